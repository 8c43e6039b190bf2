#include "ks_compact.h"

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_compress.h"
#include "kp_records.h"
#include "ks_offmap.h"

/* Decompressed records of one batch beyond this are not decoded: the batch
 * is kept as-is and stays out of the map. */
#define MAX_PLAIN_BYTES ((size_t)256 << 20)
/* Output is appended to the new segment in pieces of about this size (or
 * index.interval.bytes when smaller), one index entry at most per piece. */
#define OUT_PIECE_BYTES ((size_t)1 << 20)
#define ATTR_DELETE_HORIZON 0x40

/* One old segment as the job saw it at plan time. */
typedef struct cseg {
    ks_segment *seg;         /* reference */
    int64_t base;            /* base offset */
    int64_t size;            /* bytes of whole batches at plan time */
    int64_t end;             /* next offset (the next segment's base) */
    int64_t mtime_ms;        /* last modification */
    bool drop_tombstones;    /* mtime + delete.retention.ms <= now */
} cseg;

/* Consecutive old segments [first, first + n) rewritten into out. */
typedef struct cgroup {
    int32_t first;
    int32_t n;
    ks_segment *out; /* the new segment (reference) or NULL */
    int64_t bytes_before;
} cgroup;

typedef enum cphase { PH_MAP, PH_CLEAN, PH_DONE } cphase;

/* Batches to append to the new segment, with their summary. */
typedef struct outbuf {
    uint8_t *p;
    size_t len;
    size_t cap;
    ks_append_unit unit;
} outbuf;

struct ks_compact_job {
    ks_io io;
    char *dir;
    ks_segment_opts opts;
    int64_t segment_bytes;
    int64_t now_ms;
    int64_t truncations;  /* of the log at plan */
    int64_t first_dirty;
    int64_t first_uncleanable;
    int64_t end_offset;   /* the map covers [first_dirty, end_offset) */
    ks_compact_aborted *aborted; /* by (producer id, first offset); owned */
    int32_t naborted;
    cseg *segs;
    int32_t nsegs;
    cgroup *groups;
    int32_t ngroups;
    ks_offmap map;
    cphase phase;
    int32_t cur;          /* segment (map) or group (clean) */
    int32_t cur_seg;      /* segment inside the group */
    int64_t pos;          /* position in the current segment */
    uint8_t *in;          /* one batch read from a segment */
    size_t in_cap;
    outbuf out;
    int64_t records_read, records_removed, tombstones_removed, aborted_removed;
    atomic_bool cancel;
    kp_err failed;
    kp_errctx failed_ctx;
};

void ks_compact_config_default(ks_compact_config *cfg)
{
    cfg->min_cleanable_ratio = 0.5;
    cfg->delete_retention_ms = 86400000;
    cfg->min_lag_ms = 0;
    cfg->max_lag_ms = INT64_MAX;
    cfg->map_entries = (int64_t)1 << 20;
}

/* ---- measuring ---------------------------------------------------------- */

/* The segment's newest record time: its largest timestamp, else its mtime. */
static int64_t newest_time(const ks_segment *seg)
{
    return seg->max_timestamp >= 0 ? seg->max_timestamp : seg->mtime_ms;
}

static int64_t first_dirty_of(const ks_log *log)
{
    int64_t d = ks_log_cleaner_offset(log);
    int64_t start = ks_log_start_offset(log);
    return d < start || d > ks_log_end_offset(log) ? start : d;
}

/* Records at or past this offset are not cleaned: the high watermark, or
 * the last stable offset below it. */
static int64_t cleanable_end(const ks_log *log, const ks_compact_txns *txns)
{
    int64_t hw = ks_log_high_watermark(log);
    return txns != NULL && txns->stable_offset < hw ? txns->stable_offset : hw;
}

/* Number of leading segments below the first uncleanable offset. */
static kp_err cleanable_count(ks_log *log, const ks_compact_config *cfg,
                              const ks_compact_txns *txns, int64_t now_ms, int32_t *count,
                              kp_errctx *ctx)
{
    int32_t n = ks_log_segment_count(log), i = 0;
    int64_t end = cleanable_end(log, txns);
    for (; i < n - 1; i++) {
        ks_segment *seg = NULL;
        kp_err err = ks_log_segment_at(log, i, &seg, ctx);
        if (err != KP_ERR_NONE)
            return err;
        if (seg->next_offset > end)
            break;
        if (cfg->min_lag_ms > 0 && now_ms - newest_time(seg) < cfg->min_lag_ms)
            break;
    }
    *count = i;
    return KP_ERR_NONE;
}

