/* Handlers that read or move a partition's offsets: ListOffsets,
 * OffsetForLeaderEpoch, DeleteRecords. */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_logscan.h"
#include "kb_partition_log.h"
#include "kb_txn_coord.h"
#include "kb_topics.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"

enum {
    TS_LATEST = -1,
    TS_EARLIEST = -2,
    TS_MAX_TIMESTAMP = -3,
    TS_EARLIEST_LOCAL = -4,
    TS_LATEST_TIERED = -5,
};

#define KB_BATCH_READ_MAX (64 * 1024 * 1024)

typedef kp_list_offsets_resp_list_offsets_partition_response lo_out;

/* Reads the whole batch at file position pos into a malloc()ed buffer. */
static kp_err read_batch(const ks_io *io, int fd, int64_t pos, const kp_batch_hdr *h, uint8_t **out)
{
    int64_t total = kp_batch_total_size(h);
    if (total > KB_BATCH_READ_MAX)
        return KP_ERR__CORRUPT;
    *out = malloc((size_t)total);
    if (*out == NULL)
        return KP_ERR__NOMEM;
    kp_err e = ks_io_read_all(io, fd, *out, (size_t)total, pos, NULL);
    if (e != KP_ERR_NONE) {
        free(*out);
        *out = NULL;
    }
    return e;
}

/* Finds, in one batch, the first record with timestamp >= ts, or with
 * want_max the record carrying the batch's max timestamp. */
static kp_err find_in_batch(const uint8_t *batch, const kp_batch_hdr *h, int64_t ts, bool want_max,
                            int64_t *offset, int64_t *found_ts)
{
    if (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME) {
        *offset = want_max ? kp_batch_last_offset(h) : h->base_offset;
        *found_ts = h->max_timestamp;
        return KP_ERR_NONE;
    }
    const uint8_t *recs = batch + KP_BATCH_HDR_SIZE;
    size_t len = (size_t)kp_batch_total_size(h) - KP_BATCH_HDR_SIZE;
    uint8_t *plain = NULL;
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    if (codec != KP_CODEC_NONE) {
        size_t plain_len;
        kp_err e = kp_decompress((kp_codec)codec, recs, len, (size_t)KB_BATCH_READ_MAX, &plain,
                                 &plain_len, NULL);
        if (e != KP_ERR_NONE)
            return e;
        recs = plain;
        len = plain_len;
    }
    kp_record_iter it;
    kp_record r;
    kp_err e;
    kp_records_iter_init(&it, recs, len, h->records_count);
    *offset = -1;
    while ((e = kp_records_next(&it, &r)) == KP_ERR_NONE) {
        int64_t rts = h->base_timestamp + r.timestamp_delta;
        bool hit = want_max ? rts == h->max_timestamp : rts >= ts;
        if (hit) {
            *offset = h->base_offset + r.offset_delta;
            *found_ts = rts;
            break;
        }
    }
    free(plain);
    return *offset >= 0 ? KP_ERR_NONE : (e == KP_ERR__NOENT ? KP_ERR__NOENT : e);
}

typedef struct time_search {
    int64_t ts;       /* target, or the running max for TS_MAX_TIMESTAMP */
    bool want_max;
    kp_batch_hdr best;
    int64_t best_pos;
    int best_fd;
    bool found;
} time_search;

static kp_err time_search_cb(void *arg, const kp_batch_hdr *h, int64_t pos, int fd)
{
    time_search *s = arg;
    bool better = s->want_max ? (!s->found || h->max_timestamp > s->best.max_timestamp)
                              : (!s->found && h->max_timestamp >= s->ts);
    if (better) {
        s->best = *h;
        s->best_pos = pos;
        s->best_fd = fd;
        s->found = true;
    }
    return KP_ERR_NONE;
}

