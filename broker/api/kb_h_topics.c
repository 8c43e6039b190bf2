/* Handlers that change topics: CreateTopics, DeleteTopics, CreatePartitions. */
#include <string.h>

#include "kb_authz.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_gcoord.h"
#include "kb_log.h"
#include "kb_plog.h"
#include "kb_tconf.h"
#include "kb_topics.h"

typedef kp_create_topics_req_creatable_topic creatable_topic;
typedef kp_create_topics_resp_creatable_topic_result creatable_result;

static kp_str msg_str(kb_req *req, const kb_msgbuf *msg)
{
    return kb_req_str(req, msg->text);
}

/* True if the name appears more than once in the request. */
static bool duplicated(const kp_create_topics_req *rq, kp_str name)
{
    int seen = 0;
    for (int32_t i = 0; i < rq->topics.n; i++)
        seen += kp_str_eq(rq->topics.v[i].name, name) ? 1 : 0;
    return seen > 1;
}

/* Resolves partitions and replication factor with Kafka's rules; sets msg. */
static kp_err creatable_shape(kb_req *req, const creatable_topic *ct, int32_t *partitions,
                              int16_t *replication, kb_msgbuf *msg)
{
    const kb_config *cfg = req->broker->cfg;
    if (ct->assignments.n > 0) {
        if (ct->num_partitions != -1 || ct->replication_factor != -1) {
            kb_msgf(msg, "Both numPartitions or replicationFactor and replicasAssignments were "
                         "set. Both cannot be used at the same time.");
            return KP_ERR_INVALID_REQUEST;
        }
        for (int32_t i = 0; i < ct->assignments.n; i++) {
            const kp_create_topics_req_creatable_replica_assignment *a = &ct->assignments.v[i];
            if (a->partition_index != i) {
                kb_msgf(msg, "Partitions should be a consecutive 0-based integer sequence");
                return KP_ERR_INVALID_REPLICA_ASSIGNMENT;
            }
            if (a->broker_ids.n != 1 || a->broker_ids.v[0] != req->broker->node_id) {
                kb_msgf(msg, "The manual partition assignment includes a broker that is not "
                             "registered, or a replication factor other than 1.");
                return KP_ERR_INVALID_REPLICA_ASSIGNMENT;
            }
        }
        *partitions = ct->assignments.n;
        *replication = 1;
        return KP_ERR_NONE;
    }
    *partitions = ct->num_partitions == -1 ? cfg->num_partitions : ct->num_partitions;
    *replication =
        ct->replication_factor == -1 ? (int16_t)cfg->default_replication_factor : ct->replication_factor;
    if (*partitions <= 0) {
        kb_msgf(msg, "Number of partitions was set to an invalid non-positive value.");
        return KP_ERR_INVALID_PARTITIONS;
    }
    if (*replication <= 0) {
        kb_msgf(msg, "Replication factor must be larger than 0, or -1 to use the default value.");
        return KP_ERR_INVALID_REPLICATION_FACTOR;
    }
    if (*replication > 1) {
        kb_msgf(msg,
                "Unable to replicate the partition %d time(s): The target replication factor of "
                "%d cannot be reached because only 1 broker(s) are registered.",
                *replication, *replication);
        return KP_ERR_INVALID_REPLICATION_FACTOR;
    }
    return KP_ERR_NONE;
}

/* The requested configs as NUL-terminated pairs in the arena. */
static kb_topic_config *creatable_configs(kb_req *req, const creatable_topic *ct, kb_msgbuf *msg,
                                          kp_err *err)
{
    kb_topic_config *cs = kp_arena_calloc(&req->arena, (size_t)ct->configs.n + 1, sizeof(*cs));
    *err = cs == NULL ? KP_ERR__NOMEM : KP_ERR_NONE;
    for (int32_t i = 0; cs != NULL && i < ct->configs.n; i++) {
        kp_str k = ct->configs.v[i].name, v = ct->configs.v[i].value;
        cs[i].key = kp_arena_strdup(&req->arena, k.p, (size_t)k.len);
        cs[i].value = v.len < 0 ? NULL : kp_arena_strdup(&req->arena, v.p, (size_t)v.len);
        if (cs[i].key == NULL || (v.len >= 0 && cs[i].value == NULL)) {
            *err = KP_ERR__NOMEM;
            return NULL;
        }
        if (v.len < 0) {
            kb_msgf(msg, "Null value not supported for topic configs: %s", cs[i].key);
            *err = KP_ERR_INVALID_CONFIG;
            return NULL;
        }
    }
    return cs;
}

