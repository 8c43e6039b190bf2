/* Handler for Produce: validate (on a helper thread when the batches are
 * compressed and large), deduplicate idempotent retries, append, and answer
 * per acks (0: nothing, 1: page cache, -1: the flush policy, then in cluster
 * mode the high watermark past the batch, with the ISR at least
 * min.insync.replicas). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_admin.h"
#include "kb_authz.h"
#include "kb_cluster.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_log.h"
#include "kb_producer_state.h"
#include "kb_partition_txn.h"
#include "kb_partition_log.h"
#include "kb_replica.h"
#include "kb_topic_settings.h"
#include "kb_txn_coord.h"
#include "kb_topics.h"
#include "kb_work.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_validate.h"

typedef kp_produce_resp_partition_produce_response part_resp;

/* The decompressed size allowed for a partition's records: 256 times the
 * bytes received, at least 16 MiB, at most 256 MiB. A compression bomb thus
 * costs memory in proportion to what the client sent. */
#define KB_DECOMPRESS_RATIO 256
#define KB_DECOMPRESS_FLOOR ((size_t)16 << 20)
#define KB_DECOMPRESS_CEIL ((size_t)256 << 20)

static size_t decompress_cap(size_t received)
{
    size_t cap = received > KB_DECOMPRESS_CEIL / KB_DECOMPRESS_RATIO ? KB_DECOMPRESS_CEIL
                                                                     : received * KB_DECOMPRESS_RATIO;
    return cap < KB_DECOMPRESS_FLOOR ? KB_DECOMPRESS_FLOOR : cap;
}

/* Compressed bytes in one request above which validation leaves the loop. */
#define KB_OFFLOAD_MIN_BYTES (16 * 1024)

/* One partition of a Produce request, from validation to durability. */
typedef struct produce_part {
    struct produce_state *state;
    kb_topic *topic; /* NULL when resp already carries an error */
    part_resp *resp;
    uint8_t *bytes;  /* the records: in the frame, or an owned copy when offloaded */
    size_t len;
    kp_validate_opts opts;
    int codec;       /* the topic's compression.type codec, -1 for "producer" */
    kp_err verr;     /* validation result */
    kp_validate_result vr;
    uint8_t *recompressed;
    size_t recompressed_len;
    ks_log *log;     /* set after a successful append */
    int64_t upto;    /* acks=-1: the log end after the append */
    kb_hw_waiter hw; /* acks=-1, replicated: waits for the high watermark */
    bool waiting;    /* a durability or high watermark callback is due */
    bool verified;   /* cluster mode: the remote coordinator verified (or added) it */
    bool remote;     /* being verified by the remote coordinator */
} produce_part;

/* A Produce in flight; heap-owned so it can outlive a closed connection
 * while a helper thread or a flush still refers to it. */
typedef struct produce_state {
    kb_req *req;     /* NULL once detached (answered early, or connection closed) */
    kb_loop *loop;
    kb_timer timeout;
    int16_t acks;
    int32_t timeout_ms;
    int32_t pending; /* durability callbacks due */
    bool owns_copies;
    int32_t nparts;
    produce_part parts[];
} produce_state;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The last sequence of a batch: sequences wrap from INT32_MAX to 0. */
static int32_t last_sequence(int32_t base, int32_t last_offset_delta)
{
    return (int32_t)(((int64_t)base + last_offset_delta) % ((int64_t)INT32_MAX + 1));
}

static void validate_opts(const kb_req *req, const kb_topic_settings *ts, kp_validate_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->single_batch = true; /* Kafka refuses a second v2 batch at every version */
    o->compacted = ts->cleanup_compact;
    o->allow_zstd = req->api_version >= 7;
    o->log_append_time = ts->log.message_timestamp_type == KS_TS_LOG_APPEND_TIME;
    o->max_message_bytes = ts->max_message_bytes;
    o->now_ms = wall_ms();
    o->timestamp_before_max_ms = ts->timestamp_before_max_ms;
    o->timestamp_after_max_ms = ts->timestamp_after_max_ms;
}

/* A refused batch's answer, as Kafka's ReplicaManager gives it: per-record
 * faults each as a record error with LogValidator's text and a summary
 * message; the partition's log start offset, which Kafka reports for every
 * refusal the log's validation makes (not for those below). */
