/* Handlers for committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch,
 * OffsetDelete.
 * The group checks come from kb_group, the records from kb_group_coord. */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_coord_ack.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_consumer_group.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_streams_group.h"
#include "kb_txn_coord.h"
#include "kb_topics.h"

/* ---- OffsetCommit ------------------------------------------------------- */

typedef kp_offset_commit_req_offset_commit_request_partition commit_part;
typedef kp_offset_commit_resp_offset_commit_response_partition commit_result;

/* The group a commit (plain or transactional) from member at generation
 * goes to: an existing one whose checks accept the member, or a new "simple"
 * group for a generation below 0. */
static kp_err group_for_commit(kb_req *req, kp_str group_id, kp_str member_id, kp_str instance_id,
                               int32_t generation, bool transactional, kb_group **out)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    *out = kb_groups_find(gs, group_id);
    if (*out == NULL) {
        if (generation >= 0)
            return KP_ERR_ILLEGAL_GENERATION;
        return kb_groups_get(gs, group_id, out) == KP_ERR_NONE ? KP_ERR_NONE
                                                                : KP_ERR_UNKNOWN_SERVER_ERROR;
    }
    if ((*out)->cg != NULL)
        return kb_consumer_group_check_commit((*out)->cg, member_id, generation, req->api_version,
                                      transactional);
    if ((*out)->stg != NULL)
        return kb_streams_group_check_commit((*out)->stg, member_id, generation);
    return kb_group_check_commit(*out, member_id, instance_id, generation);
}

/* The group's partition of __consumer_offsets (*t, *p) may take a write
 * here: this broker coordinates the group, has loaded it, and the ISR is
 * at least min.insync.replicas (cluster mode; kb_coord_ack.h). */
static kp_err coordinator_write_check(kb_req *req, kp_str group_id, kb_topic **t, int32_t *p)
{
    if (kb_group_coord_offsets_topic(req->broker, t) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    kp_err coord = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, group_id);
    if (coord != KP_ERR_NONE)
        return coord;
    *p = kb_offsets_partition_for(group_id, (*t)->npartitions);
    return kb_coord_ack_check(req, *t, *p);
}

