#include "kp_validate.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"

/* The smallest batch length any message format may claim (Kafka's
 * RECORD_OVERHEAD_V0); below it Kafka's batch iterator reports corruption. */
#define LEGACY_MIN_LENGTH 14
#define OFF_RECORDS_COUNT (KP_BATCH_HDR_SIZE - 4)
#define NO_TIMESTAMP      (-1)

static kp_err fail(kp_validate_result *res, kp_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kp_err fail(kp_validate_result *res, kp_err err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
    va_end(ap);
    return err;
}

static void result_init(kp_validate_result *res)
{
    memset(res, 0, sizeof(*res));
    res->max_timestamp = NO_TIMESTAMP;
    res->producer_id = -1;
    res->producer_epoch = -1;
    res->base_sequence = -1;
    res->last_offset_delta = -1;
}

void kp_validate_result_fini(kp_validate_result *res)
{
    free(res->record_errors);
    res->record_errors = NULL;
    res->record_errors_listed = 0;
}

static int batch_codec(const uint8_t *batch)
{
    /* The codec is the low 3 bits of the big-endian attributes. */
    return batch[KP_BATCH_OFF_ATTRIBUTES + 1] & KP_BATCH_ATTR_CODEC_MASK;
}

/* A record's timestamp as Kafka reads it: the batch max timestamp under
 * LogAppendTime, else base + delta (wrapping, as Java's long does). */
static int64_t record_timestamp(const kp_batch_hdr *h, const kp_record *r)
{
    if (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME)
        return h->max_timestamp;
    return (int64_t)((uint64_t)h->base_timestamp + (uint64_t)r->timestamp_delta);
}

/* The records section of a checked batch, decompressed when needed: *owned
 * is NULL or the buffer *recs points into (caller frees). */
static kp_err open_records(const uint8_t *batch, size_t total, const kp_batch_hdr *h,
                           size_t max_decompressed, uint8_t **owned, const uint8_t **recs,
                           size_t *rlen, kp_errctx *ctx)
{
    *owned = NULL;
    *recs = batch + KP_BATCH_HDR_SIZE;
    *rlen = total - KP_BATCH_HDR_SIZE;
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    if (codec == KP_CODEC_NONE)
        return KP_ERR_NONE;
    kp_err err = kp_decompress((kp_codec)codec, *recs, *rlen, max_decompressed, owned, rlen, ctx);
    *recs = *owned;
    return err;
}

/* ---- framing -------------------------------------------------------------- */

/* The extent of the batch at p, as Kafka's batch iterator finds it: *total
 * is 0 when the bytes hold no whole batch (the iterator stops there). */
static kp_err frame_batch(const uint8_t *p, size_t left, size_t *total, kp_validate_result *res)
{
    *total = 0;
    if (left < KP_BATCH_LOG_OVERHEAD)
        return KP_ERR_NONE;
    int32_t length = kp_be32_get(p + KP_BATCH_OFF_LENGTH);
    if (length < LEGACY_MIN_LENGTH)
        return fail(res, KP_ERR_CORRUPT_MESSAGE,
                    "Record size %d is less than the minimum record overhead (%d)", length,
                    LEGACY_MIN_LENGTH);
    if (left <= KP_BATCH_OFF_MAGIC)
        return KP_ERR_NONE;
    int8_t magic = (int8_t)p[KP_BATCH_OFF_MAGIC];
    if (magic < 0 || magic > KP_BATCH_MAGIC)
        return fail(res, KP_ERR_CORRUPT_MESSAGE, "Invalid magic found in record: %d", magic);
    if ((size_t)length > left - KP_BATCH_LOG_OVERHEAD)
        return KP_ERR_NONE;
    *total = (size_t)length + KP_BATCH_LOG_OVERHEAD;
    return KP_ERR_NONE;
}

static kp_err check_codec_allowed(const uint8_t *batch, const kp_validate_opts *opts,
                                  kp_validate_result *res)
{
    if (!opts->allow_zstd && batch_codec(batch) == KP_CODEC_ZSTD)
        return fail(res, KP_ERR_UNSUPPORTED_COMPRESSION_TYPE,
                    "Produce requests below version 7 are not allowed to use ZStandard "
                    "compression");
    return KP_ERR_NONE;
}

/* What ProduceRequest.validateRecords checks before the log sees anything. */
static kp_err check_first(const uint8_t *p, size_t len, size_t total,
                          const kp_validate_opts *opts, kp_validate_result *res)
{
    if (total == 0)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Produce requests must have at least one record batch per partition");
    if (p[KP_BATCH_OFF_MAGIC] != KP_BATCH_MAGIC)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Produce requests are only allowed to contain record batches with magic "
                    "version 2");
    kp_err err = check_codec_allowed(p, opts, res);
    if (err != KP_ERR_NONE || !opts->single_batch || total == len)
        return err;
    size_t next;
    err = frame_batch(p + total, len - total, &next, res);
    if (err != KP_ERR_NONE)
        return err;
    if (next == 0)
        return fail(res, KP_ERR_CORRUPT_MESSAGE, "%zu trailing bytes do not hold a whole batch",
                    len - total);
    return fail(res, KP_ERR_INVALID_RECORD,
                "Produce requests are only allowed to contain exactly one record batch per "
                "partition");
}

