/* Handler for Produce: validate, deduplicate idempotent retries, append,
 * and answer per acks (0: nothing, 1: page cache, -1: the flush policy). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_broker.h"
#include "kb_dispatch.h"
#include "kb_log.h"
#include "kb_pidstate.h"
#include "kb_plog.h"
#include "kb_tconf.h"
#include "kb_topics.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_validate.h"

typedef kp_produce_resp_partition_produce_response part_resp;

/* The decompressed size allowed per batch: a compression-bomb cap. */
#define KB_MAX_DECOMPRESSED(max_message) \
    ((size_t)(max_message) * 16 > (size_t)256 << 20 ? (size_t)(max_message) * 16 : (size_t)256 << 20)

/* A parked acks=-1 produce: answered when every partition is durable or
 * timeout_ms passed; freed when the last durability callback ran. */
typedef struct produce_wait {
    kb_req *req; /* NULL once answered early (timeout) or the connection closed */
    kb_loop *loop;
    kb_timer timeout;
    int32_t pending;
    struct produce_part {
        struct produce_wait *wait;
        part_resp *resp;
        bool waiting; /* a durability callback is due */
    } parts[];
} produce_wait;

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

static void validate_opts(const kb_req *req, const kb_topic *t, kp_validate_opts *o)
{
    const kb_config *cfg = req->broker->cfg;
    int8_t source;
    const char *policy = kb_tconf_effective(cfg, t, "cleanup.policy", &source);
    const char *tstype = kb_tconf_effective(cfg, t, "message.timestamp.type", &source);
    memset(o, 0, sizeof(*o));
    o->single_batch = true; /* Kafka refuses a second v2 batch at every version */
    o->compacted = policy != NULL && strstr(policy, "compact") != NULL;
    o->allow_zstd = req->api_version >= 7;
    o->log_append_time = tstype != NULL && strcmp(tstype, "LogAppendTime") == 0;
    o->max_message_bytes = (int32_t)kb_tconf_long(cfg, t, "max.message.bytes", 1048588);
    o->now_ms = wall_ms();
    o->timestamp_before_max_ms =
        kb_tconf_long(cfg, t, "message.timestamp.before.max.ms", INT64_MAX);
    o->timestamp_after_max_ms = kb_tconf_long(cfg, t, "message.timestamp.after.max.ms", INT64_MAX);
    o->max_decompressed = KB_MAX_DECOMPRESSED(o->max_message_bytes);
}

/* The codec a topic's compression.type asks for, or -1 for "producer". */
static int topic_codec(const kb_config *cfg, const kb_topic *t)
{
    static const char *const names[] = {"uncompressed", "gzip", "snappy", "lz4", "zstd"};
    int8_t source;
    const char *c = kb_tconf_effective(cfg, t, "compression.type", &source);
    for (int i = 0; c != NULL && i < 5; i++)
        if (strcmp(c, names[i]) == 0)
            return i;
    return -1;
}

static void record_error(kb_req *req, part_resp *pr, const kp_validate_result *vr)
{
    pr->error_message = kb_req_str(req, vr->msg);
    if (vr->record_error_index >= 0 && KB_ARRAY_ALLOC(req, pr->record_errors, 1)) {
        pr->record_errors.v[0].batch_index = vr->record_error_index;
        pr->record_errors.v[0].batch_index_error_message = pr->error_message;
    }
}

