#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"
#include "ks_compact.h"
#include "ks_offmap.h"
#include "kt_storage.h"
#include "storage_suites.h"

#define NOW0 1000000

/* One record as read back: offset, key and value (value NULL: tombstone). */
typedef struct kv {
    int64_t offset;
    char key[32];
    char value[32];
    bool tombstone;
} kv;

typedef struct kv_list {
    kv v[4096];
    int32_t n;
    int32_t batches;
    int32_t codec_seen[8];
} kv_list;

/* Appends one batch of producer pid (-1: none) with attributes attrs: n
 * records key[i] -> val[i] (NULL: tombstone); returns its base offset. */
static int64_t append_batch(ks_log *log, int16_t attrs, int64_t pid, const char *const *keys,
                            const char *const *vals, int32_t n, int codec, int64_t now_ms)
{
    kp_batch_builder b;
    kp_batch_builder_init(&b, 0, attrs, pid, pid >= 0 ? 0 : -1, -1);
    for (int32_t i = 0; i < n; i++) {
        kp_slice k = {(const uint8_t *)keys[i], (int32_t)strlen(keys[i])};
        kp_slice v = vals[i] != NULL ? (kp_slice){(const uint8_t *)vals[i], (int32_t)strlen(vals[i])}
                                     : (kp_slice){NULL, -1};
        kp_batch_builder_add(&b, now_ms + i, k, v, NULL, 0);
    }
    uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(kp_batch_builder_finish_codec(&b, codec, KP_COMPRESS_LEVEL_DEFAULT, &p, &len),
                     KP_ERR_NONE);
    kp_batch_builder_fini(&b);
    kp_errctx ctx = {{0}, NULL, 0, 0};
    ks_append_result res;
    kp_err err = ks_log_append(log, p, len, 7, now_ms, &res, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "append: %s", ctx.msg);
    free(p);
    return res.base_offset;
}

static void append_kv(ks_log *log, const char *const *keys, const char *const *vals, int32_t n,
                      int codec, int64_t now_ms)
{
    (void)append_batch(log, 0, -1, keys, vals, n, codec, now_ms);
}

/* A transactional batch of pid: key -> val; returns its offset. */
static int64_t append_txn(ks_log *log, int64_t pid, const char *key, const char *val)
{
    const char *k[] = {key}, *v[] = {val};
    return append_batch(log, KP_BATCH_ATTR_TRANSACTIONAL, pid, k, v, 1, KP_CODEC_NONE, NOW0);
}

/* A commit or abort marker of pid: a control batch. The cleaner keeps it
 * as-is and never parses its record, so that record is a placeholder. */
static int64_t append_marker(ks_log *log, int64_t pid)
{
    const char *k[] = {"marker"}, *v[] = {"marker"};
    return append_batch(log, KP_BATCH_ATTR_TRANSACTIONAL | KP_BATCH_ATTR_CONTROL, pid, k, v, 1,
                        KP_CODEC_NONE, NOW0);
}

/* Appends count single-record batches "k<i % keys>" -> "v<i>". */
static void append_updates(ks_log *log, int32_t count, int32_t keys, int64_t now_ms)
{
    for (int32_t i = 0; i < count; i++) {
        char k[16], v[16];
        snprintf(k, sizeof(k), "k%d", (int)(i % keys));
        snprintf(v, sizeof(v), "v%d", (int)i);
        const char *kk[] = {k}, *vv[] = {v};
        append_kv(log, kk, vv, 1, KP_CODEC_NONE, now_ms);
    }
}

