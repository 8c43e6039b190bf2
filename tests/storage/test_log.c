#include <check.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kp_batch.h"
#include "ks_log.h"
#include "kt_batch_build.h"
#include "kt_storage.h"
#include "storage_suites.h"

START_TEST(test_log_round_trip_many_rolls)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 4096, 512);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 400, 5000, 1);
    ck_assert_int_gt(ks_log_segment_count(log), 20);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].last + 1);
    ck_assert_int_eq(ks_log_high_watermark(log), ks_log_end_offset(log));
    kt_check_reads(log, &m, m.n);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    /* Clean reopen reads no segment data but finds the same log. */
    log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].last + 1);
    kt_check_reads(log, &m, m.n);
    kt_model_fill(log, &m, 10, 6000, 2);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    /* Unclean reopen from offset 0 rescans every segment. */
    ks_recover_report rep;
    log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, &rep);
    ck_assert_int_eq(rep.truncated_bytes, 0);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].last + 1);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* Slices cover whole batches, stay under max_bytes unless one batch is
 * larger, and stop below max_offset. */
START_TEST(test_log_read_bounds)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 200, 5000, 3);
    for (int32_t max = 1; max < 4000; max += 97) {
        for (int32_t i = 0; i < m.n; i += 7) {
            ks_log_slice s;
            int64_t hw = m.v[m.n - 1 - i / 2].base;
            ck_assert_int_eq(ks_log_read(log, m.v[i].base, max, hw, &s, NULL), KP_ERR_NONE);
            if (m.v[i].base >= hw) {
                ck_assert_int_eq(s.range.len, 0);
                continue;
            }
            int32_t want = 0, j = i;
            while (j < m.n && m.v[j].base < hw && (want == 0 || want + m.v[j].len <= max))
                want += m.v[j++].len;
            ck_assert_int_eq(s.range.len, want);
            ks_log_slice_release(&s);
        }
    }
    ks_log_slice s;
    int64_t leo = ks_log_end_offset(log);
    ck_assert_int_eq(ks_log_read(log, leo, 100, INT64_MAX, &s, NULL), KP_ERR_NONE);
    ck_assert_int_eq(s.range.len, 0);
    ck_assert_int_eq(ks_log_read(log, leo + 1, 100, INT64_MAX, &s, NULL),
                     KP_ERR_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(ks_log_read(log, -1, 100, INT64_MAX, &s, NULL), KP_ERR_OFFSET_OUT_OF_RANGE);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_log_append_time)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 4096);
    cfg.message_timestamp_type = KS_TS_LOG_APPEND_TIME;
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    size_t len;
    uint8_t *b = kt_batch_build(4, 50, 111, 1, &len);
    ks_append_result res;
    ck_assert_int_eq(ks_log_append(log, b, len, 9, 777777, &res, NULL), KP_ERR_NONE);
    ck_assert_int_eq(res.log_append_time, 777777);
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 0, 1 << 20, INT64_MAX, &s, NULL), KP_ERR_NONE);
    uint8_t *got = malloc(len);
    kt_pread(s.range.fd, got, len, s.range.off);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_check(got, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(h.max_timestamp, 777777);
    ck_assert_int_ne(h.attributes & KP_BATCH_ATTR_LOG_APPEND_TIME, 0);
    ck_assert_int_eq(h.partition_leader_epoch, 9);
    ks_log_slice_release(&s);
    free(got);
    free(b);
    ks_log_close(log, NULL);
}
END_TEST

START_TEST(test_log_multi_batch_and_malformed)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 4096);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    size_t l1, l2;
    uint8_t *b1 = kt_batch_build(3, 10, 1, 1, &l1);
    uint8_t *b2 = kt_batch_build(2, 10, 1, 1, &l2);
    uint8_t *both = malloc(l1 + l2);
    memcpy(both, b1, l1);
    memcpy(both + l1, b2, l2);
    ks_append_result res;
    ck_assert_int_eq(ks_log_append(log, both, l1 + l2, 0, 1, &res, NULL), KP_ERR_NONE);
    ck_assert_int_eq(res.base_offset, 0);
    ck_assert_int_eq(res.last_offset, 4);
    ck_assert_int_eq(res.batches, 2);
    ck_assert_int_eq(kp_be64_get(both + l1), 3);
    ck_assert_int_eq(ks_log_append(log, both, l1 + l2 - 1, 0, 1, &res, NULL), KP_ERR__MALFORMED);
    ck_assert_int_eq(ks_log_append(log, both, 0, 0, 1, &res, NULL), KP_ERR__MALFORMED);
    ck_assert_int_eq(ks_log_end_offset(log), 5);
    free(both);
    free(b1);
    free(b2);
    ks_log_close(log, NULL);
}
END_TEST