static void validation_error(kb_req *req, const produce_part *p)
{
    part_resp *pr = p->resp;
    const kp_validate_result *vr = &p->vr;
    ks_log *log;
    pr->error_code = kp_err_to_wire(p->verr);
    if ((pr->error_code == KP_ERR_INVALID_RECORD || pr->error_code == KP_ERR_INVALID_TIMESTAMP ||
         pr->error_code == KP_ERR_UNKNOWN_SERVER_ERROR) &&
        kb_partition_log_get(req->broker, p->topic, pr->index, &log) == KP_ERR_NONE)
        pr->log_start_offset = ks_log_start_offset(log);
    if (vr->record_errors_listed == 0 || !KB_ARRAY_ALLOC(req, pr->record_errors,
                                                         vr->record_errors_listed)) {
        pr->error_message = kb_req_str(req, vr->msg);
        return;
    }
    char text[256], prev[256] = "";
    for (int32_t i = 0; i < vr->record_errors_listed; i++) {
        kp_produce_resp_batch_index_and_error_message *re = &pr->record_errors.v[i];
        kp_record_error_text(&vr->record_errors[i], &p->opts, p->topic->name, pr->index, text,
                             sizeof(text));
        re->batch_index = vr->record_errors[i].index;
        /* Records refused for the same reason mostly share one text. */
        if (i > 0 && strcmp(text, prev) == 0) {
            re->batch_index_error_message = pr->record_errors.v[i - 1].batch_index_error_message;
            continue;
        }
        re->batch_index_error_message = kb_req_str(req, text);
        memcpy(prev, text, sizeof(prev));
    }
    char summary[1024];
    kp_record_errors_summary(vr, &p->opts, p->topic->name, pr->index, summary, sizeof(summary));
    pr->error_message = kb_req_str(req, summary);
}
static void state_free(produce_state *st)
{
    for (int32_t i = 0; i < st->nparts; i++) {
        kp_validate_result_fini(&st->parts[i].vr);
        free(st->parts[i].recompressed);
        if (st->owns_copies)
            free(st->parts[i].bytes);
    }
    free(st);
}

/* ---- validation (loop, or a helper thread) ------------------------------ */

static void validate_part(produce_part *p)
{
    p->verr = kp_validate_batches(p->bytes, p->len, &p->opts, &p->vr);
    int batch_codec = p->vr.attributes & KP_BATCH_ATTR_CODEC_MASK;
    if (p->verr != KP_ERR_NONE || p->codec < 0 || p->codec == batch_codec)
        return;
    p->verr = kp_recompress_batches(p->bytes, p->len, p->codec, KP_COMPRESS_LEVEL_DEFAULT,
                                    p->opts.max_decompressed, &p->recompressed,
                                    &p->recompressed_len);
}

/* Runs on a helper thread: touches only what the state owns. */
static void validate_all(void *arg)
{
    produce_state *st = arg;
    for (int32_t i = 0; i < st->nparts; i++)
        if (st->parts[i].topic != NULL)
            validate_part(&st->parts[i]);
}

static size_t compressed_bytes(const produce_state *st)
{
    size_t n = 0;
    for (int32_t i = 0; i < st->nparts; i++) {
        const produce_part *p = &st->parts[i];
        if (p->topic != NULL && p->len >= KP_BATCH_HDR_SIZE &&
            (p->bytes[KP_BATCH_OFF_ATTRIBUTES + 1] & KP_BATCH_ATTR_CODEC_MASK) != 0)
            n += p->len;
    }
    return n;
}

/* Gives the state its own copy of every partition's records, so the
 * helper thread never reads a frame a closing connection frees. */
static bool copy_records(produce_state *st)
{
    st->owns_copies = true;
    for (int32_t i = 0; i < st->nparts; i++) {
        produce_part *p = &st->parts[i];
        if (p->topic == NULL)
            continue;
        uint8_t *copy = malloc(p->len > 0 ? p->len : 1);
        if (copy == NULL) {
            p->bytes = NULL;
            return false;
        }
        memcpy(copy, p->bytes, p->len);
        p->bytes = copy;
    }
    return true;
}

/* ---- append (loop) ------------------------------------------------------ */

/* acks=-1 in cluster mode: the committed ISR is below min.insync.replicas. */
static bool isr_short(const kb_req *req, produce_part *p)
{
    const kb_replica *r = p->topic->partitions[p->resp->index].repl;
    return p->state->acks == -1 && r != NULL &&
           r->nisr < kb_topic_settings_of(req->broker->cfg, p->topic)->min_insync_replicas;
}