static void collect_batch(const uint8_t *b, const kp_batch_hdr *h, kv_list *out)
{
    size_t total = (size_t)kp_batch_total_size(h);
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    const uint8_t *recs = b + KP_BATCH_HDR_SIZE;
    size_t len = total - KP_BATCH_HDR_SIZE;
    uint8_t *plain = NULL;
    if (codec != KP_CODEC_NONE) {
        ck_assert_int_eq(kp_decompress((kp_codec)codec, recs, len, 1 << 24, &plain, &len, NULL),
                         KP_ERR_NONE);
        recs = plain;
    }
    out->codec_seen[codec]++;
    out->batches++;
    kp_record_iter it;
    kp_record r;
    kp_records_iter_init(&it, recs, len, h->records_count);
    while (kp_records_next(&it, &r) == KP_ERR_NONE) {
        ck_assert_int_lt(out->n, 4096);
        kv *e = &out->v[out->n++];
        e->offset = h->base_offset + r.offset_delta;
        ck_assert_int_le(r.offset_delta, h->last_offset_delta);
        snprintf(e->key, sizeof(e->key), "%.*s", (int)r.key.len, (const char *)r.key.p);
        e->tombstone = r.value.len < 0;
        snprintf(e->value, sizeof(e->value), "%.*s", e->tombstone ? 0 : (int)r.value.len,
                 e->tombstone ? "" : (const char *)r.value.p);
        if (out->n > 1)
            ck_assert_int_gt(e->offset, out->v[out->n - 2].offset);
    }
    free(plain);
}

/* Reads every record of the log from its start (CRCs checked). */
static void read_all(ks_log *log, kv_list *out)
{
    memset(out, 0, sizeof(*out));
    int64_t off = ks_log_start_offset(log), end = ks_log_end_offset(log);
    while (off < end) {
        ks_log_slice s;
        ck_assert_int_eq(ks_log_read(log, off, 1 << 20, end, &s, NULL), KP_ERR_NONE);
        if (s.range.len == 0)
            break;
        uint8_t *buf = malloc((size_t)s.range.len);
        kt_pread(s.range.fd, buf, (size_t)s.range.len, s.range.off);
        for (int32_t pos = 0; pos < s.range.len;) {
            kp_batch_hdr h;
            ck_assert_int_eq(kp_batch_check(buf + pos, (size_t)(s.range.len - pos), &h),
                             KP_ERR_NONE);
            collect_batch(buf + pos, &h, out);
            off = kp_batch_last_offset(&h) + 1;
            pos += (int32_t)kp_batch_total_size(&h);
        }
        free(buf);
        ks_log_slice_release(&s);
    }
}

static const kv *find_key(const kv_list *l, const char *key, int32_t *count)
{
    const kv *last = NULL;
    *count = 0;
    for (int32_t i = 0; i < l->n; i++) {
        if (strcmp(l->v[i].key, key) == 0) {
            last = &l->v[i];
            (*count)++;
        }
    }
    return last;
}

/* The latest record per key of before must be in after, exactly once. */
static void assert_compacted(const kv_list *before, const kv_list *after)
{
    for (int32_t i = 0; i < before->n; i++) {
        int32_t nb, na;
        const kv *latest = find_key(before, before->v[i].key, &nb);
        const kv *kept = find_key(after, before->v[i].key, &na);
        ck_assert_int_eq(na, 1);
        ck_assert_int_eq(kept->offset, latest->offset);
        ck_assert_str_eq(kept->value, latest->value);
    }
}

static void compact_cfg(ks_compact_config *cfg)
{
    ks_compact_config_default(cfg);
    cfg->delete_retention_ms = 60000;
    cfg->min_cleanable_ratio = 0.01;
}

static ks_log *open_log(int64_t segment_bytes)
{
    ks_log_config cfg;
    kt_small_config(&cfg, segment_bytes, 128);
    return kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
}

/* One whole cleaning: plan, work, commit, unlink the garbage. */
static bool clean_once(ks_log *log, const ks_compact_config *cfg, int64_t now_ms,
                       ks_compact_result *res)
{
    ks_compact_job *job = NULL;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    ck_assert_int_eq(ks_compact_plan(log, cfg, NULL, now_ms, &job, &ctx), KP_ERR_NONE);
    if (job == NULL)
        return false;
    kp_err err = ks_compact_work(job, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "work: %s %s", kp_err_name(err), ctx.msg);
    err = ks_compact_commit(log, job, res, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "commit: %s %s", kp_err_name(err), ctx.msg);
    ck_assert_int_eq(ks_retention_finish(&res->garbage, NULL), KP_ERR_NONE);
    ks_compact_job_free(job);
    return true;
}