/* Record-level lookup by timestamp (want_max: the largest timestamp). */
static kp_err offset_for_time(kb_broker *b, ks_log *log, int64_t ts, bool want_max,
                              int64_t *offset, int64_t *found_ts)
{
    int64_t from = ks_log_start_offset(log);
    if (!want_max) {
        /* The time index narrows the scan to the first candidate batch. */
        int64_t boff, bts;
        kp_err e = ks_log_offset_for_time(log, ts, &boff, &bts, NULL);
        if (e == KP_ERR__NOENT)
            return KP_ERR__NOENT;
        if (e == KP_ERR_NONE)
            from = boff;
    }
    /* A search holds the fd only during the scan, so read the batch inside. */
    time_search s = {ts, want_max, {0}, 0, -1, false};
    kp_err e = kb_log_scan(kb_partition_log_io(b), log, from, time_search_cb, &s);
    if (e != KP_ERR_NONE)
        return e;
    if (!s.found)
        return KP_ERR__NOENT;
    ks_log_slice slice;
    e = ks_log_read(log, s.best.base_offset, 1, ks_log_end_offset(log), &slice, NULL);
    if (e != KP_ERR_NONE)
        return e;
    uint8_t *batch = NULL;
    e = read_batch(kb_partition_log_io(b), slice.range.fd, slice.range.off, &s.best, &batch);
    ks_log_slice_release(&slice);
    if (e == KP_ERR_NONE)
        e = find_in_batch(batch, &s.best, ts, want_max, offset, found_ts);
    free(batch);
    return e;
}

/* lso: the partition's last stable offset, "latest" for read_committed. */
static void list_offset(kb_req *req, const kp_list_offsets_req *rq, ks_log *log, int64_t ts,
                        int64_t lso, lo_out *out)
{
    out->timestamp = -1;
    out->leader_epoch = 0;
    int64_t hw = ks_log_high_watermark(log);
    if (ts == TS_EARLIEST || ts == TS_EARLIEST_LOCAL) {
        out->offset = ks_log_start_offset(log);
    } else if (ts == TS_LATEST) {
        out->offset = rq->isolation_level == 1 ? lso : hw;
    } else if (ts == TS_LATEST_TIERED || (ts < 0 && ts != TS_MAX_TIMESTAMP)) {
        out->offset = -1;
        out->leader_epoch = -1;
    } else {
        kp_err e = offset_for_time(req->broker, log, ts, ts == TS_MAX_TIMESTAMP, &out->offset,
                                   &out->timestamp);
        if (e == KP_ERR__NOENT) {
            out->offset = -1;
            out->leader_epoch = -1;
        } else if (e != KP_ERR_NONE) {
            out->error_code = kp_err_to_wire(e);
        }
    }
}

/* kb_partition_log_lookup, refused first with NOT_LEADER_OR_FOLLOWER when
 * another broker leads the partition (cluster mode), so no log is opened
 * for it here. */
static int16_t led_lookup(kb_req *req, kp_str name, int32_t p, kb_topic **t, ks_log **log)
{
    kb_topic *lt = kb_topics_find(req->broker->topics, name);
    int32_t leader, epoch;
    int16_t e = lt != NULL ? kb_cv_check_leader(req, &lt->id, p, &leader, &epoch) : KP_ERR_NONE;
    return e != KP_ERR_NONE ? e : kb_partition_log_lookup(req->broker, name, p, t, log);
}

