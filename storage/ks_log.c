#include "ks_log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_compact.h"
#include "ks_epoch_cache.h"

struct ks_log {
    ks_io io;
    ks_log_config cfg;
    char *dir;             /* <log dir>/<topic>-<partition> */
    char *topic;
    int32_t partition;
    ks_segment **segs;     /* sorted by base offset; last one is active */
    int32_t nsegs;
    int32_t cap;
    int64_t log_start;
    int64_t hw;
    int64_t recovery_point;
    int64_t appended_msgs; /* messages appended since open */
    int64_t flushed_msgs;  /* of those, known durable */
    int64_t last_flush_ms;
    int64_t truncations;   /* bumped by truncate: stale flushes ignored */
    int32_t pending_flushes;
    int64_t cleaner_offset; /* first offset the cleaner has not seen, -1 */
    bool dir_dirty;        /* a segment file was created since the last flush */
    bool replicated;       /* the HW is set by replication, never by appends */
    kp_err failed;         /* invariant 5 */
    ks_epoch_cache epochs; /* leader epochs, kept in leader-epoch-checkpoint */
};

/* ---- config ------------------------------------------------------------ */

void ks_log_config_default(ks_log_config *cfg)
{
    cfg->segment_bytes = 1073741824;
    cfg->segment_ms = 604800000;
    cfg->index_interval_bytes = 4096;
    cfg->segment_index_bytes = 10485760;
    cfg->retention_ms = 604800000;
    cfg->retention_bytes = -1;
    cfg->flush_messages = INT64_MAX;
    cfg->flush_ms = INT64_MAX;
    cfg->message_timestamp_type = KS_TS_CREATE_TIME;
}

kp_err ks_log_config_check(const ks_log_config *cfg, kp_errctx *ctx)
{
    if (cfg->segment_bytes < KP_BATCH_HDR_SIZE || cfg->segment_bytes > INT32_MAX)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "segment.bytes %lld", (long long)cfg->segment_bytes);
    if (cfg->segment_ms <= 0 || cfg->index_interval_bytes < 0 || cfg->flush_messages <= 0 ||
        cfg->flush_ms < 0)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "segment.ms, index.interval.bytes or flush.*");
    if (cfg->segment_index_bytes < KS_INDEX_TIME_ENTRY)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "segment.index.bytes %d", cfg->segment_index_bytes);
    if (cfg->message_timestamp_type != KS_TS_CREATE_TIME &&
        cfg->message_timestamp_type != KS_TS_LOG_APPEND_TIME)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "message.timestamp.type");
    return KP_ERR_NONE;
}

static ks_segment_opts seg_opts(const ks_log *log)
{
    ks_segment_opts o = {
        .index_interval_bytes = log->cfg.index_interval_bytes,
        .max_index_entries = log->cfg.segment_index_bytes / KS_INDEX_OFFSET_ENTRY,
        .max_time_entries = log->cfg.segment_index_bytes / KS_INDEX_TIME_ENTRY,
    };
    return o;
}

const ks_log_config *ks_log_config_of(const ks_log *log)
{
    return &log->cfg;
}

kp_err ks_log_set_config(ks_log *log, const ks_log_config *cfg, kp_errctx *ctx)
{
    kp_err err = ks_log_config_check(cfg, ctx);
    if (err == KP_ERR_NONE)
        log->cfg = *cfg;
    return err;
}

/* ---- segment list ------------------------------------------------------- */

static ks_segment *active(const ks_log *log)
{
    return log->segs[log->nsegs - 1];
}

static kp_err push_seg(ks_log *log, ks_segment *seg)
{
    if (log->nsegs == log->cap) {
        int32_t cap = log->cap > 0 ? log->cap * 2 : 8;
        ks_segment **s = realloc(log->segs, (size_t)cap * sizeof(*s));
        if (s == NULL)
            return KP_ERR__NOMEM;
        log->segs = s;
        log->cap = cap;
    }
    log->segs[log->nsegs++] = seg;
    return KP_ERR_NONE;
}

/* Removes segments [keep, nsegs) from disk and the list. */
static void drop_tail(ks_log *log, int32_t keep)
{
    while (log->nsegs > keep) {
        ks_segment *seg = log->segs[--log->nsegs];
        (void)ks_segment_remove(seg, NULL);
        ks_segment_unref(seg);
    }
}

/* Index of the last segment whose base offset <= offset (0 if none). */
static int32_t seg_index_for(const ks_log *log, int64_t offset)
{
    int32_t lo = 0, hi = log->nsegs;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base_offset <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 ? lo - 1 : 0;
}

