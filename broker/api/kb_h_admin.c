/* Handlers for changing configs: AlterConfigs (full replacement of a
 * resource's explicitly set configs) and IncrementalAlterConfigs (SET,
 * DELETE, APPEND, SUBTRACT), on topics, on the broker (dynamic configs) and
 * on groups (kb_group_conf.h).
 * Both validate every key first, change nothing on any error, persist, and
 * apply the result to open logs at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_admin.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_config_edit.h"
#include "kb_dispatch.h"
#include "kb_dynconf.h"
#include "kb_group_conf.h"
#include "kb_partition_log.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"

enum { RESOURCE_TOPIC = 2, RESOURCE_BROKER = 4, RESOURCE_GROUP = 32 };

/* One requested change, the same shape for both APIs. */
typedef struct alter_op {
    const char *key;
    int8_t op;
    const char *value; /* NULL for a null value */
} alter_op;

typedef struct alter_job {
    kb_req *req;
    int8_t type;
    kp_str name;
    const alter_op *ops;
    int32_t nops;
    bool incremental;
    bool validate_only;
} alter_job;

typedef struct alter_result {
    int16_t error_code;
    kb_msgbuf msg;
} alter_result;

static kp_err fail(alter_result *r, kp_err code)
{
    r->error_code = (int16_t)kp_err_to_wire(code);
    return code;
}

/* Applies the ops to set; keys are checked by check(key, value). */
static kp_err apply_ops(const alter_job *j, kb_cfgset *set, alter_result *r,
                        const char *(*base)(const alter_job *j, const char *key))
{
    for (int32_t i = 0; i < j->nops; i++) {
        const alter_op *o = &j->ops[i];
        bool is_list = j->type == RESOURCE_TOPIC    ? kb_topic_conf_is_list(o->key)
                       : j->type == RESOURCE_BROKER ? strcmp(o->key, "log.cleanup.policy") == 0
                                                    : false;
        /* Kafka's controller words this refusal for topics and groups. */
        if (!is_list && j->type != RESOURCE_BROKER &&
            (o->op == KB_CFG_OP_APPEND || o->op == KB_CFG_OP_SUBTRACT)) {
            kb_msgf(&r->msg, "Can't %s to key %s because its type is not LIST.",
                    o->op == KB_CFG_OP_APPEND ? "APPEND" : "SUBTRACT", o->key);
            return fail(r, KP_ERR_INVALID_CONFIG);
        }
        kp_err e = kb_cfgset_apply(set, o->key, o->op, o->value, is_list, base(j, o->key), &r->msg);
        if (e != KP_ERR_NONE)
            return fail(r, e);
    }
    return KP_ERR_NONE;
}

/* ---- topics --------------------------------------------------------------- */

static const char *topic_base(const alter_job *j, const char *key)
{
    (void)j;
    return kb_topic_conf_default(key);
}

/* Checks the value every touched key ends with. */
static kp_err check_topic_set(const alter_job *j, const kb_cfgset *set, alter_result *r)
{
    for (int32_t i = 0; i < j->nops; i++) {
        /* Only DELETE leaves a key unset; deleting an unset key is fine. */
        const char *v = kb_cfgset_get(set, j->ops[i].key);
        kp_err e = v != NULL ? kb_topic_conf_check(j->ops[i].key, v, &r->msg) : KP_ERR_NONE;
        if (e != KP_ERR_NONE)
            return fail(r, e);
    }
    return KP_ERR_NONE;
}

static void alter_topic(const alter_job *j, alter_result *r)
{
    kb_broker *b = j->req->broker;
    kb_topic *t = kb_topics_find(b->topics, j->name);
    if (t == NULL) {
        kb_msgf(&r->msg, "The topic '%.*s' does not exist.", j->name.len, j->name.p);
        r->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        return;
    }
    kb_cfgset set = {0, NULL};
    kp_err e = j->incremental ? kb_cfgset_copy(&set, t->configs, t->nconfigs) : KP_ERR_NONE;
    if (e != KP_ERR_NONE) {
        fail(r, e);
        return;
    }
    if (apply_ops(j, &set, r, topic_base) == KP_ERR_NONE &&
        check_topic_set(j, &set, r) == KP_ERR_NONE && !j->validate_only) {
        e = kb_topics_set_configs(b->topics, t, set.v, set.n, &r->msg);
        if (e != KP_ERR_NONE)
            fail(r, e);
        else
            kb_partition_log_config_changed(b, t);
    }
    kb_cfgset_fini(&set);
}

/* ---- the broker ------------------------------------------------------------ */

static const char *broker_base(const alter_job *j, const char *key)
{
    return kb_config_get_raw(j->req->broker->cfg, key);
}

/* The keys of j for which refused(key) holds, as Scala prints a Set. */
static size_t list_keys(const alter_job *j, bool (*refused)(const char *key), char *list,
                        size_t cap)
{
    size_t o = 0;
    list[0] = '\0';
    for (int32_t i = 0; i < j->nops; i++)
        if (refused(j->ops[i].key) && o < cap)
            o += (size_t)snprintf(list + o, cap - o, "%s%s", o ? ", " : "", j->ops[i].key);
    return o;
}