kp_err ks_compact_measure(ks_log *log, const ks_compact_config *cfg, const ks_compact_txns *txns,
                          int64_t now_ms, ks_compact_stats *st, kp_errctx *ctx)
{
    int32_t k = 0;
    memset(st, 0, sizeof(*st));
    st->first_dirty = first_dirty_of(log);
    kp_err err = cleanable_count(log, cfg, txns, now_ms, &k, ctx);
    if (err != KP_ERR_NONE)
        return err;
    ks_segment *seg = NULL;
    err = ks_log_segment_at(log, k, &seg, ctx);
    st->first_uncleanable = seg != NULL ? seg->base_offset : st->first_dirty;
    for (int32_t i = 0; err == KP_ERR_NONE && i < k; i++) {
        err = ks_log_segment_at(log, i, &seg, ctx);
        if (err != KP_ERR_NONE)
            break;
        if (seg->next_offset <= st->first_dirty) {
            st->clean_bytes += seg->size;
            continue;
        }
        st->dirty_bytes += seg->size;
        int64_t first = cfg->max_lag_ms < INT64_MAX ? ks_segment_rolling_ts(seg) : -1;
        if (first >= 0 && now_ms - first > cfg->max_lag_ms)
            st->forced = true;
    }
    int64_t total = st->clean_bytes + st->dirty_bytes;
    st->ratio = total > 0 ? (double)st->dirty_bytes / (double)total : 0.0;
    st->cleanable = st->dirty_bytes > 0 && (st->forced || st->ratio > cfg->min_cleanable_ratio);
    return err;
}

/* ---- planning ----------------------------------------------------------- */

static void job_release_segs(ks_compact_job *job)
{
    for (int32_t i = 0; i < job->nsegs; i++)
        ks_segment_unref(job->segs[i].seg);
    job->nsegs = 0;
}

void ks_compact_job_free(ks_compact_job *job)
{
    if (job == NULL)
        return;
    for (int32_t g = 0; g < job->ngroups; g++) {
        if (job->groups[g].out != NULL) {
            (void)ks_segment_remove(job->groups[g].out, NULL);
            ks_segment_unref(job->groups[g].out);
        }
    }
    job_release_segs(job);
    ks_offmap_fini(&job->map);
    free(job->aborted);
    free(job->segs);
    free(job->groups);
    free(job->in);
    free(job->out.p);
    free(job->dir);
    free(job);
}

static kp_err job_alloc(ks_log *log, const ks_compact_config *cfg, int32_t k, int64_t now_ms,
                        ks_compact_job **out, kp_errctx *ctx)
{
    ks_compact_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "compaction job");
    job->segs = calloc((size_t)k, sizeof(*job->segs));
    job->groups = calloc((size_t)k, sizeof(*job->groups));
    job->dir = strdup(ks_log_dir(log));
    kp_err err = ks_offmap_init(&job->map, cfg->map_entries);
    if (err == KP_ERR_NONE && (job->segs == NULL || job->groups == NULL || job->dir == NULL))
        err = KP_ERR__NOMEM;
    if (err != KP_ERR_NONE) {
        ks_compact_job_free(job);
        return KP_ERRCTX(ctx, err, 0, "compaction job of %d segments", k);
    }
    job->segment_bytes = ks_log_config_of(log)->segment_bytes;
    ks_log_segment_opts(log, &job->opts);
    job->now_ms = now_ms;
    job->truncations = ks_log_truncation_count(log);
    atomic_init(&job->cancel, false);
    *out = job;
    return KP_ERR_NONE;
}

static int cmp_aborted(const void *a, const void *b)
{
    const ks_compact_aborted *x = a, *y = b;
    if (x->producer_id != y->producer_id)
        return x->producer_id < y->producer_id ? -1 : 1;
    return x->first_offset < y->first_offset ? -1 : x->first_offset > y->first_offset;
}

/* Copies the aborted transactions with data in [from, upto), sorted for
 * is_aborted. */
static kp_err copy_aborted(ks_compact_job *job, const ks_compact_txns *txns, int64_t from,
                           int64_t upto, kp_errctx *ctx)
{
    if (txns == NULL || txns->naborted <= 0)
        return KP_ERR_NONE;
    job->aborted = calloc((size_t)txns->naborted, sizeof(*job->aborted));
    if (job->aborted == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "%d aborted transactions", txns->naborted);
    for (int32_t i = 0; i < txns->naborted; i++) {
        const ks_compact_aborted *a = &txns->aborted[i];
        if (a->last_offset >= from && a->first_offset < upto)
            job->aborted[job->naborted++] = *a;
    }
    qsort(job->aborted, (size_t)job->naborted, sizeof(*job->aborted), cmp_aborted);
    return KP_ERR_NONE;
}

