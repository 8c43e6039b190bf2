#include "kp_records.h"

#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"

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

void kp_batch_builder_add(kp_batch_builder *b, int64_t timestamp, kp_slice key, kp_slice value,
                          const kp_record_header *headers, int32_t header_count)
{
    if (!b->started) {
        b->base_timestamp = timestamp;
        b->max_timestamp = timestamp;
        b->started = true;
    }
    if (timestamp > b->max_timestamp)
        b->max_timestamp = timestamp;
    int64_t ts_delta = timestamp - b->base_timestamp;
    int32_t off_delta = b->count;
    size_t body = 1 + kp_varlong_size(ts_delta) + kp_varint_size(off_delta) +
                  varbytes_size(key) + varbytes_size(value) + kp_varint_size(header_count);
    for (int32_t i = 0; i < header_count; i++)
        body += varbytes_size(headers[i].key) + varbytes_size(headers[i].value);
    kp_write_varint(&b->w, (int32_t)body);
    kp_write_i8(&b->w, 0);
    kp_write_varlong(&b->w, ts_delta);
    kp_write_varint(&b->w, off_delta);
    write_varbytes(&b->w, key);
    write_varbytes(&b->w, value);
    kp_write_varint(&b->w, header_count);
    for (int32_t i = 0; i < header_count; i++) {
        write_varbytes(&b->w, headers[i].key);
        write_varbytes(&b->w, headers[i].value);
    }
    b->count++;
}

uint8_t *kp_batch_builder_finish(kp_batch_builder *b, size_t *len)
{
    if (b->w.err != KP_ERR_NONE || b->count == 0)
        return NULL;
    uint8_t *p = b->w.buf;
    kp_be32_put(p + KP_BATCH_OFF_LENGTH, (int32_t)(b->w.len - KP_BATCH_LOG_OVERHEAD));
    kp_be32_put(p + KP_BATCH_OFF_LAST_DELTA, b->count - 1);
    kp_be64_put(p + KP_BATCH_OFF_BASE_TIMESTAMP, b->base_timestamp);
    kp_be64_put(p + KP_BATCH_OFF_MAX_TIMESTAMP, b->max_timestamp);
    kp_be32_put(p + KP_BATCH_HDR_SIZE - 4, b->count);
    kp_batch_crc_store(p, b->w.len);
    *len = b->w.len;
    return kp_writer_steal(&b->w);
}

void kp_batch_builder_fini(kp_batch_builder *b)
{
    kp_writer_fini(&b->w);
}