kp_err kb_h_list_offsets(kb_req *req, const kp_list_offsets_req *rq, kp_list_offsets_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_list_offsets_req_list_offsets_topic *tq = &rq->topics.v[i];
        kp_list_offsets_resp_list_offsets_topic_response *to = &rs->topics.v[i];
        to->name = tq->name;
        if (!KB_ARRAY_ALLOC(req, to->partitions, tq->partitions.n))
            return KP_ERR__NOMEM;
        bool denied = !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, tq->name);
        for (int32_t j = 0; j < tq->partitions.n; j++) {
            const kp_list_offsets_req_list_offsets_partition *pq = &tq->partitions.v[j];
            lo_out *out = &to->partitions.v[j];
            kp_list_offsets_resp_list_offsets_partition_response_defaults(out);
            out->partition_index = pq->partition_index;
            kb_topic *t;
            ks_log *log;
            out->error_code =
                denied ? KP_ERR_TOPIC_AUTHORIZATION_FAILED
                       : led_lookup(req, tq->name, pq->partition_index, &t, &log);
            if (out->error_code == KP_ERR_NONE)
                out->error_code = kb_partition_log_check_epoch(
                    pq->current_leader_epoch, t->partitions[pq->partition_index].leader_epoch);
            if (out->error_code == KP_ERR_NONE)
                list_offset(req, rq, log, pq->timestamp,
                            kb_txn_coord_lso(req->broker, t, pq->partition_index, log), out);
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_offset_for_leader_epoch(kb_req *req, const kp_offset_for_leader_epoch_req *rq,
                                    kp_offset_for_leader_epoch_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_offset_for_leader_epoch_req_offset_for_leader_topic *tq = &rq->topics.v[i];
        kp_offset_for_leader_epoch_resp_offset_for_leader_topic_result *to = &rs->topics.v[i];
        to->topic = tq->topic;
        if (!KB_ARRAY_ALLOC(req, to->partitions, tq->partitions.n))
            return KP_ERR__NOMEM;
        /* Kafka: CLUSTER CLUSTER_ACTION covers every topic, else DESCRIBE. */
        bool denied = !kb_authz_cluster(req, KB_OP_CLUSTER_ACTION) &&
                      !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, tq->topic);
        for (int32_t j = 0; j < tq->partitions.n; j++) {
            const kp_offset_for_leader_epoch_req_offset_for_leader_partition *pq =
                &tq->partitions.v[j];
            kp_offset_for_leader_epoch_resp_epoch_end_offset *out = &to->partitions.v[j];
            kp_offset_for_leader_epoch_resp_epoch_end_offset_defaults(out);
            out->partition = pq->partition;
            kb_topic *t;
            ks_log *log;
            out->error_code = denied ? KP_ERR_TOPIC_AUTHORIZATION_FAILED
                                     : led_lookup(req, tq->topic, pq->partition, &t, &log);
            if (out->error_code != KP_ERR_NONE)
                continue;
            int32_t ours = t->partitions[pq->partition].leader_epoch;
            out->error_code = kb_partition_log_check_epoch(pq->current_leader_epoch, ours);
            if (out->error_code == KP_ERR_NONE) /* from the epoch cache */
                ks_log_epoch_end_offset(log, pq->leader_epoch, &out->leader_epoch,
                                        &out->end_offset);
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_delete_records(kb_req *req, const kp_delete_records_req *rq,
                           kp_delete_records_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_delete_records_req_delete_records_topic *tq = &rq->topics.v[i];
        kp_delete_records_resp_delete_records_topic_result *to = &rs->topics.v[i];
        to->name = tq->name;
        if (!KB_ARRAY_ALLOC(req, to->partitions, tq->partitions.n))
            return KP_ERR__NOMEM;
        bool denied = !kb_authz(req, KB_OP_DELETE, KB_RES_TOPIC, tq->name);
        for (int32_t j = 0; j < tq->partitions.n; j++) {
            const kp_delete_records_req_delete_records_partition *pq = &tq->partitions.v[j];
            kp_delete_records_resp_delete_records_partition_result *out = &to->partitions.v[j];
            kp_delete_records_resp_delete_records_partition_result_defaults(out);
            out->partition_index = pq->partition_index;
            kb_topic *t;
            ks_log *log;
            out->error_code =
                denied ? KP_ERR_TOPIC_AUTHORIZATION_FAILED
                       : led_lookup(req, tq->name, pq->partition_index, &t, &log);
            if (out->error_code != KP_ERR_NONE)
                continue;
            int64_t target = pq->offset == -1 ? ks_log_high_watermark(log) : pq->offset;
            kp_err e = target < 0 ? KP_ERR_OFFSET_OUT_OF_RANGE
                                  : ks_log_advance_start(log, target, NULL);
            out->error_code = kp_err_to_wire(e);
            out->low_watermark = e == KP_ERR_NONE ? ks_log_start_offset(log) : -1;
        }
    }
    return KP_ERR_NONE;
}
