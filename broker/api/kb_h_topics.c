/* Handlers that change topics: CreateTopics, DeleteTopics, CreatePartitions.
 *
 * CreateTopics and DeleteTopics answer once the topics' partition
 * directories are made or removed (kb_partition_dirs, on the helper threads): the
 * request parks meanwhile, other clients are served, and timeout_ms (when
 * positive) answers the topics still in progress with REQUEST_TIMED_OUT
 * while their work goes on. */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_partition_dirs.h"
#include "kb_partition_log.h"
#include "kb_topic_conf.h"
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
    size_t n = kb_topic_conf_count();
    if (!KB_ARRAY_ALLOC(req, out->configs, n))
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++) {
        kp_create_topics_resp_creatable_topic_configs *c = &out->configs.v[i];
        const char *value = kb_topic_conf_effective(req->broker->cfg, t, kb_topic_conf_key(i),
                                               &c->config_source);
        c->name = kb_req_str(req, kb_topic_conf_key(i));
        c->value = value != NULL ? kb_req_str(req, value) : KP_STR_NULL;
        c->read_only = false;
        c->is_sensitive = false;
    }
    return KP_ERR_NONE;
}

/* ---- waiting for the partition directories ------------------------------ */

typedef enum item_kind { ITEM_CREATE, ITEM_DELETE, ITEM_GROW } item_kind;

/* One topic a CreateTopics, DeleteTopics or CreatePartitions waits for. */
typedef struct topic_item {
    struct topic_wait *w;
    item_kind kind;
    kb_topic *t;               /* valid until its job reports */
    creatable_result *created; /* CreateTopics: its result */
    int32_t total;             /* CreatePartitions: the partitions asked for */
    int16_t *error_code;       /* the topic's result fields in the response */
    kp_str *error_message;
    bool done;
} topic_item;

/* A request waiting for kb_partition_dirs jobs; heap-owned so it outlives a closed
 * connection (or a timed-out answer) until every job reported. */
typedef struct topic_wait {
    kb_req *req;     /* NULL once answered or the connection closed */
    kb_loop *loop;
    kb_timer timeout;
    int32_t pending; /* jobs still to report */
    int32_t n;
    topic_item items[];
} topic_wait;

static void on_wait_timeout(kb_loop *loop, void *arg);

static topic_wait *wait_new(kb_req *req, int32_t topics)
{
    topic_wait *w = calloc(1, sizeof(*w) + (size_t)topics * sizeof(w->items[0]));
    if (w == NULL)
        return NULL;
    w->loop = req->broker->loop;
    kb_timer_init(&w->timeout, on_wait_timeout, w);
    return w;
}

static topic_item *wait_add(topic_wait *w, item_kind kind, kb_topic *t, int16_t *error_code,
                            kp_str *error_message)
{
    topic_item *it = &w->items[w->n++];
    *it = (topic_item){.w = w, .kind = kind, .t = t, .error_code = error_code,
                       .error_message = error_message};
    return it;
}

/* Detaches the request from its wait; reports still due keep w alive. */
static kb_req *wait_detach(topic_wait *w)
{
    kb_req *req = w->req;
    w->req = NULL;
    kb_timer_disarm(w->loop, &w->timeout);
    if (req != NULL) {
        req->park_state = NULL;
        req->on_cancel = NULL;
    }
    return req;
}

static void wait_report(topic_wait *w)
{
    if (--w->pending > 0)
        return;
    kb_req *req = wait_detach(w);
    free(w);
    if (req != NULL)
        kb_req_finish(req);
}

static void on_wait_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    topic_wait *w = arg;
    for (int32_t i = 0; i < w->n; i++) {
        if (w->items[i].done)
            continue;
        *w->items[i].error_code = KP_ERR_REQUEST_TIMED_OUT;
        *w->items[i].error_message = KP_STR_LIT("Timed out waiting for the topic's partitions.");
    }
    kb_req_finish(wait_detach(w));
}

static void on_wait_cancel(kb_req *req)
{
    topic_wait *w = req->park_state;
    if (w != NULL)
        (void)wait_detach(w);
}

static void on_topic_created(void *arg, kp_err err);
static void on_topic_deleted(void *arg, kp_err err);
static void on_partitions_added(void *arg, kp_err err);

