#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ks_log.h"
#include "kt_batch_build.h"
#include "kt_storage.h"
#include "storage_suites.h"

/* Bytes in the .log files on disk, all segments together. */
static int64_t files_size(ks_log *log)
{
    int64_t total = 0;
    for (int32_t i = 0; i < ks_log_segment_count(log); i++) {
        ks_segment *seg;
        ck_assert_int_eq(ks_log_segment_at(log, i, &seg, NULL), KP_ERR_NONE);
        struct stat st;
        ck_assert_int_eq(fstat(seg->fd, &st), 0);
        total += (int64_t)st.st_size;
    }
    return total;
}

static kp_err try_append(ks_log *log, int32_t n, size_t vlen)
{
    size_t len;
    uint8_t *b = kt_batch_build(n, vlen, 1000, 1, &len);
    ks_append_result res;
    kp_err err = ks_log_append(log, b, len, 3, 5000, &res, NULL);
    free(b);
    return err;
}

/* Disk full or EIO, before or in the middle of a batch: the append fails,
 * nothing of it is visible, and appends work again once space is back. */
START_TEST(test_io_write_errors_leave_no_trace)
{
    static const int errs[] = {ENOSPC, EIO, EDQUOT};
    static const int64_t budgets[] = {0, 1, 60, 200};
    ks_log_config cfg;
    kt_small_config(&cfg, 4096, 100);
    ks_log *log = kt_open(&kt_fio()->io, kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 20, 5000, 31);
    for (size_t e = 0; e < 3; e++) {
        for (size_t b = 0; b < 4; b++) {
            int64_t leo = ks_log_end_offset(log);
            int64_t fsize = files_size(log);
            kt_faultio_set(kt_fio(), budgets[b], errs[e], false);
            kp_err err = try_append(log, 3, 100);
            ck_assert_int_eq(err, errs[e] == EIO ? KP_ERR__IO : KP_ERR__NOSPC);
            ck_assert_int_eq(kp_err_to_wire(err), KP_ERR_KAFKA_STORAGE_ERROR);
            ck_assert_int_eq(ks_log_end_offset(log), leo);
            ck_assert_int_eq(files_size(log), fsize);
            ck_assert_int_eq(ks_log_size(log), fsize);
            ks_log_slice s;
            ck_assert_int_eq(ks_log_read(log, leo, 1000, INT64_MAX, &s, NULL), KP_ERR_NONE);
            ck_assert_int_eq(s.range.len, 0);
            kt_faultio_set(kt_fio(), -1, 0, false);
            kt_model_fill(log, &m, 3, 5000, 32 + (unsigned)b);
            ck_assert_int_eq(m.v[m.n - 3].base, leo);
        }
    }
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].last + 1);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_io_short_writes)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 4096, 100);
    kt_fio()->short_max = 7;
    ks_log *log = kt_open(&kt_fio()->io, kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 50, 5000, 33);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* The process dies after N more bytes reach the file: every acknowledged
 * batch survives, and at most the unacknowledged one besides. */
START_TEST(test_io_crash_after_n_bytes)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 2048, 100);
    int64_t budget = 37 + _i * 211;
    ks_log *log = kt_open(&kt_fio()->io, kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 5, 5000, 34);
    kt_faultio_set(kt_fio(), budget, EIO, true);
    while (kt_model_try(log, &m, 2, 150, 1000, 5000, NULL) == KP_ERR_NONE)
        ck_assert_int_lt(ks_log_end_offset(log), 100000);
    int64_t acked = ks_log_end_offset(log);
    ks_log_close(log, NULL);
    log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    ck_assert_int_ge(ks_log_end_offset(log), acked);
    ck_assert_int_le(ks_log_end_offset(log), acked + 2);
    kt_check_reads(log, &m, m.n);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* A failed fdatasync is never reported as a success, even if retried. */
START_TEST(test_io_failed_fdatasync_poisons)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 4096, 100);
    ks_log *log = kt_open(&kt_fio()->io, kt_dir(), &cfg, false, 0, NULL);
    kt_model m = {0};
    kt_model_fill(log, &m, 5, 5000, 35);
    ck_assert_int_eq(ks_log_flush(log, 6000, NULL), KP_ERR_NONE);
    int64_t rp = ks_log_recovery_point(log);
    ck_assert_int_eq(rp, ks_log_end_offset(log));
    kt_model_fill(log, &m, 5, 5000, 36);
    kt_faultio_set_sync(kt_fio(), EIO);
    ck_assert_int_eq(ks_log_flush(log, 6000, NULL), KP_ERR__IO);
    kt_faultio_set_sync(kt_fio(), 0);
    ck_assert_int_eq(ks_log_flush(log, 6000, NULL), KP_ERR__IO);
    ck_assert_int_eq(ks_log_recovery_point(log), rp);
    ck_assert_int_eq(try_append(log, 1, 10), KP_ERR__IO);
    ck_assert_int_ne(ks_log_close(log, NULL), KP_ERR_NONE);
    /* Reopening runs recovery and the log works again. */
    log = kt_open(kt_io(), kt_dir(), &cfg, false, rp, NULL);
    kt_check_reads(log, &m, m.n);
    ck_assert_int_eq(try_append(log, 1, 10), KP_ERR_NONE);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_io_write_errors_leave_no_trace);
    tcase_add_test(tc, test_io_short_writes);
    tcase_add_loop_test(tc, test_io_crash_after_n_bytes, 0, 12);
    tcase_add_test(tc, test_io_failed_fdatasync_poisons);
    suite_add_tcase(s, tc);
    return s;
}
