/* Handler for DescribeConfigs: topics, the broker and groups, each config with its
 * value, source, defaults, sensitivity and (on request) synonyms in Kafka's
 * order of precedence and a short documentation text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_admin.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_config_doc.h"
#include "kb_dispatch.h"
#include "kb_dynconf.h"
#include "kb_group_conf.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"

enum {
    RESOURCE_TOPIC = 2,
    RESOURCE_BROKER = 4,
    RESOURCE_BROKER_LOGGER = 8,
    RESOURCE_CLIENT_METRICS = 16,
    RESOURCE_GROUP = 32,
};

/* Synonyms per config at most: topic, dynamic node, dynamic cluster,
 * static (per broker synonym), default. */
#define MAX_SYNONYMS 8

typedef kp_describe_configs_resp_describe_configs_result config_result;
typedef kp_describe_configs_resp_describe_configs_resource_result config_entry;
typedef kp_describe_configs_req_describe_configs_resource config_resource;
typedef kp_describe_configs_resp_describe_configs_synonym config_synonym;

typedef struct synonym {
    const char *name, *value;
    int8_t source;
} synonym;

typedef struct synonyms {
    int n;
    synonym v[MAX_SYNONYMS];
    char scaled[24]; /* a default converted to its broker key's unit */
} synonyms;

static void syn_add(synonyms *s, const char *name, const char *value, int8_t source)
{
    if (value != NULL && s->n < MAX_SYNONYMS)
        s->v[s->n++] = (synonym){name, value, source};
}

static kp_err syn_store(kb_req *req, const synonyms *s, bool hide, config_entry *e)
{
    if (!KB_ARRAY_ALLOC(req, e->synonyms, s->n))
        return KP_ERR__NOMEM;
    for (int i = 0; i < s->n; i++)
        e->synonyms.v[i] = (config_synonym){kb_req_str(req, s->v[i].name),
                                            hide ? KP_STR_NULL : kb_req_str(req, s->v[i].value),
                                            s->v[i].source};
    return KP_ERR_NONE;
}

static bool key_wanted(const config_resource *res, const char *key)
{
    if (res->configuration_keys.n < 0)
        return true;
    for (int32_t i = 0; i < res->configuration_keys.n; i++)
        if (kp_str_eq_c(res->configuration_keys.v[i], key))
            return true;
    return false;
}

static int8_t static_source(kb_config_source src)
{
    return src == KB_SRC_DEFAULT || src == KB_SRC_UNSET ? KB_CS_DEFAULT : KB_CS_STATIC_BROKER;
}

/* A broker key's own layers: dynamic per broker, dynamic default, static, default. */
static void broker_key_synonyms(const kb_broker *b, const char *key, synonyms *s)
{
    const kb_cfgset *node = kb_dynconf_set(b->dynconf, KB_DYN_NODE);
    const kb_cfgset *cluster = kb_dynconf_set(b->dynconf, KB_DYN_CLUSTER);
    syn_add(s, key, kb_cfgset_get(node, key), KB_CS_DYNAMIC_BROKER);
    syn_add(s, key, kb_cfgset_get(cluster, key), KB_CS_DYNAMIC_DEFAULT_BROKER);
    kb_config_source src;
    const char *v = kb_config_lookup(b->cfg, key, &src);
    if (static_source(src) == KB_CS_STATIC_BROKER)
        syn_add(s, key, v, KB_CS_STATIC_BROKER);
}

/* Drops the broker entries from index `from` on that come before the first one naming
 * `primary`, all of them when none does: Kafka lists a topic key's broker synonyms from
 * its primary broker key on (so a default held only by log.retention.hours is not
 * listed for retention.ms). */
static void syn_from_primary(synonyms *s, int from, const char *primary)
{
    int first = from;
    while (first < s->n && strcmp(s->v[first].name, primary) != 0)
        first++;
    memmove(&s->v[from], &s->v[first], (size_t)(s->n - first) * sizeof(s->v[0]));
    s->n -= first - from;
}

/* Synonyms of a topic key: the topic's value, then each broker synonym's layers, then
 * Kafka's default (whatever the layers above say), which sits on the coarsest broker
 * synonym (log.retention.hours=168 for retention.ms), or on the topic key when it has
 * no broker synonym. */
