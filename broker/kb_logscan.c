#include "kb_logscan.h"

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

kp_err kb_log_scan(const ks_io *io, ks_log *log, int64_t from, kb_scan_cb *cb, void *arg)
{
    int64_t off = from > ks_log_start_offset(log) ? from : ks_log_start_offset(log);
    int64_t end = ks_log_end_offset(log);
    kp_err e = KP_ERR_NONE;
    while (off < end && e == KP_ERR_NONE) {
        ks_log_slice s;
        e = ks_log_read(log, off, SCAN_SLICE, end, &s, NULL);
        if (e != KP_ERR_NONE || s.range.len == 0)
            break;
        int64_t next = off;
        e = scan_slice(io, &s, cb, arg, &next);
        ks_log_slice_release(&s);
        if (next <= off)
            break;
        off = next;
    }
    return e;
}