kp_err ks_compact_plan(ks_log *log, const ks_compact_config *cfg, const ks_compact_txns *txns,
                       int64_t now_ms, ks_compact_job **out, kp_errctx *ctx)
{
    ks_compact_stats st;
    *out = NULL;
    kp_err err = ks_compact_measure(log, cfg, txns, now_ms, &st, ctx);
    if (err != KP_ERR_NONE || st.dirty_bytes == 0)
        return err;
    int32_t k = 0;
    while (ks_log_segment_count(log) > k + 1) { /* segments below first_uncleanable */
        ks_segment *seg = NULL;
        err = ks_log_segment_at(log, k, &seg, ctx);
        if (err != KP_ERR_NONE || seg->base_offset >= st.first_uncleanable)
            break;
        k++;
    }
    ks_compact_job *job = NULL;
    if (err == KP_ERR_NONE)
        err = job_alloc(log, cfg, k, now_ms, &job, ctx);
    if (err != KP_ERR_NONE)
        return err;
    for (int32_t i = 0; i < k; i++) {
        ks_segment *seg = NULL;
        (void)ks_log_segment_at(log, i, &seg, NULL);
        cseg *c = &job->segs[job->nsegs++];
        c->seg = ks_segment_ref(seg);
        c->base = seg->base_offset;
        c->size = seg->size;
        c->end = seg->next_offset;
        c->mtime_ms = seg->mtime_ms;
        c->drop_tombstones = now_ms - seg->mtime_ms >= cfg->delete_retention_ms;
        job->io = seg->io;
    }
    job->first_dirty = st.first_dirty;
    job->first_uncleanable = st.first_uncleanable;
    job->end_offset = st.first_uncleanable;
    err = copy_aborted(job, txns, k > 0 ? job->segs[0].base : st.first_uncleanable,
                       st.first_uncleanable, ctx);
    if (err != KP_ERR_NONE) {
        ks_compact_job_free(job);
        return err;
    }
    *out = job;
    return KP_ERR_NONE;
}

/* ---- reading batches ---------------------------------------------------- */

/* Reads the whole batch whose header h sits at pos of c into job->in, and
 * checks its CRC (the file may have changed under the job). */
static kp_err read_batch(ks_compact_job *job, const cseg *c, int64_t pos, const kp_batch_hdr *h,
                         kp_errctx *ctx)
{
    size_t total = (size_t)kp_batch_total_size(h);
    if (total > job->in_cap) {
        uint8_t *p = realloc(job->in, total);
        if (p == NULL)
            return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "batch of %zu bytes", total);
        job->in = p;
        job->in_cap = total;
    }
    kp_err err = ks_io_read_all(&c->seg->io, c->seg->fd, job->in, total, pos, ctx);
    if (err == KP_ERR__UNDERFLOW || (err == KP_ERR_NONE && kp_batch_check(job->in, total, NULL)))
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s.log: bad batch at %lld", c->seg->base_path,
                         (long long)pos);
    return err;
}

/* The records of the batch in job->in, in place or decompressed into *plain
 * (the caller frees it); false when they cannot be decoded. */
static bool batch_records(const ks_compact_job *job, const kp_batch_hdr *h, const uint8_t **recs,
                          size_t *len, uint8_t **plain)
{
    const uint8_t *body = job->in + KP_BATCH_HDR_SIZE;
    size_t blen = (size_t)kp_batch_total_size(h) - KP_BATCH_HDR_SIZE;
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    *plain = NULL;
    if (codec == KP_CODEC_NONE) {
        *recs = body;
        *len = blen;
        return true;
    }
    if (kp_decompress((kp_codec)codec, body, blen, MAX_PLAIN_BYTES, plain, len, NULL) !=
        KP_ERR_NONE)
        return false;
    *recs = *plain;
    return true;
}

static bool is_control(const kp_batch_hdr *h)
{
    return (h->attributes & KP_BATCH_ATTR_CONTROL) != 0;
}

static int64_t record_offset(const kp_batch_hdr *h, const kp_record *r)
{
    return h->base_offset + r->offset_delta;
}

/* Whether h is a data batch of one of the job's aborted transactions: the
 * entry of its producer with the largest first offset <= its base offset
 * (a producer's transactions do not overlap) ends at or after it. */
