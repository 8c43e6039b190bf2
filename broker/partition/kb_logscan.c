#include "kb_logscan.h"

#include <stdlib.h>

#define SCAN_SLICE (64 * 1024 * 1024)

/* Walks one slice; *next gets the offset after its last batch. */
static kp_err scan_slice(const ks_io *io, const ks_log_slice *s, kb_scan_cb *cb, void *arg,
                         int64_t *next)
{
    int64_t pos = s->range.off, stop = s->range.off + s->range.len;
    while (pos + KP_BATCH_HDR_SIZE <= stop) {
        uint8_t raw[KP_BATCH_HDR_SIZE];
        kp_batch_hdr h;
        kp_err e = ks_io_read_all(io, s->range.fd, raw, sizeof(raw), pos, NULL);
        if (e == KP_ERR_NONE)
            e = kp_batch_hdr_parse(raw, sizeof(raw), &h);
        if (e == KP_ERR_NONE)
            e = cb(arg, &h, pos, s->range.fd);
        if (e != KP_ERR_NONE)
            return e;
        *next = kp_batch_last_offset(&h) + 1;
        pos += kp_batch_total_size(&h);
    }
    return KP_ERR_NONE;
}

/* Walks the batches from the one holding from up to end, in slices of
 * slice_bytes, at most max_slices of them (-1: no limit); *next gets the
 * offset after the last batch walked (from when none). */
static kp_err scan_range(const ks_io *io, ks_log *log, int64_t from, int64_t end,
                         int32_t slice_bytes, int max_slices, kb_scan_cb *cb, void *arg,
                         int64_t *next)
{
    int64_t off = from > ks_log_start_offset(log) ? from : ks_log_start_offset(log);
    kp_err e = KP_ERR_NONE;
    *next = off;
    for (int n = 0; off < end && e == KP_ERR_NONE && (max_slices < 0 || n < max_slices); n++) {
        ks_log_slice s;
        e = ks_log_read(log, off, slice_bytes, end, &s, NULL);
        if (e != KP_ERR_NONE || s.range.len == 0)
            break;
        int64_t after = off;
        e = scan_slice(io, &s, cb, arg, &after);
        ks_log_slice_release(&s);
        if (after <= off)
            break;
        off = *next = after;
    }
    return e;
}

kp_err kb_log_scan(const ks_io *io, ks_log *log, int64_t from, kb_scan_cb *cb, void *arg)
{
    int64_t next;
    return scan_range(io, log, from, ks_log_end_offset(log), SCAN_SLICE, -1, cb, arg, &next);
}

typedef struct batch_scan {
    const ks_io *io;
    size_t max_batch;
    kb_scan_batch_cb *cb;
    void *arg;
} batch_scan;

static kp_err read_whole(void *arg, const kp_batch_hdr *h, int64_t file_pos, int fd)
{
    const batch_scan *bs = arg;
    int64_t total = kp_batch_total_size(h);
    if (total < 0 || (uint64_t)total > bs->max_batch)
        return bs->cb(bs->arg, h, NULL, 0);
    uint8_t *buf = malloc((size_t)total);
    if (buf == NULL)
        return KP_ERR__NOMEM;
    kp_err e = ks_io_read_all(bs->io, fd, buf, (size_t)total, file_pos, NULL);
    if (e == KP_ERR_NONE && kp_batch_check(buf, (size_t)total, NULL) != KP_ERR_NONE)
        e = KP_ERR__CORRUPT;
    if (e == KP_ERR_NONE)
        e = bs->cb(bs->arg, h, buf, (size_t)total);
    free(buf);
    return e;
}

kp_err kb_log_scan_batches(const ks_io *io, ks_log *log, size_t max_batch, kb_scan_batch_cb *cb,
                           void *arg)
{
    batch_scan bs = {io, max_batch, cb, arg};
    return kb_log_scan(io, log, ks_log_start_offset(log), read_whole, &bs);
}

kp_err kb_log_scan_batches_step(const ks_io *io, ks_log *log, int64_t from, int64_t end,
                                int32_t step_bytes, size_t max_batch, kb_scan_batch_cb *cb,
                                void *arg, int64_t *next)
{
    batch_scan bs = {io, max_batch, cb, arg};
    return scan_range(io, log, from, end, step_bytes, 1, read_whole, &bs, next);
}

kp_err kb_batch_each_record(const kp_batch_hdr *h, const uint8_t *batch, size_t len,
                            kb_record_cb *cb, void *arg)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_record_iter it;
    kp_record rec;
    kp_err e;
    kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, len - KP_BATCH_HDR_SIZE,
                         h->records_count);
    while ((e = kp_records_next(&it, &rec)) == KP_ERR_NONE && (e = cb(arg, &rec, &a)) == KP_ERR_NONE)
        kp_arena_reset(&a);
    kp_arena_fini(&a);
    return e == KP_ERR__NOENT ? KP_ERR_NONE : e;
}