/* Loads a sealed segment's indexes on first use (rebuilding when bad). */
int64_t ks_log_time_near(const ks_log *log, int64_t offset)
{
    if (log->nsegs == 0 || offset < log->log_start || offset >= ks_log_end_offset(log))
        return -1;
    const ks_segment *seg = log->segs[seg_index_for(log, offset)];
    if (seg->indexes_loaded) {
        int32_t j = ks_index_floor_val(&seg->tidx, offset - seg->base_offset - 1) + 1;
        if (j < seg->tidx.n)
            return seg->tidx.keys[j];
    }
    if (offset == seg->base_offset && seg->rolling_ts >= 0)
        return seg->rolling_ts;
    return seg->max_timestamp;
}

static kp_err ready(ks_segment *seg, kp_errctx *ctx)
{
    ks_recover_report rep;
    if (seg->indexes_loaded)
        return KP_ERR_NONE;
    ks_recover_report_init(&rep);
    return ks_recover_indexes(seg, &rep, ctx);
}

int32_t ks_log_segment_count(const ks_log *log)
{
    return log->nsegs;
}

kp_err ks_log_segment_at(ks_log *log, int32_t i, ks_segment **seg, kp_errctx *ctx)
{
    if (i < 0 || i >= log->nsegs)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "segment %d of %d", i, log->nsegs);
    *seg = log->segs[i];
    return ready(*seg, ctx);
}

void ks_log_segment_opts(const ks_log *log, ks_segment_opts *o)
{
    *o = seg_opts(log);
}

int32_t ks_log_segment_find(const ks_log *log, const ks_segment *seg)
{
    for (int32_t i = 0; i < log->nsegs; i++)
        if (log->segs[i] == seg)
            return i;
    return -1;
}

kp_err ks_log_replace_segments(ks_log *log, int32_t first, int32_t n, ks_segment *seg,
                               ks_segment **old, kp_errctx *ctx)
{
    if (first < 0 || n < 1 || first + n >= log->nsegs ||
        seg->base_offset != log->segs[first]->base_offset ||
        seg->next_offset > log->segs[first + n]->base_offset)
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "%s: replacing segments %d+%d of %d", log->dir,
                         first, n, log->nsegs);
    memcpy(old, log->segs + first, (size_t)n * sizeof(*old));
    log->segs[first] = seg;
    memmove(log->segs + first + 1, log->segs + first + n,
            (size_t)(log->nsegs - first - n) * sizeof(*old));
    log->nsegs -= n - 1;
    log->dir_dirty = true;
    return KP_ERR_NONE;
}

int64_t ks_log_truncation_count(const ks_log *log)
{
    return log->truncations;
}

int64_t ks_log_cleaner_offset(const ks_log *log)
{
    return log->cleaner_offset;
}

void ks_log_set_cleaner_offset(ks_log *log, int64_t offset)
{
    log->cleaner_offset = offset;
}

static void epochs_start_moved(ks_log *log);

int32_t ks_log_detach_oldest(ks_log *log, int32_t n, ks_segment **out)
{
    if (n > log->nsegs - 1)
        n = log->nsegs - 1;
    if (n <= 0)
        return 0;
    memcpy(out, log->segs, (size_t)n * sizeof(*out));
    memmove(log->segs, log->segs + n, (size_t)(log->nsegs - n) * sizeof(*out));
    log->nsegs -= n;
    if (log->segs[0]->base_offset > log->log_start) {
        log->log_start = log->segs[0]->base_offset;
        epochs_start_moved(log);
    }
    if (log->hw < log->log_start)
        log->hw = log->log_start;
    return n;
}

/* ---- open / close ------------------------------------------------------- */

typedef struct base_list {
    int64_t *v;
    int32_t n;
    int32_t cap;
    bool nomem;
} base_list;

static void collect_base(void *arg, const char *name)
{
    base_list *l = arg;
    int64_t base;
    if (!ks_segment_parse_name(name, &base))
        return;
    if (l->n == l->cap) {
        int32_t cap = l->cap > 0 ? l->cap * 2 : 16;
        int64_t *v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            l->nomem = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = base;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static kp_err load_segments(ks_log *log, int64_t now_ms, kp_errctx *ctx)
{
    base_list l = {0};
    kp_err err = ks_io_list_dir(&log->io, log->dir, collect_base, &l, ctx);
    if (err == KP_ERR_NONE && l.nomem)
        err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "listing %s", log->dir);
    if (err == KP_ERR_NONE && l.n > 0)
        qsort(l.v, (size_t)l.n, sizeof(*l.v), cmp_i64);
    ks_segment_opts o = seg_opts(log);
    for (int32_t i = 0; err == KP_ERR_NONE && i < l.n; i++) {
        ks_segment *seg = NULL;
        err = ks_segment_open(&log->io, log->dir, l.v[i], &o, now_ms, &seg, ctx);
        if (err == KP_ERR_NONE && push_seg(log, seg) != KP_ERR_NONE) {
            ks_segment_unref(seg);
            err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "segment list");
        }
    }
    free(l.v);
    return err;
}

