#include "ks_segment.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ext_log = ".log";
static const char *const ext_index = ".index";
static const char *const ext_time = ".timeindex";

/* rolling_ts of a segment opened from disk until its first batch is read. */
#define ROLLING_TS_UNREAD INT64_MIN

static const char *const suffix_names[] = {"", ".cleaned", ".swap", ".deleted"};
#define NSUFFIX ((int)(sizeof(suffix_names) / sizeof(suffix_names[0])))

const char *ks_segment_suffix_str(ks_segment_suffix suffix)
{
    return (int)suffix >= 0 && (int)suffix < NSUFFIX ? suffix_names[suffix] : "";
}

static void path_as(const ks_segment *seg, const char *ext, ks_segment_suffix suffix, char *buf,
                    size_t n)
{
    snprintf(buf, n, "%s%s%s", seg->base_path, ext, ks_segment_suffix_str(suffix));
}

static void file_path(const ks_segment *seg, const char *ext, char *buf, size_t n)
{
    path_as(seg, ext, seg->suffix, buf, n);
}

/* Parses the 20 leading digits of a segment file name. */
static bool parse_digits(const char *name, int64_t *base_offset)
{
    int64_t v = 0;
    for (int i = 0; i < KS_SEGMENT_NAME_DIGITS; i++) {
        if (name[i] < '0' || name[i] > '9')
            return false;
        if (v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (name[i] - '0');
    }
    *base_offset = v;
    return true;
}

bool ks_segment_parse_name(const char *name, int64_t *base_offset)
{
    int64_t v = 0;
    if (!parse_digits(name, &v) || strcmp(name + KS_SEGMENT_NAME_DIGITS, ext_log) != 0)
        return false;
    *base_offset = v;
    return true;
}

bool ks_segment_parse_file(const char *name, int64_t *base_offset, ks_segment_suffix *suffix,
                           bool *is_log)
{
    const char *const exts[] = {ext_log, ext_index, ext_time};
    if (!parse_digits(name, base_offset))
        return false;
    const char *rest = name + KS_SEGMENT_NAME_DIGITS;
    for (size_t e = 0; e < sizeof(exts) / sizeof(exts[0]); e++) {
        size_t n = strlen(exts[e]);
        if (strncmp(rest, exts[e], n) != 0)
            continue;
        for (int k = 0; k < NSUFFIX; k++) {
            if (strcmp(rest + n, suffix_names[k]) == 0) {
                *suffix = (ks_segment_suffix)k;
                *is_log = e == 0;
                return true;
            }
        }
    }
    return false;
}

void ks_append_unit_add(ks_append_unit *u, const kp_batch_hdr *h, bool first)
{
    int64_t last = kp_batch_last_offset(h);
    if (first) {
        u->first_offset = h->base_offset;
        u->first_batch_ts = h->max_timestamp;
        u->max_timestamp = -1;
        u->offset_of_max_ts = last;
    }
    u->last_offset = last;
    if (h->max_timestamp > u->max_timestamp) {
        u->max_timestamp = h->max_timestamp;
        u->offset_of_max_ts = last;
    }
}

static ks_segment *seg_alloc(const ks_io *io, const char *dir, int64_t base,
                             const ks_segment_opts *o)
{
    ks_segment *seg = calloc(1, sizeof(*seg));
    size_t n = strlen(dir) + KS_SEGMENT_NAME_DIGITS + 2;
    char *path = malloc(n);
    if (seg == NULL || path == NULL) {
        free(seg);
        free(path);
        return NULL;
    }
    snprintf(path, n, "%s/%020lld", dir, (long long)base);
    seg->io = *io;
    seg->base_path = path;
    seg->fd = -1;
    seg->base_offset = base;
    seg->next_offset = base;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = base;
    seg->rolling_ts = -1;
    seg->index_interval = o->index_interval_bytes;
    atomic_init(&seg->refs, 1);
    atomic_init(&seg->sync_failed, false);
    ks_index_init(&seg->oidx, KS_INDEX_OFFSET, o->max_index_entries);
    ks_index_init(&seg->tidx, KS_INDEX_TIME, o->max_time_entries);
    return seg;
}

static void seg_free(ks_segment *seg)
{
    ks_index_fini(&seg->oidx, &seg->io);
    ks_index_fini(&seg->tidx, &seg->io);
    ks_io_close(&seg->io, seg->fd);
    free(seg->base_path);
    free(seg);
}

/* Opens an index file; a missing one is created and flagged for rebuild. */
static kp_err open_index(ks_segment *seg, ks_index *ix, const char *ext, bool create,
                         kp_errctx *ctx)
{
    char path[PATH_MAX];
    file_path(seg, ext, path, sizeof(path));
    kp_err err = create ? KP_ERR__NOENT : ks_io_open(&seg->io, path, O_RDWR, &ix->fd, ctx);
    if (err == KP_ERR__NOENT) {
        seg->index_missing = !create;
        err = ks_index_open(ix, &seg->io, path, true, ctx);
    }
    return err;
}

static kp_err seg_open_files(ks_segment *seg, bool create, kp_errctx *ctx)
{
    char path[PATH_MAX];
    int flags = O_RDWR | (create ? O_CREAT | O_TRUNC : 0);
    file_path(seg, ext_log, path, sizeof(path));
    kp_err err = ks_io_open(&seg->io, path, flags, &seg->fd, ctx);
    if (err == KP_ERR_NONE)
        err = open_index(seg, &seg->oidx, ext_index, create, ctx);
    if (err == KP_ERR_NONE)
        err = open_index(seg, &seg->tidx, ext_time, create, ctx);
    return err;
}

kp_err ks_segment_create(const ks_io *io, const char *dir, int64_t base_offset,
                         const ks_segment_opts *o, int64_t now_ms, ks_segment **out,
                         kp_errctx *ctx)
{
    return ks_segment_create_as(io, dir, base_offset, o, KS_SUFFIX_NONE, now_ms, out, ctx);
}

kp_err ks_segment_create_as(const ks_io *io, const char *dir, int64_t base_offset,
                            const ks_segment_opts *o, ks_segment_suffix suffix, int64_t now_ms,
                            ks_segment **out, kp_errctx *ctx)
{
    ks_segment *seg = seg_alloc(io, dir, base_offset, o);
    if (seg == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "segment alloc");
    seg->suffix = suffix;
    kp_err err = seg_open_files(seg, true, ctx);
    if (err != KP_ERR_NONE) {
        seg_free(seg);
        return err;
    }
    seg->indexes_loaded = true;
    seg->created_ms = now_ms;
    seg->mtime_ms = now_ms;
    *out = seg;
    return KP_ERR_NONE;
}

kp_err ks_segment_open(const ks_io *io, const char *dir, int64_t base_offset,
                       const ks_segment_opts *o, int64_t now_ms, ks_segment **out,
                       kp_errctx *ctx)
{
    ks_segment *seg = seg_alloc(io, dir, base_offset, o);
    if (seg == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "segment alloc");
    kp_err err = seg_open_files(seg, false, ctx);
    if (err == KP_ERR_NONE)
        err = ks_io_fsize(io, seg->fd, &seg->size, &seg->mtime_ms, ctx);
    if (err != KP_ERR_NONE) {
        seg_free(seg);
        return err;
    }
    seg->rolling_ts = ROLLING_TS_UNREAD;
    seg->created_ms = now_ms;
    *out = seg;
    return KP_ERR_NONE;
}

kp_err ks_segment_load_indexes(ks_segment *seg, kp_errctx *ctx)
{
    /* The active segment's end is not known yet: any int32 offset goes. */
    int64_t span = seg->sealed ? seg->next_offset - seg->base_offset : (int64_t)INT32_MAX + 1;
    seg->bytes_since_index = 0;
    if (seg->index_missing)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s: index file missing", seg->base_path);
    kp_err err = ks_index_load(&seg->oidx, &seg->io, span, seg->size, ctx);
    if (err == KP_ERR_NONE)
        err = ks_index_load(&seg->tidx, &seg->io, INT64_MAX, span, ctx);
    if (err != KP_ERR_NONE)
        return err;
    const ks_index *t = &seg->tidx;
    if (t->n > 0 && t->keys[t->n - 1] > seg->max_timestamp) {
        seg->max_timestamp = t->keys[t->n - 1];
        seg->offset_of_max_ts = seg->base_offset + t->vals[t->n - 1];
    }
    seg->indexes_loaded = true;
    return KP_ERR_NONE;
}

kp_err ks_segment_reset_indexes(ks_segment *seg, kp_errctx *ctx)
{
    seg->indexes_loaded = false;
    seg->index_missing = false;
    kp_err err = ks_index_truncate(&seg->oidx, &seg->io, 0, ctx);
    if (err == KP_ERR_NONE)
        err = ks_index_truncate(&seg->tidx, &seg->io, 0, ctx);
    seg->size = 0;
    seg->next_offset = seg->base_offset;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = seg->base_offset;
    seg->bytes_since_index = 0;
    seg->rolling_ts = -1;
    return err;
}

static kp_err maybe_index(ks_segment *seg, int64_t pos, const ks_append_unit *u, kp_errctx *ctx)
{
    if (seg->bytes_since_index <= seg->index_interval)
        return KP_ERR_NONE;
    kp_err err = ks_index_append(&seg->oidx, &seg->io, u->last_offset - seg->base_offset,
                                 (int32_t)pos, ctx);
    const ks_index *t = &seg->tidx;
    if (err == KP_ERR_NONE && (t->n == 0 || seg->max_timestamp > t->keys[t->n - 1]))
        err = ks_index_append(&seg->tidx, &seg->io, seg->max_timestamp,
                              (int32_t)(seg->offset_of_max_ts - seg->base_offset), ctx);
    if (err == KP_ERR_NONE)
        seg->bytes_since_index = 0;
    return err;
}

kp_err ks_segment_track(ks_segment *seg, int64_t pos, int64_t len, const ks_append_unit *u,
                        kp_errctx *ctx)
{
    if (seg->size == 0)
        seg->rolling_ts = u->first_batch_ts >= 0 ? u->first_batch_ts : -1;
    if (u->max_timestamp > seg->max_timestamp) {
        seg->max_timestamp = u->max_timestamp;
        seg->offset_of_max_ts = u->offset_of_max_ts;
    }
    kp_err err = maybe_index(seg, pos, u, ctx);
    if (err != KP_ERR_NONE)
        return err;
    seg->bytes_since_index += (int32_t)len;
    seg->size = pos + len;
    seg->next_offset = u->last_offset + 1;
    return KP_ERR_NONE;
}

kp_err ks_segment_append(ks_segment *seg, const uint8_t *buf, size_t len,
                         const ks_append_unit *u, int64_t now_ms, kp_errctx *ctx)
{
    int64_t pos = seg->size;
    int32_t oidx_n = seg->oidx.n, tidx_n = seg->tidx.n, since = seg->bytes_since_index;
    int64_t max_ts = seg->max_timestamp, max_off = seg->offset_of_max_ts, roll = seg->rolling_ts;
    kp_err err = ks_io_write_all(&seg->io, seg->fd, buf, len, pos, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_track(seg, pos, (int64_t)len, u, ctx);
    if (err == KP_ERR_NONE) {
        seg->mtime_ms = now_ms;
        return KP_ERR_NONE;
    }
    /* Invariant 4: undo everything the failed append touched. */
    (void)ks_io_ftruncate(&seg->io, seg->fd, pos, NULL);
    (void)ks_index_truncate(&seg->oidx, &seg->io, oidx_n, NULL);
    (void)ks_index_truncate(&seg->tidx, &seg->io, tidx_n, NULL);
    seg->size = pos;
    seg->bytes_since_index = since;
    seg->max_timestamp = max_ts;
    seg->offset_of_max_ts = max_off;
    seg->rolling_ts = roll;
    return err;
}

kp_err ks_segment_read_hdr(const ks_segment *seg, int64_t pos, int64_t limit, kp_batch_hdr *h,
                           kp_errctx *ctx)
{
    uint8_t buf[KP_BATCH_HDR_SIZE];
    if (pos + KP_BATCH_HDR_SIZE > limit)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s.log: header at %lld past %lld",
                         seg->base_path, (long long)pos, (long long)limit);
    kp_err err = ks_io_read_all(&seg->io, seg->fd, buf, sizeof(buf), pos, ctx);
    if (err == KP_ERR__UNDERFLOW)
        err = KP_ERR__CORRUPT;
    if (err == KP_ERR_NONE)
        err = kp_batch_hdr_parse(buf, sizeof(buf), h);
    if (err == KP_ERR_NONE && pos + kp_batch_total_size(h) > limit)
        err = KP_ERR__CORRUPT;
    if (err != KP_ERR_NONE && err != KP_ERR__IO)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s.log: bad batch at %lld", seg->base_path,
                         (long long)pos);
    return err;
}

