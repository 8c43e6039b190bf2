/* Handler for Fetch: file slices of whole batches, sent with sendfile, and
 * the long poll that waits for min_bytes until max_wait_ms. */
#include <stdlib.h>
#include <string.h>

#include "kb_admin.h"
#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_lag.h"
#include "kb_log.h"
#include "kb_longpoll.h"
#include "kb_producer_state.h"
#include "kb_partition_log.h"
#include "kb_partition_txn.h"
#include "kb_replica.h"
#include "kb_txn_coord.h"
#include "kb_topics.h"

typedef kp_fetch_req_fetch_partition fetch_part;
typedef kp_fetch_req_fetch_topic fetch_topic;
typedef kp_fetch_resp_partition_data part_out;

/* A fetch in flight: the segment references its response holds, and while
 * parked its watches (kb_longpoll.h) and its timer. */
typedef struct fetch_state {
    kb_poll_waiter waiter;
    kb_req *req;
    kb_timer timer;
    ks_log_slice *slices;
    int32_t nslices;
    int64_t max_bytes; /* the request's, capped by its quota window */
    int64_t min_bytes; /* the request's, at most max_bytes */
    bool parked;
} fetch_state;

static kb_topic *fetch_topic_lookup(const kb_req *req, const fetch_topic *ft)
{
    return kb_topics_find_ref(req->broker->topics, req->api_version >= 13, ft->topic,
                              &ft->topic_id);
}

static void release_slices(fetch_state *st)
{
    for (int32_t i = 0; i < st->nslices; i++)
        ks_log_slice_release(&st->slices[i]);
    st->nslices = 0;
}

/* The aborted transactions a read_committed consumer must skip in the data
 * returned from fetch_offset (everything returned lies below the LSO). */
static void list_aborted(kb_req *req, kb_topic *t, const fetch_part *fp, int64_t lso,
                         part_out *out)
{
    kb_producer_state *ps = t->partitions[fp->partition].pids;
    kb_partition_txn *x = ps != NULL ? kb_producer_state_txns(ps) : NULL;
    if (x == NULL || kb_partition_txn_aborted_count(x) == 0)
        return;
    kb_partition_txn_prune(x, ks_log_start_offset(t->partitions[fp->partition].log));
    int32_t max = kb_partition_txn_aborted_count(x);
    kb_aborted_txn *v = kp_arena_calloc(&req->arena, (size_t)max + 1, sizeof(*v));
    if (v == NULL || !KB_ARRAY_ALLOC(req, out->aborted_transactions, max)) {
        out->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    int32_t n = kb_partition_txn_aborted(x, fp->fetch_offset, lso, v, max);
    for (int32_t i = 0; i < n; i++) {
        out->aborted_transactions.v[i].producer_id = v[i].producer_id;
        out->aborted_transactions.v[i].first_offset = v[i].first_offset;
    }
    out->aborted_transactions.n = n;
}

/* The replica id of a follower's fetch (ReplicaState from v15), else -1.
 * Only a principal with CLUSTER_ACTION may speak as a follower (as in
 * Kafka): anyone else claiming a replica id is read as a consumer, so a
 * client cannot move the high watermark past what the ISR holds. */
static int32_t fetch_replica_id(kb_req *req, const kp_fetch_req *rq)
{
    int32_t id = req->api_version >= 15 ? rq->replica_state.replica_id : rq->replica_id;
    return id >= 0 && kb_authz_cluster(req, KB_OP_CLUSTER_ACTION) ? id : -1;
}

/* Whether the fetch comes from a follower in the partition's replica set. */
static bool from_follower(kb_req *req, const kp_fetch_req *rq, const kb_topic *t,
                          int32_t p)
{
    int32_t id = fetch_replica_id(req, rq);
    return id >= 0 && kb_replica_in_set(t->partitions[p].repl, id);
}

/* A follower's fetch offset is its log end: the leader's high watermark
 * may move, which wakes the consumers and produces waiting for it. */
static void record_follower_offsets(kb_req *req, const kp_fetch_req *rq)
{
    int32_t id = fetch_replica_id(req, rq);
    if (id < 0)
        return;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        kb_topic *t = fetch_topic_lookup(req, &rq->topics.v[i]);
        for (int32_t j = 0; t != NULL && j < rq->topics.v[i].partitions.n; j++) {
            const fetch_part *fp = &rq->topics.v[i].partitions.v[j];
            if (fp->partition < 0 || fp->partition >= t->npartitions)
                continue;
            ks_log *log = t->partitions[fp->partition].log;
            if (log == NULL || fp->fetch_offset < ks_log_start_offset(log) ||
                fp->fetch_offset > ks_log_end_offset(log))
                continue;
            if (kb_replica_follower_fetched(req->broker, t, fp->partition, id, fp->fetch_offset,
                                            kb_loop_now_ms(req->broker->loop)))
                kb_partition_log_appended(req->broker, t, fp->partition);
        }
    }
}