/* A transactional batch verified here needs this broker's coordinator to
 * have loaded the id (cluster mode): while it loads, or once it moved, the
 * producer retries (NOT_ENOUGH_REPLICAS, as for a verification the
 * coordinator could not answer). */
static int16_t coordinator_ready(kb_req *req)
{
    kp_str id = ((const kp_produce_req *)req->request)->transactional_id;
    if (id.len < 0 ||
        kb_cv_check_coordinator(req, KB_TXN_COORD_STATE_TOPIC, id) == KP_ERR_NONE)
        return KP_ERR_NONE;
    return KP_ERR_NOT_ENOUGH_REPLICAS;
}

static void append_part(kb_req *req, produce_part *p)
{
    part_resp *pr = p->resp;
    if (p->verr != KP_ERR_NONE) {
        validation_error(req, p);
        return;
    }
    ks_log *log;
    kp_err e = kb_partition_log_get(req->broker, p->topic, pr->index, &log);
    if (e != KP_ERR_NONE) {
        pr->error_code = kp_err_to_wire(e);
        return;
    }
    kb_partition *part = &p->topic->partitions[pr->index];
    const kp_validate_result *vr = &p->vr;
    bool idempotent = vr->producer_id >= 0 && vr->base_sequence >= 0;
    bool transactional = (vr->attributes & KP_BATCH_ATTR_TRANSACTIONAL) != 0;
    if (transactional && !p->verified && (pr->error_code = coordinator_ready(req)) != KP_ERR_NONE)
        return;
    if (transactional && !p->verified &&
        (pr->error_code = kb_txn_coord_verify(req->broker,
                                           ((const kp_produce_req *)req->request)->transactional_id,
                                           vr->producer_id, vr->producer_epoch, p->topic,
                                           pr->index, req->api_version)) != KP_ERR_NONE) {
        KB_LOG(KB_LL_DEBUG, KB_SUB_PROTO, "msg=\"transactional batch refused\" topic=%s "
               "partition=%d producer_id=%lld epoch=%d error=%s", p->topic->name, pr->index,
               (long long)vr->producer_id, vr->producer_epoch, kp_err_name(pr->error_code));
        return;
    }
    /* A producer with a transaction open on this partition may not slip a
     * non-transactional batch into it (Kafka answers INVALID_TXN_STATE). */
    if (!transactional && vr->producer_id >= 0 &&
        kb_partition_txn_open(kb_producer_state_txns(part->pids), vr->producer_id, NULL)) {
        pr->error_code = KP_ERR_INVALID_TXN_STATE;
        return;
    }
    int32_t last_seq = last_sequence(vr->base_sequence, vr->last_offset_delta);
    kb_pid_batch dup;
    if (idempotent) {
        e = kb_producer_state_check(part->pids, vr->producer_id, vr->producer_epoch, vr->base_sequence,
                              last_seq, &dup);
        if (e == KP_ERR_DUPLICATE_SEQUENCE_NUMBER) {
            /* a retry of a batch already appended: answer with its offsets */
            pr->base_offset = dup.first_offset;
            pr->log_start_offset = ks_log_start_offset(log);
            return;
        }
        if (e != KP_ERR_NONE) {
            pr->error_code = (int16_t)e;
            return;
        }
    }
    if (isr_short(req, p)) {
        pr->error_code = KP_ERR_NOT_ENOUGH_REPLICAS;
        return;
    }
    ks_append_result res;
    e = p->recompressed != NULL
            ? kb_partition_log_append(req->broker, p->topic, pr->index, p->recompressed,
                             p->recompressed_len, &res)
            : kb_partition_log_append(req->broker, p->topic, pr->index, p->bytes, p->len, &res);
    if (e != KP_ERR_NONE) {
        pr->error_code = kp_err_to_wire(e);
        return;
    }
    if (idempotent) {
        kb_pid_batch nb = {vr->base_sequence, last_seq, res.base_offset, res.last_offset,
                           res.log_append_time >= 0 ? res.log_append_time : vr->max_timestamp};
        (void)kb_producer_state_record(part->pids, vr->producer_id, vr->producer_epoch, &nb);
    }
    if (transactional)
        kb_txn_coord_appended(req->broker, p->topic, pr->index, vr->producer_id, res.base_offset);
    kb_partition_log_appended(req->broker, p->topic, pr->index);
    pr->base_offset = res.base_offset;
    pr->log_append_time_ms = res.log_append_time;
    pr->log_start_offset = res.log_start_offset;
    p->log = log;
}