int64_t ks_segment_rolling_ts(ks_segment *seg)
{
    if (seg->rolling_ts == ROLLING_TS_UNREAD) {
        kp_batch_hdr h;
        bool read =
            seg->size > 0 && ks_segment_read_hdr(seg, 0, seg->size, &h, NULL) == KP_ERR_NONE;
        seg->rolling_ts = read && h.max_timestamp >= 0 ? h.max_timestamp : -1;
    }
    return seg->rolling_ts;
}

/* Walks batches from pos until pred says stop; *pos is then that batch. */
typedef bool batch_pred(const kp_batch_hdr *h, int64_t key);

static kp_err walk(const ks_segment *seg, int64_t *pos, batch_pred *stop, int64_t key,
                   kp_batch_hdr *h, kp_errctx *ctx)
{
    int64_t p = *pos;
    while (p < seg->size) {
        kp_err err = ks_segment_read_hdr(seg, p, seg->size, h, ctx);
        if (err != KP_ERR_NONE)
            return err;
        if (stop(h, key)) {
            *pos = p;
            return KP_ERR_NONE;
        }
        p += kp_batch_total_size(h);
    }
    return KP_ERR__NOENT;
}

static bool holds_offset(const kp_batch_hdr *h, int64_t offset)
{
    return kp_batch_last_offset(h) >= offset;
}