/* A batch after the first (multi-batch mode only). */
static kp_err frame_more(const uint8_t *p, size_t left, size_t *total,
                         const kp_validate_opts *opts, kp_validate_result *res)
{
    kp_err err = frame_batch(p, left, total, res);
    if (err != KP_ERR_NONE)
        return err;
    if (*total == 0)
        return fail(res, KP_ERR_CORRUPT_MESSAGE, "%zu trailing bytes do not hold a whole batch",
                    left);
    if (p[KP_BATCH_OFF_MAGIC] != KP_BATCH_MAGIC)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Batch magic %d is not the same as the first batch's magic byte 2",
                    p[KP_BATCH_OFF_MAGIC]);
    return check_codec_allowed(p, opts, res);
}

/* ---- batch header --------------------------------------------------------- */

/* What the log checks per batch (UnifiedLog.analyzeAndValidateRecords). */
static kp_err check_envelope(const uint8_t *b, size_t total, const kp_validate_opts *opts,
                             kp_validate_result *res)
{
    int64_t base_offset = kp_be64_get(b + KP_BATCH_OFF_BASE_OFFSET);
    if (base_offset != 0)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "The baseOffset of the record batch in the append should be 0, but it is "
                    "%lld",
                    (long long)base_offset);
    if ((int64_t)total > (int64_t)opts->max_message_bytes)
        return fail(res, KP_ERR_MESSAGE_TOO_LARGE,
                    "The record batch size in the append is %zu bytes which exceeds the maximum "
                    "configured value of %d.",
                    total, opts->max_message_bytes);
    uint32_t stored = (uint32_t)kp_be32_get(b + KP_BATCH_OFF_CRC);
    if (total < KP_BATCH_HDR_SIZE || kp_batch_crc_compute(b, total) != stored)
        return fail(res, KP_ERR_CORRUPT_MESSAGE, "Record is corrupt (stored crc = %u)", stored);
    int codec = batch_codec(b);
    if (codec > KP_CODEC_ZSTD)
        return fail(res, KP_ERR_UNKNOWN_SERVER_ERROR, "Unknown compression type id: %d", codec);
    return KP_ERR_NONE;
}

