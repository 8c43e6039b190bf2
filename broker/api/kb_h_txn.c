/* Handlers for the transaction APIs: AddPartitionsToTxn (the client form
 * v0-3 and the batched v4+ form, verify-only included), AddOffsetsToTxn,
 * EndTxn, WriteTxnMarkers, DescribeTransactions and ListTransactions. The decisions are
 * kb_txn's; InitProducerId is in kb_h_producer.c, TxnOffsetCommit in
 * kb_h_group_offsets.c. */
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_coord_ack.h"
#include "kb_consumer_group.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_offsets.h"
#include "kb_txn_coord.h"

typedef kp_add_partitions_to_txn_req_add_partitions_to_txn_topic add_topic;
typedef kp_add_partitions_to_txn_resp_add_partitions_to_txn_topic_result add_topic_result;
typedef kp_add_partitions_to_txn_resp_add_partitions_to_txn_partition_result add_part_result;

/* PRODUCER_FENCED came with v2 of these APIs; before, INVALID_PRODUCER_EPOCH. */
static int16_t fenced_for(const kb_req *req, int16_t min_version, kp_err e)
{
    if (e == KP_ERR_PRODUCER_FENCED && req->api_version < min_version)
        return KP_ERR_INVALID_PRODUCER_EPOCH;
    return kp_err_to_wire(e);
}

/* ---- AddPartitionsToTxn ------------------------------------------------- */

/* One transaction's request and where its answers go. */
typedef struct add_job {
    kp_str id;
    int64_t pid;
    int16_t epoch;
    bool verify_only;
    int32_t ntopics;
    const add_topic *topics;
    int32_t *nresults;
    add_topic_result **results;
    bool from_client; /* v0-v3: TOPIC WRITE is checked (Kafka) */
    int16_t tv;       /* v5 from a broker adds for a transactions v2 Produce */
} add_job;

/* Shapes the results like the request, checking each partition exists;
 * returns the partitions that do not (-1 on out of memory). */
static int32_t add_alloc(kb_req *req, const add_job *j, int32_t *total)
{
    add_topic_result *res = kp_arena_calloc(&req->arena, (size_t)j->ntopics + 1, sizeof(*res));
    int32_t missing = 0;
    *total = 0;
    if (res == NULL)
        return -1;
    *j->results = res;
    *j->nresults = j->ntopics;
    for (int32_t i = 0; i < j->ntopics; i++) {
        const add_topic *at = &j->topics[i];
        kb_topic *t = kb_topics_find(req->broker->topics, at->name);
        res[i].name = at->name;
        if (!KB_ARRAY_ALLOC(req, res[i].results_by_partition, at->partitions.n))
            return -1;
        bool denied = j->from_client && (t == NULL || !t->internal) &&
                      !kb_authz(req, KB_OP_WRITE, KB_RES_TOPIC, at->name);
        for (int32_t k = 0; k < at->partitions.n; k++) {
            int32_t p = at->partitions.v[k];
            add_part_result *pr = &res[i].results_by_partition.v[k];
            pr->partition_index = p;
            if (denied) {
                pr->partition_error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
                missing++;
            } else if (t == NULL || p < 0 || p >= t->npartitions) {
                pr->partition_error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                missing++;
            }
        }
        *total += at->partitions.n;
    }
    return missing;
}

/* Sets code on every partition still without an error (all when force). */
static void add_set_all(const add_job *j, int16_t code, bool force)
{
    for (int32_t i = 0; i < *j->nresults; i++) {
        add_topic_result *tr = &(*j->results)[i];
        for (int32_t k = 0; k < tr->results_by_partition.n; k++) {
            add_part_result *pr = &tr->results_by_partition.v[k];
            if (force || pr->partition_error_code == KP_ERR_NONE)
                pr->partition_error_code = code;
        }
    }
}