/* ---- durability (acks=-1) ----------------------------------------------- */

/* Detaches the request from its state; pending callbacks still run. */
static kb_req *state_detach(produce_state *st)
{
    kb_req *req = st->req;
    st->req = NULL;
    kb_timer_disarm(st->loop, &st->timeout);
    if (req != NULL) {
        req->park_state = NULL;
        req->on_cancel = NULL;
    }
    return req;
}

/* One partition's wait ended with error (0: none). */
static void part_done(produce_part *p, int16_t error)
{
    produce_state *st = p->state;
    p->waiting = false;
    if (st->req != NULL && error != KP_ERR_NONE) {
        p->resp->error_code = error;
        p->resp->base_offset = -1;
    }
    if (--st->pending > 0)
        return;
    kb_req *req = state_detach(st);
    state_free(st);
    if (req != NULL)
        kb_req_finish(req);
}

/* The high watermark passed the batch: the ISR has it (Kafka answers
 * NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum
 * meanwhile). */
static void on_hw(kb_hw_waiter *w, int16_t err)
{
    produce_part *p = w->arg;
    if (err == KP_ERR_NONE && p->state->req != NULL && isr_short(p->state->req, p))
        err = KP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
    part_done(p, err);
}

static void on_durable(void *arg, kp_err err)
{
    produce_part *p = arg;
    if (err != KP_ERR_NONE || p->state->req == NULL) {
        part_done(p, err != KP_ERR_NONE ? KP_ERR_KAFKA_STORAGE_ERROR : KP_ERR_NONE);
        return;
    }
    p->hw = (kb_hw_waiter){.offset = p->upto, .fn = on_hw, .arg = p};
    if (!kb_replica_wait_hw(p->topic, p->resp->index, &p->hw))
        on_hw(&p->hw, KP_ERR_NONE); /* there already (or a single replica) */
}

/* Stops the high watermark waits of a detached request; each counts as done. */
static void cancel_hw_waits(produce_state *st)
{
    int32_t cancelled = 0;
    for (int32_t i = 0; i < st->nparts; i++) {
        produce_part *p = &st->parts[i];
        if (p->hw.linked) {
            kb_replica_wait_cancel(p->topic, p->resp->index, &p->hw);
            p->waiting = false;
            cancelled++;
        }
    }
    st->pending -= cancelled;
    if (cancelled > 0 && st->pending == 0)
        state_free(st);
}

/* timeout_ms passed: partitions not yet durable answer REQUEST_TIMED_OUT. */
static void on_produce_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    produce_state *st = arg;
    for (int32_t i = 0; i < st->nparts; i++) {
        if (st->parts[i].waiting) {
            st->parts[i].resp->error_code = KP_ERR_REQUEST_TIMED_OUT;
            st->parts[i].resp->base_offset = -1;
        }
    }
    /* The waits name their partitions through the responses, which live in
     * the request's arena: cancel them before the request is finished. */
    kb_req *req = state_detach(st);
    cancel_hw_waits(st);
    kb_req_finish(req);
}

static void on_produce_cancel(kb_req *req)
{
    produce_state *st = req->park_state;
    if (st != NULL) {
        (void)state_detach(st);
        cancel_hw_waits(st);
    }
}

/* Registers a durability wait per appended partition; KB_PARKED if any. */
static kp_err await_durable(kb_req *req, produce_state *st)
{
    st->pending = 1; /* held until every wait is registered */
    st->req = req;   /* so an immediate failure still reaches the response */
    for (int32_t i = 0; i < st->nparts; i++) {
        produce_part *p = &st->parts[i];
        if (p->log == NULL)
            continue;
        st->pending++;
        p->waiting = true;
        p->upto = ks_log_end_offset(p->log);
        if (kb_partition_log_when_durable(req->broker, p->log, p->upto, on_durable, p) !=
            KP_ERR_NONE)
            on_durable(p, KP_ERR__IO);
    }
    if (--st->pending == 0) {
        state_free(st);
        return KP_ERR_NONE;
    }
    req->park_state = st;
    req->on_cancel = on_produce_cancel;
    /* A zero or negative timeout waits for the flush (a single replica has no
     * ISR to wait for, so Kafka itself would answer at once from the page cache). */
    if (st->timeout_ms > 0)
        (void)kb_timer_arm(st->loop, &st->timeout, st->timeout_ms);
    return KB_PARKED;
}