static void topic_key_synonyms(const kb_broker *b, const kb_topic *t, const char *key, synonyms *s)
{
    int64_t scale = 1;
    syn_add(s, key, kb_topic_config_get(t, key), KB_CS_DYNAMIC_TOPIC);
    int from = s->n;
    const char *primary = kb_dynconf_synonym(key, 0, &scale);
    if (primary == NULL) {
        syn_add(s, key, kb_topic_conf_default(key), KB_CS_DEFAULT);
        return;
    }
    const char *coarsest = primary;
    for (size_t i = 0; kb_dynconf_synonym(key, i, &scale) != NULL; i++) {
        coarsest = kb_dynconf_synonym(key, i, &scale);
        broker_key_synonyms(b, coarsest, s);
    }
    const char *dflt = kb_topic_conf_default(key);
    if (dflt != NULL && scale > 1) {
        snprintf(s->scaled, sizeof(s->scaled), "%lld", strtoll(dflt, NULL, 10) / scale);
        dflt = s->scaled;
    }
    syn_add(s, coarsest, dflt, KB_CS_DEFAULT);
    syn_from_primary(s, from, primary);
}

static kp_err describe_topic(kb_req *req, const kp_describe_configs_req *rq,
                             const config_resource *res, config_result *out)
{
    kb_topic *t = kb_topics_find(req->broker->topics, res->resource_name);
    if (t == NULL) {
        out->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        out->error_message = kb_req_str(req, "Topic does not exist");
        return KP_ERR_NONE;
    }
    size_t n = kb_topic_conf_count();
    if (!KB_ARRAY_ALLOC(req, out->configs, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = kb_topic_conf_key(i);
        if (!key_wanted(res, key))
            continue;
        config_entry *e = &out->configs.v[used++];
        kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
        const char *value = kb_topic_conf_effective(req->broker->cfg, t, key, &e->config_source);
        e->name = kb_req_str(req, key);
        e->value = kb_req_str(req, value != NULL ? value : "");
        e->config_type = kb_topic_conf_type(i);
        e->documentation = rq->include_documentation ? kb_req_str(req, kb_config_doc(key)) : KP_STR_NULL;
        synonyms s = {0};
        if (rq->include_synonyms)
            topic_key_synonyms(req->broker, t, key, &s);
        if (syn_store(req, &s, false, e) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

/* Fills one broker config entry from its layers. */
static kp_err broker_entry(kb_req *req, const kp_describe_configs_req *rq, const char *key,
                           int8_t type, config_entry *e)
{
    kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
    synonyms s = {0};
    broker_key_synonyms(req->broker, key, &s);
    kb_config_source src;
    const char *dflt = kb_config_lookup(req->broker->cfg, key, &src);
    if (static_source(src) == KB_CS_DEFAULT)
        syn_add(&s, key, dflt, KB_CS_DEFAULT);
    e->name = kb_req_str(req, key);
    e->is_sensitive = kb_config_key_sensitive(key);
    e->value = s.n == 0 || e->is_sensitive ? KP_STR_NULL : kb_req_str(req, s.v[0].value);
    e->config_source = s.n > 0 ? s.v[0].source : KB_CS_DEFAULT;
    e->read_only = !kb_dynconf_key_dynamic(key);
    e->config_type = type;
    e->documentation = rq->include_documentation ? kb_req_str(req, kb_config_doc(key)) : KP_STR_NULL;
    if (!rq->include_synonyms)
        s.n = 0;
    return syn_store(req, &s, e->is_sensitive, e);
}

static bool known_key(const char *key)
{
    int8_t type;
    for (size_t i = 0; kb_config_key_at(i, &type) != NULL; i++)
        if (strcmp(kb_config_key_at(i, &type), key) == 0)
            return true;
    return false;
}

/* Every key we know, then the other keys set statically or dynamically. */
static kp_err describe_broker(kb_req *req, const kp_describe_configs_req *rq,
                              const config_resource *res, config_result *out)
{
    const kb_config *cfg = req->broker->cfg;
    const kb_cfgset *node = kb_dynconf_set(req->broker->dynconf, KB_DYN_NODE);
    const kb_cfgset *cluster = kb_dynconf_set(req->broker->dynconf, KB_DYN_CLUSTER);
    int8_t type;
    size_t nknown = 0;
    while (kb_config_key_at(nknown, &type) != NULL)
        nknown++;
    if (!KB_ARRAY_ALLOC(req, out->configs, nknown + cfg->raw_n + node->n + cluster->n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < nknown; i++) {
        const char *key = kb_config_key_at(i, &type);
        if (key_wanted(res, key) && broker_entry(req, rq, key, type, &out->configs.v[used++]))
            return KP_ERR__NOMEM;
    }
    const kb_cfgset *extra[2] = {node, cluster};
    for (size_t i = 0; i < cfg->raw_n; i++) {
        const char *key = cfg->raw[i].ce_key;
        if (!known_key(key) && key_wanted(res, key) &&
            broker_entry(req, rq, key, KB_CT_STRING, &out->configs.v[used++]))
            return KP_ERR__NOMEM;
    }
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < extra[l]->n; i++) {
            const char *key = extra[l]->v[i].key;
            bool seen = known_key(key) || kb_config_get_raw(cfg, key) != NULL ||
                        (l == 1 && kb_cfgset_get(node, key) != NULL);
            if (!seen && key_wanted(res, key) &&
                broker_entry(req, rq, key, KB_CT_STRING, &out->configs.v[used++]))
                return KP_ERR__NOMEM;
        }
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

/* The cluster-default resource ("") lists only its dynamic values. */
static kp_err describe_broker_default(kb_req *req, const kp_describe_configs_req *rq,
                                      const config_resource *res, config_result *out)
{
    const kb_cfgset *cluster = kb_dynconf_set(req->broker->dynconf, KB_DYN_CLUSTER);
    if (!KB_ARRAY_ALLOC(req, out->configs, cluster->n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < cluster->n; i++) {
        config_entry *e = &out->configs.v[used];
        if (!key_wanted(res, cluster->v[i].key))
            continue;
        used++;
        kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
        e->name = kb_req_str(req, cluster->v[i].key);
        e->value = kb_req_str(req, cluster->v[i].value);
        e->config_source = KB_CS_DYNAMIC_DEFAULT_BROKER;
        e->config_type = KB_CT_STRING;
        e->documentation = rq->include_documentation ? kb_req_str(req, kb_config_doc(cluster->v[i].key))
                                                     : KP_STR_NULL;
        if (!KB_ARRAY_ALLOC(req, e->synonyms, 0))
            return KP_ERR__NOMEM;
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

/* Every group key: the group's value (DYNAMIC_GROUP_CONFIG) or the default,
 * its one synonym being itself. The group need not exist. */
static kp_err describe_group(kb_req *req, const kp_describe_configs_req *rq,
                             const config_resource *res, config_result *out)
{
    kb_msgbuf msg;
    kp_err bad = kb_group_conf_check_name(res->resource_name, &msg);
    if (bad != KP_ERR_NONE) {
        out->error_code = (int16_t)bad;
        out->error_message = kb_req_str(req, msg.text);
        return KP_ERR_NONE;
    }
    const kb_cfgset *set = kb_group_conf_get(req->broker->gconf, res->resource_name);
    int8_t type;
    size_t n = 0;
    while (kb_group_conf_key_at(n, &type) != NULL)
        n++;
    if (!KB_ARRAY_ALLOC(req, out->configs, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = kb_group_conf_key_at(i, &type);
        if (!key_wanted(res, key))
            continue;
        config_entry *e = &out->configs.v[used++];
        kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
        char buf[16];
        const char *v = set != NULL ? kb_cfgset_get(set, key) : NULL;
        e->config_source = v != NULL ? KB_CS_DYNAMIC_GROUP : KB_CS_DEFAULT;
        if (v == NULL)
            v = kb_group_conf_default(req->broker->cfg, key, buf, sizeof(buf));
        e->name = kb_req_str(req, key);
        e->value = kb_req_str(req, v);
        e->config_type = type;
        e->documentation = rq->include_documentation ? kb_req_str(req, kb_config_doc(key)) : KP_STR_NULL;
        synonyms s = {0};
        if (rq->include_synonyms)
            syn_add(&s, key, v, e->config_source);
        if (syn_store(req, &s, false, e) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

kp_err kb_h_describe_configs(kb_req *req, const kp_describe_configs_req *rq,
                             kp_describe_configs_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->resources.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->resources.n; i++) {
        const config_resource *res = &rq->resources.v[i];
        config_result *out = &rs->results.v[i];
        kp_describe_configs_resp_describe_configs_result_defaults(out);
        out->resource_type = res->resource_type;
        out->resource_name = res->resource_name;
        kp_err e = KP_ERR_NONE;
        int16_t denied = kb_authz_config(req, KB_OP_DESCRIBE_CONFIGS, res->resource_type,
                                         res->resource_name);
        if (denied != KP_ERR_NONE) {
            out->error_code = denied;
            out->error_message = kb_req_str(req, kb_authz_message(denied));
        } else if (res->resource_type == RESOURCE_TOPIC)
            e = describe_topic(req, rq, res, out);
        else if (res->resource_type == RESOURCE_BROKER && res->resource_name.len <= 0)
            e = describe_broker_default(req, rq, res, out);
        else if (res->resource_type == RESOURCE_BROKER && kb_admin_is_self(req, res->resource_name, false))
            e = describe_broker(req, rq, res, out);
        else if (res->resource_type == RESOURCE_GROUP)
            e = describe_group(req, rq, res, out);
        else if (res->resource_type == RESOURCE_BROKER) {
            out->error_code = KP_ERR_INVALID_REQUEST;
            out->error_message = kb_req_str(req, "Unexpected broker id");
        } else {
            out->error_code = KP_ERR_INVALID_REQUEST;
            out->error_message = kb_req_str(req, "Unsupported resource type");
        }
        if (e != KP_ERR_NONE)
            return e;
        if (out->error_code != KP_ERR_NONE && !KB_ARRAY_ALLOC(req, out->configs, 0))
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

/* ---- ListConfigResources ------------------------------------------------ */

typedef kp_list_config_resources_resp_config_resource listed_resource;

/* The resource types a ListConfigResources v1 request asks for, as bits
 * (their wire values); 0 when one is not a config resource type, which
 * Kafka answers with UNSUPPORTED_VERSION. An empty list asks for all. */
static int list_wanted_types(const kp_list_config_resources_req *rq, int16_t version)
{
    const int all = RESOURCE_TOPIC | RESOURCE_BROKER | RESOURCE_BROKER_LOGGER |
                    RESOURCE_CLIENT_METRICS | RESOURCE_GROUP;
    if (version < 1)
        return RESOURCE_CLIENT_METRICS;
    if (rq->resource_types.n <= 0)
        return all;
    int want = 0;
    for (int32_t i = 0; i < rq->resource_types.n; i++) {
        int8_t t = rq->resource_types.v[i];
        if (t <= 0 || (t & all) != t || (t & (t - 1)) != 0)
            return 0;
        want |= t;
    }
    return want;
}

/* Appends (name, type) to the answer when out is not NULL; counts always. */
static void list_add(kb_req *req, listed_resource *out, int32_t *n, const char *name, int8_t type)
{
    if (out != NULL) {
        out[*n].resource_name = kb_req_str(req, name);
        out[*n].resource_type = type;
    }
    (*n)++;
}

/* Fills out (or, with out NULL, counts) the resources of the wanted types
 * in Kafka's order: groups with configs, brokers, topics. Runnel has no
 * broker loggers or client metrics resources to list. */
static void list_resources(kb_req *req, int want, listed_resource *out, int32_t *n)
{
    kb_broker *b = req->broker;
    const kb_meta_image *img = kb_cv_image(req);
    *n = 0;
    if (want & RESOURCE_GROUP) {
        const char *g;
        for (size_t i = 0; (g = kb_group_conf_group_at(b->gconf, i)) != NULL; i++)
            list_add(req, out, n, g, RESOURCE_GROUP);
    }
    if (want & RESOURCE_BROKER) {
        char id[16];
        if (img == NULL) {
            snprintf(id, sizeof(id), "%d", (int)b->node_id);
            list_add(req, out, n, id, RESOURCE_BROKER);
        }
        for (int i = 0; img != NULL && i < img->brokers.n; i++) {
            if (!kb_cv_live(img, img->brokers.v[i].id))
                continue;
            snprintf(id, sizeof(id), "%d", (int)img->brokers.v[i].id);
            list_add(req, out, n, id, RESOURCE_BROKER);
        }
    }
    if (!(want & RESOURCE_TOPIC))
        return;
    for (int i = 0; img != NULL && i < img->topics.n; i++)
        list_add(req, out, n, img->topics.v[i]->name, RESOURCE_TOPIC);
    size_t ntopics = img == NULL ? kb_topics_count(b->topics) : 0;
    for (size_t i = 0; i < ntopics; i++) {
        const kb_topic *t = kb_topics_at(b->topics, i);
        if (t->state == KB_TOPIC_READY)
            list_add(req, out, n, t->name, RESOURCE_TOPIC);
    }
}

/* Handler for ListConfigResources: the names of the resources that can
 * carry configs, for a principal allowed DESCRIBE_CONFIGS on the cluster. */
kp_err kb_h_list_config_resources(kb_req *req, const kp_list_config_resources_req *rq,
                                  kp_list_config_resources_resp *rs)
{
    int want = list_wanted_types(rq, req->api_version);
    int32_t n = 0;
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE_CONFIGS))
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
    else if (want == 0)
        rs->error_code = KP_ERR_UNSUPPORTED_VERSION;
    else
        list_resources(req, want, NULL, &n);
    if (!KB_ARRAY_ALLOC(req, rs->config_resources, n))
        return KP_ERR__NOMEM;
    if (n > 0)
        list_resources(req, want, rs->config_resources.v, &rs->config_resources.n);
    return KP_ERR_NONE;
}