static kp_err new_segment(ks_log *log, int64_t base, int64_t now_ms, kp_errctx *ctx)
{
    ks_segment_opts o = seg_opts(log);
    ks_segment *seg = NULL;
    kp_err err = ks_segment_create(&log->io, log->dir, base, &o, now_ms, &seg, ctx);
    if (err != KP_ERR_NONE)
        return err;
    if (push_seg(log, seg) != KP_ERR_NONE) {
        (void)ks_segment_remove(seg, NULL);
        ks_segment_unref(seg);
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "segment list");
    }
    log->dir_dirty = true;
    return KP_ERR_NONE;
}

static void log_free(ks_log *log)
{
    for (int32_t i = 0; i < log->nsegs; i++)
        ks_segment_unref(log->segs[i]);
    free(log->segs);
    ks_epoch_cache_fini(&log->epochs);
    free(log->dir);
    free(log->topic);
    free(log);
}

static ks_log *log_alloc(const ks_io *io, const char *log_dir, const char *topic,
                         int32_t partition, const ks_log_config *cfg)
{
    ks_log *log = calloc(1, sizeof(*log));
    size_t n = strlen(log_dir) + strlen(topic) + 16;
    char *dir = malloc(n);
    char *t = strdup(topic);
    if (log == NULL || dir == NULL || t == NULL) {
        free(log);
        free(dir);
        free(t);
        return NULL;
    }
    snprintf(dir, n, "%s/%s-%d", log_dir, topic, (int)partition);
    log->io = *io;
    log->cfg = *cfg;
    log->dir = dir;
    log->topic = t;
    log->partition = partition;
    log->cleaner_offset = -1;
    return log;
}

/* ---- leader epochs ------------------------------------------------------ */

/* Writes the checkpoint after a change; a failed write poisons the log as
 * a failed fdatasync does (the file no longer tells the log's epochs). */
static kp_err epochs_changed(ks_log *log, bool changed, kp_errctx *ctx)
{
    if (!changed)
        return KP_ERR_NONE;
    kp_err err = ks_epoch_cache_write(&log->epochs, &log->io, log->dir, ctx);
    if (err != KP_ERR_NONE)
        log->failed = KP_ERR__IO;
    return err;
}

/* The cache from every batch header, when the checkpoint is missing or bad. */
static kp_err epochs_rebuild(ks_log *log, kp_errctx *ctx)
{
    ks_epoch_cache_clear(&log->epochs);
    for (int32_t i = 0; i < log->nsegs; i++) {
        ks_segment *seg = log->segs[i];
        for (int64_t pos = 0; pos < seg->size;) {
            kp_batch_hdr h;
            bool changed;
            kp_err err = ks_segment_read_hdr(seg, pos, seg->size, &h, ctx);
            if (err != KP_ERR_NONE)
                return err;
            if (h.partition_leader_epoch >= 0)
                (void)ks_epoch_cache_assign(&log->epochs, h.partition_leader_epoch,
                                            h.base_offset, &changed);
            pos += kp_batch_total_size(&h);
        }
    }
    return ks_epoch_cache_write(&log->epochs, &log->io, log->dir, ctx);
}

/* At open: the checkpoint, or the batches; then the log's bounds. */
static kp_err epochs_load(ks_log *log, kp_errctx *ctx)
{
    kp_err err = ks_epoch_cache_read(&log->epochs, &log->io, log->dir, NULL);
    if (err != KP_ERR_NONE)
        return epochs_rebuild(log, ctx);
    bool changed = ks_epoch_cache_truncate_end(&log->epochs, ks_log_end_offset(log));
    changed |= ks_epoch_cache_truncate_start(&log->epochs, log->log_start);
    return epochs_changed(log, changed, ctx);
}

/* Each batch's epoch from its base offset (before it is written). */
static kp_err epochs_assign_batches(ks_log *log, const uint8_t *buf, size_t len, kp_errctx *ctx)
{
    bool changed = false;
    for (size_t pos = 0; pos < len;) {
        kp_batch_hdr h;
        bool c = false;
        (void)kp_batch_hdr_parse(buf + pos, len - pos, &h);
        if (h.partition_leader_epoch >= 0 &&
            ks_epoch_cache_assign(&log->epochs, h.partition_leader_epoch, h.base_offset, &c) !=
                KP_ERR_NONE)
            return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "epoch cache");
        changed |= c;
        pos += (size_t)kp_batch_total_size(&h);
    }
    return epochs_changed(log, changed, ctx);
}

kp_err ks_log_assign_epoch(ks_log *log, int32_t epoch, int64_t start, kp_errctx *ctx)
{
    bool changed = false;
    if (ks_epoch_cache_assign(&log->epochs, epoch, start, &changed) == KP_ERR__NOMEM)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "epoch cache");
    return epochs_changed(log, changed, ctx);
}

int32_t ks_log_latest_epoch(const ks_log *log)
{
    return ks_epoch_cache_latest(&log->epochs);
}