/* The broker-to-broker verification: is each partition in the transaction? */
static void add_verify(kb_req *req, const add_job *j)
{
    const kb_txn *t = kb_txns_find(kb_txn_coord_txns(req->broker), j->id);
    kp_err e = kb_txn_check_producer(t, j->pid, j->epoch);
    if (e != KP_ERR_NONE) {
        add_set_all(j, kp_err_to_wire(e), true);
        return;
    }
    for (int32_t i = 0; i < *j->nresults; i++) {
        add_topic_result *tr = &(*j->results)[i];
        char *topic = kp_arena_strdup(&req->arena, tr->name.p, (size_t)tr->name.len);
        for (int32_t k = 0; k < tr->results_by_partition.n; k++) {
            add_part_result *pr = &tr->results_by_partition.v[k];
            if (topic == NULL || !kb_txn_has_partition(t, topic, pr->partition_index))
                pr->partition_error_code = KP_ERR_TRANSACTION_ABORTABLE;
        }
    }
}

static void add_run(kb_req *req, const add_job *j)
{
    int32_t total;
    int32_t missing = add_alloc(req, j, &total);
    int16_t coord = kb_cv_check_coordinator(req, KB_TXN_COORD_STATE_TOPIC, j->id);
    if (missing >= 0 && coord != KP_ERR_NONE) {
        add_set_all(j, coord, true);
        return;
    }
    if (missing != 0) {
        /* Kafka adds nothing when any partition is unknown. */
        add_set_all(j, missing < 0 ? KP_ERR_UNKNOWN_SERVER_ERROR : KP_ERR_OPERATION_NOT_ATTEMPTED,
                    missing < 0);
        return;
    }
    if (j->verify_only) {
        add_verify(req, j);
        return;
    }
    kb_txn_tp *tps = kp_arena_calloc(&req->arena, (size_t)total + 1, sizeof(*tps));
    int32_t n = 0;
    for (int32_t i = 0; tps != NULL && i < j->ntopics; i++) {
        const add_topic *at = &j->topics[i];
        char *topic = kp_arena_strdup(&req->arena, at->name.p, (size_t)at->name.len);
        if (topic == NULL)
            tps = NULL;
        for (int32_t k = 0; topic != NULL && k < at->partitions.n; k++)
            tps[n++] = (kb_txn_tp){topic, at->partitions.v[k]};
    }
    kp_err e = tps == NULL ? KP_ERR_UNKNOWN_SERVER_ERROR
                           : kb_txn_add_partitions_tv(kb_txn_coord_txns(req->broker), j->id,
                                                      j->pid, j->epoch, tps, n, j->tv);
    add_set_all(j, fenced_for(req, 2, e), true);
}

/* Whether every partition of j was added. */
static bool add_ok(const add_job *j)
{
    for (int32_t i = 0; i < *j->nresults; i++)
        for (int32_t k = 0; k < (*j->results)[i].results_by_partition.n; k++)
            if ((*j->results)[i].results_by_partition.v[k].partition_error_code != KP_ERR_NONE)
                return false;
    return true;
}

static void add_v3_failed(kb_req *req, int16_t err)
{
    kp_add_partitions_to_txn_resp *rs = req->response;
    add_job j = {.nresults = &rs->results_by_topic_v3_and_below.n,
                 .results = &rs->results_by_topic_v3_and_below.v};
    add_set_all(&j, err, true);
}

kp_err kb_h_add_partitions_to_txn(kb_req *req, const kp_add_partitions_to_txn_req *rq,
                                  kp_add_partitions_to_txn_resp *rs)
{
    if (req->api_version <= 3) {
        add_job j = {rq->v3_and_below_transactional_id, rq->v3_and_below_producer_id,
                     rq->v3_and_below_producer_epoch, false, rq->v3_and_below_topics.n,
                     rq->v3_and_below_topics.v, &rs->results_by_topic_v3_and_below.n,
                     &rs->results_by_topic_v3_and_below.v, true, KB_TXN_TV1};
        if (!kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, j.id)) {
            int32_t total;
            if (add_alloc(req, &j, &total) < 0)
                return KP_ERR__NOMEM;
            add_set_all(&j, KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, true);
            return KP_ERR_NONE;
        }
        add_run(req, &j);
        /* answered once the ISR has the transaction's record */
        return add_ok(&j) ? kb_coord_ack_txn(req, j.id, add_v3_failed) : KP_ERR_NONE;
    }
    if (!KB_ARRAY_ALLOC(req, rs->results_by_transaction, rq->transactions.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->transactions.n; i++) {
        const kp_add_partitions_to_txn_req_add_partitions_to_txn_transaction *tx =
            &rq->transactions.v[i];
        kp_add_partitions_to_txn_resp_add_partitions_to_txn_result *out =
            &rs->results_by_transaction.v[i];
        out->transactional_id = tx->transactional_id;
        add_job j = {tx->transactional_id, tx->producer_id,    tx->producer_epoch,
                     tx->verify_only,      tx->topics.n,       tx->topics.v,
                     &out->topic_results.n, &out->topic_results.v, false,
                     req->api_version >= 5 ? KB_TXN_TV2 : KB_TXN_TV1};
        add_run(req, &j);
    }
    return KP_ERR_NONE;
}