/* v5+: the created topic's full configuration. */
static kp_err creatable_describe(kb_req *req, const kb_topic *t, creatable_result *out)
{
    size_t n = kb_tconf_count();
    if (!KB_ARRAY_ALLOC(req, out->configs, n))
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++) {
        kp_create_topics_resp_creatable_topic_configs *c = &out->configs.v[i];
        const char *value = kb_tconf_effective(req->broker->cfg, t, kb_tconf_key(i),
                                               &c->config_source);
        c->name = kb_req_str(req, kb_tconf_key(i));
        c->value = value != NULL ? kb_req_str(req, value) : KP_STR_NULL;
        c->read_only = false;
        c->is_sensitive = false;
    }
    return KP_ERR_NONE;
}

static kp_err create_one(kb_req *req, const kp_create_topics_req *rq, const creatable_topic *ct,
                         creatable_result *out)
{
    kb_msgbuf msg = {{0}};
    out->name = ct->name;
    out->error_message = KP_STR_NULL; /* Kafka: null unless the topic failed */
    int32_t partitions = -1;
    int16_t replication = -1;
    kp_err e;
    kb_topic_config *configs = NULL;
    if (duplicated(rq, ct->name)) {
        e = KP_ERR_INVALID_REQUEST;
        kb_msgf(&msg, "Create topics request from client contains multiple entries for the "
                      "following topics: %.*s", ct->name.len, ct->name.p);
    } else if (!kb_authz_create_topic(req, ct->name)) {
        e = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        kb_msgf(&msg, "Authorization failed.");
    } else if ((e = kb_topics_check_name(ct->name, &msg)) == KP_ERR_NONE &&
               (e = creatable_shape(req, ct, &partitions, &replication, &msg)) == KP_ERR_NONE &&
               (configs = creatable_configs(req, ct, &msg, &e)) != NULL) {
        kb_topic *t = NULL;
        e = kb_topics_create(req->broker->topics, ct->name, partitions, configs,
                             (size_t)ct->configs.n, rq->validate_only, &t, &msg);
        if (e == KP_ERR_NONE) {
            out->num_partitions = partitions;
            out->replication_factor = replication;
            if (t != NULL) {
                out->topic_id = t->id;
                KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"topic created\" topic=%s partitions=%d",
                       t->name, t->npartitions);
            } else {
                kb_uuid_random(&out->topic_id); /* validate_only: a fresh id, as Kafka */
            }
            /* Configs only for a principal that may DESCRIBE_CONFIGS (Kafka). */
            if (!kb_authz(req, KB_OP_DESCRIBE_CONFIGS, KB_RES_TOPIC, ct->name)) {
                out->topic_config_error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
                return KP_ERR_NONE;
            }
            return creatable_describe(req, t, out);
        }
    }
    if (e == KP_ERR__NOMEM)
        return e;
    out->error_code = kp_err_to_wire(e);
    out->error_message = msg_str(req, &msg);
    return KP_ERR_NONE;
}