void ks_log_epoch_end_offset(const ks_log *log, int32_t epoch, int32_t *out_epoch,
                             int64_t *out_end)
{
    ks_epoch_cache_end_offset(&log->epochs, epoch, ks_log_end_offset(log), out_epoch, out_end);
}

const ks_epoch_cache *ks_log_epochs(const ks_log *log)
{
    return &log->epochs;
}

/* The log start moved up: entries below it go. */
static void epochs_start_moved(ks_log *log)
{
    (void)epochs_changed(log, ks_epoch_cache_truncate_start(&log->epochs, log->log_start), NULL);
}

/* Sets offsets after recovery; segments below the recovery point count as
 * flushed (all of them after a clean shutdown). */
static void init_offsets(ks_log *log, const ks_log_open_args *args)
{
    int64_t leo = active(log)->next_offset;
    int64_t rp = args->clean_shutdown ? leo : args->recovery_point;
    rp = rp < 0 ? 0 : (rp > leo ? leo : rp);
    for (int32_t i = 0; i < log->nsegs; i++) {
        ks_segment *seg = log->segs[i];
        bool below = i + 1 < log->nsegs && log->segs[i + 1]->base_offset <= rp;
        seg->flushed_size = below || args->clean_shutdown ? seg->size : 0;
    }
    log->recovery_point = rp;
    log->log_start = args->log_start_offset > log->segs[0]->base_offset
                         ? args->log_start_offset
                         : log->segs[0]->base_offset;
    if (log->log_start > leo)
        log->log_start = leo;
    log->hw = leo;
    log->last_flush_ms = args->now_ms;
}

kp_err ks_log_open(const ks_io *io, const char *log_dir, const char *topic, int32_t partition,
                   const ks_log_config *cfg, const ks_log_open_args *args, ks_log **out,
                   ks_recover_report *rep, kp_errctx *ctx)
{
    ks_recover_report local;
    rep = rep != NULL ? rep : &local;
    ks_recover_report_init(rep);
    kp_err err = ks_log_config_check(cfg, ctx);
    if (err != KP_ERR_NONE)
        return err;
    ks_log *log = log_alloc(io, log_dir, topic, partition, cfg);
    if (log == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "log alloc");
    err = ks_io_mkdir(io, log->dir, ctx);
    if (err == KP_ERR_NONE)
        err = ks_compact_recover_files(io, log->dir, ctx);
    if (err == KP_ERR_NONE)
        err = load_segments(log, args->now_ms, ctx);
    if (err == KP_ERR_NONE && log->nsegs == 0) {
        int64_t base = args->log_start_offset > 0 ? args->log_start_offset : 0;
        err = new_segment(log, base, args->now_ms, ctx);
    } else if (err == KP_ERR_NONE) {
        err = ks_recover_segments(log->segs, &log->nsegs, args->recovery_point,
                                  args->clean_shutdown, rep, ctx);
    }
    if (err != KP_ERR_NONE) {
        log_free(log);
        return err;
    }
    init_offsets(log, args);
    if ((err = epochs_load(log, ctx)) != KP_ERR_NONE) {
        log_free(log);
        return err;
    }
    *out = log;
    return KP_ERR_NONE;
}

kp_err ks_log_close(ks_log *log, kp_errctx *ctx)
{
    kp_err err = log->failed == KP_ERR_NONE ? ks_log_flush(log, log->last_flush_ms, ctx)
                                            : log->failed;
    log_free(log);
    return err;
}

kp_err ks_log_delete(ks_log *log, kp_errctx *ctx)
{
    drop_tail(log, 0);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", log->dir, KS_EPOCH_CHECKPOINT);
    (void)log->io.ops->unlink(log->io.ctx, path);
    int rc = log->io.ops->rmdir(log->io.ctx, log->dir);
    kp_err err = rc < 0 ? ks_io_err(ctx, rc, "rmdir", log->dir) : KP_ERR_NONE;
    log_free(log);
    return err;
}

/* ---- accessors ---------------------------------------------------------- */

int64_t ks_log_start_offset(const ks_log *log)
{
    return log->log_start;
}

int64_t ks_log_end_offset(const ks_log *log)
{
    return active(log)->next_offset;
}

int64_t ks_log_high_watermark(const ks_log *log)
{
    return log->hw;
}

int64_t ks_log_recovery_point(const ks_log *log)
{
    return log->recovery_point;
}

int64_t ks_log_size(const ks_log *log)
{
    int64_t total = 0;
    for (int32_t i = 0; i < log->nsegs; i++)
        total += log->segs[i]->size;
    return total;
}

const char *ks_log_topic(const ks_log *log)
{
    return log->topic;
}

int32_t ks_log_partition(const ks_log *log)
{
    return log->partition;
}

const char *ks_log_dir(const ks_log *log)
{
    return log->dir;
}

