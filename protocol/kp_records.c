#include "kp_records.h"

#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"
#include "kp_compress.h"

void kp_records_iter_init(kp_record_iter *it, const uint8_t *records, size_t len, int32_t count)
{
    it->r = kp_reader_make(records, len);
    it->left = count;
}

/* A varint-length-prefixed byte string; -1 is null. */
static kp_slice read_varbytes(kp_reader *r)
{
    int32_t n = kp_read_varint(r);
    if (n < -1) {
        kp_reader_fail(r, KP_ERR__CORRUPT);
        return (kp_slice){NULL, -1};
    }
    if (n == -1)
        return (kp_slice){NULL, -1};
    const uint8_t *p = kp_read_raw(r, (size_t)n);
    return p != NULL ? (kp_slice){p, n} : (kp_slice){NULL, -1};
}

kp_err kp_records_next(kp_record_iter *it, kp_record *out)
{
    if (it->left <= 0)
        return kp_reader_left(&it->r) == 0 ? KP_ERR__NOENT : KP_ERR__CORRUPT;
    int32_t len = kp_read_varint(&it->r);
    if (it->r.err != KP_ERR_NONE || len < 0 || (size_t)len > kp_reader_left(&it->r))
        return KP_ERR__CORRUPT;
    kp_reader rec = kp_reader_make(it->r.p, (size_t)len);
    it->r.p += len;
    it->left--;
    out->attributes = kp_read_i8(&rec);
    out->timestamp_delta = kp_read_varlong(&rec);
    out->offset_delta = kp_read_varint(&rec);
    out->key = read_varbytes(&rec);
    out->value = read_varbytes(&rec);
    out->header_count = kp_read_varint(&rec);
    if (rec.err != KP_ERR_NONE || out->header_count < 0 ||
        (size_t)out->header_count > kp_reader_left(&rec) / 2)
        return KP_ERR__CORRUPT;
    out->headers = rec;
    /* Walk the headers once so a bad one is caught here. */
    kp_record copy = *out;
    kp_record_header h;
    kp_err e;
    while ((e = kp_record_header_next(&copy, &h)) == KP_ERR_NONE)
        ;
    if (e != KP_ERR__NOENT || kp_reader_left(&copy.headers) != 0)
        return KP_ERR__CORRUPT;
    return KP_ERR_NONE;
}

kp_err kp_record_header_next(kp_record *rec, kp_record_header *out)
{
    if (rec->header_count <= 0)
        return KP_ERR__NOENT;
    rec->header_count--;
    out->key = read_varbytes(&rec->headers);
    out->value = read_varbytes(&rec->headers);
    if (rec->headers.err != KP_ERR_NONE || out->key.len < 0)
        return KP_ERR__CORRUPT;
    return KP_ERR_NONE;
}

/* ---- builder ------------------------------------------------------------ */

void kp_batch_builder_init(kp_batch_builder *b, int64_t base_offset, int16_t attributes,
                           int64_t producer_id, int16_t producer_epoch, int32_t base_sequence)
{
    memset(b, 0, sizeof(*b));
    kp_writer_init(&b->w, 256);
    kp_write_i64(&b->w, base_offset);
    kp_write_i32(&b->w, 0); /* batch length, patched */
    kp_write_i32(&b->w, 0); /* partition leader epoch */
    kp_write_i8(&b->w, KP_BATCH_MAGIC);
    kp_write_u32(&b->w, 0); /* crc, patched */
    kp_write_i16(&b->w, (int16_t)(attributes & ~KP_BATCH_ATTR_CODEC_MASK));
    kp_write_i32(&b->w, 0); /* last offset delta, patched */
    kp_write_i64(&b->w, 0); /* base timestamp, patched */
    kp_write_i64(&b->w, 0); /* max timestamp, patched */
    kp_write_i64(&b->w, producer_id);
    kp_write_i16(&b->w, producer_epoch);
    kp_write_i32(&b->w, base_sequence);
    kp_write_i32(&b->w, 0); /* record count, patched */
}

static void write_varbytes(kp_writer *w, kp_slice s)
{
    kp_write_varint(w, s.len < 0 ? -1 : s.len);
    if (s.len > 0)
        kp_write_raw(w, s.p, (size_t)s.len);
}

static size_t varbytes_size(kp_slice s)
{
    return kp_varint_size(s.len < 0 ? -1 : s.len) + (s.len > 0 ? (size_t)s.len : 0);
}

/* Writes a record's length, fixed fields, key, value and header count; the
 * caller then writes headers_size bytes of headers. */