static bool not_dynamic(const char *key)
{
    return !kb_dynconf_key_dynamic(key);
}

/* Kafka refuses every read-only key in one message, then every per-broker
 * key set as a cluster default. */
static bool check_dynamic(const alter_job *j, alter_result *r)
{
    char list[200];
    if (list_keys(j, not_dynamic, list, sizeof(list)) > 0) {
        kb_msgf(&r->msg, "Invalid config value for resource ConfigResource(type=BROKER, "
                "name='%.*s'): Cannot update these configs dynamically: Set(%s)", j->name.len,
                j->name.p, list);
        r->error_code = KP_ERR_INVALID_REQUEST;
        return false;
    }
    if (j->name.len <= 0 && list_keys(j, kb_dynconf_key_per_broker, list, sizeof(list)) > 0) {
        kb_msgf(&r->msg, "Cannot update these configs at default cluster level, broker id must "
                "be specified: Set(%s)", list);
        r->error_code = KP_ERR_INVALID_REQUEST;
        return false;
    }
    return true;
}

/* A broker value is checked as Kafka parses its type, then as the topic key
 * it sets, if any (scaled keys as numbers). */
static kp_err check_broker_value(const char *key, const char *v, kb_msgbuf *msg)
{
    kp_err typed = kb_config_check_value(key, v, msg->text, sizeof(msg->text));
    if (typed != KP_ERR_NONE && typed != KP_ERR__NOENT)
        return typed;
    for (size_t i = 0; i < kb_topic_conf_count(); i++) {
        int64_t scale;
        const char *tk = kb_topic_conf_key(i);
        for (size_t s = 0; kb_dynconf_synonym(tk, s, &scale) != NULL; s++) {
            if (strcmp(kb_dynconf_synonym(tk, s, &scale), key) != 0)
                continue;
            kp_err e = kb_topic_conf_check(tk, v, msg);
            if (e != KP_ERR_NONE)
                kb_msgf(msg, "Invalid value %s for configuration %s", v, key);
            return e;
        }
    }
    if (typed == KP_ERR_NONE)
        return KP_ERR_NONE;
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || d < 0) {
        kb_msgf(msg, "Invalid value %s for configuration %s: expected a non-negative number", v,
                key);
        return KP_ERR_INVALID_CONFIG;
    }
    return KP_ERR_NONE;
}

static void alter_broker(const alter_job *j, alter_result *r)
{
    kb_broker *b = j->req->broker;
    if (!kb_admin_is_self(j->req, j->name, true)) {
        kb_msgf(&r->msg, "Unexpected broker id, expected %d or empty string, but received %.*s",
                b->node_id, j->name.len, j->name.p);
        r->error_code = KP_ERR_INVALID_REQUEST;
        return;
    }
    if (!check_dynamic(j, r))
        return;
    kb_dyn_level level = j->name.len > 0 ? KB_DYN_NODE : KB_DYN_CLUSTER;
    const kb_cfgset *cur = kb_dynconf_set(b->dynconf, level);
    kb_cfgset set = {0, NULL};
    kp_err e = j->incremental ? kb_cfgset_copy(&set, cur->v, cur->n) : KP_ERR_NONE;
    if (e == KP_ERR_NONE && apply_ops(j, &set, r, broker_base) != KP_ERR_NONE)
        e = (kp_err)r->error_code;
    for (int32_t i = 0; e == KP_ERR_NONE && i < j->nops; i++) {
        const char *v = kb_cfgset_get(&set, j->ops[i].key);
        if (v != NULL && (e = check_broker_value(j->ops[i].key, v, &r->msg)) != KP_ERR_NONE)
            r->error_code = (int16_t)e;
    }
    if (e == KP_ERR_NONE && !j->validate_only) {
        if ((e = kb_dynconf_replace(b->dynconf, level, &set)) != KP_ERR_NONE)
            fail(r, e);
        else
            kb_admin_configs_changed(b);
    }
    if (e == KP_ERR__NOMEM)
        fail(r, e);
    kb_cfgset_fini(&set);
}

/* ---- groups ---------------------------------------------------------------- */

static const char *group_base(const alter_job *j, const char *key)
{
    (void)j;
    (void)key;
    return NULL; /* no group key takes a list */
}

/* A group need not exist: Kafka keeps its configs for when it does. */
static void alter_group(const alter_job *j, alter_result *r)
{
    kb_broker *b = j->req->broker;
    kp_err e = kb_group_conf_check_name(j->name, &r->msg);
    if (e != KP_ERR_NONE) {
        r->error_code = (int16_t)e;
        return;
    }
    const kb_cfgset *cur = j->incremental ? kb_group_conf_get(b->gconf, j->name) : NULL;
    kb_cfgset set = {0, NULL};
    e = cur != NULL ? kb_cfgset_copy(&set, cur->v, cur->n) : KP_ERR_NONE;
    if (e == KP_ERR_NONE && apply_ops(j, &set, r, group_base) == KP_ERR_NONE &&
        (e = kb_group_conf_check(b->cfg, &set, &r->msg)) == KP_ERR_NONE && !j->validate_only)
        e = kb_group_conf_replace(b->gconf, j->name, &set, &r->msg);
    if (e != KP_ERR_NONE && r->error_code == KP_ERR_NONE)
        fail(r, e);
    kb_cfgset_fini(&set);
}