static int32_t count_files(const char *suffix)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/t-0", kt_dir());
    DIR *d = opendir(dir);
    int32_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        n += l >= s && strcmp(e->d_name + l - s, suffix) == 0;
    }
    closedir(d);
    return n;
}

START_TEST(test_compact_latest_per_key)
{
    ks_log *log = open_log(1024);
    append_updates(log, 300, 7, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    kv_list *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    read_all(log, before);
    int32_t segs = ks_log_segment_count(log);
    int64_t size = ks_log_size(log), end = ks_log_end_offset(log);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_stats st;
    ck_assert_int_eq(ks_compact_measure(log, &cfg, NULL, NOW0, &st, NULL), KP_ERR_NONE);
    ck_assert(st.cleanable);
    ck_assert_int_eq(st.clean_bytes, 0);
    ks_compact_result res;
    ck_assert(clean_once(log, &cfg, NOW0, &res));
    ck_assert_int_eq(res.groups_discarded, 0);
    ck_assert_int_eq(res.records_removed, 300 - 7);
    ck_assert_int_lt(res.bytes_after, res.bytes_before);
    read_all(log, after);
    ck_assert_int_eq(after->n, 7);
    assert_compacted(before, after);
    ck_assert_int_le(ks_log_segment_count(log), segs); /* groups by old sizes, as Kafka */
    ck_assert_int_lt(ks_log_size(log), size);
    ck_assert_int_eq(ks_log_end_offset(log), end);
    ck_assert_int_eq(ks_log_cleaner_offset(log), end);
    ck_assert_int_eq(count_files(".deleted") + count_files(".cleaned") + count_files(".swap"), 0);
    /* Nothing dirty now; new updates make it dirty again. */
    ck_assert_int_eq(ks_compact_measure(log, &cfg, NULL, NOW0, &st, NULL), KP_ERR_NONE);
    ck_assert(!st.cleanable);
    /* Reading at an offset in a gap starts at the next batch. */
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 0, 1 << 20, end, &s, NULL), KP_ERR_NONE);
    ck_assert_int_eq(s.first_offset, after->v[0].offset);
    ks_log_slice_release(&s);
    /* The log reopens to the same content (indexes rebuilt or reloaded). */
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    log = open_log(1024);
    read_all(log, before);
    ck_assert_int_eq(before->n, 7);
    assert_compacted(after, before);
    /* A second round merges the now small segments. */
    append_updates(log, 3, 7, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    ck_assert(clean_once(log, &cfg, NOW0, &res));
    ck_assert_int_lt(ks_log_segment_count(log), 4);
    read_all(log, after);
    ck_assert_int_eq(after->n, 7);
    ks_log_close(log, NULL);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_compact_tombstones)
{
    ks_log *log = open_log(1024);
    const char *k1[] = {"a", "b", "c", "b"};
    const char *v1[] = {"a1", "b1", "c1", NULL};
    append_kv(log, k1, v1, 4, KP_CODEC_NONE, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    kv_list *l = malloc(sizeof(*l));
    ks_compact_result res;
    /* Before delete.retention.ms: the tombstone stays, b1 goes. */
    ck_assert(clean_once(log, &cfg, NOW0 + cfg.delete_retention_ms - 1, &res));
    read_all(log, l);
    ck_assert_int_eq(l->n, 3);
    int32_t n;
    const kv *b = find_key(l, "b", &n);
    ck_assert(b != NULL && b->tombstone && b->offset == 3);
    ck_assert_int_eq(res.tombstones_removed, 0);
    /* Nothing dirty: no job even once the tombstone is old. */
    ks_compact_job *job = NULL;
    ck_assert_int_eq(
        ks_compact_plan(log, &cfg, NULL, NOW0 + 10 * cfg.delete_retention_ms, &job, NULL),
        KP_ERR_NONE);
    ck_assert_ptr_null(job);
    /* New data makes the log dirty; past delete.retention.ms the tombstone goes. */
    const char *k2[] = {"a"}, *v2[] = {"a2"};
    append_kv(log, k2, v2, 1, KP_CODEC_NONE, NOW0 + 5);
    ck_assert_int_eq(ks_log_roll(log, NOW0 + 5, NULL), KP_ERR_NONE);
    ck_assert(clean_once(log, &cfg, NOW0 + cfg.delete_retention_ms + 10, &res));
    ck_assert_int_eq(res.tombstones_removed, 1);
    read_all(log, l);
    ck_assert_int_eq(l->n, 2);
    ck_assert_ptr_null(find_key(l, "b", &n));
    ck_assert_str_eq(find_key(l, "a", &n)->value, "a2");
    ck_assert_str_eq(find_key(l, "c", &n)->value, "c1");
    ks_log_close(log, NULL);
    free(l);
}
END_TEST

START_TEST(test_compact_compressed)
{
    const int codecs[] = {KP_CODEC_GZIP, KP_CODEC_SNAPPY, KP_CODEC_LZ4, KP_CODEC_ZSTD};
    ks_log *log = open_log(1 << 20);
    const char *keys[] = {"x", "y", "z", "x", "w"};
    const char *vals[] = {"1", "2", "3", "4", "5"};
    for (int i = 0; i < 4; i++)
        append_kv(log, keys, vals, 5, codecs[i], NOW0);
    const char *k2[] = {"y", "plain"}, *v2[] = {"late", "p"};
    append_kv(log, k2, v2, 2, KP_CODEC_NONE, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    kv_list *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    read_all(log, before);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_result res;
    ck_assert(clean_once(log, &cfg, NOW0, &res));
    read_all(log, after);
    assert_compacted(before, after);
    ck_assert_int_eq(after->n, 5);
    /* Batches 0-2 lose everything; batch 3 (zstd, offsets 15-19) keeps
     * z (17), x (18), w (19), recompressed; the plain batch is copied. */
    ck_assert_int_eq(after->batches, 2);
    ck_assert_int_eq(after->codec_seen[KP_CODEC_ZSTD], 1);
    ck_assert_int_eq(after->codec_seen[KP_CODEC_NONE], 1);
    ck_assert_int_eq(after->v[0].offset, 17);
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 15, 1 << 20, 100, &s, NULL), KP_ERR_NONE);
    uint8_t hdr[KP_BATCH_HDR_SIZE];
    kt_pread(s.range.fd, hdr, sizeof(hdr), s.range.off);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_hdr_parse(hdr, sizeof(hdr), &h), KP_ERR_NONE);
    ck_assert_int_eq(h.base_offset, 15);
    ck_assert_int_eq(h.last_offset_delta, 4);
    ck_assert_int_eq(h.records_count, 3);
    ck_assert_int_eq(h.partition_leader_epoch, 7);
    ck_assert_int_eq(h.base_timestamp, NOW0 + 2);
    ks_log_slice_release(&s);
    ks_log_close(log, NULL);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_compact_reader_keeps_old_segment)
{
    ks_log *log = open_log(1 << 20);
    append_updates(log, 50, 3, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 0, 1 << 20, 50, &s, NULL), KP_ERR_NONE);
    uint8_t *copy = malloc((size_t)s.range.len), *again = malloc((size_t)s.range.len);
    kt_pread(s.range.fd, copy, (size_t)s.range.len, s.range.off);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_result res;
    ck_assert(clean_once(log, &cfg, NOW0, &res));
    ck_assert_int_eq(res.groups, 1);
    ck_assert(s.seg->removed);
    kt_pread(s.range.fd, again, (size_t)s.range.len, s.range.off);
    ck_assert_mem_eq(copy, again, (size_t)s.range.len);
    ks_log_slice_release(&s);
    ks_log_close(log, NULL);
    free(copy);
    free(again);
}
END_TEST