static bool reaches_time(const kp_batch_hdr *h, int64_t ts)
{
    return h->max_timestamp >= ts;
}

static int64_t position_for(const ks_segment *seg, int64_t offset)
{
    int32_t i = ks_index_floor_key(&seg->oidx, offset - seg->base_offset, false);
    return i >= 0 ? seg->oidx.vals[i] : 0;
}

kp_err ks_segment_find(const ks_segment *seg, int64_t offset, int64_t *pos, kp_batch_hdr *h,
                       kp_errctx *ctx)
{
    if (offset >= seg->next_offset)
        return KP_ERR__NOENT;
    *pos = position_for(seg, offset);
    return walk(seg, pos, holds_offset, offset, h, ctx);
}

kp_err ks_segment_find_time(const ks_segment *seg, int64_t ts, int64_t *pos, kp_batch_hdr *h,
                            kp_errctx *ctx)
{
    int32_t i = ks_index_floor_key(&seg->tidx, ts, true);
    int64_t from = i >= 0 ? seg->base_offset + seg->tidx.vals[i] : seg->base_offset;
    *pos = position_for(seg, from);
    return walk(seg, pos, reaches_time, ts, h, ctx);
}

kp_err ks_segment_slice_end(const ks_segment *seg, int64_t start, int64_t max_bytes,
                            int64_t max_offset, int64_t *end, kp_errctx *ctx)
{
    int64_t limit = seg->size;
    kp_batch_hdr h;
    if (max_offset < seg->next_offset) {
        kp_err err = ks_segment_find(seg, max_offset, &limit, &h, ctx);
        if (err != KP_ERR_NONE)
            return err;
    }
    if (limit - start <= max_bytes) {
        *end = limit > start ? limit : start;
        return KP_ERR_NONE;
    }
    int64_t budget_end = start + max_bytes;
    int64_t p = start;
    int32_t i = ks_index_floor_val(&seg->oidx, budget_end);
    if (i >= 0 && seg->oidx.vals[i] > start)
        p = seg->oidx.vals[i];
    while (p < limit) {
        kp_err err = ks_segment_read_hdr(seg, p, limit, &h, ctx);
        if (err != KP_ERR_NONE)
            return err;
        int64_t e = p + kp_batch_total_size(&h);
        if (e > budget_end && p > start)
            break;
        p = e;
        if (e > budget_end)
            break;
    }
    *end = p;
    return KP_ERR_NONE;
}

