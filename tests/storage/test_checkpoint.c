#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ks_checkpoint.h"
#include "kt_storage.h"
#include "storage_suites.h"

static void put_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", kt_dir(), name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_checkpoint_round_trip)
{
    ks_ckpt_entry in[3] = {
        {"orders", 0, 42}, {"__consumer_offsets", 17, 0}, {"a.b-c_d", 2, 1234567890123LL}};
    ck_assert_int_eq(ks_checkpoint_write(kt_io(), kt_dir(), KS_CKPT_RECOVERY_POINT, in, 3, NULL),
                     KP_ERR_NONE);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", kt_dir(), KS_CKPT_RECOVERY_POINT);
    FILE *f = fopen(path, "r");
    char text[256] = {0};
    ck_assert_int_gt(fread(text, 1, sizeof(text) - 1, f), 0);
    fclose(f);
    ck_assert_str_eq(text, "0\n3\norders 0 42\n__consumer_offsets 17 0\na.b-c_d 2 1234567890123\n");
    snprintf(path, sizeof(path), "%s/%s.tmp", kt_dir(), KS_CKPT_RECOVERY_POINT);
    ck_assert_int_ne(access(path, F_OK), 0);
    ks_ckpt_entry *out;
    size_t n;
    ck_assert_int_eq(ks_checkpoint_read(kt_io(), kt_dir(), KS_CKPT_RECOVERY_POINT, &out, &n, NULL),
                     KP_ERR_NONE);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ks_checkpoint_find(out, n, "a.b-c_d", 2), 1234567890123LL);
    ck_assert_int_eq(ks_checkpoint_find(out, n, "__consumer_offsets", 17), 0);
    ck_assert_int_eq(ks_checkpoint_find(out, n, "orders", 1), -1);
    ks_checkpoint_free(out, n);
}
END_TEST

START_TEST(test_checkpoint_missing_and_corrupt)
{
    ks_ckpt_entry *out;
    size_t n;
    ck_assert_int_eq(ks_checkpoint_read(kt_io(), kt_dir(), KS_CKPT_LOG_START, &out, &n, NULL),
                     KP_ERR_NONE);
    ck_assert_uint_eq(n, 0);
    ks_checkpoint_free(out, n);
    static const char *const bad[] = {"", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt x 1\n",
                                      "0\n1\nt 0 1\nu 0 2\n", "0\n1\nt0 1\n", "0\n-1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_file(KS_CKPT_LOG_START, bad[i]);
        ck_assert_int_eq(ks_checkpoint_read(kt_io(), kt_dir(), KS_CKPT_LOG_START, &out, &n, NULL),
                         KP_ERR__CORRUPT);
    }
    put_file(KS_CKPT_LOG_START, "0\n0\n");
    ck_assert_int_eq(ks_checkpoint_read(kt_io(), kt_dir(), KS_CKPT_LOG_START, &out, &n, NULL),
                     KP_ERR_NONE);
    ck_assert_uint_eq(n, 0);
    ks_checkpoint_free(out, n);
}
END_TEST

START_TEST(test_checkpoint_clean_shutdown_marker)
{
    bool clean = true;
    ck_assert_int_eq(ks_clean_shutdown_take(kt_io(), kt_dir(), &clean, NULL), KP_ERR_NONE);
    ck_assert(!clean);
    ck_assert_int_eq(ks_clean_shutdown_mark(kt_io(), kt_dir(), 5, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_clean_shutdown_take(kt_io(), kt_dir(), &clean, NULL), KP_ERR_NONE);
    ck_assert(clean);
    ck_assert_int_eq(ks_clean_shutdown_take(kt_io(), kt_dir(), &clean, NULL), KP_ERR_NONE);
    ck_assert(!clean);
    put_file(KS_CLEAN_SHUTDOWN, "");
    ck_assert_int_eq(ks_clean_shutdown_take(kt_io(), kt_dir(), &clean, NULL), KP_ERR_NONE);
    ck_assert(clean);
}
END_TEST

Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_add_test(tc, test_checkpoint_round_trip);
    tcase_add_test(tc, test_checkpoint_missing_and_corrupt);
    tcase_add_test(tc, test_checkpoint_clean_shutdown_marker);
    suite_add_tcase(s, tc);
    return s;
}