void ks_log_set_high_watermark(ks_log *log, int64_t offset)
{
    int64_t leo = ks_log_end_offset(log);
    log->hw = offset < log->log_start ? log->log_start : (offset > leo ? leo : offset);
}

/* ---- append ------------------------------------------------------------- */

/* Checks that buf is whole v2 batch headers back to back. */
static kp_err scan_batches(const uint8_t *buf, size_t len, int32_t *count, int64_t *records,
                           kp_errctx *ctx)
{
    size_t pos = 0;
    *count = 0;
    *records = 0;
    while (pos < len) {
        kp_batch_hdr h;
        kp_err err = kp_batch_hdr_parse(buf + pos, len - pos, &h);
        if (err == KP_ERR_NONE && (uint64_t)kp_batch_total_size(&h) > len - pos)
            err = KP_ERR__UNDERFLOW;
        if (err != KP_ERR_NONE)
            return KP_ERRCTX(ctx, KP_ERR__MALFORMED, 0, "batch %d at %zu: %s", *count, pos,
                             kp_err_name(err));
        *records += (int64_t)h.last_offset_delta + 1;
        pos += (size_t)kp_batch_total_size(&h);
        (*count)++;
    }
    if (*count == 0)
        return KP_ERRCTX(ctx, KP_ERR__MALFORMED, 0, "empty append");
    return KP_ERR_NONE;
}

/* Stamps offsets, epoch and LogAppendTime into the batches; fills u. */
static void assign(const ks_log *log, uint8_t *buf, size_t len, int32_t epoch, int64_t now_ms,
                   ks_append_unit *u)
{
    int64_t next = ks_log_end_offset(log);
    bool lat = log->cfg.message_timestamp_type == KS_TS_LOG_APPEND_TIME;
    for (size_t pos = 0; pos < len;) {
        uint8_t *b = buf + pos;
        kp_batch_hdr h;
        (void)kp_batch_hdr_parse(b, len - pos, &h);
        size_t total = (size_t)kp_batch_total_size(&h);
        kp_batch_set_base_offset(b, next);
        kp_batch_set_leader_epoch(b, epoch);
        h.base_offset = next;
        if (lat) {
            kp_batch_set_log_append_time(b, now_ms);
            kp_batch_crc_store(b, total);
            h.max_timestamp = now_ms;
        }
        ks_append_unit_add(u, &h, pos == 0);
        next = kp_batch_last_offset(&h) + 1;
        pos += total;
    }
}

/* Kafka's rule for segment.ms: the time a segment has waited is the span
 * from its first batch's timestamp to the newest timestamp appended (record
 * time, so old or future timestamps do not roll a segment per append), or
 * wall-clock time since its creation when its first batch has none. */
static bool should_roll(const ks_log *log, ks_segment *seg, size_t len, const ks_append_unit *u,
                        int64_t now_ms)
{
    if (seg->size == 0)
        return false;
    int64_t first = ks_segment_rolling_ts(seg);
    int64_t waited = first >= 0 ? u->max_timestamp - first : now_ms - seg->created_ms;
    return seg->size + (int64_t)len > log->cfg.segment_bytes || waited > log->cfg.segment_ms ||
           ks_index_full(&seg->oidx) || ks_index_full(&seg->tidx) ||
           u->last_offset - seg->base_offset > INT32_MAX;
}

kp_err ks_log_roll(ks_log *log, int64_t now_ms, kp_errctx *ctx)
{
    ks_segment *old = active(log);
    if (old->size == 0)
        return KP_ERR_NONE;
    kp_err err = new_segment(log, old->next_offset, now_ms, ctx);
    if (err != KP_ERR_NONE)
        return err;
    err = ks_segment_seal(old, ctx);
    if (err != KP_ERR_NONE) {
        old->sealed = false;
        drop_tail(log, log->nsegs - 1);
    }
    return err;
}

/* What every append checks first: a healthy log, whole batch headers, a
 * size a segment can hold. */
static kp_err append_check(const ks_log *log, const uint8_t *batches, size_t len, int32_t *count,
                           int64_t *records, kp_errctx *ctx)
{
    if (log->failed != KP_ERR_NONE)
        return KP_ERRCTX(ctx, log->failed, 0, "%s: log failed an fdatasync", log->dir);
    kp_err err = scan_batches(batches, len, count, records, ctx);
    if (err != KP_ERR_NONE)
        return err;
    if ((int64_t)len > log->cfg.segment_bytes)
        return KP_ERRCTX(ctx, KP_ERR_RECORD_LIST_TOO_LARGE, 0, "%zu bytes > segment.bytes", len);
    return KP_ERR_NONE;
}