static bool is_aborted(const ks_compact_job *job, const kp_batch_hdr *h)
{
    if ((h->attributes & KP_BATCH_ATTR_TRANSACTIONAL) == 0 || is_control(h))
        return false;
    int32_t lo = 0, hi = job->naborted;
    while (lo < hi) { /* the first entry after (producer id, base offset) */
        int32_t mid = lo + (hi - lo) / 2;
        const ks_compact_aborted *a = &job->aborted[mid];
        if (a->producer_id < h->producer_id ||
            (a->producer_id == h->producer_id && a->first_offset <= h->base_offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    const ks_compact_aborted *a = lo > 0 ? &job->aborted[lo - 1] : NULL;
    return a != NULL && a->producer_id == h->producer_id && h->base_offset <= a->last_offset;
}

/* ---- the map phase ------------------------------------------------------ */

/* Maps the keys of the batch in job->in at or past first_dirty; a full map
 * ends the range at the first record left out (*full). */
static kp_err map_batch(ks_compact_job *job, const kp_batch_hdr *h, bool *full, kp_errctx *ctx)
{
    const uint8_t *recs;
    size_t len;
    uint8_t *plain;
    *full = false;
    if (is_control(h) || is_aborted(job, h) || !batch_records(job, h, &recs, &len, &plain))
        return KP_ERR_NONE;
    kp_record_iter it;
    kp_record r;
    kp_err err = KP_ERR_NONE;
    kp_records_iter_init(&it, recs, len, h->records_count);
    while (err == KP_ERR_NONE && kp_records_next(&it, &r) == KP_ERR_NONE) {
        int64_t off = record_offset(h, &r);
        if (off < job->first_dirty || r.key.len < 0)
            continue;
        err = ks_offmap_put(&job->map, r.key.p, (size_t)r.key.len, off);
        if (err == KP_ERR__AGAIN) {
            job->end_offset = off;
            *full = true;
            err = KP_ERR_NONE;
            break;
        }
    }
    free(plain);
    return err == KP_ERR_NONE ? KP_ERR_NONE : KP_ERRCTX(ctx, err, 0, "offset map");
}

static bool group_fits(const ks_compact_job *job, const cgroup *g, const cseg *c)
{
    const cseg *first = &job->segs[g->first];
    return g->n == 0 || (g->bytes_before + c->size <= job->segment_bytes &&
                         c->end - 1 - first->base <= INT32_MAX);
}

/* Groups the segments below the end offset into runs that fit one segment,
 * and starts the clean phase. */
static void start_clean(ks_compact_job *job)
{
    int32_t n = 0;
    while (n < job->nsegs && job->segs[n].base < job->end_offset)
        n++;
    job->ngroups = 0;
    for (int32_t i = 0; i < n;) {
        cgroup *g = &job->groups[job->ngroups++];
        g->first = i;
        while (i < n && group_fits(job, g, &job->segs[i])) {
            g->bytes_before += job->segs[i].size;
            g->n++;
            i++;
        }
    }
    job->phase = job->ngroups > 0 ? PH_CLEAN : PH_DONE;
    job->cur = job->cur_seg = 0;
    job->pos = 0;
}

static kp_err map_step(ks_compact_job *job, kp_errctx *ctx)
{
    int64_t budget = KS_COMPACT_STEP_BYTES;
    while (budget > 0 && job->phase == PH_MAP) {
        if (atomic_load(&job->cancel))
            return KP_ERR__AGAIN;
        if (job->cur >= job->nsegs) {
            start_clean(job);
            break;
        }
        const cseg *c = &job->segs[job->cur];
        if (c->end <= job->first_dirty || job->pos >= c->size) {
            job->cur++;
            job->pos = 0;
            continue;
        }
        kp_batch_hdr h;
        bool full = false;
        kp_err err = ks_segment_read_hdr(c->seg, job->pos, c->size, &h, ctx);
        budget -= KP_BATCH_HDR_SIZE;
        if (err == KP_ERR_NONE && kp_batch_last_offset(&h) >= job->first_dirty) {
            err = read_batch(job, c, job->pos, &h, ctx);
            if (err == KP_ERR_NONE)
                err = map_batch(job, &h, &full, ctx);
            budget -= kp_batch_total_size(&h);
        }
        if (err != KP_ERR_NONE)
            return err;
        if (full)
            start_clean(job);
        job->pos += full ? 0 : kp_batch_total_size(&h);
    }
    return KP_ERR_NONE;
}

/* ---- the clean phase ---------------------------------------------------- */

static kp_err out_flush(ks_compact_job *job, kp_errctx *ctx)
{
    outbuf *o = &job->out;
    if (o->len == 0)
        return KP_ERR_NONE;
    kp_err err = ks_segment_append(job->groups[job->cur].out, o->p, o->len, &o->unit, job->now_ms,
                                   ctx);
    o->len = 0;
    return err;
}

/* Queues n bytes of whole batch (header h) for the new segment. */
static kp_err out_add(ks_compact_job *job, const uint8_t *batch, size_t n, const kp_batch_hdr *h,
                      kp_errctx *ctx)
{
    outbuf *o = &job->out;
    if (o->len + n > o->cap) {
        size_t cap = o->cap > 0 ? o->cap : 65536;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *p = realloc(o->p, cap);
        if (p == NULL)
            return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "output buffer of %zu bytes", cap);
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, batch, n);
    ks_append_unit_add(&o->unit, h, o->len == 0);
    o->len += n;
    size_t interval = (size_t)(job->opts.index_interval_bytes > 0 ? job->opts.index_interval_bytes : 1);
    return o->len >= (interval < OUT_PIECE_BYTES ? interval : OUT_PIECE_BYTES) ? out_flush(job, ctx)
                                                                               : KP_ERR_NONE;
}

/* Finishes a rebuilt batch as the original had it: codec, last offset
 * delta, LogAppendTime, leader epoch. */
static kp_err out_rebuilt(ks_compact_job *job, kp_batch_builder *b, const kp_batch_hdr *h,
                          kp_errctx *ctx)
{
    uint8_t *p = NULL;
    size_t n = 0;
    kp_err err = kp_batch_builder_finish_codec(b, h->attributes & KP_BATCH_ATTR_CODEC_MASK,
                                               KP_COMPRESS_LEVEL_DEFAULT, &p, &n);
    if (err != KP_ERR_NONE)
        return KP_ERRCTX(ctx, err, 0, "rebuilding the batch at offset %lld",
                         (long long)h->base_offset);
    kp_be32_put(p + KP_BATCH_OFF_LAST_DELTA, h->last_offset_delta);
    if (h->attributes & KP_BATCH_ATTR_LOG_APPEND_TIME)
        kp_batch_set_log_append_time(p, h->max_timestamp);
    kp_batch_crc_store(p, n);
    kp_batch_set_leader_epoch(p, h->partition_leader_epoch);
    kp_batch_hdr nh;
    err = kp_batch_hdr_parse(p, n, &nh);
    if (err == KP_ERR_NONE)
        err = out_add(job, p, n, &nh, ctx);
    free(p);
    return err;
}

typedef enum verdict { KEEP, SUPERSEDED, EXPIRED } verdict;

static verdict judge(const ks_compact_job *job, const cseg *c, const kp_batch_hdr *h,
                     const kp_record *r)
{
    int64_t off = record_offset(h, r);
    if (off >= job->end_offset || r->key.len < 0)
        return KEEP; /* past the map's range, or no key: nothing to judge by */
    if (ks_offmap_get(&job->map, r->key.p, (size_t)r->key.len) > off)
        return SUPERSEDED;
    return r->value.len < 0 && c->drop_tombstones ? EXPIRED : KEEP;
}

/* Writes the kept part of the batch in job->in: as-is, rebuilt, or not. */
static kp_err clean_batch(ks_compact_job *job, const cseg *c, const kp_batch_hdr *h,
                          kp_errctx *ctx)
{
    const uint8_t *recs;
    size_t len, total = (size_t)kp_batch_total_size(h);
    uint8_t *plain = NULL;
    if (is_aborted(job, h)) {
        job->aborted_removed += h->records_count;
        return KP_ERR_NONE;
    }
    if (is_control(h) || !batch_records(job, h, &recs, &len, &plain))
        return out_add(job, job->in, total, h, ctx);
    kp_batch_builder b;
    kp_batch_builder_init(&b, h->base_offset, (int16_t)(h->attributes & ~ATTR_DELETE_HORIZON),
                          h->producer_id, h->producer_epoch, h->base_sequence);
    int64_t seen = 0, tally[3] = {0, 0, 0};
    kp_record_iter it;
    kp_record r;
    kp_err e;
    kp_records_iter_init(&it, recs, len, h->records_count);
    while ((e = kp_records_next(&it, &r)) == KP_ERR_NONE) {
        verdict v = judge(job, c, h, &r);
        seen++;
        tally[v]++;
        if (v == KEEP)
            kp_batch_builder_add_record_at(
                &b, r.offset_delta, (int64_t)((uint64_t)h->base_timestamp + (uint64_t)r.timestamp_delta),
                &r);
    }
    kp_err err = KP_ERR_NONE;
    if (e != KP_ERR__NOENT || tally[KEEP] == seen) {
        err = out_add(job, job->in, total, h, ctx); /* undecodable, or all kept */
        tally[SUPERSEDED] = tally[EXPIRED] = 0;
    } else if (tally[KEEP] > 0) {
        err = out_rebuilt(job, &b, h, ctx);
    }
    job->records_read += seen;
    job->records_removed += tally[SUPERSEDED];
    job->tombstones_removed += tally[EXPIRED];
    kp_batch_builder_fini(&b);
    free(plain);
    return err;
}

/* Seals and syncs the group's new segment; it inherits the group's time. */
static kp_err finish_group(ks_compact_job *job, kp_errctx *ctx)
{
    cgroup *g = &job->groups[job->cur];
    kp_err err = out_flush(job, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_seal(g->out, ctx);
    if (err == KP_ERR_NONE)
        err = ks_segment_sync(g->out, true, ctx);
    if (err != KP_ERR_NONE)
        return err;
    g->out->flushed_size = g->out->size;
    g->out->mtime_ms = job->segs[g->first].mtime_ms;
    for (int32_t i = 1; i < g->n; i++)
        if (job->segs[g->first + i].mtime_ms > g->out->mtime_ms)
            g->out->mtime_ms = job->segs[g->first + i].mtime_ms;
    job->cur++;
    job->cur_seg = 0;
    job->pos = 0;
    if (job->cur >= job->ngroups)
        job->phase = PH_DONE;
    return KP_ERR_NONE;
}

/* The next batch of the current group, cleaned into the output; *size is
 * what was read (0 when only the position moved). */
static kp_err clean_next(ks_compact_job *job, int64_t *size, kp_errctx *ctx)
{
    cgroup *g = &job->groups[job->cur];
    *size = 0;
    if (g->out == NULL)
        return ks_segment_create_as(&job->io, job->dir, job->segs[g->first].base, &job->opts,
                                    KS_SUFFIX_CLEANED, job->now_ms, &g->out, ctx);
    if (job->cur_seg >= g->n)
        return finish_group(job, ctx);
    const cseg *c = &job->segs[g->first + job->cur_seg];
    if (job->pos >= c->size) {
        job->cur_seg++;
        job->pos = 0;
        return KP_ERR_NONE;
    }
    kp_batch_hdr h;
    kp_err err = ks_segment_read_hdr(c->seg, job->pos, c->size, &h, ctx);
    if (err == KP_ERR_NONE)
        err = read_batch(job, c, job->pos, &h, ctx);
    if (err == KP_ERR_NONE)
        err = clean_batch(job, c, &h, ctx);
    if (err == KP_ERR_NONE) {
        *size = kp_batch_total_size(&h);
        job->pos += *size;
    }
    return err;
}

static kp_err clean_step(ks_compact_job *job, kp_errctx *ctx)
{
    int64_t budget = KS_COMPACT_STEP_BYTES;
    while (budget > 0 && job->phase == PH_CLEAN) {
        int64_t size = 0;
        if (atomic_load(&job->cancel))
            return KP_ERR__AGAIN;
        kp_err err = clean_next(job, &size, ctx);
        if (err != KP_ERR_NONE)
            return err;
        budget -= size;
    }
    return KP_ERR_NONE;
}

/* ---- stepping ----------------------------------------------------------- */

kp_err ks_compact_step(ks_compact_job *job, bool *done, kp_errctx *ctx)
{
    kp_errctx local = {{0}, NULL, 0, 0};
    *done = false;
    if (job->failed != KP_ERR_NONE) {
        if (ctx != NULL)
            *ctx = job->failed_ctx;
        return job->failed;
    }
    kp_err err = KP_ERR_NONE;
    if (job->phase == PH_MAP)
        err = map_step(job, &local);
    else if (job->phase == PH_CLEAN)
        err = clean_step(job, &local);
    if (err == KP_ERR__AGAIN)
        (void)KP_ERRCTX(&local, err, 0, "cancelled");
    if (err != KP_ERR_NONE) {
        job->failed = err;
        job->failed_ctx = local;
        if (ctx != NULL)
            *ctx = local;
        return err;
    }
    *done = job->phase == PH_DONE;
    if (*done) { /* the map and buffers are not needed by commit */
        ks_offmap_fini(&job->map);
        free(job->in);
        job->in = NULL;
        job->in_cap = 0;
    }
    return KP_ERR_NONE;
}

kp_err ks_compact_work(ks_compact_job *job, kp_errctx *ctx)
{
    bool done = false;
    kp_err err = KP_ERR_NONE;
    while (err == KP_ERR_NONE && !done)
        err = ks_compact_step(job, &done, ctx);
    return err;
}

void ks_compact_cancel(ks_compact_job *job)
{
    atomic_store(&job->cancel, true);
}

/* ---- committing --------------------------------------------------------- */

/* Where the group's old segments sit in the log, -1 unless all of them are
 * still there, consecutive and sealed. */
static int32_t group_position(const ks_log *log, const ks_compact_job *job, const cgroup *g)
{
    int32_t at = ks_log_segment_find(log, job->segs[g->first].seg);
    if (at < 0 || at + g->n >= ks_log_segment_count(log))
        return -1;
    for (int32_t k = 1; k < g->n; k++)
        if (ks_log_segment_find(log, job->segs[g->first + k].seg) != at + k)
            return -1;
    return at;
}

/* Steps 1-3 of the protocol in ks_compact.h, then the in-memory swap; on
 * failure every rename done is undone (best effort). */
static kp_err swap_group(ks_log *log, ks_compact_job *job, cgroup *g, int32_t at,
                         ks_segment **old, kp_errctx *ctx)
{
    int32_t renamed = 0;
    kp_err err = ks_segment_rename(g->out, KS_SUFFIX_SWAP, ctx);
    while (err == KP_ERR_NONE && renamed < g->n) {
        err = ks_segment_rename(job->segs[g->first + renamed].seg, KS_SUFFIX_DELETED, ctx);
        renamed += err == KP_ERR_NONE;
    }
    if (err == KP_ERR_NONE)
        err = ks_segment_rename(g->out, KS_SUFFIX_NONE, ctx);
    if (err == KP_ERR_NONE)
        err = ks_log_replace_segments(log, at, g->n, g->out, old, ctx);
    if (err == KP_ERR_NONE) {
        g->out = NULL; /* the log holds it now */
        return KP_ERR_NONE;
    }
    (void)ks_segment_rename(g->out, KS_SUFFIX_CLEANED, NULL);
    for (int32_t k = 0; k < renamed; k++)
        (void)ks_segment_rename(job->segs[g->first + k].seg, KS_SUFFIX_NONE, NULL);
    return err;
}

static void result_init(const ks_compact_job *job, ks_compact_result *res)
{
    memset(res, 0, sizeof(*res));
    res->first_dirty = job->first_dirty;
    res->end_offset = job->end_offset;
    res->records_read = job->records_read;
    res->records_removed = job->records_removed;
    res->tombstones_removed = job->tombstones_removed;
    res->aborted_removed = job->aborted_removed;
    res->garbage.segs = calloc((size_t)(job->nsegs + job->ngroups + 1), sizeof(ks_segment *));
}

static void garbage_add(ks_compact_result *res, ks_segment *seg)
{
    res->garbage.segs[res->garbage.n++] = seg;
    res->garbage.bytes += seg->size;
}

kp_err ks_compact_commit(ks_log *log, ks_compact_job *job, ks_compact_result *res,
                         kp_errctx *ctx)
{
    result_init(job, res);
    if (res->garbage.segs == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "compaction result");
    kp_err err = job->failed != KP_ERR_NONE ? job->failed
                 : job->phase != PH_DONE    ? KP_ERR__AGAIN
                                            : KP_ERR_NONE;
    bool stale = err != KP_ERR_NONE || ks_log_truncation_count(log) != job->truncations;
    for (int32_t i = 0; i < job->ngroups; i++) {
        cgroup *g = &job->groups[i];
        int32_t at = stale ? -1 : group_position(log, job, g);
        ks_segment *out = g->out;
        kp_err e = at >= 0 ? swap_group(log, job, g, at, res->garbage.segs + res->garbage.n, ctx)
                           : KP_ERR__AGAIN;
        if (e == KP_ERR_NONE) {
            for (int32_t k = 0; k < g->n; k++)
                res->garbage.bytes += res->garbage.segs[res->garbage.n++]->size;
            res->groups++;
            res->segments_before += g->n;
            res->bytes_before += g->bytes_before;
            res->bytes_after += out->size;
            continue;
        }
        if (e != KP_ERR__AGAIN && err == KP_ERR_NONE)
            err = e;
        res->groups_discarded++;
        if (g->out != NULL)
            garbage_add(res, g->out);
        g->out = NULL;
    }
    if (err == KP_ERR_NONE && !stale && job->end_offset > ks_log_cleaner_offset(log))
        ks_log_set_cleaner_offset(log, job->end_offset);
    return err;
}

/* ---- recovery of leftover files ------------------------------------------ */

typedef struct dir_file {
    char name[64];
    int64_t base;
    ks_segment_suffix suffix;
    bool is_log;
} dir_file;

typedef struct dir_files {
    dir_file *v;
    int32_t n;
    int32_t cap;
    bool nomem;
} dir_files;

static void collect_file(void *arg, const char *name)
{
    dir_files *l = arg;
    dir_file f;
    if (strlen(name) >= sizeof(f.name) ||
        !ks_segment_parse_file(name, &f.base, &f.suffix, &f.is_log))
        return;
    if (l->n == l->cap) {
        int32_t cap = l->cap > 0 ? l->cap * 2 : 32;
        dir_file *v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            l->nomem = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    snprintf(f.name, sizeof(f.name), "%s", name);
    l->v[l->n++] = f;
}

static kp_err unlink_in(const ks_io *io, const char *dir, const char *name, kp_errctx *ctx)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return ks_io_unlink(io, path, ctx);
}

/* Last offset of the whole batches at the start of the file (base - 1 when
 * it holds none). */
static kp_err swap_last_offset(const ks_io *io, const char *path, int64_t base, int64_t *last,
                               kp_errctx *ctx)
{
    int fd = -1;
    int64_t size = 0;
    *last = base - 1;
    kp_err err = ks_io_open(io, path, O_RDONLY, &fd, ctx);
    if (err == KP_ERR_NONE)
        err = ks_io_fsize(io, fd, &size, NULL, ctx);
    for (int64_t pos = 0; err == KP_ERR_NONE && pos + KP_BATCH_HDR_SIZE <= size;) {
        uint8_t buf[KP_BATCH_HDR_SIZE];
        kp_batch_hdr h;
        err = ks_io_read_all(io, fd, buf, sizeof(buf), pos, ctx);
        if (err != KP_ERR_NONE || kp_batch_hdr_parse(buf, sizeof(buf), &h) != KP_ERR_NONE ||
            pos + kp_batch_total_size(&h) > size)
            break;
        *last = kp_batch_last_offset(&h);
        pos += kp_batch_total_size(&h);
    }
    if (fd >= 0)
        ks_io_close(io, fd);
    return err;
}

/* A complete swap file replaces the plain segments it covers. */
static kp_err apply_swap(const ks_io *io, const char *dir, const dir_files *l, int64_t base,
                         kp_errctx *ctx)
{
    char swap[PATH_MAX], final[PATH_MAX];
    int64_t last = 0;
    snprintf(swap, sizeof(swap), "%s/%020lld.log.swap", dir, (long long)base);
    snprintf(final, sizeof(final), "%s/%020lld.log", dir, (long long)base);
    kp_err err = swap_last_offset(io, swap, base, &last, ctx);
    for (int32_t i = 0; err == KP_ERR_NONE && i < l->n; i++) {
        const dir_file *f = &l->v[i];
        if (f->suffix == KS_SUFFIX_NONE && f->base >= base && (f->base <= last || f->base == base))
            err = unlink_in(io, dir, f->name, ctx);
    }
    return err == KP_ERR_NONE ? ks_io_rename(io, swap, final, ctx) : err;
}

kp_err ks_compact_recover_files(const ks_io *io, const char *dir, kp_errctx *ctx)
{
    dir_files l = {0};
    bool changed = false;
    kp_err err = ks_io_list_dir(io, dir, collect_file, &l, ctx);
    if (err == KP_ERR_NONE && l.nomem)
        err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "listing %s", dir);
    for (int32_t i = 0; err == KP_ERR_NONE && i < l.n; i++) {
        const dir_file *f = &l.v[i];
        if (f->suffix == KS_SUFFIX_NONE || (f->suffix == KS_SUFFIX_SWAP && f->is_log))
            continue;
        err = unlink_in(io, dir, f->name, ctx);
        changed = true;
    }
    for (int32_t i = 0; err == KP_ERR_NONE && i < l.n; i++) {
        if (l.v[i].suffix == KS_SUFFIX_SWAP && l.v[i].is_log) {
            err = apply_swap(io, dir, &l, l.v[i].base, ctx);
            changed = true;
        }
    }
    if (err == KP_ERR_NONE && changed)
        err = ks_io_fsync_dir(io, dir, ctx);
    free(l.v);
    return err;
}