/* Renames every file ending in from to end in to instead (a crash state). */
static void rename_all(const char *from, const char *to)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/t-0", kt_dir());
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), f = strlen(from);
        if (l < f || strcmp(e->d_name + l - f, from) != 0)
            continue;
        char a[1024], b[1024];
        snprintf(a, sizeof(a), "%s/%s", dir, e->d_name);
        snprintf(b, sizeof(b), "%s/%.*s%s", dir, (int)(l - f), e->d_name, to);
        ck_assert_int_eq(rename(a, b), 0);
    }
    closedir(d);
}

/* Work done, then a crash at step: 0 before commit, 1 after .cleaned ->
 * .swap, 2 with one old segment renamed .deleted too. */
static void crash_at(int step)
{
    ks_log *log = open_log(700);
    append_updates(log, 120, 5, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    kv_list *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    read_all(log, before);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_job *job = NULL;
    ck_assert_int_eq(ks_compact_plan(log, &cfg, NULL, NOW0, &job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_compact_work(job, NULL), KP_ERR_NONE);
    ck_assert_int_gt(count_files(".log.cleaned"), 0);
    if (step >= 1)
        rename_all(".cleaned", ".swap");
    if (step >= 2) {
        char a[1024], b[1024];
        ks_segment *second;
        ck_assert_int_eq(ks_log_segment_at(log, 1, &second, NULL), KP_ERR_NONE);
        snprintf(a, sizeof(a), "%s.log", second->base_path);
        snprintf(b, sizeof(b), "%s.log.deleted", second->base_path);
        ck_assert_int_eq(rename(a, b), 0);
    }
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    log = open_log(700); /* the job still holds its files open: a crashed process */
    ck_assert_int_eq(count_files(".deleted") + count_files(".cleaned") + count_files(".swap"), 0);
    read_all(log, after);
    if (step == 0) {
        ck_assert_int_eq(after->n, before->n);
    } else {
        ck_assert_int_le(after->n, before->n);
        assert_compacted(before, after);
        ck_assert_int_eq(after->n, 5);
    }
    ks_compact_job_free(job);
    ks_log_close(log, NULL);
    free(before);
    free(after);
}

START_TEST(test_compact_crash_recovery)
{
    crash_at(_i);
}
END_TEST

START_TEST(test_compact_bounded_map)
{
    ks_log *log = open_log(600);
    append_updates(log, 80, 10, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    kv_list *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    read_all(log, before);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    cfg.map_entries = 4;
    ks_compact_result res;
    int rounds = 0;
    while (clean_once(log, &cfg, NOW0, &res)) {
        ck_assert_int_le(res.end_offset - res.first_dirty, 40);
        rounds++;
        ck_assert_int_lt(rounds, 200);
    }
    ck_assert_int_gt(rounds, 2);
    read_all(log, after);
    ck_assert_int_eq(after->n, 10);
    assert_compacted(before, after);
    ks_log_close(log, NULL);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_compact_min_lag_and_active)
{
    ks_log *log = open_log(1024);
    append_updates(log, 100, 4, NOW0);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    cfg.min_lag_ms = 5000;
    ks_compact_stats st;
    ck_assert_int_eq(ks_compact_measure(log, &cfg, NULL, NOW0 + 1000, &st, NULL), KP_ERR_NONE);
    ck_assert(!st.cleanable);
    ck_assert_int_eq(st.first_uncleanable, 0);
    ck_assert_int_eq(ks_compact_measure(log, &cfg, NULL, NOW0 + 6000, &st, NULL), KP_ERR_NONE);
    ck_assert(st.cleanable);
    ks_segment *active;
    ck_assert_int_eq(ks_log_segment_at(log, ks_log_segment_count(log) - 1, &active, NULL),
                     KP_ERR_NONE);
    ck_assert_int_eq(st.first_uncleanable, active->base_offset);
    ks_compact_result res;
    ck_assert(clean_once(log, &cfg, NOW0 + 6000, &res));
    kv_list *l = malloc(sizeof(*l));
    read_all(log, l);
    /* The active segment's records are all still there. */
    int64_t in_active = ks_log_end_offset(log) - active->base_offset;
    ck_assert_int_eq(l->n, in_active + 4);
    ks_log_close(log, NULL);
    free(l);
}
END_TEST

START_TEST(test_compact_discard_when_truncated)
{
    ks_log *log = open_log(1024);
    append_updates(log, 200, 4, NOW0);
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_job *job = NULL;
    ck_assert_int_eq(ks_compact_plan(log, &cfg, NULL, NOW0, &job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_compact_work(job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_truncate_to(log, 150, NOW0, NULL), KP_ERR_NONE);
    kv_list *l = malloc(sizeof(*l));
    read_all(log, l);
    int32_t n = l->n;
    ks_compact_result res;
    ck_assert_int_eq(ks_compact_commit(log, job, &res, NULL), KP_ERR_NONE);
    ck_assert_int_eq(res.groups, 0);
    ck_assert_int_gt(res.groups_discarded, 0);
    ck_assert_int_eq(ks_retention_finish(&res.garbage, NULL), KP_ERR_NONE);
    ks_compact_job_free(job);
    ck_assert_int_eq(count_files(".cleaned"), 0);
    read_all(log, l);
    ck_assert_int_eq(l->n, n);
    ck_assert_int_eq(ks_log_cleaner_offset(log), -1);
    /* A cancelled job commits nothing either. */
    ck_assert_int_eq(ks_compact_plan(log, &cfg, NULL, NOW0, &job, NULL), KP_ERR_NONE);
    ks_compact_cancel(job);
    ck_assert_int_eq(ks_compact_work(job, NULL), KP_ERR__AGAIN);
    ck_assert_int_eq(ks_compact_commit(log, job, &res, NULL), KP_ERR__AGAIN);
    ck_assert_int_eq(ks_retention_finish(&res.garbage, NULL), KP_ERR_NONE);
    ks_compact_job_free(job);
    read_all(log, l);
    ck_assert_int_eq(l->n, n);
    ks_log_close(log, NULL);
    free(l);
}
END_TEST

/* A record of an aborted transaction neither supersedes the committed record
 * before it nor survives the cleaning; committed transactional records
 * supersede as any record does, and markers stay. */
START_TEST(test_compact_aborted_transactions)
{
    ks_log *log = open_log(1 << 20);
    const char *k[] = {"a", "b"}, *v[] = {"a1", "b1"};
    append_kv(log, k, v, 2, KP_CODEC_NONE, NOW0);     /* 0, 1 */
    int64_t aborted = append_txn(log, 42, "a", "a2"); /* 2 */
    int64_t abort_at = append_marker(log, 42);        /* 3: abort */
    int64_t committed = append_txn(log, 43, "b", "b2");
    (void)append_marker(log, 43);                     /* commit */
    int64_t again = append_txn(log, 42, "a", "a3"); /* a second aborted transaction of 42 */
    int64_t abort2_at = append_marker(log, 42);       /* abort */
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    const ks_compact_aborted ab[] = {{42, again, abort2_at}, {7, 0, 1}, {42, aborted, abort_at}};
    ks_compact_txns txns = {ks_log_end_offset(log), ab, 3};
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_job *job = NULL;
    ks_compact_result res;
    ck_assert_int_eq(ks_compact_plan(log, &cfg, &txns, NOW0, &job, NULL), KP_ERR_NONE);
    ck_assert_ptr_nonnull(job);
    ck_assert_int_eq(ks_compact_work(job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_compact_commit(log, job, &res, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_retention_finish(&res.garbage, NULL), KP_ERR_NONE);
    ks_compact_job_free(job);
    ck_assert_int_eq(res.aborted_removed, 2);
    ck_assert_int_eq(res.records_removed, 1); /* b1 */
    kv_list *l = malloc(sizeof(*l));
    read_all(log, l);
    int32_t n;
    const kv *a = find_key(l, "a", &n);
    ck_assert(a != NULL && n == 1 && a->offset == 0 && strcmp(a->value, "a1") == 0);
    const kv *b = find_key(l, "b", &n);
    ck_assert(b != NULL && n == 1 && b->offset == committed && strcmp(b->value, "b2") == 0);
    ck_assert_int_eq(l->batches, 5); /* a1 b1, b2 and the three markers */
    ks_log_close(log, NULL);
    free(l);
}
END_TEST

/* Nothing from the first record of an open transaction on is cleaned, even
 * in sealed segments: the transaction may still abort. */
START_TEST(test_compact_stops_at_open_transaction)
{
    ks_log *log = open_log(1 << 20);
    append_updates(log, 4, 2, NOW0); /* k0 k1 k0 k1 */
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    int64_t open_at = append_txn(log, 42, "k0", "open");
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    append_updates(log, 2, 2, NOW0);
    ck_assert_int_eq(ks_log_roll(log, NOW0, NULL), KP_ERR_NONE);
    ks_compact_txns txns = {open_at, NULL, 0};
    ks_compact_config cfg;
    compact_cfg(&cfg);
    ks_compact_stats st;
    ck_assert_int_eq(ks_compact_measure(log, &cfg, &txns, NOW0, &st, NULL), KP_ERR_NONE);
    ck_assert_int_eq(st.first_uncleanable, open_at);
    ks_compact_job *job = NULL;
    ks_compact_result res;
    ck_assert_int_eq(ks_compact_plan(log, &cfg, &txns, NOW0, &job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_compact_work(job, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_compact_commit(log, job, &res, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_retention_finish(&res.garbage, NULL), KP_ERR_NONE);
    ks_compact_job_free(job);
    ck_assert_int_eq(res.end_offset, open_at);
    kv_list *l = malloc(sizeof(*l));
    read_all(log, l);
    /* k0 v2 and k1 v3 below the open transaction; all from it on */
    ck_assert_int_eq(l->n, 2 + 3);
    ck_assert_str_eq(l->v[0].value, "v2");
    ck_assert_str_eq(l->v[2].value, "open");
    ks_log_close(log, NULL);
    free(l);
}
END_TEST

START_TEST(test_compact_offmap)
{
    ks_offmap m;
    ck_assert_int_eq(ks_offmap_init(&m, 5000), KP_ERR_NONE);
    char k[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof(k), "key-%d", i);
        ck_assert_int_eq(ks_offmap_put(&m, (const uint8_t *)k, strlen(k), i), KP_ERR_NONE);
    }
    ck_assert_int_eq(ks_offmap_put(&m, (const uint8_t *)"new", 3, 1), KP_ERR__AGAIN);
    ck_assert_int_eq(ks_offmap_put(&m, (const uint8_t *)"key-7", 5, 9000), KP_ERR_NONE);
    ck_assert_int_eq(ks_offmap_put(&m, (const uint8_t *)"key-7", 5, 8000), KP_ERR_NONE);
    ck_assert_int_eq(ks_offmap_get(&m, (const uint8_t *)"key-7", 5), 9000);
    ck_assert_int_eq(ks_offmap_get(&m, (const uint8_t *)"key-4999", 8), 4999);
    ck_assert_int_eq(ks_offmap_get(&m, (const uint8_t *)"new", 3), -1);
    ck_assert_int_eq(ks_offmap_get(&m, (const uint8_t *)"", 0), -1);
    uint64_t a1, a2, b1, b2;
    ks_offmap_hash((const uint8_t *)"key-1", 5, &a1, &a2);
    ks_offmap_hash((const uint8_t *)"key-2", 5, &b1, &b2);
    ck_assert(a1 != b1 && a2 != b2);
    ks_offmap_fini(&m);
}
END_TEST

Suite *compact_suite(void)
{
    Suite *s = suite_create("compact");
    TCase *tc = tcase_create("compact");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_compact_latest_per_key);
    tcase_add_test(tc, test_compact_tombstones);
    tcase_add_test(tc, test_compact_compressed);
    tcase_add_test(tc, test_compact_reader_keeps_old_segment);
    tcase_add_loop_test(tc, test_compact_crash_recovery, 0, 3);
    tcase_add_test(tc, test_compact_bounded_map);
    tcase_add_test(tc, test_compact_min_lag_and_active);
    tcase_add_test(tc, test_compact_discard_when_truncated);
    tcase_add_test(tc, test_compact_aborted_transactions);
    tcase_add_test(tc, test_compact_stops_at_open_transaction);
    tcase_add_test(tc, test_compact_offmap);
    suite_add_tcase(s, tc);
    return s;
}
