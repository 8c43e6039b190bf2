#include "ks_recover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_crc32c.h"

#define SCAN_BUF_SIZE ((size_t)1 << 20)

void ks_recover_report_init(ks_recover_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->truncated_base = -1;
    rep->truncated_pos = -1;
}

static void note_reason(ks_recover_report *rep, const kp_errctx *bctx)
{
    if (rep->reason[0] == '\0')
        snprintf(rep->reason, sizeof(rep->reason), "%s", bctx->msg);
}

/* CRC-32C of the whole batch at pos, read in buffer-sized pieces. */
static kp_err check_crc(const ks_segment *seg, int64_t pos, const kp_batch_hdr *h, uint8_t *buf,
                        kp_errctx *ctx)
{
    int64_t total = kp_batch_total_size(h);
    int64_t done = 0;
    uint32_t crc = 0;
    while (done < total) {
        size_t n = (size_t)(total - done) < SCAN_BUF_SIZE ? (size_t)(total - done) : SCAN_BUF_SIZE;
        kp_err err = ks_io_read_all(&seg->io, seg->fd, buf, n, pos + done, ctx);
        if (err != KP_ERR_NONE)
            return err == KP_ERR__UNDERFLOW ? KP_ERR__CORRUPT : err;
        size_t skip = done == 0 ? KP_BATCH_CRC_START : 0;
        crc = kp_crc32c(crc, buf + skip, n - skip);
        done += (int64_t)n;
    }
    if (crc != h->crc)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s.log: CRC mismatch at %lld", seg->base_path,
                         (long long)pos);
    return KP_ERR_NONE;
}

/* Validates the batch at pos; KP_ERR__CORRUPT ends the valid prefix. */
static kp_err check_batch(const ks_segment *seg, int64_t pos, int64_t file_size,
                          int64_t min_offset, uint8_t *buf, kp_batch_hdr *h, kp_errctx *ctx)
{
    kp_err err = ks_segment_read_hdr(seg, pos, file_size, h, ctx);
    if (err != KP_ERR_NONE)
        return err;
    if (h->base_offset < min_offset || kp_batch_last_offset(h) - seg->base_offset > INT32_MAX)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s.log: offset %lld out of order at %lld",
                         seg->base_path, (long long)h->base_offset, (long long)pos);
    return buf != NULL ? check_crc(seg, pos, h, buf, ctx) : KP_ERR_NONE;
}

kp_err ks_recover_scan(ks_segment *seg, int64_t min_offset, bool crc, int64_t *valid_end,
                       ks_recover_report *rep, kp_errctx *ctx)
{
    int64_t file_size = 0;
    kp_err err = ks_io_fsize(&seg->io, seg->fd, &file_size, NULL, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_reset_indexes(seg, ctx);
    uint8_t *buf = crc ? malloc(SCAN_BUF_SIZE) : NULL;
    if (err == KP_ERR_NONE && crc && buf == NULL)
        err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "scan buffer");
    int64_t pos = 0;
    int64_t min = min_offset > seg->base_offset ? min_offset : seg->base_offset;
    while (err == KP_ERR_NONE && pos < file_size) {
        kp_batch_hdr h;
        kp_errctx bctx = {0};
        kp_err e = check_batch(seg, pos, file_size, min, buf, &h, &bctx);
        if (e == KP_ERR__CORRUPT) {
            note_reason(rep, &bctx);
            break;
        }
        if (e != KP_ERR_NONE) {
            err = e;
            if (ctx != NULL)
                *ctx = bctx;
            break;
        }
        ks_append_unit u;
        ks_append_unit_add(&u, &h, true);
        err = ks_segment_track(seg, pos, kp_batch_total_size(&h), &u, ctx);
        pos += kp_batch_total_size(&h);
        min = u.last_offset + 1;
    }
    free(buf);
    seg->indexes_loaded = err == KP_ERR_NONE;
    rep->segments_scanned++;
    rep->indexes_rebuilt++;
    *valid_end = pos;
    return err;
}

kp_err ks_recover_indexes(ks_segment *seg, ks_recover_report *rep, kp_errctx *ctx)
{
    kp_err err = ks_segment_load_indexes(seg, ctx);
    if (err != KP_ERR__CORRUPT)
        return err;
    int64_t end = 0;
    return ks_recover_scan(seg, seg->base_offset, false, &end, rep, ctx);
}