/* Starts an item's job; on an immediate error reports its failure now. */
static void item_start(kb_broker *b, topic_item *it)
{
    static kb_partition_dirs_done *const reports[] = {
        [ITEM_CREATE] = on_topic_created, [ITEM_DELETE] = on_topic_deleted,
        [ITEM_GROW] = on_partitions_added};
    kp_err e;
    switch (it->kind) {
    case ITEM_CREATE: e = kb_partition_dirs_create(b, it->t, on_topic_created, it); break;
    case ITEM_DELETE: e = kb_partition_dirs_delete(b, it->t, on_topic_deleted, it); break;
    default: e = kb_partition_dirs_grow(b, it->t, it->total, on_partitions_added, it); break;
    }
    if (e != KP_ERR_NONE)
        reports[it->kind](it, e);
}

/* Submits every item's job and parks req (KB_PARKED), or answers at once
 * (KP_ERR_NONE) when there is nothing to wait for. req NULL: the jobs run
 * with no one to answer. */
static kp_err wait_start(kb_broker *b, kb_req *req, topic_wait *w, int32_t timeout_ms)
{
    w->req = req;
    w->pending = 1; /* held until every job is submitted */
    for (int32_t i = 0; i < w->n; i++) {
        w->pending++;
        item_start(b, &w->items[i]);
    }
    if (--w->pending == 0) {
        (void)wait_detach(w);
        free(w);
        return KP_ERR_NONE;
    }
    if (req == NULL)
        return KP_ERR_NONE;
    req->park_state = w;
    req->on_cancel = on_wait_cancel;
    if (timeout_ms > 0)
        (void)kb_timer_arm(w->loop, &w->timeout, timeout_ms);
    return KB_PARKED;
}

/* The configs part of a created topic's result (v5+). */
static void created_configs(kb_req *req, const kb_topic *t, kp_str name, creatable_result *out)
{
    /* Configs only for a principal that may DESCRIBE_CONFIGS (Kafka). */
    if (!kb_authz(req, KB_OP_DESCRIBE_CONFIGS, KB_RES_TOPIC, name)) {
        out->topic_config_error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        return;
    }
    if (creatable_describe(req, t, out) != KP_ERR_NONE)
        out->topic_config_error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
}

static void on_topic_created(void *arg, kp_err err)
{
    topic_item *it = arg;
    topic_wait *w = it->w;
    it->done = true;
    kb_req *req = w->req;
    if (err == KP_ERR_NONE)
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"topic created\" topic=%s partitions=%d",
               it->t->name, it->t->npartitions);
    if (req != NULL && err == KP_ERR_NONE) {
        created_configs(req, it->t, it->created->name, it->created);
    } else if (req != NULL) {
        static const kp_uuid zero;
        creatable_result *out = it->created;
        out->error_code = KP_ERR_KAFKA_STORAGE_ERROR;
        out->error_message = kb_req_str(req, "Could not create the topic's partition directories.");
        out->topic_id = zero;
        out->num_partitions = -1;
        out->replication_factor = -1;
    }
    it->t = NULL; /* dropped on failure; the registry's either way */
    wait_report(w);
}

static void on_topic_deleted(void *arg, kp_err err)
{
    topic_item *it = arg;
    it->done = true;
    if (err != KP_ERR_NONE) /* the topic is gone all the same; a restart finishes it */
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"removing a deleted topic's directories did not "
               "finish\" error=%s", kp_err_name(err));
    it->t = NULL;
    wait_report(it->w);
}

static void on_partitions_added(void *arg, kp_err err)
{
    topic_item *it = arg;
    it->done = true;
    kb_req *req = it->w->req;
    if (err == KP_ERR_NONE)
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"partitions added\" topic=%s partitions=%d",
               it->t->name, it->total);
    if (req != NULL && err != KP_ERR_NONE) {
        bool gone = err == KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        *it->error_code = gone ? KP_ERR_UNKNOWN_TOPIC_OR_PARTITION : KP_ERR_KAFKA_STORAGE_ERROR;
        *it->error_message = kb_req_str(req, gone ? "The topic was deleted meanwhile."
                                                  : "Could not create the partitions' directories.");
    }
    it->t = NULL;
    wait_report(it->w);
}

/* ---- CreateTopics --------------------------------------------------------- */