/* Fetch v12+ (Kafka's validateFetchOffsetAndMaybeGetDivergingEpoch): when
 * the fetcher's last fetched epoch ends here before its fetch offset, or is
 * not an epoch of this log, it answers the diverging epoch (the largest
 * epoch <= it and where that ends) and no records; the fetcher truncates.
 * True when out is answered so. */
static bool diverged(kb_req *req, ks_log *log, const fetch_part *fp, part_out *out)
{
    if (req->api_version < 12 || fp->last_fetched_epoch < 0)
        return false;
    int32_t epoch;
    int64_t end;
    ks_log_epoch_end_offset(log, fp->last_fetched_epoch, &epoch, &end);
    if (epoch < 0 || end < 0) {
        out->error_code = KP_ERR_OFFSET_OUT_OF_RANGE; /* no end offset for that epoch */
        return true;
    }
    if (epoch >= fp->last_fetched_epoch && end >= fp->fetch_offset)
        return false;
    out->diverging_epoch.epoch = epoch;
    out->diverging_epoch.end_offset = end;
    out->records = (kp_records){(const uint8_t *)"", 0, NULL};
    return true;
}

/* Reads one partition into out; *budget is what max_bytes leaves. */
static void fetch_partition(kb_req *req, const kp_fetch_req *rq, kb_topic *t, const fetch_part *fp,
                            fetch_state *st, int64_t *budget, part_out *out)
{
    ks_log *log;
    kp_err e = kb_partition_log_get(req->broker, t, fp->partition, &log);
    if (e != KP_ERR_NONE) {
        out->error_code = kp_err_to_wire(e);
        return;
    }
    int64_t hw = ks_log_high_watermark(log);
    int64_t lso = kb_txn_coord_lso(req->broker, t, fp->partition, log);
    bool committed_only = rq->isolation_level == 1; /* read_committed stops at the LSO */
    out->high_watermark = hw;
    out->last_stable_offset = lso;
    out->log_start_offset = ks_log_start_offset(log);
    out->aborted_transactions.n = committed_only ? 0 : -1;
    out->error_code = kb_partition_log_check_epoch(fp->current_leader_epoch,
                                         t->partitions[fp->partition].leader_epoch);
    if (out->error_code != KP_ERR_NONE || diverged(req, log, fp, out))
        return;
    if (fp->fetch_offset < out->log_start_offset || fp->fetch_offset > ks_log_end_offset(log)) {
        out->error_code = KP_ERR_OFFSET_OUT_OF_RANGE;
        if (rq->replica_id < 0 && rq->replica_state.replica_id < 0) /* a consumer */
            kb_lag_out_of_range(req->broker, req->client_id, t->name, fp->partition,
                                fp->fetch_offset, out->log_start_offset);
        return;
    }
    out->records = (kp_records){(const uint8_t *)"", 0, NULL};
    int64_t limit = fp->partition_max_bytes < *budget ? fp->partition_max_bytes : *budget;
    bool first_data = *budget == st->max_bytes;
    if (limit <= 0 && !first_data)
        return;
    /* followers read up to the log end, consumers up to the HW (or the LSO) */
    int64_t upto = from_follower(req, rq, t, fp->partition) ? ks_log_end_offset(log)
                   : committed_only                          ? lso
                                                             : hw;
    ks_log_slice s;
    e = ks_log_read(log, fp->fetch_offset, limit > INT32_MAX ? INT32_MAX : (int32_t)limit, upto,
                    &s, NULL);
    if (e != KP_ERR_NONE) {
        out->error_code = kp_err_to_wire(e);
        return;
    }
    /* KIP-74: only the first partition with data may exceed the limits. */
    if (s.range.len == 0 || (s.range.len > limit && !first_data)) {
        ks_log_slice_release(&s);
        return;
    }
    kp_file_range *fr = kp_arena_alloc(&req->arena, sizeof(*fr));
    if (fr == NULL) {
        ks_log_slice_release(&s);
        out->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    *fr = s.range;
    st->slices[st->nslices++] = s;
    out->records = (kp_records){NULL, s.range.len, fr};
    *budget -= s.range.len;
    if (committed_only)
        list_aborted(req, t, fp, lso, out);
}

static int32_t count_partitions(const kp_fetch_req *rq)
{
    int32_t n = 0;
    for (int32_t i = 0; i < rq->topics.n; i++)
        n += rq->topics.v[i].partitions.n;
    return n;
}

/* Fills the whole response; returns the record bytes it carries. */
static int64_t fetch_fill(kb_req *req, const kp_fetch_req *rq, kp_fetch_resp *rs, fetch_state *st,
                          bool *errors)
{
    release_slices(st);
    int64_t budget = st->max_bytes;
    *errors = false;
    if (!KB_ARRAY_ALLOC(req, rs->responses, rq->topics.n))
        return -1;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const fetch_topic *ft = &rq->topics.v[i];
        kp_fetch_resp_fetchable_topic_response *to = &rs->responses.v[i];
        to->topic = ft->topic;
        to->topic_id = ft->topic_id;
        if (!KB_ARRAY_ALLOC(req, to->partitions, ft->partitions.n))
            return -1;
        kb_topic *t = fetch_topic_lookup(req, ft);
        /* Kafka: an unknown id first, then READ, then existence by name. */
        bool denied = t != NULL ? !kb_authz_topic(req, KB_OP_READ, t->name)
                                : req->api_version < 13 &&
                                      !kb_authz(req, KB_OP_READ, KB_RES_TOPIC, ft->topic);
        for (int32_t j = 0; j < ft->partitions.n; j++) {
            const fetch_part *fp = &ft->partitions.v[j];
            part_out *out = &to->partitions.v[j];
            kp_fetch_resp_partition_data_defaults(out);
            out->partition_index = fp->partition;
            if (denied)
                out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
            else if (t == NULL)
                out->error_code = req->api_version >= 13 ? KP_ERR_UNKNOWN_TOPIC_ID
                                                         : KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            else if (fp->partition < 0 || fp->partition >= t->npartitions)
                out->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            else if ((out->error_code = kb_cv_check_leader(req, &t->id, fp->partition,
                                                           &out->current_leader.leader_id,
                                                           &out->current_leader.leader_epoch)) ==
                     KP_ERR_NONE)
                fetch_partition(req, rq, t, fp, st, &budget, out);
            *errors |= out->error_code != KP_ERR_NONE;
        }
    }
    return st->max_bytes - budget;
}