/* Writes checked batches to the active segment, rolling it first when due. */
static kp_err write_unit(ks_log *log, const uint8_t *batches, size_t len, ks_append_unit *u,
                         int64_t now_ms, kp_errctx *ctx)
{
    kp_err err = KP_ERR_NONE;
    if (should_roll(log, active(log), len, u, now_ms))
        err = ks_log_roll(log, now_ms, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_append(active(log), batches, len, u, now_ms, ctx);
    return err;
}

kp_err ks_log_append(ks_log *log, uint8_t *batches, size_t len, int32_t leader_epoch,
                     int64_t now_ms, ks_append_result *out, kp_errctx *ctx)
{
    int32_t count = 0;
    int64_t records = 0;
    kp_err err = append_check(log, batches, len, &count, &records, ctx);
    if (err != KP_ERR_NONE)
        return err;
    ks_append_unit u;
    assign(log, batches, len, leader_epoch, now_ms, &u);
    if ((err = epochs_assign_batches(log, batches, len, ctx)) != KP_ERR_NONE)
        return err;
    if ((err = write_unit(log, batches, len, &u, now_ms, ctx)) != KP_ERR_NONE)
        return err;
    log->appended_msgs += records;
    if (!log->replicated)
        log->hw = ks_log_end_offset(log);
    if (out != NULL) {
        out->base_offset = u.first_offset;
        out->last_offset = u.last_offset;
        out->log_append_time =
            log->cfg.message_timestamp_type == KS_TS_LOG_APPEND_TIME ? now_ms : -1;
        out->log_start_offset = log->log_start;
        out->batches = count;
    }
    return KP_ERR_NONE;
}

/* A follower's batches, kept as the leader wrote them: each whole, its CRC
 * right, and offsets rising from the log end (a compacted leader may leave
 * gaps). Fills u as assign does. */
static kp_err check_replica_batches(const ks_log *log, const uint8_t *buf, size_t len,
                                    ks_append_unit *u, kp_errctx *ctx)
{
    int64_t next = ks_log_end_offset(log);
    for (size_t pos = 0; pos < len;) {
        kp_batch_hdr h;
        kp_err err = kp_batch_check(buf + pos, len - pos, &h);
        if (err != KP_ERR_NONE)
            return KP_ERRCTX(ctx, KP_ERR_CORRUPT_MESSAGE, 0, "replica batch at %zu: %s", pos,
                             kp_err_name(err));
        if (h.base_offset < next || h.last_offset_delta < 0)
            return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "replica batch at offset %lld, expected "
                             ">= %lld", (long long)h.base_offset, (long long)next);
        ks_append_unit_add(u, &h, pos == 0);
        next = kp_batch_last_offset(&h) + 1;
        pos += (size_t)kp_batch_total_size(&h);
    }
    return KP_ERR_NONE;
}

kp_err ks_log_append_replica(ks_log *log, const uint8_t *batches, size_t len, int64_t now_ms,
                             ks_append_result *out, kp_errctx *ctx)
{
    int32_t count = 0;
    int64_t records = 0;
    kp_err err = append_check(log, batches, len, &count, &records, ctx);
    if (err != KP_ERR_NONE)
        return err;
    ks_append_unit u;
    if ((err = check_replica_batches(log, batches, len, &u, ctx)) != KP_ERR_NONE)
        return err;
    if ((err = epochs_assign_batches(log, batches, len, ctx)) != KP_ERR_NONE)
        return err;
    if ((err = write_unit(log, batches, len, &u, now_ms, ctx)) != KP_ERR_NONE) {
        (void)epochs_changed(log, ks_epoch_cache_truncate_end(&log->epochs,
                                                              ks_log_end_offset(log)), NULL);
        return err;
    }
    log->appended_msgs += records;
    if (out != NULL)
        *out = (ks_append_result){u.first_offset, u.last_offset, -1, log->log_start, count};
    return KP_ERR_NONE;
}

void ks_log_set_replicated(ks_log *log, bool replicated)
{
    log->replicated = replicated;
}

/* ---- read --------------------------------------------------------------- */

static kp_err fill_slice(ks_segment *seg, int64_t pos, const kp_batch_hdr *h,
                         int32_t max_bytes, int64_t max_offset, ks_log_slice *out,
                         kp_errctx *ctx)
{
    int64_t end = pos;
    kp_err err = ks_segment_slice_end(seg, pos, max_bytes, max_offset, &end, ctx);
    if (err != KP_ERR_NONE || end <= pos)
        return err;
    out->range.fd = seg->fd;
    out->range.off = pos;
    out->range.len = (int32_t)(end - pos);
    out->seg = ks_segment_ref(seg);
    out->first_offset = h->base_offset;
    return KP_ERR_NONE;
}