START_TEST(test_log_truncate_and_start)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 100, 5000, 4);
    int32_t cut = 60;
    /* Truncating inside a batch removes the whole batch. */
    ck_assert_int_eq(ks_log_truncate_to(log, m.v[cut].last, 5000, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[cut].base);
    m.n = cut;
    kt_check_reads(log, &m, m.n);
    kt_model_fill(log, &m, 20, 5000, 5);
    ck_assert_int_eq(m.v[cut].base, m.v[cut - 1].last + 1);
    kt_check_reads(log, &m, m.n);
    /* DeleteRecords. */
    int64_t start = m.v[30].base + 1;
    ks_log_slice s;
    ck_assert_int_eq(ks_log_advance_start(log, ks_log_end_offset(log) + 1, NULL),
                     KP_ERR_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(ks_log_advance_start(log, start, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_start_offset(log), start);
    ck_assert_int_eq(ks_log_read(log, start - 1, 1, INT64_MAX, &s, NULL),
                     KP_ERR_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(ks_log_read(log, start, 1, INT64_MAX, &s, NULL), KP_ERR_NONE);
    ck_assert_int_eq(s.first_offset, m.v[30].base);
    ks_log_slice_release(&s);
    /* Truncating below the start empties the log and restarts it there. */
    ck_assert_int_eq(ks_log_truncate_to(log, 7, 5000, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_end_offset(log), 7);
    ck_assert_int_eq(ks_log_start_offset(log), 7);
    ck_assert_int_eq(ks_log_segment_count(log), 1);
    ck_assert_int_eq(kt_append(log, 2, 5, 1, 5000), 7);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* A reader's slice stays readable after its segment was removed. */
START_TEST(test_log_slice_outlives_segment)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 40, 5000, 6);
    ks_log_slice s;
    ck_assert_int_eq(ks_log_read(log, 0, 1, INT64_MAX, &s, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_truncate_to(log, 0, 5000, NULL), KP_ERR_NONE);
    uint8_t *buf = malloc((size_t)s.range.len);
    kt_pread(s.range.fd, buf, (size_t)s.range.len, s.range.off);
    ck_assert_int_eq(kp_batch_check(buf, (size_t)s.range.len, NULL), KP_ERR_NONE);
    free(buf);
    ks_log_slice_release(&s);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_log_on_disk_names)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 30, 5000, 7);
    char path[512];
    ks_segment *seg = NULL;
    ck_assert_int_eq(ks_log_segment_at(log, 1, &seg, NULL), KP_ERR_NONE);
    snprintf(path, sizeof(path), "%s/t-0/%020lld.log", kt_dir(), (long long)seg->base_offset);
    ck_assert_int_eq(access(path, F_OK), 0);
    snprintf(path, sizeof(path), "%s/t-0/00000000000000000000.timeindex", kt_dir());
    ck_assert_int_eq(access(path, F_OK), 0);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* segment.ms counts record time, as Kafka does: from the first batch's
 * timestamp to the newest one appended (read back from the file after a
 * reopen), and wall-clock time since the segment's creation only when its
 * first batch has no timestamp. */
START_TEST(test_log_roll_by_record_time)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 4096);
    cfg.segment_ms = 1000;
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    const int64_t now = 2000000000000, old = now - 10 * 86400000LL;
    /* Records ten days old, appended a minute apart: one segment. */
    for (int i = 0; i < 5; i++)
        kt_append(log, 1, 10, old + i, now + i * 60000);
    ck_assert_int_eq(ks_log_segment_count(log), 1);
    kt_append(log, 1, 10, old + 1000, now);
    ck_assert_int_eq(ks_log_segment_count(log), 1);
    kt_append(log, 1, 10, old + 1001, now); /* more than 1000 ms of record time */
    ck_assert_int_eq(ks_log_segment_count(log), 2);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    kt_append(log, 1, 10, old + 2001, now + 3600000);
    ck_assert_int_eq(ks_log_segment_count(log), 2);
    kt_append(log, 1, 10, old + 2002, now);
    ck_assert_int_eq(ks_log_segment_count(log), 3);
    ks_log_close(log, NULL);

    /* No timestamps: the wall clock from creation (kt_open's now, 1000). */
    char *dir = kt_tmpdir();
    log = kt_open(kt_io(), dir, &cfg, false, 0, NULL);
    kt_append(log, 1, 10, -1, 1500);
    kt_append(log, 1, 10, -1, 2000);
    ck_assert_int_eq(ks_log_segment_count(log), 1);
    kt_append(log, 1, 10, -1, 2001);
    ck_assert_int_eq(ks_log_segment_count(log), 2);
    ks_log_close(log, NULL);
    kt_rmtree(dir);
}
END_TEST

Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_log_round_trip_many_rolls);
    tcase_add_test(tc, test_log_read_bounds);
    tcase_add_test(tc, test_log_append_time);
    tcase_add_test(tc, test_log_multi_batch_and_malformed);
    tcase_add_test(tc, test_log_truncate_and_start);
    tcase_add_test(tc, test_log_slice_outlives_segment);
    tcase_add_test(tc, test_log_on_disk_names);
    tcase_add_test(tc, test_log_roll_by_record_time);
    suite_add_tcase(s, tc);
    return s;
}