static kp_err commit_group(kb_req *req, const kp_offset_commit_req *rq, kb_group **out,
                           kb_topic **t, int32_t *p)
{
    if (rq->group_id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    kp_err coord = coordinator_write_check(req, rq->group_id, t, p);
    if (coord != KP_ERR_NONE)
        return coord;
    return group_for_commit(req, rq->group_id, rq->member_id, rq->group_instance_id,
                            rq->generation_id_or_member_epoch, false, out);
}

/* When the commit expires: v2-v4 carry a retention (v1, with per-partition
 * timestamps, is below Kafka 4's minimum and not served). */
static int64_t expire_at(kb_req *req, const kp_offset_commit_req *rq, int64_t now)
{
    if (req->api_version >= 2 && req->api_version <= 4 && rq->retention_time_ms >= 0)
        return now + rq->retention_time_ms;
    return -1;
}

static kp_err commit_alloc(kb_req *req, const kp_offset_commit_req *rq, kp_offset_commit_resp *rs,
                           int32_t *total)
{
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0;
    *total = 0;
    if (!KB_ARRAY_ALLOC(req, rs->topics, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        int32_t np = rq->topics.v[i].partitions.n > 0 ? rq->topics.v[i].partitions.n : 0;
        rs->topics.v[i].name = rq->topics.v[i].name;
        rs->topics.v[i].topic_id = rq->topics.v[i].topic_id;
        if (!KB_ARRAY_ALLOC(req, rs->topics.v[i].partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++)
            rs->topics.v[i].partitions.v[j].partition_index =
                rq->topics.v[i].partitions.v[j].partition_index;
        *total += np;
    }
    return KP_ERR_NONE;
}

/* Sets err on every partition still NONE (all of them when all is true). */
static void commit_fail(kp_offset_commit_resp *rs, kp_err err, bool all)
{
    for (int32_t i = 0; i < rs->topics.n; i++)
        for (int32_t j = 0; j < rs->topics.v[i].partitions.n; j++)
            if (all || rs->topics.v[i].partitions.v[j].error_code == KP_ERR_NONE)
                rs->topics.v[i].partitions.v[j].error_code = err;
}

static int32_t commit_timeout(const kb_req *req)
{
    return req->broker->cfg->offsets_commit_timeout_ms;
}

static void commit_failed(kb_req *req, int16_t err)
{
    commit_fail(req->response, err, false);
}

/* One partition's commit checked into o: its error code (NONE: o filled;
 * UNKNOWN_SERVER_ERROR: out of memory). name is the topic's arena copy. */
static int16_t offset_entry(kb_req *req, const kb_topic *t, char *name, int32_t partition,
                            int64_t offset, int32_t leader_epoch, kp_str metadata, kb_offset *o)
{
    if (t == NULL || name == NULL || partition < 0 || partition >= t->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (metadata.len > KB_OFFSETS_METADATA_MAX)
        return KP_ERR_OFFSET_METADATA_TOO_LARGE;
    o->topic = name;
    o->partition = partition;
    o->offset = offset;
    o->leader_epoch = leader_epoch;
    o->metadata_len = metadata.len > 0 ? metadata.len : 0;
    o->metadata = kp_arena_strdup(&req->arena, metadata.len > 0 ? metadata.p : "",
                                  (size_t)o->metadata_len);
    o->commit_ts = kb_group_coord_wall(req->broker);
    o->expire_ts = -1;
    return o->metadata != NULL ? KP_ERR_NONE : KP_ERR_UNKNOWN_SERVER_ERROR;
}

static char *topic_copy(kb_req *req, kp_str name)
{
    return kp_arena_strdup(&req->arena, name.p, (size_t)(name.len > 0 ? name.len : 0));
}

/* The topic a commit or an offset fetch names: by id in the versions that
 * carry ids (OffsetCommit and OffsetFetch v10+, TxnOffsetCommit v6+), where
 * an id no topic has is UNKNOWN_TOPIC_ID (*err), Kafka's answer before any
 * topic authorization. *named: the name ACLs and offsets are keyed by. */
static kb_topic *named_topic(kb_req *req, bool by_id, kp_str name, const kp_uuid *id,
                             kp_str *named, int16_t *err)
{
    kb_topic *t = kb_topics_find_ref(req->broker->topics, by_id, name, id);
    *err = t == NULL && by_id ? KP_ERR_UNKNOWN_TOPIC_ID : KP_ERR_NONE;
    *named = !by_id ? name : t != NULL ? kp_str_from(t->name) : KP_STR_LIT("");
    return t;
}

/* A committed topic: its registry entry (or NULL), the arena copy of the
 * name its offsets are keyed by, and the error every partition of it gets
 * before each is looked at (an unknown id, then TOPIC READ). */
static kb_topic *commit_topic(kb_req *req, bool by_id, kp_str name, const kp_uuid *id,
                              char **copy, int16_t *err)
{
    kp_str named;
    kb_topic *t = named_topic(req, by_id, name, id, &named, err);
    *copy = topic_copy(req, named);
    if (*err == KP_ERR_NONE && !kb_authz(req, KB_OP_READ, KB_RES_TOPIC, named))
        *err = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    return t;
}

/* Checks each partition; the valid ones become entries of offs. */
static int32_t commit_collect(kb_req *req, const kp_offset_commit_req *rq,
                              kp_offset_commit_resp *rs, kb_offset *offs)
{
    int32_t n = 0;
    for (int32_t i = 0; i < rs->topics.n; i++) {
        const kp_offset_commit_req_offset_commit_request_topic *rt = &rq->topics.v[i];
        char *name;
        int16_t terr;
        kb_topic *t = commit_topic(req, req->api_version >= 10, rt->name, &rt->topic_id, &name,
                                   &terr);
        for (int32_t j = 0; j < rs->topics.v[i].partitions.n; j++) {
            const commit_part *p = &rt->partitions.v[j];
            commit_result *r = &rs->topics.v[i].partitions.v[j];
            if (terr != KP_ERR_NONE) {
                r->error_code = terr;
                continue;
            }
            r->error_code = offset_entry(req, t, name, p->partition_index, p->committed_offset,
                                         p->committed_leader_epoch, p->committed_metadata,
                                         &offs[n]);
            if (r->error_code == KP_ERR_UNKNOWN_SERVER_ERROR)
                return -1;
            if (r->error_code == KP_ERR_NONE) {
                offs[n].expire_ts = expire_at(req, rq, offs[n].commit_ts);
                n++;
            }
        }
    }
    return n;
}

kp_err kb_h_offset_commit(kb_req *req, const kp_offset_commit_req *rq, kp_offset_commit_resp *rs)
{
    int32_t total;
    if (commit_alloc(req, rq, rs, &total) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_group *g = NULL;
    kb_topic *ot = NULL;
    int32_t op = 0;
    kp_err err = kb_authz(req, KB_OP_READ, KB_RES_GROUP, rq->group_id)
                     ? commit_group(req, rq, &g, &ot, &op)
                     : KP_ERR_GROUP_AUTHORIZATION_FAILED;
    if (err != KP_ERR_NONE) {
        commit_fail(rs, err, true);
        return KP_ERR_NONE;
    }
    kb_offset *offs = kp_arena_calloc(&req->arena, (size_t)total + 1, sizeof(*offs));
    if (offs == NULL)
        return KP_ERR__NOMEM;
    int32_t n = commit_collect(req, rq, rs, offs);
    if (n < 0)
        return KP_ERR__NOMEM;
    if (n > 0 && kb_group_coord_commit(req->broker, g, offs, n) != KP_ERR_NONE) {
        commit_fail(rs, KP_ERR_COORDINATOR_NOT_AVAILABLE, false);
        return KP_ERR_NONE;
    }
    /* answered once the ISR has the commit (acks=-1, as Kafka appends it) */
    return n > 0 ? kb_coord_ack_wait(req, ot, op, commit_timeout(req), commit_failed)
                 : KP_ERR_NONE;
}

/* ---- TxnOffsetCommit ---------------------------------------------------- */

typedef kp_txn_offset_commit_resp_txn_offset_commit_response_partition txn_commit_result;

/* The transaction must hold the group's partition of __consumer_offsets
 * (AddOffsetsToTxn), as Kafka 4's verification checks before a v0-4 write;
 * from v5 (transactions v2) the commit adds it. */
static kp_err txn_commit_check(kb_req *req, const kp_txn_offset_commit_req *rq, kb_group **g,
                               kb_topic **ot, int32_t *op)
{
    if (!kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, rq->transactional_id))
        return KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (!kb_authz(req, KB_OP_READ, KB_RES_GROUP, rq->group_id))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    if (rq->group_id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    kp_err coord = coordinator_write_check(req, rq->group_id, ot, op);
    if (coord != KP_ERR_NONE)
        return coord;
    kb_topic *t = *ot;
    int32_t p = *op;
    const kb_txn *txn = kb_txns_find(kb_txn_coord_txns(req->broker), rq->transactional_id);
    kp_err e = kb_txn_check_producer(txn, rq->producer_id, rq->producer_epoch);
    if (e == KP_ERR_PRODUCER_FENCED)
        return KP_ERR_INVALID_PRODUCER_EPOCH;
    if (e != KP_ERR_NONE)
        return e;
    if (!kb_txn_has_partition(txn, t->name, p)) {
        /* v5 is transactions v2: the commit adds the partition itself. */
        if (req->api_version < 5)
            return KP_ERR_INVALID_TXN_STATE;
        kb_txn_tp tp = {t->name, p};
        e = kb_txn_add_partitions_tv(kb_txn_coord_txns(req->broker), rq->transactional_id,
                                     rq->producer_id, rq->producer_epoch, &tp, 1, KB_TXN_TV2);
        if (e != KP_ERR_NONE)
            return e;
    }
    e = group_for_commit(req, rq->group_id, rq->member_id, rq->group_instance_id,
                         rq->generation_id_or_member_epoch, true, g);
    /* A classic group's rebalance does not stop a transactional commit (the
     * consumer protocol's checks never answer REBALANCE_IN_PROGRESS). */
    return e == KP_ERR_REBALANCE_IN_PROGRESS ? KP_ERR_NONE : e;
}

/* Shapes the response like the request; every partition gets err. */
static kp_err txn_commit_alloc(kb_req *req, const kp_txn_offset_commit_req *rq,
                               kp_txn_offset_commit_resp *rs, int16_t err, int32_t *total)
{
    *total = 0;
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        rs->topics.v[i].name = rq->topics.v[i].name;
        rs->topics.v[i].topic_id = rq->topics.v[i].topic_id;
        if (!KB_ARRAY_ALLOC(req, rs->topics.v[i].partitions, rq->topics.v[i].partitions.n))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < rq->topics.v[i].partitions.n; j++) {
            rs->topics.v[i].partitions.v[j].partition_index =
                rq->topics.v[i].partitions.v[j].partition_index;
            rs->topics.v[i].partitions.v[j].error_code = err;
        }
        *total += rq->topics.v[i].partitions.n;
    }
    return KP_ERR_NONE;
}

/* Sets err on every partition still without an error. */
static void txn_commit_failed(kb_req *req, int16_t err)
{
    kp_txn_offset_commit_resp *rs = req->response;
    for (int32_t i = 0; i < rs->topics.n; i++)
        for (int32_t j = 0; j < rs->topics.v[i].partitions.n; j++)
            if (rs->topics.v[i].partitions.v[j].error_code == KP_ERR_NONE)
                rs->topics.v[i].partitions.v[j].error_code = err;
}

kp_err kb_h_txn_offset_commit(kb_req *req, const kp_txn_offset_commit_req *rq,
                              kp_txn_offset_commit_resp *rs)
{
    kb_group *g = NULL;
    kb_topic *ot = NULL;
    int32_t total, n = 0, op = 0;
    int16_t err = kp_err_to_wire(txn_commit_check(req, rq, &g, &ot, &op));
    if (txn_commit_alloc(req, rq, rs, err, &total) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_offset *offs = kp_arena_calloc(&req->arena, (size_t)total + 1, sizeof(*offs));
    if (err != KP_ERR_NONE || offs == NULL)
        return offs == NULL ? KP_ERR__NOMEM : KP_ERR_NONE;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_txn_offset_commit_req_txn_offset_commit_request_topic *rt = &rq->topics.v[i];
        char *name;
        int16_t terr;
        kb_topic *t = commit_topic(req, req->api_version >= 6, rt->name, &rt->topic_id, &name,
                                   &terr);
        for (int32_t j = 0; j < rt->partitions.n; j++) {
            const kp_txn_offset_commit_req_txn_offset_commit_request_partition *p =
                &rt->partitions.v[j];
            txn_commit_result *r = &rs->topics.v[i].partitions.v[j];
            if (terr != KP_ERR_NONE) {
                r->error_code = terr;
                continue;
            }
            r->error_code = offset_entry(req, t, name, p->partition_index, p->committed_offset,
                                         p->committed_leader_epoch, p->committed_metadata,
                                         &offs[n]);
            n += r->error_code == KP_ERR_NONE;
        }
    }
    kp_err e = n > 0 ? kb_group_coord_txn_commit(req->broker, g, rq->producer_id, rq->producer_epoch,
                                            offs, n)
                     : KP_ERR_NONE;
    if (e != KP_ERR_NONE)
        txn_commit_failed(req, kp_err_to_wire(e));
    /* answered once the ISR has the commit (acks=-1, as Kafka appends it) */
    return e == KP_ERR_NONE && n > 0 ? kb_coord_ack_wait(req, ot, op, commit_timeout(req),
                                                       txn_commit_failed)
                                     : KP_ERR_NONE;
}

/* ---- OffsetFetch -------------------------------------------------------- */

typedef kp_offset_fetch_resp_offset_fetch_response_partitions fetch_part;
typedef kp_offset_fetch_resp_offset_fetch_response_topics fetch_topic;

/* With require_stable, an offset an open transaction may still change
 * answers UNSTABLE_OFFSET_COMMIT (the client retries). */
static void fetch_fill(kb_req *req, const kb_group *g, kp_str topic, int32_t partition,
                       fetch_part *out)
{
    const kb_offset *o = g != NULL ? kb_offset_map_get(&g->offsets, topic, partition) : NULL;
    const kp_offset_fetch_req *rq = req->request;
    bool unstable = rq->require_stable && g != NULL &&
                    kb_group_coord_txn_pending(req->broker, kp_str_from(g->id), topic, partition);
    out->partition_index = partition;
    out->committed_offset = o != NULL && !unstable ? o->offset : -1;
    out->committed_leader_epoch = o != NULL && !unstable ? o->leader_epoch : -1;
    out->metadata = o != NULL && !unstable ? kb_offset_metadata(o) : KP_STR_LIT("");
    out->error_code = unstable ? KP_ERR_UNSTABLE_OFFSET_COMMIT : KP_ERR_NONE;
}

static int cmp_offset(const void *a, const void *b)
{
    const kb_offset *x = *(const kb_offset *const *)a, *y = *(const kb_offset *const *)b;
    int c = strcmp(x->topic, y->topic);
    return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Every committed offset of g, grouped by topic. */
static kp_err fetch_all(kb_req *req, const kb_group *g, kp_offset_fetch_resp_offset_fetch_response_group *out)
{
    size_t n = g != NULL ? kb_offset_map_count(&g->offsets) : 0, cur = 0, k = 0;
    const kb_offset **v = kp_arena_calloc(&req->arena, n + 1, sizeof(*v));
    if (v == NULL || !KB_ARRAY_ALLOC(req, out->topics, n))
        return KP_ERR__NOMEM;
    /* Topics the principal may not DESCRIBE are left out (as Kafka). */
    for (const kb_offset *o; g != NULL && (o = kb_offset_map_next(&g->offsets, &cur)) != NULL;)
        if (kb_authz_topic(req, KB_OP_DESCRIBE, o->topic))
            v[k++] = o;
    n = k;
    qsort(v, n, sizeof(*v), cmp_offset);
    int32_t nt = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(v[j]->topic, v[i]->topic) == 0)
            j++;
        /* v10 names topics by id: one no topic has any more is left out */
        const kb_topic *named = req->api_version >= 10
                                    ? kb_topics_find(req->broker->topics, kp_str_from(v[i]->topic))
                                    : NULL;
        if (req->api_version >= 10 && named == NULL) {
            i = j;
            continue;
        }
        fetch_topic *t = &out->topics.v[nt++];
        t->name = kb_req_str(req, v[i]->topic);
        if (named != NULL)
            t->topic_id = named->id;
        if (!KB_ARRAY_ALLOC(req, t->partitions, j - i))
            return KP_ERR__NOMEM;
        for (size_t p = i; p < j; p++)
            fetch_fill(req, g, t->name, v[p]->partition, &t->partitions.v[p - i]);
        i = j;
    }
    out->topics.n = nt;
    return KP_ERR_NONE;
}

static kp_err fetch_group(kb_req *req, const kp_offset_fetch_req_offset_fetch_request_group *rg,
                          kp_offset_fetch_resp_offset_fetch_response_group *out)
{
    out->group_id = rg->group_id;
    if (rg->group_id.len < 0) {
        out->error_code = KP_ERR_INVALID_GROUP_ID;
        return KP_ERR_NONE;
    }
    if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_GROUP, rg->group_id)) {
        out->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    out->error_code = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rg->group_id);
    if (out->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    const kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), rg->group_id);
    if (g != NULL && g->cg != NULL && req->api_version >= 9 &&
        (out->error_code = kb_consumer_group_check_fetch(g->cg, rg->member_id, rg->member_epoch)) !=
            KP_ERR_NONE)
        return KP_ERR_NONE;
    if (g != NULL && g->stg != NULL && req->api_version >= 9 &&
        (out->error_code = kb_streams_group_check_fetch(g->stg, rg->member_id, rg->member_epoch)) !=
            KP_ERR_NONE)
        return KP_ERR_NONE;
    if (rg->topics.n < 0)
        return fetch_all(req, g, out);
    if (!KB_ARRAY_ALLOC(req, out->topics, rg->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rg->topics.n; i++) {
        const kp_offset_fetch_req_offset_fetch_request_topics *rt = &rg->topics.v[i];
        fetch_topic *t = &out->topics.v[i];
        t->name = rt->name;
        t->topic_id = rt->topic_id;
        int32_t np = rt->partition_indexes.n > 0 ? rt->partition_indexes.n : 0;
        if (!KB_ARRAY_ALLOC(req, t->partitions, np))
            return KP_ERR__NOMEM;
        kp_str named;
        int16_t terr;
        (void)named_topic(req, req->api_version >= 10, rt->name, &rt->topic_id, &named, &terr);
        if (terr == KP_ERR_NONE && !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, named))
            terr = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        for (int32_t j = 0; j < np; j++) {
            fetch_fill(req, terr != KP_ERR_NONE ? NULL : g, named, rt->partition_indexes.v[j],
                       &t->partitions.v[j]);
            if (terr != KP_ERR_NONE)
                t->partitions.v[j].error_code = terr;
        }
    }
    return KP_ERR_NONE;
}