/* Appends every validated partition and answers per acks. */
static kp_err produce_commit(kb_req *req, produce_state *st)
{
    bool any_error = false;
    for (int32_t i = 0; i < st->nparts; i++) {
        if (st->parts[i].topic != NULL)
            append_part(req, &st->parts[i]);
        any_error |= st->parts[i].resp->error_code != KP_ERR_NONE;
    }
    int16_t acks = st->acks;
    if (acks == -1)
        return await_durable(req, st);
    state_free(st);
    if (acks == 0) {
        req->no_response = true;
        /* Kafka closes an acks=0 connection on error: the client sees no response. */
        if (any_error)
            kb_conn_close(req->conn, "acks=0 produce failed");
    }
    return KP_ERR_NONE;
}

/* ---- cluster mode: verification with a remote coordinator --------------- */

/* KIP-890: the leader of a partition whose transactional id another broker
 * coordinates asks that coordinator with AddPartitionsToTxn v4+: verifyOnly
 * for a transaction version 1 producer (Produce below v12: it added the
 * partition itself), an add for version 2 (Produce v12+: the partition
 * joins the transaction here). */
#define VERIFY_VERSION 5

static bool needs_remote(kb_req *req, const produce_part *p, int32_t *coordinator)
{
    const kp_produce_req *rq = req->request;
    if (p->topic == NULL || p->verr != KP_ERR_NONE || p->resp->error_code != KP_ERR_NONE ||
        (p->vr.attributes & KP_BATCH_ATTR_TRANSACTIONAL) == 0 || rq->transactional_id.len < 0)
        return false;
    const kb_meta_image *img = kb_cv_image(req);
    if (img == NULL)
        return false;
    *coordinator = kb_cv_coordinator(req, img, KB_TXN_COORD_STATE_TOPIC, rq->transactional_id);
    return *coordinator != req->broker->node_id;
}

/* A coordinator's verification error as the producer must see it. */
static int16_t verify_error(int16_t e, int16_t produce_version)
{
    switch (e) {
    case KP_ERR_NONE:
        return KP_ERR_NONE;
    case KP_ERR_PRODUCER_FENCED:
        return KP_ERR_INVALID_PRODUCER_EPOCH;
    case KP_ERR_TRANSACTION_ABORTABLE:
        return produce_version >= 11 ? e : KP_ERR_INVALID_TXN_STATE;
    case KP_ERR_INVALID_PRODUCER_ID_MAPPING:
    case KP_ERR_INVALID_PRODUCER_EPOCH:
    case KP_ERR_INVALID_TXN_STATE:
        return e;
    default: /* the coordinator moving or busy: retriable for the producer */
        return KP_ERR_NOT_ENOUGH_REPLICAS;
    }
}

static void verify_encode(kp_writer *w, const void *msg, int16_t version)
{
    kp_add_partitions_to_txn_req_encode(w, msg, version);
}

static void remote_fail(produce_state *st, int16_t error)
{
    for (int32_t i = 0; i < st->nparts; i++)
        if (st->parts[i].remote) {
            st->parts[i].remote = false;
            st->parts[i].resp->error_code = error;
            st->parts[i].topic = NULL; /* answered: not appended */
        }
}

static void on_verify_cancel(kb_req *req)
{
    produce_state *st = req->park_state;
    st->req = NULL; /* on_verified frees it */
}