/* ---- AddOffsetsToTxn and EndTxn ----------------------------------------- */

static void add_offsets_failed(kb_req *req, int16_t err)
{
    ((kp_add_offsets_to_txn_resp *)req->response)->error_code = err;
}

kp_err kb_h_add_offsets_to_txn(kb_req *req, const kp_add_offsets_to_txn_req *rq,
                               kp_add_offsets_to_txn_resp *rs)
{
    if (!kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, rq->transactional_id)) {
        rs->error_code = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    if (!kb_authz(req, KB_OP_READ, KB_RES_GROUP, rq->group_id)) {
        rs->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    kb_topic *t;
    rs->error_code = kb_cv_check_coordinator(req, KB_TXN_COORD_STATE_TOPIC, rq->transactional_id);
    if (rs->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    if (kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE) {
        rs->error_code = KP_ERR_COORDINATOR_NOT_AVAILABLE;
        return KP_ERR_NONE;
    }
    /* The group's partition of __consumer_offsets joins the transaction, so
     * the marker reaches the offsets TxnOffsetCommit writes there. */
    kb_txn_tp tp = {t->name, kb_offsets_partition_for(rq->group_id, t->npartitions)};
    kp_err e = kb_txn_add_partitions(kb_txn_coord_txns(req->broker), rq->transactional_id,
                                     rq->producer_id, rq->producer_epoch, &tp, 1);
    rs->error_code = fenced_for(req, 2, e);
    return e == KP_ERR_NONE ? kb_coord_ack_txn(req, rq->transactional_id, add_offsets_failed)
                            : KP_ERR_NONE;
}

static void end_failed(kb_req *req, int16_t err)
{
    ((kp_end_txn_resp *)req->response)->error_code = err;
}

kp_err kb_h_end_txn(kb_req *req, const kp_end_txn_req *rq, kp_end_txn_resp *rs)
{
    if (!kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, rq->transactional_id)) {
        rs->error_code = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    rs->error_code = kb_cv_check_coordinator(req, KB_TXN_COORD_STATE_TOPIC, rq->transactional_id);
    if (rs->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    /* v5 is transactions v2: the epoch is bumped and the new one answered. */
    int16_t tv = req->api_version >= 5 ? KB_TXN_TV2 : KB_TXN_TV1;
    kp_err e = kb_txn_end_tv(kb_txn_coord_txns(req->broker), rq->transactional_id, rq->producer_id,
                             rq->producer_epoch, rq->committed, tv, &rs->producer_id,
                             &rs->producer_epoch);
    rs->error_code = fenced_for(req, 2, e);
    /* answered once the ISR has the Prepare* record (the markers follow) */
    return e == KP_ERR_NONE ? kb_coord_ack_txn(req, rq->transactional_id, end_failed)
                            : KP_ERR_NONE;
}

/* ---- DescribeTransactions and ListTransactions -------------------------- */

typedef kp_describe_transactions_resp_transaction_state describe_out;

/* The partitions of t (sorted by topic) grouped per topic. */
static kp_err describe_topics(kb_req *req, const kb_txn *t, describe_out *out)
{
    int32_t nt = 0;
    for (int32_t i = 0; i < t->nparts; i++)
        nt += i == 0 || strcmp(t->parts[i].topic, t->parts[i - 1].topic) != 0;
    if (!KB_ARRAY_ALLOC(req, out->topics, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0, k = -1; i < t->nparts; i++) {
        if (i == 0 || strcmp(t->parts[i].topic, t->parts[i - 1].topic) != 0) {
            kp_describe_transactions_resp_topic_data *td = &out->topics.v[++k];
            int32_t n = 0;
            while (i + n < t->nparts && strcmp(t->parts[i + n].topic, t->parts[i].topic) == 0)
                n++;
            td->topic = kb_req_str(req, t->parts[i].topic);
            if (!KB_ARRAY_ALLOC(req, td->partitions, n))
                return KP_ERR__NOMEM;
            td->partitions.n = 0;
        }
        kp_describe_transactions_resp_topic_data *td = &out->topics.v[k];
        td->partitions.v[td->partitions.n++] = t->parts[i].partition;
    }
    return KP_ERR_NONE;
}

kp_err kb_h_describe_transactions(kb_req *req, const kp_describe_transactions_req *rq,
                                  kp_describe_transactions_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->transaction_states, rq->transactional_ids.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->transactional_ids.n; i++) {
        describe_out *out = &rs->transaction_states.v[i];
        kp_describe_transactions_resp_transaction_state_defaults(out);
        out->transactional_id = rq->transactional_ids.v[i];
        const kb_txn *t = kb_txns_find(kb_txn_coord_txns(req->broker), out->transactional_id);
        if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_TRANSACTIONAL_ID, out->transactional_id)) {
            out->error_code = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        } else if (out->transactional_id.len <= 0) {
            out->error_code = KP_ERR_INVALID_REQUEST;
        } else if ((out->error_code = kb_cv_check_coordinator(
                        req, KB_TXN_COORD_STATE_TOPIC, out->transactional_id)) != KP_ERR_NONE) {
            continue;
        } else if (t == NULL || t->m.state == KB_TXN_DEAD) {
            out->error_code = KP_ERR_TRANSACTIONAL_ID_NOT_FOUND;
        } else {
            out->transaction_state = kp_str_from(kb_txn_state_name(t->m.state));
            out->transaction_timeout_ms = t->m.timeout_ms;
            out->transaction_start_time_ms = t->m.start_ms;
            out->producer_id = t->m.producer_id;
            out->producer_epoch = t->m.producer_epoch;
            if (describe_topics(req, t, out) != KP_ERR_NONE)
                return KP_ERR__NOMEM;
        }
    }
    return KP_ERR_NONE;
}

/* Kafka's listTransactionStates filters (re: the v2 TransactionalIdPattern,
 * NULL when absent or empty). */
static bool list_match(const kp_list_transactions_req *rq, const kb_txn *t, int64_t now,
                       const regex_t *re)
{
    if (re != NULL && regexec(re, t->id, 0, NULL, 0) != 0)
        return false;
    if (t->m.state == KB_TXN_DEAD)
        return false;
    bool pid_ok = rq->producer_id_filters.n <= 0;
    for (int32_t i = 0; !pid_ok && i < rq->producer_id_filters.n; i++)
        pid_ok = rq->producer_id_filters.v[i] == t->m.producer_id;
    bool state_ok = rq->state_filters.n <= 0;
    for (int32_t i = 0; !state_ok && i < rq->state_filters.n; i++)
        state_ok = kp_str_eq_c(rq->state_filters.v[i], kb_txn_state_name(t->m.state));
    bool old_enough = rq->duration_filter < 0 || now - t->m.start_ms > rq->duration_filter;
    return pid_ok && state_ok && old_enough;
}

static bool known_state(kp_str name)
{
    for (int s = KB_TXN_EMPTY; s <= KB_TXN_PREPARE_EPOCH_FENCE; s++)
        if (kp_str_eq_c(name, kb_txn_state_name((kb_txn_state)s)))
            return true;
    return false;
}

static void list_fill(kb_req *req, const kp_list_transactions_req *rq, const regex_t *re,
                      kp_list_transactions_resp *rs)
{
    kb_txns *ts = kb_txn_coord_txns(req->broker);
    int64_t now = kb_group_coord_wall(req->broker);
    size_t cur = 0;
    int32_t n = 0;
    for (const kb_txn *t; (t = kb_txns_next(ts, &cur)) != NULL;) {
        if (!list_match(rq, t, now, re) ||
            !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TRANSACTIONAL_ID, kb_cstr(t->id)))
            continue;
        kp_list_transactions_resp_transaction_state *out = &rs->transaction_states.v[n++];
        out->transactional_id = kb_req_str(req, t->id);
        out->producer_id = t->m.producer_id;
        out->transaction_state = kp_str_from(kb_txn_state_name(t->m.state));
    }
    rs->transaction_states.n = n;
}