/* KIP-951: the endpoints of the leaders NOT_LEADER_OR_FOLLOWER names
 * (nparts: the partitions asked for). */
static kp_err leader_endpoints(kb_req *req, kp_fetch_resp *rs, int32_t nparts)
{
    int32_t *ids = kp_arena_calloc(&req->arena, (size_t)nparts + 1, sizeof(*ids));
    int32_t k = 0;
    for (int32_t i = 0; ids != NULL && i < rs->responses.n; i++)
        for (int32_t j = 0; j < rs->responses.v[i].partitions.n; j++)
            if (rs->responses.v[i].partitions.v[j].error_code == KP_ERR_NOT_LEADER_OR_FOLLOWER)
                ids[k++] = rs->responses.v[i].partitions.v[j].current_leader.leader_id;
    kb_cv_node *nodes;
    int32_t nn;
    if (ids == NULL || kb_cv_nodes(req, ids, k, &nodes, &nn) != KP_ERR_NONE ||
        !KB_ARRAY_ALLOC(req, rs->node_endpoints, nn))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nn; i++)
        rs->node_endpoints.v[i] = (kp_fetch_resp_node_endpoint){nodes[i].node_id, nodes[i].host,
                                                                nodes[i].port, nodes[i].rack};
    return KP_ERR_NONE;
}

/* ---- parking ------------------------------------------------------------ */

static void state_free(void *arg)
{
    fetch_state *st = arg;
    release_slices(st);
    free(st->slices);
    free(st);
}

static void unpark(kb_broker *b, fetch_state *st)
{
    if (!st->parked)
        return;
    st->parked = false;
    kb_timer_disarm(b->loop, &st->timer);
    kb_longpoll_unpark(b->longpoll, &st->waiter);
}

/* Answers a parked fetch with whatever is there now. */
static void finish_parked(fetch_state *st)
{
    kb_req *req = st->req;
    unpark(req->broker, st);
    bool errors;
    int64_t bytes = fetch_fill(req, req->request, req->response, st, &errors);
    if (bytes < 0)
        ((kp_fetch_resp *)req->response)->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
    req->quota_bytes = bytes > 0 ? bytes : 0; /* the pipeline's quota counts these */
    req->on_cancel = NULL;
    req->release = state_free;
    req->release_arg = st;
    kb_req_finish(req);
}