/* What LogValidator.validateBatch checks for a client's batch. */
static kp_err check_header(const uint8_t *b, size_t total, kp_batch_hdr *h,
                           kp_validate_result *res)
{
    int32_t last_delta = kp_be32_get(b + KP_BATCH_OFF_LAST_DELTA);
    int32_t count = kp_be32_get(b + OFF_RECORDS_COUNT);
    if (last_delta < 0)
        return fail(res, KP_ERR_INVALID_RECORD, "Batch has an invalid offset range: [0, %d]",
                    last_delta);
    if (count <= 0)
        return fail(res, KP_ERR_INVALID_RECORD, "Invalid reported count for record batch: %d",
                    count);
    if ((int64_t)count != (int64_t)last_delta + 1)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Inconsistent batch offset range [0, %d] and count of records %d",
                    last_delta, count);
    if (kp_batch_hdr_parse(b, total, h) != KP_ERR_NONE)
        return fail(res, KP_ERR_CORRUPT_MESSAGE, "Record batch header is malformed");
    if (h->attributes & KP_BATCH_ATTR_CONTROL)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Clients are not allowed to write control records");
    if (h->producer_id >= 0 && h->base_sequence < 0)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Invalid sequence number %d in record batch with producerId %lld",
                    h->base_sequence, (long long)h->producer_id);
    return KP_ERR_NONE;
}

/* ---- records -------------------------------------------------------------- */

