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
    res->record_error_index = -1;
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

/* Per-record errors, which Kafka collects for the whole batch before failing. */
typedef struct record_errors {
    int32_t first_invalid; /* first INVALID_RECORD record, or -1 */
    int32_t first_timestamp; /* first INVALID_TIMESTAMP record, or -1 */
    char invalid_msg[96];
    char timestamp_msg[96];
} record_errors;

static void check_timestamp(const kp_batch_hdr *h, int64_t ts, int32_t i,
                            const kp_validate_opts *opts, record_errors *re)
{
    if (re->first_timestamp >= 0)
        return;
    if (!opts->log_append_time && ts != NO_TIMESTAMP) {
        /* Java long arithmetic: the differences wrap. */
        int64_t diff = (int64_t)((uint64_t)opts->now_ms - (uint64_t)ts);
        int64_t ahead = (int64_t)(0 - (uint64_t)diff);
        if (diff <= opts->timestamp_before_max_ms && ahead <= opts->timestamp_after_max_ms)
            return;
        snprintf(re->timestamp_msg, sizeof(re->timestamp_msg),
                 "Timestamp %lld of record %d is out of range", (long long)ts, i);
    } else if (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME) {
        snprintf(re->timestamp_msg, sizeof(re->timestamp_msg),
                 "Producer should not set timestamp type to LogAppendTime");
    } else {
        return;
    }
    re->first_timestamp = i;
}

static void check_record(const kp_batch_hdr *h, const kp_record *r, int32_t i,
                         const kp_validate_opts *opts, record_errors *re,
                         kp_validate_result *res)
{
    const char *invalid = NULL;
    if (r->offset_delta != i)
        invalid = "has an offset delta out of sequence";
    else if (opts->compacted && r->key.len < 0)
        invalid = "has no key; a compacted topic cannot accept it";
    if (invalid != NULL) {
        if (re->first_invalid < 0) {
            re->first_invalid = i;
            snprintf(re->invalid_msg, sizeof(re->invalid_msg), "Record %d %s", i, invalid);
        }
        return;
    }
    int64_t ts = record_timestamp(h, r);
    int32_t before = re->first_timestamp;
    check_timestamp(h, ts, i, opts, re);
    if (re->first_timestamp == before && ts > res->max_timestamp)
        res->max_timestamp = ts;
}

static kp_err walk_records(const uint8_t *recs, size_t rlen, const kp_batch_hdr *h,
                           const kp_validate_opts *opts, kp_validate_result *res)
{
    record_errors re = {-1, -1, "", ""};
    kp_record_iter it;
    kp_record r;
    kp_records_iter_init(&it, recs, rlen, h->records_count);
    for (int32_t i = 0; i < h->records_count; i++) {
        if (kp_records_next(&it, &r) != KP_ERR_NONE)
            return fail(res, KP_ERR_INVALID_RECORD,
                        "Found invalid record structure at record %d of %d", i,
                        h->records_count);
        check_record(h, &r, i, opts, &re, res);
    }
    if (kp_records_next(&it, &r) != KP_ERR__NOENT)
        return fail(res, KP_ERR_INVALID_RECORD,
                    "Incorrect declared batch size, records still remaining");
    if (re.first_timestamp >= 0) {
        res->record_error_index = re.first_timestamp;
        return fail(res, KP_ERR_INVALID_TIMESTAMP, "%s", re.timestamp_msg);
    }
    if (re.first_invalid >= 0) {
        res->record_error_index = re.first_invalid;
        return fail(res, KP_ERR_INVALID_RECORD, "%s", re.invalid_msg);
    }
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