static void on_verified(void *arg, kp_reader *body)
{
    produce_state *st = arg;
    kb_req *req = st->req;
    if (req == NULL) {
        state_free(st);
        return;
    }
    st->req = NULL;
    req->park_state = NULL;
    req->on_cancel = NULL;
    kp_add_partitions_to_txn_resp rs;
    if (body == NULL ||
        kp_add_partitions_to_txn_resp_decode(body, &req->arena, &rs, VERIFY_VERSION) !=
            KP_ERR_NONE ||
        rs.results_by_transaction.n != 1) {
        remote_fail(st, KP_ERR_NOT_ENOUGH_REPLICAS);
    } else {
        int16_t top = rs.error_code;
        const kp_add_partitions_to_txn_resp_add_partitions_to_txn_result *tr =
            &rs.results_by_transaction.v[0];
        for (int32_t i = 0; i < st->nparts; i++) {
            produce_part *p = &st->parts[i];
            if (!p->remote)
                continue;
            int16_t e = top != KP_ERR_NONE ? top : KP_ERR_UNKNOWN_SERVER_ERROR;
            for (int32_t t = 0; top == KP_ERR_NONE && t < tr->topic_results.n; t++) {
                const kp_add_partitions_to_txn_resp_add_partitions_to_txn_topic_result *r =
                    &tr->topic_results.v[t];
                if (!kp_str_eq_c(r->name, p->topic->name))
                    continue;
                for (int32_t k = 0; k < r->results_by_partition.n; k++)
                    if (r->results_by_partition.v[k].partition_index == p->resp->index)
                        e = r->results_by_partition.v[k].partition_error_code;
            }
            p->remote = false;
            if (e != KP_ERR_NONE)
                KB_LOG(KB_LL_DEBUG, KB_SUB_PROTO, "msg=\"transactional batch refused by its "
                       "coordinator\" topic=%s partition=%d producer_id=%lld epoch=%d error=%s",
                       p->topic->name, p->resp->index, (long long)p->vr.producer_id,
                       p->vr.producer_epoch, kp_err_name(e));
            p->resp->error_code = verify_error(e, req->api_version);
            p->verified = p->resp->error_code == KP_ERR_NONE;
            if (!p->verified)
                p->topic = NULL; /* answered: not appended */
        }
    }
    if (produce_commit(req, st) != KB_PARKED)
        kb_req_finish(req);
}

/* Sends the remote verification and parks (KB_PARKED), or commits now. */
static kp_err produce_verify(kb_req *req, produce_state *st)
{
    int32_t coordinator = -1, n = 0;
    for (int32_t i = 0; i < st->nparts; i++) {
        int32_t c;
        if (needs_remote(req, &st->parts[i], &c)) {
            st->parts[i].remote = true;
            coordinator = c;
            n++;
        }
    }
    if (n == 0)
        return produce_commit(req, st);
    kb_ib *ib = kb_cluster_interbroker(req->broker->cluster);
    /* One topic entry per partition: Kafka's coordinator accepts repeats. */
    kp_add_partitions_to_txn_req_add_partitions_to_txn_topic *topics =
        kp_arena_calloc(&req->arena, (size_t)n, sizeof(*topics));
    const kp_validate_result *vr = NULL;
    int32_t k = 0;
    for (int32_t i = 0; topics != NULL && i < st->nparts; i++) {
        produce_part *p = &st->parts[i];
        if (!p->remote)
            continue;
        vr = &p->vr;
        topics[k].name = kp_str_from(p->topic->name);
        topics[k].partitions.n = 1;
        topics[k].partitions.v = &p->resp->index;
        k++;
    }
    if (topics == NULL || coordinator < 0 || ib == NULL) {
        remote_fail(st, KP_ERR_NOT_ENOUGH_REPLICAS);
        return produce_commit(req, st);
    }
    const kp_produce_req *rq = req->request;
    kp_add_partitions_to_txn_req_add_partitions_to_txn_transaction tx = {
        rq->transactional_id, vr->producer_id, vr->producer_epoch, req->api_version < 12,
        {k, topics}};
    kp_add_partitions_to_txn_req msg;
    kp_add_partitions_to_txn_req_defaults(&msg);
    msg.transactions.n = 1;
    msg.transactions.v = &tx;
    if (kb_ib_send(ib, coordinator, KP_API_ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, verify_encode,
                   &msg, on_verified, st) != KP_ERR_NONE) {
        remote_fail(st, KP_ERR_NOT_ENOUGH_REPLICAS);
        return produce_commit(req, st);
    }
    st->req = req;
    req->park_state = st;
    req->on_cancel = on_verify_cancel;
    return KB_PARKED;
}

/* Back on the loop after a helper thread validated the batches. */
static void after_validate(void *arg)
{
    produce_state *st = arg;
    kb_req *req = st->req;
    if (req == NULL) {
        state_free(st); /* the connection closed meanwhile */
        return;
    }
    st->req = NULL;
    req->park_state = NULL;
    req->on_cancel = NULL;
    if (produce_verify(req, st) != KB_PARKED)
        kb_req_finish(req);
}

static void on_validate_cancel(kb_req *req)
{
    produce_state *st = req->park_state;
    st->req = NULL; /* after_validate frees it */
}