kp_err ks_segment_scan_tail(ks_segment *seg, kp_errctx *ctx)
{
    const ks_index *ix = &seg->oidx;
    int64_t from = ix->n > 0 ? ix->vals[ix->n - 1] : 0;
    if (ix->n == 0)
        seg->next_offset = seg->base_offset;
    for (int64_t pos = from; pos < seg->size;) {
        kp_batch_hdr h;
        kp_err err = ks_segment_read_hdr(seg, pos, seg->size, &h, ctx);
        if (err != KP_ERR_NONE)
            return err;
        seg->next_offset = kp_batch_last_offset(&h) + 1;
        if (h.max_timestamp > seg->max_timestamp) {
            seg->max_timestamp = h.max_timestamp;
            seg->offset_of_max_ts = seg->next_offset - 1;
        }
        pos += kp_batch_total_size(&h);
    }
    seg->bytes_since_index = (int32_t)(seg->size - from);
    return KP_ERR_NONE;
}

kp_err ks_segment_truncate(ks_segment *seg, int64_t pos, kp_errctx *ctx)
{
    kp_err err = ks_io_ftruncate(&seg->io, seg->fd, pos, ctx);
    if (err == KP_ERR_NONE)
        err = ks_index_truncate(&seg->oidx, &seg->io, ks_index_count_below_val(&seg->oidx, pos),
                                ctx);
    if (err != KP_ERR_NONE)
        return err;
    seg->size = pos;
    seg->flushed_size = seg->flushed_size < pos ? seg->flushed_size : pos;
    seg->max_timestamp = -1;
    seg->offset_of_max_ts = seg->base_offset;
    err = ks_segment_scan_tail(seg, ctx);
    const ks_index *t = &seg->tidx;
    int32_t tkeep = ks_index_count_below_val(t, seg->next_offset - seg->base_offset);
    if (err == KP_ERR_NONE)
        err = ks_index_truncate(&seg->tidx, &seg->io, tkeep, ctx);
    if (err == KP_ERR_NONE && t->n > 0 && t->keys[t->n - 1] > seg->max_timestamp) {
        seg->max_timestamp = t->keys[t->n - 1];
        seg->offset_of_max_ts = seg->base_offset + t->vals[t->n - 1];
    }
    return err;
}