kp_err ks_log_read(ks_log *log, int64_t offset, int32_t max_bytes, int64_t max_offset,
                   ks_log_slice *out, kp_errctx *ctx)
{
    int64_t leo = ks_log_end_offset(log);
    memset(out, 0, sizeof(*out));
    out->range.fd = -1;
    out->first_offset = offset;
    if (offset < log->log_start || offset > leo)
        return KP_ERRCTX(ctx, KP_ERR_OFFSET_OUT_OF_RANGE, 0, "offset %lld not in [%lld, %lld]",
                         (long long)offset, (long long)log->log_start, (long long)leo);
    max_offset = max_offset > leo ? leo : max_offset;
    for (int32_t i = seg_index_for(log, offset); offset < max_offset && i < log->nsegs; i++) {
        ks_segment *seg = log->segs[i];
        int64_t pos = 0;
        kp_batch_hdr h;
        kp_err err = ready(seg, ctx);
        if (err == KP_ERR_NONE)
            err = ks_segment_find(seg, offset, &pos, &h, ctx);
        if (err == KP_ERR__NOENT)
            continue;
        if (err != KP_ERR_NONE || h.base_offset >= max_offset)
            return err;
        return fill_slice(seg, pos, &h, max_bytes, max_offset, out, ctx);
    }
    return KP_ERR_NONE;
}

void ks_log_slice_release(ks_log_slice *s)
{
    ks_segment_unref(s->seg);
    s->seg = NULL;
    s->range.fd = -1;
    s->range.len = 0;
}

kp_err ks_log_offset_for_time(ks_log *log, int64_t ts, int64_t *offset, int64_t *timestamp,
                              kp_errctx *ctx)
{
    for (int32_t i = 0; i < log->nsegs; i++) {
        ks_segment *seg = log->segs[i];
        if (i + 1 < log->nsegs && log->segs[i + 1]->base_offset <= log->log_start)
            continue;
        int64_t pos = 0;
        kp_batch_hdr h;
        kp_err err = ready(seg, ctx);
        if (err == KP_ERR_NONE && seg->max_timestamp < ts)
            continue;
        if (err == KP_ERR_NONE)
            err = ks_segment_find_time(seg, ts, &pos, &h, ctx);
        if (err == KP_ERR__NOENT)
            continue;
        if (err != KP_ERR_NONE)
            return err;
        *offset = h.base_offset > log->log_start ? h.base_offset : log->log_start;
        *timestamp = h.max_timestamp;
        return KP_ERR_NONE;
    }
    return KP_ERR__NOENT;
}

/* ---- truncation and log start --------------------------------------------- */

static void clamp_after_truncate(ks_log *log)
{
    int64_t leo = ks_log_end_offset(log);
    log->hw = log->hw > leo ? leo : log->hw;
    log->recovery_point = log->recovery_point > leo ? leo : log->recovery_point;
    log->log_start = log->log_start > leo ? leo : log->log_start;
    log->cleaner_offset = log->cleaner_offset > leo ? leo : log->cleaner_offset;
    log->truncations++;
}

/* Empties the log and restarts it at offset. Old files are unlinked, not
 * cut, so readers holding a slice of them still read whole batches. */
static kp_err truncate_fully(ks_log *log, int64_t offset, int64_t now_ms, kp_errctx *ctx)
{
    if (offset == log->segs[0]->base_offset) {
        drop_tail(log, 1);
        (void)ks_segment_remove(log->segs[0], NULL);
    }
    kp_err err = new_segment(log, offset, now_ms, ctx);
    if (err != KP_ERR_NONE) {
        log->failed = KP_ERR__IO;
        return err;
    }
    ks_segment *fresh = log->segs[--log->nsegs];
    drop_tail(log, 0);
    log->segs[log->nsegs++] = fresh;
    log->log_start = offset;
    return KP_ERR_NONE;
}

kp_err ks_log_truncate_to(ks_log *log, int64_t offset, int64_t now_ms, kp_errctx *ctx)
{
    if (offset < 0)
        return KP_ERRCTX(ctx, KP_ERR_OFFSET_OUT_OF_RANGE, 0, "truncate to %lld", (long long)offset);
    if (offset >= ks_log_end_offset(log))
        return KP_ERR_NONE;
    kp_err err;
    if (offset <= log->segs[0]->base_offset || offset <= log->log_start) {
        err = truncate_fully(log, offset, now_ms, ctx);
        ks_epoch_cache_clear(&log->epochs); /* an empty log has no epochs */
    } else {
        drop_tail(log, seg_index_for(log, offset) + 1);
        ks_segment *seg = active(log);
        int64_t pos = 0;
        kp_batch_hdr h;
        err = ready(seg, ctx);
        if (err == KP_ERR_NONE)
            err = ks_segment_find(seg, offset, &pos, &h, ctx);
        if (err == KP_ERR__NOENT) {
            pos = seg->size;
            err = KP_ERR_NONE;
        }
        if (err == KP_ERR_NONE)
            err = ks_segment_truncate(seg, pos, ctx);
        seg->sealed = false;
    }
    clamp_after_truncate(log);
    bool changed = ks_epoch_cache_truncate_end(&log->epochs, ks_log_end_offset(log)) ||
                   ks_epoch_cache_latest(&log->epochs) < 0;
    kp_err eerr = epochs_changed(log, changed, ctx);
    return err != KP_ERR_NONE ? err : eerr;
}