/* Appends one partition's batches; fills pr; returns the log for acks=-1. */
static ks_log *produce_partition(kb_req *req, kb_topic *t, const kp_records *rec, part_resp *pr)
{
    kb_broker *b = req->broker;
    ks_log *log;
    kp_err e = kb_plog_get(b, t, pr->index, &log);
    if (e != KP_ERR_NONE) {
        pr->error_code = kp_err_to_wire(e);
        return NULL;
    }
    kp_validate_opts opts;
    kp_validate_result vr;
    validate_opts(req, t, &opts);
    /* The records live in the connection's receive buffer, which we own. */
    uint8_t *bytes = (uint8_t *)(uintptr_t)rec->p;
    size_t len = rec->len < 0 ? 0 : (size_t)rec->len;
    e = kp_validate_batches(bytes, len, &opts, &vr);
    if (e != KP_ERR_NONE) {
        pr->error_code = kp_err_to_wire(e);
        record_error(req, pr, &vr);
        return NULL;
    }
    kb_partition *part = &t->partitions[pr->index];
    bool idempotent = vr.producer_id >= 0 && vr.base_sequence >= 0;
    kb_pid_batch dup;
    if (idempotent) {
        e = kb_pidstate_check(part->pids, vr.producer_id, vr.producer_epoch, vr.base_sequence,
                              last_sequence(vr.base_sequence, vr.last_offset_delta), &dup);
        if (e == KP_ERR_DUPLICATE_SEQUENCE_NUMBER) {
            pr->base_offset = dup.first_offset;
            pr->log_start_offset = ks_log_start_offset(log);
            return NULL; /* already durable or in flight with the original */
        }
        if (e != KP_ERR_NONE) {
            pr->error_code = (int16_t)e;
            return NULL;
        }
    }
    uint8_t *recompressed = NULL;
    int codec = topic_codec(b->cfg, t);
    if (codec >= 0 && codec != (vr.attributes & KP_BATCH_ATTR_CODEC_MASK)) {
        size_t out_len;
        e = kp_recompress_batches(bytes, len, codec, KP_COMPRESS_LEVEL_DEFAULT,
                                  opts.max_decompressed, &recompressed, &out_len);
        if (e != KP_ERR_NONE) {
            pr->error_code = kp_err_to_wire(e);
            return NULL;
        }
        bytes = recompressed;
        len = out_len;
    }
    ks_append_result res;
    e = kb_plog_append(b, t, pr->index, bytes, len, &res);
    free(recompressed);
    if (e != KP_ERR_NONE) {
        pr->error_code = kp_err_to_wire(e);
        return NULL;
    }
    if (idempotent) {
        kb_pid_batch nb = {vr.base_sequence, last_sequence(vr.base_sequence, vr.last_offset_delta),
                           res.base_offset, res.last_offset};
        (void)kb_pidstate_record(part->pids, vr.producer_id, vr.producer_epoch, &nb);
    }
    pr->base_offset = res.base_offset;
    pr->log_append_time_ms = res.log_append_time;
    pr->log_start_offset = res.log_start_offset;
    return log;
}

/* Detaches the request from its wait; the callbacks still run and free it. */
static kb_req *wait_detach(produce_wait *w)
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

static void on_durable(void *arg, kp_err err)
{
    struct produce_part *pp = arg;
    produce_wait *w = pp->wait;
    pp->waiting = false;
    if (w->req != NULL && err != KP_ERR_NONE) {
        pp->resp->error_code = KP_ERR_KAFKA_STORAGE_ERROR;
        pp->resp->base_offset = -1;
    }
    if (--w->pending > 0)
        return;
    kb_req *req = wait_detach(w);
    free(w);
    if (req != NULL)
        kb_req_finish(req);
}

/* timeout_ms passed: partitions not yet durable answer REQUEST_TIMED_OUT. */
static void on_produce_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    produce_wait *w = arg;
    kb_req *req = w->req;
    const kp_produce_resp *rs = req->response;
    int32_t k = 0;
    for (int32_t i = 0; i < rs->responses.n; i++) {
        for (int32_t j = 0; j < rs->responses.v[i].partition_responses.n; j++, k++) {
            if (w->parts[k].waiting) {
                w->parts[k].resp->error_code = KP_ERR_REQUEST_TIMED_OUT;
                w->parts[k].resp->base_offset = -1;
            }
        }
    }
    kb_req_finish(wait_detach(w));
}

static void on_produce_cancel(kb_req *req)
{
    produce_wait *w = req->park_state;
    if (w != NULL)
        (void)wait_detach(w);
}