/* *made: a topic now being created (its directories still to make). */
static kp_err create_one(kb_req *req, const kp_create_topics_req *rq, const creatable_topic *ct,
                         creatable_result *out, kb_topic **made)
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
        e = kb_topics_begin_create(req->broker->topics, ct->name, partitions, configs,
                                   (size_t)ct->configs.n, rq->validate_only, &t, &msg);
        if (e == KP_ERR_NONE) {
            out->num_partitions = partitions;
            out->replication_factor = replication;
            if (t != NULL) {
                out->topic_id = t->id;
                *made = t; /* configs once its partitions exist */
                return KP_ERR_NONE;
            }
            kb_uuid_random(&out->topic_id); /* validate_only: a fresh id, as Kafka */
            created_configs(req, NULL, ct->name, out);
            return KP_ERR_NONE;
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
    topic_wait *w = wait_new(req, rq->topics.n);
    if (w == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        creatable_result *out = &rs->topics.v[i];
        kp_create_topics_resp_creatable_topic_result_defaults(out);
        kb_topic *made = NULL;
        kp_err e = create_one(req, rq, &rq->topics.v[i], out, &made);
        if (made != NULL)
            wait_add(w, ITEM_CREATE, made, &out->error_code, &out->error_message)->created = out;
        if (e != KP_ERR_NONE) {
            /* out of memory: what began still gets made, answered by no one */
            (void)wait_start(req->broker, NULL, w, 0);
            return e;
        }
    }
    return wait_start(req->broker, req, w, rq->timeout_ms);
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

/* Hides the topic and records it deleting; its directories go in w. */
static void delete_one(kb_req *req, topic_wait *w, kp_str name, const kp_uuid *id,
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
    kp_err e = kb_topics_begin_delete(b->topics, t, &msg);
    if (e != KP_ERR_NONE) {
        out->error_code = kp_err_to_wire(e);
        out->error_message = msg_str(req, &msg);
        return;
    }
    kb_partition_log_drop_topic(b, t);
    kb_group_coord_topic_deleted(b, out->name); /* out->name: the request's copy */
    wait_add(w, ITEM_DELETE, t, &out->error_code, &out->error_message);
}

kp_err kb_h_delete_topics(kb_req *req, const kp_delete_topics_req *rq, kp_delete_topics_resp *rs)
{
    /* v0-5 name topics in topic_names; v6+ in topics (by name or by id). */
    bool by_state = req->api_version >= 6;
    int32_t n = by_state ? rq->topics.n : rq->topic_names.n;
    if (!KB_ARRAY_ALLOC(req, rs->responses, n))
        return KP_ERR__NOMEM;
    topic_wait *w = wait_new(req, n);
    if (w == NULL)
        return KP_ERR__NOMEM;
    static const kp_uuid zero;
    for (int32_t i = 0; i < n; i++) {
        kp_delete_topics_resp_deletable_topic_result *out = &rs->responses.v[i];
        kp_delete_topics_resp_deletable_topic_result_defaults(out);
        if (by_state)
            delete_one(req, w, rq->topics.v[i].name, &rq->topics.v[i].topic_id, out);
        else
            delete_one(req, w, rq->topic_names.v[i], &zero, out);
    }
    return wait_start(req->broker, req, w, rq->timeout_ms);
}

/* One topic of a CreatePartitions: checked here, grown by a job (w). */
static void grow_one(kb_req *req, const kp_create_partitions_req *rq, topic_wait *w,
                     const kp_create_partitions_req_create_partitions_topic *ct,
                     kp_create_partitions_resp_create_partitions_topic_result *out)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = kb_topics_find(req->broker->topics, ct->name);
    kp_err e;
    out->name = ct->name;
    if (!kb_authz(req, KB_OP_ALTER, KB_RES_TOPIC, ct->name)) {
        out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        return;
    }
    if (t == NULL) {
        e = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        kb_msgf(&msg, "The topic '%.*s' does not exist.", ct->name.len, ct->name.p);
    } else if (ct->assignments.n > 0 && ct->assignments.n != ct->count - t->npartitions) {
        e = KP_ERR_INVALID_REPLICA_ASSIGNMENT;
        kb_msgf(&msg, "Attempted to add %d additional partition(s), but only %d assignment(s) "
                      "were specified.", ct->count - t->npartitions, ct->assignments.n);
    } else {
        e = kb_topics_check_add_partitions(req->broker->topics, t, ct->count, &msg);
    }
    out->error_code = kp_err_to_wire(e);
    if (e != KP_ERR_NONE)
        out->error_message = msg_str(req, &msg);
    else if (!rq->validate_only)
        wait_add(w, ITEM_GROW, t, &out->error_code, &out->error_message)->total = ct->count;
}

kp_err kb_h_create_partitions(kb_req *req, const kp_create_partitions_req *rq,
                              kp_create_partitions_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->topics.n))
        return KP_ERR__NOMEM;
    topic_wait *w = wait_new(req, rq->topics.n);
    if (w == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        kp_create_partitions_resp_create_partitions_topic_result *out = &rs->results.v[i];
        kp_create_partitions_resp_create_partitions_topic_result_defaults(out);
        grow_one(req, rq, w, &rq->topics.v[i], out);
    }
    return wait_start(req->broker, req, w, rq->timeout_ms);
}