static void begin_record(kp_batch_builder *b, int32_t off_delta, int64_t timestamp, kp_slice key,
                         kp_slice value, int32_t header_count, size_t headers_size)
{
    if (!b->started) {
        b->base_timestamp = timestamp;
        b->max_timestamp = timestamp;
        b->started = true;
    }
    if (timestamp > b->max_timestamp)
        b->max_timestamp = timestamp;
    int64_t ts_delta = (int64_t)((uint64_t)timestamp - (uint64_t)b->base_timestamp);
    size_t body = 1 + kp_varlong_size(ts_delta) + kp_varint_size(off_delta) +
                  varbytes_size(key) + varbytes_size(value) + kp_varint_size(header_count) +
                  headers_size;
    if (body > INT32_MAX) {
        b->w.err = KP_ERR__MALFORMED;
        return;
    }
    kp_write_varint(&b->w, (int32_t)body);
    kp_write_i8(&b->w, 0);
    kp_write_varlong(&b->w, ts_delta);
    kp_write_varint(&b->w, off_delta);
    write_varbytes(&b->w, key);
    write_varbytes(&b->w, value);
    kp_write_varint(&b->w, header_count);
    b->count++;
    b->last_delta = off_delta;
}

void kp_batch_builder_add(kp_batch_builder *b, int64_t timestamp, kp_slice key, kp_slice value,
                          const kp_record_header *headers, int32_t header_count)
{
    size_t headers_size = 0;
    for (int32_t i = 0; i < header_count; i++)
        headers_size += varbytes_size(headers[i].key) + varbytes_size(headers[i].value);
    begin_record(b, b->count, timestamp, key, value, header_count, headers_size);
    for (int32_t i = 0; i < header_count; i++) {
        write_varbytes(&b->w, headers[i].key);
        write_varbytes(&b->w, headers[i].value);
    }
}

void kp_batch_builder_add_record(kp_batch_builder *b, int64_t timestamp, const kp_record *rec)
{
    kp_batch_builder_add_record_at(b, b->count, timestamp, rec);
}

void kp_batch_builder_add_record_at(kp_batch_builder *b, int32_t offset_delta, int64_t timestamp,
                                    const kp_record *rec)
{
    size_t headers_size = kp_reader_left(&rec->headers);
    if (b->count > 0 && offset_delta <= b->last_delta) {
        b->w.err = KP_ERR__MALFORMED;
        return;
    }
    begin_record(b, offset_delta, timestamp, rec->key, rec->value, rec->header_count,
                 headers_size);
    if (headers_size > 0)
        kp_write_raw(&b->w, rec->headers.p, headers_size);
}

/* Fills the header fields known only at the end, and the CRC. */
static void seal_batch(const kp_batch_builder *b, uint8_t *p, size_t total)
{
    kp_be32_put(p + KP_BATCH_OFF_LENGTH, (int32_t)(total - KP_BATCH_LOG_OVERHEAD));
    kp_be32_put(p + KP_BATCH_OFF_LAST_DELTA, b->last_delta);
    kp_be64_put(p + KP_BATCH_OFF_BASE_TIMESTAMP, b->base_timestamp);
    kp_be64_put(p + KP_BATCH_OFF_MAX_TIMESTAMP, b->max_timestamp);
    kp_be32_put(p + KP_BATCH_HDR_SIZE - 4, b->count);
    kp_batch_crc_store(p, total);
}

static bool builder_ready(const kp_batch_builder *b)
{
    return b->w.err == KP_ERR_NONE && b->count > 0 && b->w.len - KP_BATCH_LOG_OVERHEAD <= INT32_MAX;
}

uint8_t *kp_batch_builder_finish(kp_batch_builder *b, size_t *len)
{
    if (!builder_ready(b))
        return NULL;
    seal_batch(b, b->w.buf, b->w.len);
    *len = b->w.len;
    return kp_writer_steal(&b->w);
}

kp_err kp_batch_builder_finish_codec(kp_batch_builder *b, int codec, int32_t level,
                                     uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (codec == KP_CODEC_NONE) {
        *out = kp_batch_builder_finish(b, len);
        return *out != NULL ? KP_ERR_NONE : KP_ERR__INVAL;
    }
    if (!builder_ready(b))
        return b->w.err != KP_ERR_NONE ? b->w.err : KP_ERR__INVAL;
    uint8_t *z;
    size_t zlen;
    kp_err err = kp_compress((kp_codec)codec, b->w.buf + KP_BATCH_HDR_SIZE,
                             b->w.len - KP_BATCH_HDR_SIZE, level, &z, &zlen, NULL);
    if (err != KP_ERR_NONE)
        return err;
    size_t total = KP_BATCH_HDR_SIZE + zlen;
    uint8_t *p = total - KP_BATCH_LOG_OVERHEAD <= INT32_MAX ? malloc(total) : NULL;
    if (p == NULL) {
        free(z);
        return KP_ERR__NOMEM;
    }
    memcpy(p, b->w.buf, KP_BATCH_HDR_SIZE);
    memcpy(p + KP_BATCH_HDR_SIZE, z, zlen);
    free(z);
    /* The codec sits in the low 3 bits of the big-endian attributes. */
    uint8_t *attr_lo = p + KP_BATCH_OFF_ATTRIBUTES + 1;
    *attr_lo = (uint8_t)((*attr_lo & ~KP_BATCH_ATTR_CODEC_MASK) | (codec & KP_BATCH_ATTR_CODEC_MASK));
    seal_batch(b, p, total);
    *out = p;
    *len = total;
    return KP_ERR_NONE;
}

void kp_batch_builder_fini(kp_batch_builder *b)
{
    kp_writer_fini(&b->w);
}