kp_err ks_log_advance_start(ks_log *log, int64_t offset, kp_errctx *ctx)
{
    if (offset > log->hw || offset < 0)
        return KP_ERRCTX(ctx, KP_ERR_OFFSET_OUT_OF_RANGE, 0, "log start %lld beyond hw %lld",
                         (long long)offset, (long long)log->hw);
    if (offset > log->log_start) {
        log->log_start = offset;
        epochs_start_moved(log);
    }
    return KP_ERR_NONE;
}

/* ---- flushing ----------------------------------------------------------- */

static kp_err target_alloc(ks_log_flush_target *t, int32_t n)
{
    if (n == 0)
        return KP_ERR_NONE;
    t->segs = calloc((size_t)n, sizeof(*t->segs));
    t->sizes = calloc((size_t)n, sizeof(*t->sizes));
    t->sealed = calloc((size_t)n, sizeof(*t->sealed));
    return t->segs && t->sizes && t->sealed ? KP_ERR_NONE : KP_ERR__NOMEM;
}

kp_err ks_log_flush_prepare(ks_log *log, ks_log_flush_target *t, kp_errctx *ctx)
{
    memset(t, 0, sizeof(*t));
    t->io = log->io;
    if (log->failed != KP_ERR_NONE)
        return KP_ERRCTX(ctx, log->failed, 0, "%s: log failed an fdatasync", log->dir);
    int32_t dirty = 0;
    for (int32_t i = 0; i < log->nsegs; i++)
        dirty += log->segs[i]->size > log->segs[i]->flushed_size;
    if (target_alloc(t, dirty) != KP_ERR_NONE ||
        (log->dir_dirty && (t->dir = strdup(log->dir)) == NULL)) {
        ks_log_flush_target_fini(t);
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "flush target");
    }
    for (int32_t i = 0; i < log->nsegs; i++) {
        ks_segment *seg = log->segs[i];
        if (seg->size <= seg->flushed_size)
            continue;
        t->segs[t->n] = ks_segment_ref(seg);
        t->sizes[t->n] = seg->size;
        t->sealed[t->n] = seg->sealed;
        t->n++;
    }
    log->dir_dirty = false;
    t->offset = ks_log_end_offset(log);
    t->messages = log->appended_msgs;
    t->epoch = log->truncations;
    return KP_ERR_NONE;
}

kp_err ks_log_flush_target_sync(ks_log_flush_target *t, kp_errctx *ctx)
{
    for (int32_t i = 0; i < t->n; i++) {
        kp_err err = ks_segment_sync(t->segs[i], t->sealed[i], ctx);
        if (err != KP_ERR_NONE)
            return err;
    }
    return t->dir != NULL ? ks_io_fsync_dir(&t->io, t->dir, ctx) : KP_ERR_NONE;
}

void ks_log_flush_complete(ks_log *log, const ks_log_flush_target *t, kp_err err,
                           int64_t now_ms)
{
    if (err != KP_ERR_NONE) {
        log->failed = KP_ERR__IO;
        log->dir_dirty = log->dir_dirty || t->dir != NULL;
        return;
    }
    for (int32_t i = 0; i < t->n; i++) {
        if (t->segs[i]->flushed_size < t->sizes[i])
            t->segs[i]->flushed_size = t->sizes[i];
    }
    if (t->epoch == log->truncations && t->offset > log->recovery_point)
        log->recovery_point = t->offset;
    if (t->messages > log->flushed_msgs)
        log->flushed_msgs = t->messages;
    log->last_flush_ms = now_ms;
}

void ks_log_flush_target_fini(ks_log_flush_target *t)
{
    for (int32_t i = 0; i < t->n; i++)
        ks_segment_unref(t->segs[i]);
    free(t->segs);
    free(t->sizes);
    free(t->sealed);
    free(t->dir);
    memset(t, 0, sizeof(*t));
}

kp_err ks_log_flush(ks_log *log, int64_t now_ms, kp_errctx *ctx)
{
    ks_log_flush_target t;
    kp_err err = ks_log_flush_prepare(log, &t, ctx);
    if (err != KP_ERR_NONE)
        return err;
    err = ks_log_flush_target_sync(&t, ctx);
    ks_log_flush_complete(log, &t, err, now_ms);
    ks_log_flush_target_fini(&t);
    return err;
}

int64_t ks_log_unflushed_messages(const ks_log *log)
{
    return log->appended_msgs - log->flushed_msgs;
}

int64_t ks_log_last_flush_ms(const ks_log *log)
{
    return log->last_flush_ms;
}

int32_t ks_log_flush_pending(const ks_log *log)
{
    return log->pending_flushes;
}

void ks_log_flush_pending_add(ks_log *log, int32_t delta)
{
    log->pending_flushes += delta;
}