static void on_fetch_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    finish_parked(arg);
}

static void on_fetch_cancel(kb_req *req)
{
    fetch_state *st = req->park_state;
    unpark(req->broker, st);
    state_free(st);
}

/* Record bytes a parked fetch could return now, without building a response. */
static int64_t bytes_available(kb_req *req, fetch_state *st)
{
    /* The probe builds into a scratch arena, dropped at once, so a parked
     * fetch woken by many appends does not grow its request's arena. */
    kp_arena kept = req->arena;
    kp_arena_init(&req->arena);
    kp_fetch_resp probe;
    kp_fetch_resp_defaults(&probe);
    bool errors;
    int64_t n = fetch_fill(req, req->request, &probe, st, &errors);
    release_slices(st);
    kp_arena_fini(&req->arena);
    req->arena = kept;
    return errors ? INT64_MAX : n;
}

/* An append reached one of the partitions the parked fetch reads. */
static void on_append(kb_poll_waiter *w)
{
    fetch_state *st = w->arg;
    if (bytes_available(st->req, st) >= st->min_bytes)
        finish_parked(st);
}

/* Parks the fetch on each partition of a topic it found, until an append
 * brings min_bytes, max_wait_ms passes or the connection closes. */
static kp_err park(kb_req *req, const kp_fetch_req *rq, fetch_state *st, int32_t n)
{
    kb_topic **topics = calloc((size_t)n + 1, sizeof(*topics));
    int32_t *partitions = calloc((size_t)n + 1, sizeof(*partitions));
    int32_t k = 0;
    for (int32_t i = 0; topics != NULL && partitions != NULL && i < rq->topics.n; i++) {
        kb_topic *t = fetch_topic_lookup(req, &rq->topics.v[i]);
        for (int32_t j = 0; t != NULL && j < rq->topics.v[i].partitions.n; j++) {
            topics[k] = t;
            partitions[k++] = rq->topics.v[i].partitions.v[j].partition;
        }
    }
    st->waiter.wake = on_append;
    st->waiter.arg = st;
    kp_err e = topics != NULL && partitions != NULL
                   ? kb_longpoll_park(req->broker->longpoll, &st->waiter, topics, partitions, k)
                   : KP_ERR__NOMEM;
    free(topics);
    free(partitions);
    if (e != KP_ERR_NONE)
        return e;
    st->parked = true;
    kb_timer_init(&st->timer, on_fetch_timeout, st);
    (void)kb_timer_arm(req->broker->loop, &st->timer, rq->max_wait_ms);
    req->park_state = st;
    req->on_cancel = on_fetch_cancel;
    return KB_PARKED;
}

kp_err kb_h_fetch(kb_req *req, const kp_fetch_req *rq, kp_fetch_resp *rs)
{
    if (rq->session_id != 0 && rq->session_epoch != -1) {
        /* Runnel never creates fetch sessions (it answers session id 0). */
        rs->error_code = KP_ERR_FETCH_SESSION_ID_NOT_FOUND;
        return KP_ERR_NONE;
    }
    fetch_state *st = calloc(1, sizeof(*st));
    int32_t n = count_partitions(rq);
    if (st == NULL || (st->slices = calloc((size_t)n + 1, sizeof(*st->slices))) == NULL) {
        free(st);
        return KP_ERR__NOMEM;
    }
    st->req = req;
    /* Kafka caps a fetch by what its quota allows in one window. */
    int64_t window = kb_req_quota_window_bytes(req);
    st->max_bytes = rq->max_bytes < window ? rq->max_bytes : window;
    st->min_bytes = rq->min_bytes < st->max_bytes ? rq->min_bytes : st->max_bytes;
    record_follower_offsets(req, rq);
    bool errors;
    int64_t bytes = fetch_fill(req, rq, rs, st, &errors);
    if (bytes >= 0 && errors && req->api_version >= 16 &&
        leader_endpoints(req, rs, n) != KP_ERR_NONE)
        bytes = -1;
    if (bytes < 0) {
        state_free(st);
        return KP_ERR__NOMEM;
    }
    if (bytes >= st->min_bytes || rq->max_wait_ms <= 0 || errors || n == 0) {
        req->release = state_free;
        req->release_arg = st;
        req->quota_bytes = bytes;
        return KP_ERR_NONE;
    }
    release_slices(st);
    kp_err e = park(req, rq, st, n);
    if (e != KB_PARKED) {
        state_free(st);
        return e;
    }
    return KB_PARKED;
}