/* ---- the handler -------------------------------------------------------- */

/* KIP-951: the endpoints of the leaders NOT_LEADER_OR_FOLLOWER names
 * (nparts: the partitions of the request). */
static kp_err leader_endpoints(kb_req *req, kp_produce_resp *rs, int32_t nparts)
{
    int32_t *ids = kp_arena_calloc(&req->arena, (size_t)nparts + 1, sizeof(*ids));
    int32_t k = 0;
    for (int32_t i = 0; ids != NULL && i < rs->responses.n; i++)
        for (int32_t j = 0; j < rs->responses.v[i].partition_responses.n; j++) {
            const part_resp *pr = &rs->responses.v[i].partition_responses.v[j];
            if (pr->error_code == KP_ERR_NOT_LEADER_OR_FOLLOWER)
                ids[k++] = pr->current_leader.leader_id;
        }
    kb_cv_node *nodes;
    int32_t nn;
    if (ids == NULL || kb_cv_nodes(req, ids, k, &nodes, &nn) != KP_ERR_NONE ||
        !KB_ARRAY_ALLOC(req, rs->node_endpoints, nn))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nn; i++)
        rs->node_endpoints.v[i] = (kp_produce_resp_node_endpoint){
            nodes[i].node_id, nodes[i].host, nodes[i].port, nodes[i].rack};
    return KP_ERR_NONE;
}

/* Sets up one partition: topic, limits, config; or an error in pr. */
static void part_init(kb_req *req, kb_topic *t, int16_t terr, bool acks_ok,
                      const kp_produce_req_partition_produce_data *pd, produce_part *p)
{
    part_resp *pr = p->resp;
    kp_produce_resp_partition_produce_response_defaults(pr);
    pr->index = pd->index;
    pr->base_offset = -1; /* Kafka's INVALID_OFFSET until an append sets it */
    if (!acks_ok)
        pr->error_code = KP_ERR_INVALID_REQUIRED_ACKS;
    else if (t == NULL)
        pr->error_code = terr;
    else if (pr->index < 0 || pr->index >= t->npartitions)
        pr->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    else /* cluster mode: only the partition's leader appends (KIP-951) */
        pr->error_code = kb_cv_check_leader(req, &t->id, pr->index,
                                            &pr->current_leader.leader_id,
                                            &pr->current_leader.leader_epoch);
    if (pr->error_code != KP_ERR_NONE)
        return;
    p->topic = t;
    /* The records live in the connection's receive buffer, which we own. */
    p->bytes = (uint8_t *)(uintptr_t)pd->records.p;
    p->len = pd->records.len < 0 ? 0 : (size_t)pd->records.len;
    const kb_topic_settings *ts = kb_topic_settings_of(req->broker->cfg, t);
    validate_opts(req, ts, &p->opts);
    p->opts.max_decompressed = decompress_cap(p->len);
    p->codec = ts->codec;
}

/* Whether any partition carries a transactional batch (the attribute bit in
 * the low byte of a magic 2 batch's big-endian attributes; Kafka's
 * RequestUtils.hasTransactionalRecords). */
static bool has_transactional(const kp_produce_req *rq)
{
    for (int32_t i = 0; i < rq->topic_data.n; i++)
        for (int32_t j = 0; j < rq->topic_data.v[i].partition_data.n; j++) {
            kp_records r = rq->topic_data.v[i].partition_data.v[j].records;
            if (r.len > KP_BATCH_OFF_ATTRIBUTES + 1 && r.p[KP_BATCH_OFF_MAGIC] == 2 &&
                (r.p[KP_BATCH_OFF_ATTRIBUTES + 1] & KP_BATCH_ATTR_TRANSACTIONAL) != 0)
                return true;
        }
    return false;
}

/* A transactional produce without TRANSACTIONAL_ID WRITE: Kafka refuses
 * the whole request before it looks at any topic. */
static int16_t produce_txn_authz(kb_req *req, const kp_produce_req *rq)
{
    if (!kb_authz_on(req) || !has_transactional(rq))
        return KP_ERR_NONE;
    return rq->transactional_id.len >= 0 &&
                   kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, rq->transactional_id)
               ? KP_ERR_NONE
               : KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
}