/* Finds or auto-creates the topic a produce names. */
static kb_topic *produce_topic(kb_req *req, kp_str name, int16_t *err)
{
    kb_broker *b = req->broker;
    kb_topic *t = kb_topics_find(b->topics, name);
    *err = KP_ERR_NONE;
    if (t != NULL)
        return t;
    kb_msgbuf msg;
    if (!b->cfg->auto_create_topics_enable || kb_topics_check_name(name, &msg) != KP_ERR_NONE) {
        *err = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        return NULL;
    }
    kp_err e = kb_topics_create(b->topics, name, b->cfg->num_partitions, NULL, 0, false, &t, &msg);
    if (e != KP_ERR_NONE) {
        *err = kp_err_to_wire(e);
        return NULL;
    }
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"topic auto-created\" topic=%s partitions=%d", t->name,
           t->npartitions);
    return t;
}

kp_err kb_h_produce(kb_req *req, const kp_produce_req *rq, kp_produce_resp *rs)
{
    int32_t nparts = 0;
    bool acks_ok = rq->acks == 0 || rq->acks == 1 || rq->acks == -1;
    if (!KB_ARRAY_ALLOC(req, rs->responses, rq->topic_data.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topic_data.n; i++)
        nparts += rq->topic_data.v[i].partition_data.n;
    produce_wait *w = NULL;
    if (rq->acks == -1 && (w = calloc(1, sizeof(*w) + (size_t)nparts * sizeof(w->parts[0]))) == NULL)
        return KP_ERR__NOMEM;
    bool any_error = false;
    ks_log **logs = kp_arena_calloc(&req->arena, (size_t)nparts + 1, sizeof(*logs));
    int32_t k = 0;
    for (int32_t i = 0; i < rq->topic_data.n; i++) {
        const kp_produce_req_topic_produce_data *td = &rq->topic_data.v[i];
        kp_produce_resp_topic_produce_response *tr = &rs->responses.v[i];
        tr->name = td->name;
        if (!KB_ARRAY_ALLOC(req, tr->partition_responses, td->partition_data.n) || logs == NULL) {
            free(w);
            return KP_ERR__NOMEM;
        }
        int16_t terr = KP_ERR_NONE;
        kb_topic *t = acks_ok ? produce_topic(req, td->name, &terr) : NULL;
        for (int32_t j = 0; j < td->partition_data.n; j++, k++) {
            part_resp *pr = &tr->partition_responses.v[j];
            kp_produce_resp_partition_produce_response_defaults(pr);
            pr->index = td->partition_data.v[j].index;
            if (!acks_ok)
                pr->error_code = KP_ERR_INVALID_REQUIRED_ACKS;
            else if (t == NULL)
                pr->error_code = terr;
            else if (pr->index < 0 || pr->index >= t->npartitions)
                pr->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            else
                logs[k] = produce_partition(req, t, &td->partition_data.v[j].records, pr);
            any_error |= pr->error_code != KP_ERR_NONE;
            if (w != NULL)
                w->parts[k] = (struct produce_part){w, pr, false};
        }
    }
    if (rq->acks == 0) {
        req->no_response = true;
        /* Kafka closes an acks=0 connection on error: the client sees no response. */
        if (any_error)
            kb_conn_close(req->conn, "acks=0 produce failed");
        return KP_ERR_NONE;
    }
    if (w == NULL)
        return KP_ERR_NONE;
    /* acks=-1: answer once every appended partition is durable. */
    w->req = req;
    w->loop = req->broker->loop;
    kb_timer_init(&w->timeout, on_produce_timeout, w);
    w->pending = 1; /* held until every wait is registered */
    for (k = 0; k < nparts; k++) {
        if (logs[k] == NULL)
            continue;
        w->pending++;
        w->parts[k].waiting = true;
        int64_t upto = ks_log_end_offset(logs[k]);
        if (kb_plog_when_durable(req->broker, logs[k], upto, on_durable, &w->parts[k]) != KP_ERR_NONE)
            on_durable(&w->parts[k], KP_ERR__IO);
    }
    if (--w->pending == 0) {
        free(w);
        return KP_ERR_NONE;
    }
    req->park_state = w;
    req->on_cancel = on_produce_cancel;
    /* A zero or negative timeout waits for the flush (a single replica has no
     * ISR to wait for, so Kafka itself would answer at once from the page cache). */
    if (rq->timeout_ms > 0)
        (void)kb_timer_arm(w->loop, &w->timeout, rq->timeout_ms);
    return KB_PARKED;
}