kp_err kb_h_list_transactions(kb_req *req, const kp_list_transactions_req *rq,
                              kp_list_transactions_resp *rs)
{
    kb_txns *ts = kb_txn_coord_txns(req->broker);
    int32_t nf = rq->state_filters.n > 0 ? rq->state_filters.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->unknown_state_filters, nf) ||
        !KB_ARRAY_ALLOC(req, rs->transaction_states, kb_txns_count(ts)))
        return KP_ERR__NOMEM;
    rs->unknown_state_filters.n = 0;
    for (int32_t i = 0; i < nf; i++)
        if (!known_state(rq->state_filters.v[i]))
            rs->unknown_state_filters.v[rs->unknown_state_filters.n++] = rq->state_filters.v[i];
    regex_t re;
    bool filtered = rq->transactional_id_pattern.len > 0;
    if (filtered) {
        kp_err e = kb_consumer_group_compile_regex(rq->transactional_id_pattern, &re);
        if (e == KP_ERR__NOMEM)
            return e;
        if (e != KP_ERR_NONE) {
            rs->error_code = kp_err_to_wire(e);
            rs->transaction_states.n = 0;
            return KP_ERR_NONE;
        }
    }
    list_fill(req, rq, filtered ? &re : NULL, rs);
    if (filtered)
        regfree(&re);
    return KP_ERR_NONE;
}