kp_err ks_segment_seal(ks_segment *seg, kp_errctx *ctx)
{
    const ks_index *t = &seg->tidx;
    seg->sealed = true;
    if (seg->max_timestamp < 0 || (t->n > 0 && seg->max_timestamp <= t->keys[t->n - 1]))
        return KP_ERR_NONE;
    return ks_index_append(&seg->tidx, &seg->io, seg->max_timestamp,
                           (int32_t)(seg->offset_of_max_ts - seg->base_offset), ctx);
}

kp_err ks_segment_sync(ks_segment *seg, bool with_indexes, kp_errctx *ctx)
{
    if (atomic_load(&seg->sync_failed))
        return KP_ERRCTX(ctx, KP_ERR__IO, 0, "%s.log: an earlier fdatasync failed",
                         seg->base_path);
    kp_err err = ks_io_fdatasync(&seg->io, seg->fd, ctx);
    if (err == KP_ERR_NONE && with_indexes)
        err = ks_index_sync(&seg->oidx, &seg->io, ctx);
    if (err == KP_ERR_NONE && with_indexes)
        err = ks_index_sync(&seg->tidx, &seg->io, ctx);
    if (err != KP_ERR_NONE)
        atomic_store(&seg->sync_failed, true);
    return err;
}

kp_err ks_segment_rename(ks_segment *seg, ks_segment_suffix suffix, kp_errctx *ctx)
{
    const char *const exts[] = {ext_index, ext_time, ext_log}; /* .log last */
    const size_t n = sizeof(exts) / sizeof(exts[0]);
    kp_err err = KP_ERR_NONE;
    size_t done = 0;
    for (; err == KP_ERR_NONE && done < n; done++) {
        char from[PATH_MAX], to[PATH_MAX];
        file_path(seg, exts[done], from, sizeof(from));
        path_as(seg, exts[done], suffix, to, sizeof(to));
        err = ks_io_rename(&seg->io, from, to, ctx);
    }
    if (err == KP_ERR_NONE) {
        seg->suffix = suffix;
        return KP_ERR_NONE;
    }
    for (size_t i = done - 1; i-- > 0;) { /* undo the renames that succeeded */
        char from[PATH_MAX], to[PATH_MAX];
        path_as(seg, exts[i], suffix, from, sizeof(from));
        file_path(seg, exts[i], to, sizeof(to));
        (void)ks_io_rename(&seg->io, from, to, NULL);
    }
    return err;
}

kp_err ks_segment_remove(ks_segment *seg, kp_errctx *ctx)
{
    const char *const exts[] = {ext_log, ext_index, ext_time};
    kp_err first = KP_ERR_NONE;
    if (seg->removed)
        return KP_ERR_NONE; /* the names may belong to a newer segment now */
    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        char path[PATH_MAX];
        file_path(seg, exts[i], path, sizeof(path));
        kp_err err = ks_io_unlink(&seg->io, path, ctx);
        if (first == KP_ERR_NONE)
            first = err;
    }
    seg->removed = true;
    return first;
}

ks_segment *ks_segment_ref(ks_segment *seg)
{
    atomic_fetch_add(&seg->refs, 1);
    return seg;
}

void ks_segment_unref(ks_segment *seg)
{
    if (seg != NULL && atomic_fetch_sub(&seg->refs, 1) == 1)
        seg_free(seg);
}