/* ---- both APIs ------------------------------------------------------------- */

static void alter_resource(const alter_job *j, int16_t *error_code, kp_str *error_message)
{
    alter_result r = {KP_ERR_NONE, {""}};
    int16_t denied = kb_authz_config(j->req, KB_OP_ALTER_CONFIGS, j->type, j->name);
    if (denied != KP_ERR_NONE) {
        *error_code = denied;
        *error_message = KP_STR_NULL;
        return;
    }
    if (j->type == RESOURCE_TOPIC)
        alter_topic(j, &r);
    else if (j->type == RESOURCE_BROKER)
        alter_broker(j, &r);
    else if (j->type == RESOURCE_GROUP)
        alter_group(j, &r);
    else {
        r.error_code = KP_ERR_INVALID_REQUEST;
        kb_msgf(&r.msg, "Unsupported resource type %d", j->type);
    }
    *error_code = r.error_code;
    *error_message = r.error_code != KP_ERR_NONE ? kb_req_str(j->req, r.msg.text) : KP_STR_NULL;
}

/* Duplicate keys make Kafka refuse the resource before anything else. */
static bool refuse_duplicates(kb_req *req, const kp_str *names, size_t stride, int32_t n,
                              int16_t *error_code, kp_str *error_message)
{
    kp_str dup;
    if (n <= 0 || !kb_cfg_has_duplicate(names, stride, n, &dup))
        return false;
    *error_code = KP_ERR_INVALID_REQUEST;
    *error_message = kb_req_str(
        req, kp_arena_printf(&req->arena, "Error due to duplicate config keys : %.*s", dup.len,
                             dup.p ? dup.p : ""));
    return true;
}

kp_err kb_h_alter_configs(kb_req *req, const kp_alter_configs_req *rq, kp_alter_configs_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->responses, rq->resources.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->resources.n; i++) {
        const kp_alter_configs_req_alter_configs_resource *res = &rq->resources.v[i];
        kp_alter_configs_resp_alter_configs_resource_response *out = &rs->responses.v[i];
        out->resource_type = res->resource_type;
        out->resource_name = res->resource_name;
        if (refuse_duplicates(req, res->configs.n > 0 ? &res->configs.v[0].name : NULL,
                              sizeof(res->configs.v[0]),
                              res->configs.n, &out->error_code, &out->error_message))
            continue;
        alter_op *ops = kp_arena_calloc(&req->arena, (size_t)res->configs.n + 1, sizeof(*ops));
        if (ops == NULL)
            return KP_ERR__NOMEM;
        for (int32_t k = 0; k < res->configs.n; k++) {
            const kp_alter_configs_req_alterable_config *c = &res->configs.v[k];
            ops[k] = (alter_op){kb_req_cstr(req, c->name), KB_CFG_OP_SET,
                                c->value.len < 0 ? NULL : kb_req_cstr(req, c->value)};
        }
        alter_job j = {req, res->resource_type, res->resource_name, ops, res->configs.n, false,
                       rq->validate_only};
        alter_resource(&j, &out->error_code, &out->error_message);
    }
    return KP_ERR_NONE;
}

kp_err kb_h_incremental_alter_configs(kb_req *req, const kp_incremental_alter_configs_req *rq,
                                      kp_incremental_alter_configs_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->responses, rq->resources.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->resources.n; i++) {
        const kp_incremental_alter_configs_req_alter_configs_resource *res = &rq->resources.v[i];
        kp_incremental_alter_configs_resp_alter_configs_resource_response *out =
            &rs->responses.v[i];
        out->resource_type = res->resource_type;
        out->resource_name = res->resource_name;
        if (refuse_duplicates(req, res->configs.n > 0 ? &res->configs.v[0].name : NULL,
                              sizeof(res->configs.v[0]),
                              res->configs.n, &out->error_code, &out->error_message))
            continue;
        alter_op *ops = kp_arena_calloc(&req->arena, (size_t)res->configs.n + 1, sizeof(*ops));
        if (ops == NULL)
            return KP_ERR__NOMEM;
        for (int32_t k = 0; k < res->configs.n; k++) {
            const kp_incremental_alter_configs_req_alterable_config *c = &res->configs.v[k];
            ops[k] = (alter_op){kb_req_cstr(req, c->name), c->config_operation,
                                c->value.len < 0 ? NULL : kb_req_cstr(req, c->value)};
        }
        alter_job j = {req, res->resource_type, res->resource_name, ops, res->configs.n, true,
                       rq->validate_only};
        alter_resource(&j, &out->error_code, &out->error_message);
    }
    return KP_ERR_NONE;
}