/* Lists one refused record; KP_ERR__NOMEM if the list cannot grow. */
static kp_err add_fault(kp_validate_result *res, const kp_record *r, int32_t i, int64_t ts,
                        kp_record_fault fault)
{
    int32_t n = res->record_errors_listed;
    res->record_error_count++;
    if (n == KP_VALIDATE_MAX_RECORD_ERRORS)
        return KP_ERR_NONE;
    if ((n & (n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow by doubling */
        size_t cap = n == 0 ? 8 : (size_t)n * 2;
        kp_record_error *v = realloc(res->record_errors, cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        res->record_errors = v;
    }
    res->record_errors[n] = (kp_record_error){
        .timestamp = ts,
        .index = i,
        .key_len = r->key.len,
        .value_len = r->value.len,
        .fault = fault,
    };
    res->record_errors_listed = n + 1;
    return KP_ERR_NONE;
}

/* The first fault of record i, in LogValidator's order, or -1 if none. */
static int record_fault(const kp_batch_hdr *h, const kp_record *r, int32_t i, int64_t ts,
                        const kp_validate_opts *opts)
{
    if (r->offset_delta != i)
        return KP_RECORD_FAULT_OFFSET_DELTA;
    if (opts->compacted && r->key.len < 0)
        return KP_RECORD_FAULT_NO_KEY;
    if (!opts->log_append_time && ts != NO_TIMESTAMP) {
        /* Java long arithmetic: the differences wrap. */
        int64_t diff = (int64_t)((uint64_t)opts->now_ms - (uint64_t)ts);
        int64_t ahead = (int64_t)(0 - (uint64_t)diff);
        if (diff <= opts->timestamp_before_max_ms && ahead <= opts->timestamp_after_max_ms)
            return -1;
        return KP_RECORD_FAULT_TIMESTAMP;
    }
    if (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME)
        return KP_RECORD_FAULT_LOG_APPEND_TIME;
    return -1;
}

static kp_err walk_records(const uint8_t *recs, size_t rlen, const kp_batch_hdr *h,
                           const kp_validate_opts *opts, kp_validate_result *res)
{
    kp_record_iter it;
    kp_record r;
    kp_records_iter_init(&it, recs, rlen, h->records_count);
    for (int32_t i = 0; i < h->records_count; i++) {
        if (kp_records_next(&it, &r) != KP_ERR_NONE)
            return fail(res, KP_ERR_INVALID_RECORD,
                        "Found invalid record structure at record %d of %d", i,
                        h->records_count);
        int64_t ts = record_timestamp(h, &r);
        int fault = record_fault(h, &r, i, ts, opts);
        if (fault < 0) {
            if (ts > res->max_timestamp)
                res->max_timestamp = ts;
            continue;
        }
        if (add_fault(res, &r, i, ts, (kp_record_fault)fault) != KP_ERR_NONE)
            return fail(res, KP_ERR__NOMEM, "Out of memory listing record errors");
        res->timestamp_fault |= fault >= KP_RECORD_FAULT_TIMESTAMP;
    }
    if (kp_records_next(&it, &r) != KP_ERR__NOENT)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Incorrect declared batch size, records still remaining");
    if (res->timestamp_fault)
        return fail(res, KP_ERR_INVALID_TIMESTAMP,
                    "One or more records have been rejected due to invalid timestamp");
    if (res->record_error_count > 0)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "One or more records have been rejected due to %d record errors in total",
                    res->record_error_count);
    return KP_ERR_NONE;
}

static kp_err check_records(const uint8_t *b, size_t total, const kp_batch_hdr *h,
                            const kp_validate_opts *opts, kp_validate_result *res)
{
    uint8_t *owned;
    const uint8_t *recs;
    size_t rlen;
    kp_errctx ctx = {.msg = ""};
    kp_err err = open_records(b, total, h, opts->max_decompressed, &owned, &recs, &rlen, &ctx);
    if (err == KP_ERR__CORRUPT && ctx.sys_errno == EFBIG)
        err = fail(res, KP_ERR_MESSAGE_TOO_LARGE,
                   "Decompressed records exceed the broker's limit of %zu bytes",
                   opts->max_decompressed);
    else if (err == KP_ERR__CORRUPT)
        err = fail(res, KP_ERR_UNKNOWN_SERVER_ERROR, "Failed to decompress record stream: %s",
                   ctx.msg);
    else if (err != KP_ERR_NONE)
        err = fail(res, err, "Decompression failed: %s", ctx.msg);
    else
        err = walk_records(recs, rlen, h, opts, res);
    free(owned);
    return err;
}

static void note_first_batch(const kp_batch_hdr *h, kp_validate_result *res)
{
    res->attributes = h->attributes;
    res->producer_id = h->producer_id;
    res->producer_epoch = h->producer_epoch;
    res->base_sequence = h->base_sequence;
    res->last_offset_delta = h->last_offset_delta;
}

static kp_err check_batch(const uint8_t *b, size_t total, const kp_validate_opts *opts,
                          kp_validate_result *res)
{
    kp_batch_hdr h;
    kp_err err = check_envelope(b, total, opts, res);
    if (err == KP_ERR_NONE)
        err = check_header(b, total, &h, res);
    if (err != KP_ERR_NONE)
        return err;
    if (res->batches == 0)
        note_first_batch(&h, res);
    err = check_records(b, total, &h, opts, res);
    if (err != KP_ERR_NONE)
        return err;
    res->batches++;
    res->records += h.records_count;
    return KP_ERR_NONE;
}

kp_err kp_validate_batches(const uint8_t *p, size_t len, const kp_validate_opts *opts,
                           kp_validate_result *res)
{
    size_t total;
    result_init(res);
    kp_err err = frame_batch(p, len, &total, res);
    if (err == KP_ERR_NONE)
        err = check_first(p, len, total, opts, res);
    for (size_t off = 0; err == KP_ERR_NONE && off < len; off += total) {
        if (off > 0)
            err = frame_more(p + off, len - off, &total, opts, res);
        if (err == KP_ERR_NONE)
            err = check_batch(p + off, total, opts, res);
    }
    return err;
}

/* ---- Kafka's texts for refused records ----------------------------------- */

void kp_record_error_text(const kp_record_error *e, const kp_validate_opts *opts,
                          const char *topic, int32_t partition, char *buf, size_t cap)
{
    /* Java long arithmetic: the bounds wrap as Kafka's do. */
    int64_t lo = (int64_t)((uint64_t)opts->now_ms - (uint64_t)opts->timestamp_before_max_ms);
    int64_t hi = (int64_t)((uint64_t)opts->now_ms + (uint64_t)opts->timestamp_after_max_ms);
    switch (e->fault) {
    case KP_RECORD_FAULT_NO_KEY:
        snprintf(buf, cap,
                 "Compacted topic cannot accept message without key in topic partition %s-%d",
                 topic, partition);
        return;
    case KP_RECORD_FAULT_TIMESTAMP:
        snprintf(buf, cap,
                 "Timestamp %lld of message with offset %d is out of range. The timestamp "
                 "should be within [%lld, %lld]",
                 (long long)e->timestamp, e->index, (long long)lo, (long long)hi);
        return;
    case KP_RECORD_FAULT_LOG_APPEND_TIME:
        snprintf(buf, cap,
                 "Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=%lld, "
                 "key=%d bytes, value=%d bytes). Producer should not set timestamp type to "
                 "LogAppendTime.",
                 e->index, (long long)e->timestamp, e->key_len < 0 ? 0 : e->key_len,
                 e->value_len < 0 ? 0 : e->value_len);
        return;
    case KP_RECORD_FAULT_OFFSET_DELTA:
        break;
    }
    snprintf(buf, cap, "Record %d has an offset delta out of sequence in topic partition %s-%d",
             e->index, topic, partition);
}

/* Appends printf output at *len, keeping buf terminated when cut short. */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len = n < 0 ? cap : *len + (size_t)n;
}

void kp_record_errors_summary(const kp_validate_result *res, const kp_validate_opts *opts,
                              const char *topic, int32_t partition, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (res->timestamp_fault) {
        append(buf, cap, &len, "One or more records have been rejected due to invalid timestamp");
        return;
    }
    /* Java's List.toString of the first three RecordErrors. */
    append(buf, cap, &len,
           "One or more records have been rejected due to %d record errors in total, and only "
           "showing the first three errors at most: [",
           res->record_error_count);
    for (int32_t i = 0; i < res->record_errors_listed && i < 3; i++) {
        char text[256];
        kp_record_error_text(&res->record_errors[i], opts, topic, partition, text, sizeof(text));
        append(buf, cap, &len, "%sRecordError(batchIndex=%d, message='%s')", i > 0 ? ", " : "",
               res->record_errors[i].index, text);
    }
    append(buf, cap, &len, "]");
}

/* ---- recompression -------------------------------------------------------- */

static kp_err append_records(kp_batch_builder *bld, const uint8_t *b, size_t total,
                             const kp_batch_hdr *h, size_t max_decompressed)
{
    uint8_t *owned;
    const uint8_t *recs;
    size_t rlen;
    kp_err err = open_records(b, total, h, max_decompressed, &owned, &recs, &rlen, NULL);
    if (err != KP_ERR_NONE)
        return err;
    kp_record_iter it;
    kp_record r;
    kp_records_iter_init(&it, recs, rlen, h->records_count);
    while ((err = kp_records_next(&it, &r)) == KP_ERR_NONE)
        kp_batch_builder_add_record(bld, record_timestamp(h, &r), &r);
    free(owned);
    return err == KP_ERR__NOENT ? KP_ERR_NONE : KP_ERR__CORRUPT;
}

kp_err kp_recompress_batches(const uint8_t *p, size_t len, int codec, int32_t level,
                             size_t max_decompressed, uint8_t **out, size_t *out_len)
{
    kp_batch_builder bld;
    bool started = false;
    kp_err err = len > 0 ? KP_ERR_NONE : KP_ERR__INVAL;
    *out = NULL;
    *out_len = 0;
    for (size_t off = 0; err == KP_ERR_NONE && off < len;) {
        kp_batch_hdr h;
        if (kp_batch_check(p + off, len - off, &h) != KP_ERR_NONE) {
            err = KP_ERR__CORRUPT;
            break;
        }
        if (!started) {
            kp_batch_builder_init(&bld, h.base_offset,
                                  (int16_t)(h.attributes & KP_BATCH_ATTR_TRANSACTIONAL),
                                  h.producer_id, h.producer_epoch, h.base_sequence);
            started = true;
        }
        size_t total = (size_t)kp_batch_total_size(&h);
        err = append_records(&bld, p + off, total, &h, max_decompressed);
        off += total;
    }
    if (err == KP_ERR_NONE)
        err = kp_batch_builder_finish_codec(&bld, codec, level, out, out_len);
    if (started)
        kp_batch_builder_fini(&bld);
    return err;
}
