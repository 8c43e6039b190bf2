#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ks_index.h"
#include "ks_log.h"
#include "kt_storage.h"
#include "storage_suites.h"

static int32_t brute_floor(const ks_index *ix, int64_t key, bool strict)
{
    int32_t r = -1;
    for (int32_t i = 0; i < ix->n; i++) {
        if (strict ? ix->keys[i] < key : ix->keys[i] <= key)
            r = i;
    }
    return r;
}

START_TEST(test_index_lookup_vs_brute_force)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/0.index", kt_dir());
    ks_index ix;
    ks_index_init(&ix, _i == 0 ? KS_INDEX_OFFSET : KS_INDEX_TIME, 100000);
    ck_assert_int_eq(ks_index_open(&ix, kt_io(), path, true, NULL), KP_ERR_NONE);
    unsigned seed = 11;
    int64_t key = 0;
    int32_t val = 0;
    for (int i = 0; i < 3000; i++) {
        key += 1 + rand_r(&seed) % 50;
        val += rand_r(&seed) % 3;
        ck_assert_int_eq(ks_index_append(&ix, kt_io(), key, val, NULL), KP_ERR_NONE);
    }
    ck_assert_int_eq(ks_index_append(&ix, kt_io(), key, val, NULL), KP_ERR__INVAL);
    for (int64_t k = -5; k < key + 5; k += 1 + rand_r(&seed) % 7) {
        ck_assert_int_eq(ks_index_floor_key(&ix, k, false), brute_floor(&ix, k, false));
        ck_assert_int_eq(ks_index_floor_key(&ix, k, true), brute_floor(&ix, k, true));
    }
    /* What was written reads back identically. */
    ks_index copy;
    ks_index_init(&copy, ix.kind, 100000);
    ck_assert_int_eq(ks_index_open(&copy, kt_io(), path, false, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_index_load(&copy, kt_io(), INT64_MAX, INT32_MAX, NULL), KP_ERR_NONE);
    ck_assert_int_eq(copy.n, ix.n);
    for (int32_t i = 0; i < ix.n; i++) {
        ck_assert_int_eq(copy.keys[i], ix.keys[i]);
        ck_assert_int_eq(copy.vals[i], ix.vals[i]);
    }
    /* Out-of-range limits make the file corrupt. */
    ck_assert_int_eq(ks_index_load(&copy, kt_io(), key, INT32_MAX, NULL), KP_ERR__CORRUPT);
    ck_assert_int_eq(copy.n, 0);
    ks_index_fini(&copy, kt_io());
    ks_index_fini(&ix, kt_io());
}
END_TEST

/* Offset for timestamp against a scan of what was appended. */
START_TEST(test_index_time_lookup_vs_brute_force)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 8192, 300);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 300, 5000, 12);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t ts = 999990; ts < 1100010; ts += 997) {
            int32_t want = -1;
            for (int32_t i = 0; i < m.n && want < 0; i++)
                want = m.v[i].max_ts >= ts ? i : -1;
            int64_t off = -1, bts = -1;
            kp_err err = ks_log_offset_for_time(log, ts, &off, &bts, NULL);
            if (want < 0) {
                ck_assert_int_eq(err, KP_ERR__NOENT);
                continue;
            }
            ck_assert_int_eq(err, KP_ERR_NONE);
            ck_assert_int_eq(off, m.v[want].base);
            ck_assert_int_eq(bts, m.v[want].max_ts);
        }
        ks_log_close(log, NULL);
        log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    }
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

static void index_path(char *buf, size_t n, const ks_segment *seg, const char *ext)
{
    snprintf(buf, n, "%s%s", seg->base_path, ext);
}

/* Missing, truncated and scrambled index files are rebuilt from the log. */
START_TEST(test_index_missing_and_corrupt_rebuilt)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 4096, 200);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 150, 5000, 13);
    ck_assert_int_gt(ks_log_segment_count(log), 6);
    char p[3][512], q[512];
    ks_segment *seg;
    ck_assert_int_eq(ks_log_segment_at(log, 0, &seg, NULL), KP_ERR_NONE);
    index_path(p[0], sizeof(p[0]), seg, ".index");
    ck_assert_int_eq(ks_log_segment_at(log, 2, &seg, NULL), KP_ERR_NONE);
    index_path(p[1], sizeof(p[1]), seg, ".index");
    index_path(q, sizeof(q), seg, ".timeindex");
    int32_t last = ks_log_segment_count(log) - 1;
    ck_assert_int_eq(ks_log_segment_at(log, last, &seg, NULL), KP_ERR_NONE);
    index_path(p[2], sizeof(p[2]), seg, ".index");
    ks_log_close(log, NULL);
    ck_assert_int_eq(unlink(p[0]), 0);
    ck_assert_int_eq(truncate(q, 5), 0);
    int fd = open(p[1], O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "\x7f\xff\xff\xff\x00\x00\x00\x00", 8, 0), 8);
    close(fd);
    fd = open(p[2], O_WRONLY);
    ck_assert_int_eq(pwrite(fd, "\x00\x00\x00\x01\x7f\x00\x00\x00", 8, 0), 8);
    close(fd);
    log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    kt_check_reads(log, &m, m.n);
    int64_t off, ts;
    ck_assert_int_eq(ks_log_offset_for_time(log, 0, &off, &ts, NULL), KP_ERR_NONE);
    ck_assert_int_eq(off, 0);
    ck_assert_int_eq(access(p[0], F_OK), 0);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

Suite *index_suite(void)
{
    Suite *s = suite_create("index");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_index_lookup_vs_brute_force, 0, 2);
    tcase_add_test(tc, test_index_time_lookup_vs_brute_force);
    tcase_add_test(tc, test_index_missing_and_corrupt_rebuilt);
    suite_add_tcase(s, tc);
    return s;
}