/* v0-v7 ask for one group with top-level topics: the same, in the older
 * structs (identical fields, distinct types). */
static kp_err fetch_single(kb_req *req, const kp_offset_fetch_req *rq, kp_offset_fetch_resp *rs)
{
    kp_offset_fetch_req_offset_fetch_request_group rg = {.group_id = rq->group_id};
    rg.topics.n = rq->topics.n;
    if (rq->topics.n >= 0 &&
        (rg.topics.v = kp_arena_calloc(&req->arena, (size_t)rq->topics.n + 1, sizeof(*rg.topics.v))) == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        rg.topics.v[i].name = rq->topics.v[i].name;
        rg.topics.v[i].partition_indexes.n = rq->topics.v[i].partition_indexes.n;
        rg.topics.v[i].partition_indexes.v = rq->topics.v[i].partition_indexes.v;
    }
    kp_offset_fetch_resp_offset_fetch_response_group out = {0};
    kp_err e = fetch_group(req, &rg, &out);
    if (e != KP_ERR_NONE)
        return e;
    rs->error_code = out.error_code;
    if (!KB_ARRAY_ALLOC(req, rs->topics, out.topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < out.topics.n; i++) {
        const fetch_topic *src = &out.topics.v[i];
        kp_offset_fetch_resp_offset_fetch_response_topic *dst = &rs->topics.v[i];
        dst->name = src->name;
        if (!KB_ARRAY_ALLOC(req, dst->partitions, src->partitions.n))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < src->partitions.n; j++) {
            const fetch_part *sp = &src->partitions.v[j];
            kp_offset_fetch_resp_offset_fetch_response_partition *dp = &dst->partitions.v[j];
            dp->partition_index = sp->partition_index;
            dp->committed_offset = sp->committed_offset;
            dp->committed_leader_epoch = sp->committed_leader_epoch;
            dp->metadata = sp->metadata;
            dp->error_code = sp->error_code;
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_offset_fetch(kb_req *req, const kp_offset_fetch_req *rq, kp_offset_fetch_resp *rs)
{
    if (req->api_version < 8)
        return fetch_single(req, rq, rs);
    int32_t n = rq->groups.n > 0 ? rq->groups.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_err e = fetch_group(req, &rq->groups.v[i], &rs->groups.v[i]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

/* ---- OffsetDelete ------------------------------------------------------- */

static kp_err delete_check(kb_req *req, const kp_offset_delete_req *rq, kb_group **g)
{
    if (!kb_authz(req, KB_OP_DELETE, KB_RES_GROUP, rq->group_id))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    if (rq->group_id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    kp_err coord = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
    if (coord != KP_ERR_NONE)
        return coord;
    *g = kb_groups_find(kb_group_coord_groups(req->broker), rq->group_id);
    if (*g == NULL || (*g)->state == KB_GS_DEAD)
        return KP_ERR_GROUP_ID_NOT_FOUND;
    if ((*g)->cg == NULL && (*g)->state != KB_GS_EMPTY &&
        ((*g)->protocol_type == NULL || strcmp((*g)->protocol_type, "consumer") != 0))
        return KP_ERR_NON_EMPTY_GROUP;
    return KP_ERR_NONE;
}

/* One partition's answer, Kafka's checks in Kafka's order: topic READ, then
 * the topic and partition exist, then the group is not subscribed to it.
 * NONE means its committed offset (if any) is to go. */
static int16_t delete_partition_error(bool denied, const kb_topic *t, bool subscribed,
                                      int32_t partition)
{
    if (denied)
        return KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    if (t == NULL || partition < 0 || partition >= t->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return subscribed ? KP_ERR_GROUP_SUBSCRIBED_TO_TOPIC : KP_ERR_NONE;
}

kp_err kb_h_offset_delete(kb_req *req, const kp_offset_delete_req *rq, kp_offset_delete_resp *rs)
{
    kb_group *g = NULL;
    if ((rs->error_code = delete_check(req, rq, &g)) != KP_ERR_NONE)
        return KP_ERR_NONE;
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0, total = 0, n = 0;
    if (!KB_ARRAY_ALLOC(req, rs->topics, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++)
        total += rq->topics.v[i].partitions.n > 0 ? rq->topics.v[i].partitions.n : 0;
    kb_offset *dead = kp_arena_calloc(&req->arena, (size_t)total + 1, sizeof(*dead));
    if (dead == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        const kp_offset_delete_req_offset_delete_request_topic *rt = &rq->topics.v[i];
        int32_t np = rt->partitions.n > 0 ? rt->partitions.n : 0;
        bool subscribed = g->cg != NULL    ? kb_consumer_group_subscribed_to(g->cg, rt->name)
                          : g->stg != NULL ? g->stg->topology != NULL &&
                                                 kb_streams_topology_reads(g->stg->topology, rt->name)
                                           : kb_group_subscribed_to(g, rt->name);
        bool denied = !kb_authz(req, KB_OP_READ, KB_RES_TOPIC, rt->name);
        const kb_topic *t = kb_topics_find(req->broker->topics, rt->name);
        rs->topics.v[i].name = rt->name;
        if (!KB_ARRAY_ALLOC(req, rs->topics.v[i].partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++) {
            int32_t p = rt->partitions.v[j].partition_index;
            int16_t err = delete_partition_error(denied, t, subscribed, p);
            const kb_offset *o = kb_offset_map_get(&g->offsets, rt->name, p);
            rs->topics.v[i].partitions.v[j].partition_index = p;
            rs->topics.v[i].partitions.v[j].error_code = err;
            /* A tombstone also ends what open transactions hold (as in Kafka). */
            if (err == KP_ERR_NONE &&
                (o != NULL || kb_group_coord_txn_pending(req->broker, rq->group_id, rt->name, p))) {
                /* the topic is copied: deleting frees the map's */
                dead[n].topic = kp_arena_strdup(&req->arena, rt->name.p, (size_t)rt->name.len);
                dead[n].partition = p;
                if (dead[n++].topic == NULL)
                    return KP_ERR__NOMEM;
            }
        }
    }
    if (n > 0 && kb_group_coord_delete_offsets(req->broker, g, dead, n) != KP_ERR_NONE)
        rs->error_code = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return KP_ERR_NONE;
}