/* Clean shutdown: load the active segment's indexes and walk the headers
 * after the last index entry to find the log end. */
static kp_err recover_tail_clean(ks_segment *seg, kp_errctx *ctx)
{
    kp_err err = ks_segment_load_indexes(seg, ctx);
    return err == KP_ERR_NONE ? ks_segment_scan_tail(seg, ctx) : err;
}

/* Removes segs[from..*n) from disk and from the array. */
static void drop_from(ks_segment **segs, int32_t *n, int32_t from, ks_recover_report *rep)
{
    for (int32_t i = *n - 1; i >= from; i--) {
        rep->truncated_bytes += segs[i]->size;
        rep->segments_dropped++;
        (void)ks_segment_remove(segs[i], NULL);
        ks_segment_unref(segs[i]);
        segs[i] = NULL;
    }
    *n = from;
}

/* Scans segs[i]; on a bad tail truncates it and drops what follows.
 * Returns true when recovery is finished. */
static kp_err recover_one(ks_segment **segs, int32_t *n, int32_t i, ks_recover_report *rep,
                          bool *done, kp_errctx *ctx)
{
    ks_segment *seg = segs[i];
    int64_t min = i > 0 ? segs[i - 1]->next_offset : 0;
    int64_t file_size = 0, end = 0;
    kp_err err = ks_io_fsize(&seg->io, seg->fd, &file_size, NULL, ctx);
    if (err == KP_ERR_NONE)
        err = ks_recover_scan(seg, min, true, &end, rep, ctx);
    *done = false;
    if (err != KP_ERR_NONE || end == file_size)
        return err;
    err = ks_segment_truncate(seg, end, ctx);
    if (err != KP_ERR_NONE)
        return err;
    rep->truncated_base = seg->base_offset;
    rep->truncated_pos = end;
    rep->truncated_bytes += file_size - end;
    /* An emptied segment that is not the first would break invariant 1. */
    drop_from(segs, n, end == 0 && i > 0 ? i : i + 1, rep);
    *done = true;
    return KP_ERR_NONE;
}

/* Dropping segments may leave an unscanned segment active: load its
 * indexes and find its end, scanning it fully if its tail is bad. */
static kp_err ready_active(ks_segment **segs, int32_t *n, ks_recover_report *rep,
                           kp_errctx *ctx)
{
    ks_segment *last = segs[*n - 1];
    bool was_loaded = last->indexes_loaded;
    last->sealed = false;
    if (was_loaded)
        return KP_ERR_NONE;
    kp_err err = ks_recover_indexes(last, rep, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_scan_tail(last, ctx);
    if (err == KP_ERR__CORRUPT) {
        bool done;
        err = recover_one(segs, n, *n - 1, rep, &done, ctx);
    }
    return err;
}

static int32_t segment_holding(ks_segment *const *segs, int32_t n, int64_t offset)
{
    int32_t i = n - 1;
    while (i > 0 && segs[i]->base_offset > offset)
        i--;
    return i;
}

kp_err ks_recover_segments(ks_segment **segs, int32_t *n, int64_t recovery_point, bool clean,
                           ks_recover_report *rep, kp_errctx *ctx)
{
    for (int32_t i = 0; i + 1 < *n; i++) {
        segs[i]->sealed = true;
        segs[i]->next_offset = segs[i + 1]->base_offset;
    }
    int32_t start = segment_holding(segs, *n, recovery_point);
    if (clean) {
        kp_errctx bctx = {0};
        kp_err err = recover_tail_clean(segs[*n - 1], &bctx);
        if (err == KP_ERR_NONE)
            return KP_ERR_NONE;
        if (err != KP_ERR__CORRUPT)
            return ctx != NULL ? (*ctx = bctx, err) : err;
        note_reason(rep, &bctx);
        start = *n - 1;
    }
    bool done = false;
    for (int32_t i = start; i < *n && !done; i++) {
        kp_err err = recover_one(segs, n, i, rep, &done, ctx);
        if (err != KP_ERR_NONE)
            return err;
    }
    return ready_active(segs, n, rep, ctx);
}