/* The topic a Produce names, in Kafka's order of checks: an id v13+ names
 * that no topic has is UNKNOWN_TOPIC_ID, then TOPIC WRITE, then a name no
 * topic has is UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics;
 * Metadata does, when allowed). One hash lookup per topic. */
static kb_topic *produce_topic(kb_req *req, const kp_produce_req_topic_produce_data *td,
                               int16_t *err)
{
    bool by_id = req->api_version >= 13;
    kb_topic *t = kb_topics_find_ref(req->broker->topics, by_id, td->name, &td->topic_id);
    *err = KP_ERR_NONE;
    if (t == NULL && by_id)
        *err = KP_ERR_UNKNOWN_TOPIC_ID;
    else if (kb_authz_on(req) &&
             !kb_authz(req, KB_OP_WRITE, KB_RES_TOPIC, by_id ? kp_str_from(t->name) : td->name))
        *err = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    else if (t == NULL)
        *err = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return *err == KP_ERR_NONE ? t : NULL;
}

static produce_state *state_new(kb_req *req, const kp_produce_req *rq, kp_produce_resp *rs)
{
    int32_t nparts = 0;
    for (int32_t i = 0; i < rq->topic_data.n; i++)
        nparts += rq->topic_data.v[i].partition_data.n;
    produce_state *st = calloc(1, sizeof(*st) + (size_t)nparts * sizeof(st->parts[0]));
    if (st == NULL || !KB_ARRAY_ALLOC(req, rs->responses, rq->topic_data.n)) {
        free(st);
        return NULL;
    }
    st->loop = req->broker->loop;
    kb_timer_init(&st->timeout, on_produce_timeout, st);
    st->acks = rq->acks;
    st->timeout_ms = rq->timeout_ms;
    st->nparts = nparts;
    bool acks_ok = rq->acks == 0 || rq->acks == 1 || rq->acks == -1;
    int16_t txn_err = acks_ok ? produce_txn_authz(req, rq) : KP_ERR_NONE;
    int32_t k = 0;
    for (int32_t i = 0; i < rq->topic_data.n; i++) {
        const kp_produce_req_topic_produce_data *td = &rq->topic_data.v[i];
        kp_produce_resp_topic_produce_response *tr = &rs->responses.v[i];
        tr->name = td->name;         /* up to v12 */
        tr->topic_id = td->topic_id; /* v13+ */
        if (!KB_ARRAY_ALLOC(req, tr->partition_responses, td->partition_data.n)) {
            state_free(st);
            return NULL;
        }
        int16_t terr = txn_err;
        kb_topic *t = acks_ok && terr == KP_ERR_NONE ? produce_topic(req, td, &terr) : NULL;
        for (int32_t j = 0; j < td->partition_data.n; j++, k++) {
            produce_part *p = &st->parts[k];
            p->state = st;
            p->resp = &tr->partition_responses.v[j];
            part_init(req, t, terr, acks_ok, &td->partition_data.v[j], p);
        }
    }
    if (req->api_version >= 10 && leader_endpoints(req, rs, st->nparts) != KP_ERR_NONE) {
        state_free(st);
        return NULL;
    }
    return st;
}

/* The record bytes a produce carries (what its client quota counts). */
static int64_t produce_request_bytes(const kp_produce_req *rq)
{
    int64_t n = 0;
    for (int32_t i = 0; i < rq->topic_data.n; i++)
        for (int32_t j = 0; j < rq->topic_data.v[i].partition_data.n; j++)
            n += rq->topic_data.v[i].partition_data.v[j].records.len > 0
                     ? rq->topic_data.v[i].partition_data.v[j].records.len
                     : 0;
    return n;
}

kp_err kb_h_produce(kb_req *req, const kp_produce_req *rq, kp_produce_resp *rs)
{
    produce_state *st = state_new(req, rq, rs);
    if (st == NULL)
        return KP_ERR__NOMEM;
    req->quota_bytes = produce_request_bytes(rq); /* the pipeline's quota counts these */
    if (compressed_bytes(st) >= KB_OFFLOAD_MIN_BYTES) {
        if (!copy_records(st)) {
            state_free(st);
            return KP_ERR__NOMEM;
        }
        if (kb_work_submit(req->broker, validate_all, after_validate, st) == KP_ERR_NONE) {
            st->req = req;
            req->park_state = st;
            req->on_cancel = on_validate_cancel;
            return KB_PARKED;
        }
    }
    validate_all(st);
    return produce_verify(req, st);
}
