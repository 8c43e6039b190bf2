#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ks_retention.h"
#include "kt_storage.h"
#include "storage_suites.h"

/* Runs bounded steps until nothing is eligible; returns segments deleted. */
static int32_t run_steps(ks_log *log, int64_t now_ms, int32_t max)
{
    int32_t total = 0;
    for (;;) {
        ks_retention_job job;
        ck_assert_int_eq(ks_retention_plan(log, now_ms, max, &job, NULL), KP_ERR_NONE);
        ck_assert_int_le(job.n, max);
        int32_t n = job.n;
        ck_assert_int_eq(ks_retention_finish(&job, NULL), KP_ERR_NONE);
        if (n == 0)
            return total;
        total += n;
    }
}

/* Timestamps grow with the batch index: 1000 ms per batch. */
static void fill_timed(ks_log *log, kt_model *m, int32_t batches)
{
    for (int32_t i = 0; i < batches; i++)
        ck_assert_int_eq(kt_model_try(log, m, 2, 200, (int64_t)i * 1000, 0, NULL), KP_ERR_NONE);
}

/* A log of small segments keeping retention_ms, filled with batches. */
static ks_log *open_timed(kt_model *m, int64_t retention_ms, int32_t batches)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    cfg.retention_ms = retention_ms;
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    fill_timed(log, m, batches);
    return log;
}

START_TEST(test_retention_by_time)
{
    kt_model m = {0};
    ks_log *log = open_timed(&m, 10000, 60);
    const int64_t retention_ms = 10000;
    int32_t before = ks_log_segment_count(log);
    int64_t now = 59000 + 10000; /* batches with max ts < 59000 are too old */
    ck_assert_int_eq(run_steps(log, 10000, 2), 0);
    int32_t deleted = run_steps(log, now, 2);
    ck_assert_int_gt(deleted, 0);
    ck_assert_int_eq(ks_log_segment_count(log), before - deleted);
    for (int32_t i = 0; i < ks_log_segment_count(log) - 1; i++) {
        ks_segment *seg;
        ck_assert_int_eq(ks_log_segment_at(log, i, &seg, NULL), KP_ERR_NONE);
        ck_assert_int_le(now - seg->max_timestamp, retention_ms);
    }
    ks_segment *first;
    ck_assert_int_eq(ks_log_segment_at(log, 0, &first, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_start_offset(log), first->base_offset);
    char path[512];
    snprintf(path, sizeof(path), "%s/t-0/00000000000000000000.log", kt_dir());
    ck_assert_int_ne(access(path, F_OK), 0);
    /* Never the active segment, however old. */
    run_steps(log, INT64_MAX / 2, 100);
    ck_assert_int_eq(ks_log_segment_count(log), 1);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].last + 1);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_retention_by_size)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    cfg.retention_bytes = 5000;
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    fill_timed(log, &m, 80);
    ck_assert_int_gt(ks_log_size(log), 5000);
    ck_assert_int_gt(run_steps(log, 0, 1), 0);
    ks_segment *first;
    ck_assert_int_eq(ks_log_segment_at(log, 0, &first, NULL), KP_ERR_NONE);
    ck_assert_int_ge(ks_log_size(log), cfg.retention_bytes);
    ck_assert_int_lt(ks_log_size(log) - first->size, cfg.retention_bytes);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* DeleteRecords moves the start; whole segments below it go. A reader
 * still sending a deleted segment finishes. */
START_TEST(test_retention_log_start_and_reader)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 60, 5000, 41);
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 0, 1 << 20, INT64_MAX, &s, NULL), KP_ERR_NONE);
    ks_segment *seg;
    ck_assert_int_eq(ks_log_segment_at(log, 3, &seg, NULL), KP_ERR_NONE);
    int64_t start = seg->base_offset + 1;
    ck_assert_int_eq(ks_log_advance_start(log, start, NULL), KP_ERR_NONE);
    ck_assert_int_eq(run_steps(log, 0, 10), 3);
    ck_assert_int_eq(ks_log_start_offset(log), start);
    uint8_t buf[64];
    kt_pread(s.range.fd, buf, sizeof(buf), s.range.off);
    ck_assert_int_eq(kp_be64_get(buf), 0);
    ks_log_slice_release(&s);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* The guard's hold: a reader at an offset keeps the segments it has not
 * read, until they are max_ms past retention or hold more than max_bytes;
 * ks_log_time_near reads a batch's time from memory. */
START_TEST(test_retention_hold)
{
    kt_model m = {0};
    ks_log *log = open_timed(&m, 10000, 60);
    int64_t now = 59000 + 10000;
    int32_t count = 0, allowed = -1;
    ck_assert_int_eq(ks_retention_eligible(log, now, 1000, &count, NULL), KP_ERR_NONE);
    ck_assert_int_gt(count, 2);
    ks_segment *s1, *s2;
    ck_assert_int_eq(ks_log_segment_at(log, 1, &s1, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_segment_at(log, 2, &s2, NULL), KP_ERR_NONE);
    /* A reader inside segment 1: segment 0 goes, 1 stays. */
    ks_retention_hold h = {s1->base_offset + 1, -1, -1};
    ck_assert_int_eq(ks_retention_apply_hold(log, now, count, &h, &allowed, NULL), KP_ERR_NONE);
    ck_assert_int_eq(allowed, 1);
    /* No reader behind: every eligible segment goes. */
    h.keep_from = INT64_MAX;
    ck_assert_int_eq(ks_retention_apply_hold(log, now, count, &h, &allowed, NULL), KP_ERR_NONE);
    ck_assert_int_eq(allowed, count);
    /* A reader at 0 within the time bound: nothing goes; 70 s later the
     * segments older than 29 s are past retention + 100 s and go. */
    h = (ks_retention_hold){0, 100000, -1};
    ck_assert_int_eq(ks_retention_apply_hold(log, now, count, &h, &allowed, NULL), KP_ERR_NONE);
    ck_assert_int_eq(allowed, 0);
    ck_assert_int_eq(ks_retention_apply_hold(log, now + 70000, count, &h, &allowed, NULL),
                     KP_ERR_NONE);
    ck_assert_int_gt(allowed, 0);
    ck_assert_int_lt(allowed, count);
    /* The byte bound: held bytes above it go, oldest first. */
    h = (ks_retention_hold){0, -1, s1->size + s2->size};
    ck_assert_int_eq(ks_retention_apply_hold(log, now, count, &h, &allowed, NULL), KP_ERR_NONE);
    ck_assert_int_gt(allowed, 0);
    ck_assert_int_le(allowed, count - 2);
    /* Batch times from memory: the batch at s2's base was written at i * 1000. */
    int64_t t2 = ks_log_time_near(log, s2->base_offset);
    ck_assert_int_ge(t2, 0);
    ck_assert_int_le(t2, ks_log_time_near(log, ks_log_end_offset(log) - 1));
    ck_assert_int_eq(ks_log_time_near(log, ks_log_end_offset(log)), -1);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

Suite *retention_suite(void)
{
    Suite *s = suite_create("retention");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_add_test(tc, test_retention_by_time);
    tcase_add_test(tc, test_retention_by_size);
    tcase_add_test(tc, test_retention_log_start_and_reader);
    tcase_add_test(tc, test_retention_hold);
    suite_add_tcase(s, tc);
    return s;
}