/* ---- WriteTxnMarkers ---------------------------------------------------- */

typedef kp_write_txn_markers_resp_writable_txn_marker_result marker_result;

/* One marker's partitions, each written (or its error) in request order. */
static kp_err write_markers_of(kb_req *req, const kp_write_txn_markers_req_writable_txn_marker *m,
                               marker_result *out, bool allowed)
{
    out->producer_id = m->producer_id;
    if (!KB_ARRAY_ALLOC(req, out->topics, m->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < m->topics.n; i++) {
        const kp_write_txn_markers_req_writable_txn_marker_topic *mt = &m->topics.v[i];
        kp_write_txn_markers_resp_writable_txn_marker_topic_result *tr = &out->topics.v[i];
        kb_topic *t = kb_topics_find(req->broker->topics, mt->name);
        int32_t leader, epoch;
        tr->name = mt->name;
        if (!KB_ARRAY_ALLOC(req, tr->partitions, mt->partition_indexes.n))
            return KP_ERR__NOMEM;
        for (int32_t k = 0; k < mt->partition_indexes.n; k++) {
            int32_t p = mt->partition_indexes.v[k];
            tr->partitions.v[k].partition_index = p;
            if (!allowed)
                tr->partitions.v[k].error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
            else if (t == NULL || p < 0 || p >= t->npartitions)
                tr->partitions.v[k].error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            else if ((tr->partitions.v[k].error_code =
                          kb_cv_check_leader(req, &t->id, p, &leader, &epoch)) == KP_ERR_NONE)
                /* cluster mode: only the partition's leader writes it (the
                 * coordinator retries at the leader it learns next) */
                tr->partitions.v[k].error_code = kb_txn_coord_write_marker(
                    req->broker, t, p, m->producer_id, m->producer_epoch, m->transaction_result,
                    m->coordinator_epoch);
        }
    }
    return KP_ERR_NONE;
}

/* Sent by transaction coordinators, and by kafka-transactions abort; Kafka
 * requires CLUSTER_ACTION on the cluster. */
kp_err kb_h_write_txn_markers(kb_req *req, const kp_write_txn_markers_req *rq,
                              kp_write_txn_markers_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->markers, rq->markers.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->markers.n; i++)
        if (write_markers_of(req, &rq->markers.v[i], &rs->markers.v[i], allowed) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    return KP_ERR_NONE;
}
