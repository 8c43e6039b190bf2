#include "kb_console_records.h"

#include <stdlib.h>
#include <unistd.h>

#include "kb_console_api.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"

/* A key, value or header value: null, or {"b64": ..., "text": bool}. */
static void bytes_field(kb_json *j, const char *key, kp_slice s)
{
    kb_json_key(j, key);
    if (s.len < 0) {
        kb_json_null(j);
        return;
    }
    kb_json_obj(j);
    kb_json_key(j, "b64");
    kb_json_b64(j, s.p, (size_t)s.len);
    kb_json_kbool(j, "text", kb_json_is_text(s.p, (size_t)s.len));
    kb_json_kint(j, "size", s.len);
    kb_json_obj_end(j);
}

static kp_err headers_field(kb_json *j, kp_record *rec)
{
    kp_record_header h;
    kp_err e;
    kb_json_key(j, "headers");
    kb_json_arr(j);
    while ((e = kp_record_header_next(rec, &h)) == KP_ERR_NONE) {
        kb_json_obj(j);
        kb_json_key(j, "key");
        kb_json_strn(j, h.key.p, (size_t)(h.key.len > 0 ? h.key.len : 0));
        bytes_field(j, "value", h.value);
        kb_json_obj_end(j);
    }
    kb_json_arr_end(j);
    return e == KP_ERR__NOENT ? KP_ERR_NONE : e;
}

typedef struct read_state {
    kb_json *j;
    int64_t from;   /* first offset wanted */
    int32_t left;   /* records still wanted */
    int64_t next;   /* offset after the last emitted or skipped record */
} read_state;

static kp_err emit_records(read_state *st, const kp_batch_hdr *h, const uint8_t *recs, size_t len)
{
    kp_record_iter it;
    kp_record rec;
    kp_err e;
    kp_records_iter_init(&it, recs, len, h->records_count);
    while (st->left > 0 && (e = kp_records_next(&it, &rec)) == KP_ERR_NONE) {
        int64_t off = h->base_offset + rec.offset_delta;
        if (off < st->from)
            continue;
        bool log_append = (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME) != 0;
        kb_json_obj(st->j);
        kb_json_kint(st->j, "offset", off);
        kb_json_kint(st->j, "timestamp", log_append ? h->max_timestamp : h->base_timestamp + rec.timestamp_delta);
        kb_json_kstr(st->j, "timestampType", log_append ? "LogAppendTime" : "CreateTime");
        bytes_field(st->j, "key", rec.key);
        bytes_field(st->j, "value", rec.value);
        e = headers_field(st->j, &rec);
        kb_json_obj_end(st->j);
        if (e != KP_ERR_NONE)
            return e;
        st->left--;
        st->next = off + 1;
    }
    return KP_ERR_NONE;
}

/* Past the whole batch, unless the record bound stopped inside it. */
static void move_past(read_state *st, const kp_batch_hdr *h)
{
    int64_t after = kp_batch_last_offset(h) + 1;
    if (st->left > 0 && st->next < after)
        st->next = after;
}

static kp_err emit_batch(read_state *st, const uint8_t *p, const kp_batch_hdr *h, size_t total)
{
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    const uint8_t *recs = p + KP_BATCH_HDR_SIZE;
    size_t len = total - KP_BATCH_HDR_SIZE;
    uint8_t *plain = NULL;
    kp_err e = KP_ERR_NONE;
    if (codec != KP_CODEC_NONE && !(h->attributes & KP_BATCH_ATTR_CONTROL)) {
        size_t plain_len;
        kp_errctx ctx = {0};
        e = kp_decompress((kp_codec)codec, recs, len, KB_CONSOLE_INFLATE_MAX, &plain, &plain_len, &ctx);
        if (e != KP_ERR_NONE)
            return e;
        recs = plain;
        len = plain_len;
    }
    if (!(h->attributes & KP_BATCH_ATTR_CONTROL))
        e = emit_records(st, h, recs, len);
    move_past(st, h);
    free(plain);
    return e;
}

static kp_err emit_batches(read_state *st, const uint8_t *buf, size_t len)
{
    size_t pos = 0;
    while (st->left > 0 && len - pos >= KP_BATCH_HDR_SIZE) {
        kp_batch_hdr h;
        kp_err e = kp_batch_hdr_parse(buf + pos, len - pos, &h);
        if (e != KP_ERR_NONE)
            return e == KP_ERR__UNDERFLOW ? KP_ERR_NONE : e; /* a batch cut by the read bound */
        int64_t total = kp_batch_total_size(&h);
        if (total > (int64_t)(len - pos))
            return KP_ERR_NONE;
        if ((e = emit_batch(st, buf + pos, &h, (size_t)total)) != KP_ERR_NONE)
            return e;
        pos += (size_t)total;
    }
    return KP_ERR_NONE;
}

static kp_err read_slice(ks_log *log, int64_t offset, uint8_t **buf, size_t *len)
{
    ks_log_slice s;
    kp_errctx ctx = {0};
    *buf = NULL;
    *len = 0;
    kp_err e = ks_log_read(log, offset, KB_CONSOLE_READ_MAX, ks_log_high_watermark(log), &s, &ctx);
    if (e != KP_ERR_NONE || s.range.len == 0)
        return e;
    size_t want = (size_t)s.range.len;
    if (want > KB_CONSOLE_READ_MAX)
        want = KB_CONSOLE_READ_MAX; /* one batch alone larger than the bound: cut */
    *buf = malloc(want);
    if (*buf == NULL) {
        ks_log_slice_release(&s);
        return KP_ERR__NOMEM;
    }
    ssize_t got = pread(s.range.fd, *buf, want, s.range.off);
    ks_log_slice_release(&s);
    if (got < 0) {
        free(*buf);
        *buf = NULL;
        return KP_ERR__IO;
    }
    *len = (size_t)got;
    return KP_ERR_NONE;
}

kp_err kb_console_records_read(ks_log *log, int64_t offset, int32_t max, kb_json *j)
{
    uint8_t *buf;
    size_t len;
    if (offset < ks_log_start_offset(log))
        offset = ks_log_start_offset(log);
    if (offset > ks_log_high_watermark(log))
        offset = ks_log_high_watermark(log);
    read_state st = {.j = j, .from = offset, .left = max, .next = offset};
    kp_err e = read_slice(log, offset, &buf, &len);
    kb_json_key(j, "records");
    kb_json_arr(j);
    if (e == KP_ERR_NONE)
        e = emit_batches(&st, buf, len);
    kb_json_arr_end(j);
    free(buf);
    kb_json_kint(j, "nextOffset", st.next);
    return e;
}