kp_err kb_h_create_topics(kb_req *req, const kp_create_topics_req *rq, kp_create_topics_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        kp_create_topics_resp_creatable_topic_result_defaults(&rs->topics.v[i]);
        kp_err e = create_one(req, rq, &rq->topics.v[i], &rs->topics.v[i]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

/* Kafka's controller: CLUSTER DELETE covers every topic, else TOPIC DELETE;
 * a topic given by id keeps its name hidden unless the principal may
 * DESCRIBE it. */
static bool delete_denied(kb_req *req, kp_str name, const kb_topic *t,
                          kp_delete_topics_resp_deletable_topic_result *out)
{
    if (!kb_authz_on(req) || kb_authz_cluster(req, KB_OP_DELETE))
        return false;
    kp_str n = name.len >= 0 ? name : kb_cstr(t->name);
    if (kb_authz(req, KB_OP_DELETE, KB_RES_TOPIC, n))
        return false;
    out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    out->error_message = KP_STR_LIT("Topic authorization failed.");
    if (name.len < 0 && kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, n))
        out->name = kb_req_str(req, t->name);
    return true;
}

static void delete_one(kb_req *req, kp_str name, const kp_uuid *id,
                       kp_delete_topics_resp_deletable_topic_result *out)
{
    kb_broker *b = req->broker;
    kb_topic *t = name.len >= 0 ? kb_topics_find(b->topics, name) : kb_topics_find_id(b->topics, id);
    out->name = name;
    out->topic_id = *id;
    if ((name.len >= 0 || t != NULL) && delete_denied(req, name, t, out))
        return;
    if (t == NULL) {
        out->error_code = name.len >= 0 ? KP_ERR_UNKNOWN_TOPIC_OR_PARTITION : KP_ERR_UNKNOWN_TOPIC_ID;
        return;
    }
    out->name = kb_req_str(req, t->name);
    out->topic_id = t->id;
    if (!b->cfg->delete_topic_enable) {
        out->error_code = KP_ERR_TOPIC_DELETION_DISABLED;
        return;
    }
    kb_msgbuf msg = {{0}};
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"deleting topic\" topic=%s", t->name);
    kb_plog_drop_topic(b, t);
    kp_err e = kb_topics_delete(b->topics, t, &msg);
    if (e != KP_ERR_NONE) {
        out->error_code = kp_err_to_wire(e);
        out->error_message = msg_str(req, &msg);
        return;
    }
    kb_gcoord_topic_deleted(b, out->name); /* out->name: the request's copy */
}

kp_err kb_h_delete_topics(kb_req *req, const kp_delete_topics_req *rq, kp_delete_topics_resp *rs)
{
    /* v0-5 name topics in topic_names; v6+ in topics (by name or by id). */
    bool by_state = req->api_version >= 6;
    int32_t n = by_state ? rq->topics.n : rq->topic_names.n;
    if (!KB_ARRAY_ALLOC(req, rs->responses, n))
        return KP_ERR__NOMEM;
    static const kp_uuid zero;
    for (int32_t i = 0; i < n; i++) {
        kp_delete_topics_resp_deletable_topic_result *out = &rs->responses.v[i];
        kp_delete_topics_resp_deletable_topic_result_defaults(out);
        if (by_state)
            delete_one(req, rq->topics.v[i].name, &rq->topics.v[i].topic_id, out);
        else
            delete_one(req, rq->topic_names.v[i], &zero, out);
    }
    return KP_ERR_NONE;
}

kp_err kb_h_create_partitions(kb_req *req, const kp_create_partitions_req *rq,
                              kp_create_partitions_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_create_partitions_req_create_partitions_topic *ct = &rq->topics.v[i];
        kp_create_partitions_resp_create_partitions_topic_result *out = &rs->results.v[i];
        kp_create_partitions_resp_create_partitions_topic_result_defaults(out);
        out->name = ct->name;
        kb_msgbuf msg = {{0}};
        kb_topic *t = kb_topics_find(req->broker->topics, ct->name);
        kp_err e;
        if (!kb_authz(req, KB_OP_ALTER, KB_RES_TOPIC, ct->name)) {
            out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        if (t == NULL) {
            e = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            kb_msgf(&msg, "The topic '%.*s' does not exist.", ct->name.len, ct->name.p);
        } else if (ct->assignments.n > 0 && ct->assignments.n != ct->count - t->npartitions) {
            e = KP_ERR_INVALID_REPLICA_ASSIGNMENT;
            kb_msgf(&msg, "Attempted to add %d additional partition(s), but only %d assignment(s) "
                          "were specified.", ct->count - t->npartitions, ct->assignments.n);
        } else {
            e = kb_topics_add_partitions(req->broker->topics, t, ct->count, rq->validate_only, &msg);
        }
        if (e == KP_ERR__NOMEM)
            return e;
        out->error_code = kp_err_to_wire(e);
        if (e != KP_ERR_NONE)
            out->error_message = msg_str(req, &msg);
    }
    return KP_ERR_NONE;
}
