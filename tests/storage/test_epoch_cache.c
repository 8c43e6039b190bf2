/* ks_epoch_cache and the log's use of it: Kafka's assign, endOffsetFor and
 * truncation rules, the leader-epoch-checkpoint file, and the cache a log
 * keeps across appends, replica appends, truncation, reopen and rebuild. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kt_batch_build.h"
#include "kt_storage.h"
#include "ks_epoch_cache.h"
#include "ks_log.h"
#include "storage_suites.h"

static void assign(ks_epoch_cache *c, int32_t epoch, int64_t start, bool want_changed)
{
    bool changed;
    ck_assert_int_eq(ks_epoch_cache_assign(c, epoch, start, &changed), KP_ERR_NONE);
    ck_assert(changed == want_changed);
}

static void end_of(const ks_epoch_cache *c, int32_t epoch, int64_t leo, int32_t want_epoch,
                   int64_t want_end)
{
    int32_t e;
    int64_t end;
    ks_epoch_cache_end_offset(c, epoch, leo, &e, &end);
    ck_assert_int_eq(e, want_epoch);
    ck_assert_int_eq(end, want_end);
}

START_TEST(test_epoch_assign_and_end_offset)
{
    ks_epoch_cache c;
    ks_epoch_cache_init(&c);
    end_of(&c, 0, 10, -1, -1); /* empty */
    assign(&c, 1, 5, true);
    assign(&c, 1, 9, false);   /* same epoch, later offset: kept */
    assign(&c, 3, 20, true);
    assign(&c, 5, 40, true);
    ck_assert_int_eq(ks_epoch_cache_latest(&c), 5);
    end_of(&c, 5, 60, 5, 60);  /* the latest ends at the log end */
    end_of(&c, 3, 60, 3, 40);  /* the start of the next larger epoch */
    end_of(&c, 4, 60, 3, 40);  /* the largest epoch <= the requested one */
    end_of(&c, 1, 60, 1, 20);
    end_of(&c, 0, 60, 0, 5);   /* below every entry: the first start */
    end_of(&c, 6, 60, -1, -1); /* past the latest */
    end_of(&c, -1, 60, -1, -1);
    /* a smaller start for a larger epoch removes what it overtakes */
    assign(&c, 6, 30, true);
    ck_assert_int_eq(c.n, 3);
    ck_assert_int_eq(c.v[2].epoch, 6);
    ck_assert_int_eq(c.v[2].start_offset, 30);
    /* an older epoch removes the newer ones */
    assign(&c, 2, 35, true);
    ck_assert_int_eq(c.n, 2);
    ck_assert_int_eq(c.v[1].epoch, 2);
    bool changed;
    ck_assert_int_eq(ks_epoch_cache_assign(&c, -1, 3, &changed), KP_ERR__INVAL);
    ks_epoch_cache_fini(&c);
}
END_TEST

START_TEST(test_epoch_truncate_both_ends)
{
    ks_epoch_cache c;
    ks_epoch_cache_init(&c);
    assign(&c, 0, 0, true);
    assign(&c, 2, 10, true);
    assign(&c, 4, 20, true);
    ck_assert(!ks_epoch_cache_truncate_end(&c, 21));
    ck_assert(ks_epoch_cache_truncate_end(&c, 20));
    ck_assert_int_eq(ks_epoch_cache_latest(&c), 2);
    ck_assert(!ks_epoch_cache_truncate_start(&c, 0));
    ck_assert(ks_epoch_cache_truncate_start(&c, 12));
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq(c.v[0].epoch, 2);
    ck_assert_int_eq(c.v[0].start_offset, 12);
    ck_assert(!ks_epoch_cache_truncate_start(&c, 12));
    ks_epoch_cache_fini(&c);
}
END_TEST

static void put_file(const char *text)
{
    ck_assert_int_eq(ks_io_write_file_atomic(kt_io(), kt_dir(), KS_EPOCH_CHECKPOINT, text,
                                             strlen(text), NULL), KP_ERR_NONE);
}

START_TEST(test_epoch_file_round_trip_and_corrupt)
{
    ks_epoch_cache c, r;
    ks_epoch_cache_init(&c);
    ks_epoch_cache_init(&r);
    ck_assert_int_eq(ks_epoch_cache_read(&r, kt_io(), kt_dir(), NULL), KP_ERR__NOENT);
    assign(&c, 0, 0, true);
    assign(&c, 7, 1234567890123LL, true);
    ck_assert_int_eq(ks_epoch_cache_write(&c, kt_io(), kt_dir(), NULL), KP_ERR_NONE);
    char path[512], text[128] = {0};
    snprintf(path, sizeof(path), "%s/%s", kt_dir(), KS_EPOCH_CHECKPOINT);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(fread(text, 1, sizeof(text) - 1, f), 0);
    fclose(f);
    ck_assert_str_eq(text, "0\n2\n0 0\n7 1234567890123\n");
    ck_assert_int_eq(ks_epoch_cache_read(&r, kt_io(), kt_dir(), NULL), KP_ERR_NONE);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.v[1].start_offset, 1234567890123LL);
    static const char *const bad[] = {"", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 x\n", "0\n-1\n",
                                      "0\n2\n3 5\n2 9\n", "0\n1\n0 0\n1 1\n", "0\n1\n 0 0\n",
                                      "0\n1\n0 -1\n", "0\n99999999999\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_file(bad[i]);
        ck_assert_int_eq(ks_epoch_cache_read(&r, kt_io(), kt_dir(), NULL), KP_ERR__CORRUPT);
        ck_assert_int_eq(r.n, 0);
    }
    ks_epoch_cache_fini(&c);
    ks_epoch_cache_fini(&r);
}
END_TEST

static void append_at_epoch(ks_log *log, int32_t epoch, int32_t records)
{
    size_t len;
    uint8_t *b = kt_batch_build(records, 10, 1000, 1, &len);
    ck_assert_int_eq(ks_log_append(log, b, len, epoch, 1000, NULL, NULL), KP_ERR_NONE);
    free(b);
}

START_TEST(test_epoch_log_keeps_and_rebuilds)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1024, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    ck_assert_int_eq(ks_log_latest_epoch(log), -1);
    append_at_epoch(log, 0, 5);  /* 0..4 */
    append_at_epoch(log, 0, 5);  /* 5..9 */
    ck_assert_int_eq(ks_log_assign_epoch(log, 2, ks_log_end_offset(log), NULL), KP_ERR_NONE);
    append_at_epoch(log, 2, 10); /* 10..19 */
    for (int i = 0; i < 10; i++)
        append_at_epoch(log, 3, 4); /* 20..59, across segments */
    ck_assert_int_gt(ks_log_segment_count(log), 1);
    const ks_epoch_cache *c = ks_log_epochs(log);
    ck_assert_int_eq(c->n, 3);
    int32_t e;
    int64_t end;
    ks_log_epoch_end_offset(log, 2, &e, &end);
    ck_assert_int_eq(e, 2);
    ck_assert_int_eq(end, 20);
    ks_log_epoch_end_offset(log, 1, &e, &end);
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(end, 10);
    /* truncation at the end drops epoch 3 */
    ck_assert_int_eq(ks_log_truncate_to(log, 20, 1000, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_latest_epoch(log), 2);
    ks_log_epoch_end_offset(log, 2, &e, &end);
    ck_assert_int_eq(end, 20);
    /* a replica append keeps the leader's epoch and records it */
    size_t len;
    uint8_t *b = kt_batch_build(3, 10, 1000, 1, &len);
    kp_batch_set_base_offset(b, 20);
    kp_batch_set_leader_epoch(b, 9);
    ck_assert_int_eq(ks_log_append_replica(log, b, len, 1000, NULL, NULL), KP_ERR_NONE);
    free(b);
    ck_assert_int_eq(ks_log_latest_epoch(log), 9);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    /* reopened from the checkpoint */
    log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    c = ks_log_epochs(log);
    ck_assert_int_eq(c->n, 3);
    ck_assert_int_eq(c->v[2].epoch, 9);
    ck_assert_int_eq(c->v[2].start_offset, 20);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    /* without the checkpoint: rebuilt from the batches' partitionLeaderEpoch */
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s/t-0", kt_dir());
    snprintf(path, sizeof(path), "%s/%s", dir, KS_EPOCH_CHECKPOINT);
    ck_assert_int_eq(unlink(path), 0);
    log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    c = ks_log_epochs(log);
    ck_assert_int_eq(c->n, 3);
    ck_assert_int_eq(c->v[0].epoch, 0);
    ck_assert_int_eq(c->v[0].start_offset, 0);
    ck_assert_int_eq(c->v[1].epoch, 2);
    ck_assert_int_eq(c->v[1].start_offset, 10);
    ck_assert_int_eq(c->v[2].epoch, 9);
    ck_assert_int_eq(access(path, F_OK), 0);
    /* the log start moving up cuts the first entries */
    ks_log_set_high_watermark(log, ks_log_end_offset(log));
    ck_assert_int_eq(ks_log_advance_start(log, 12, NULL), KP_ERR_NONE);
    c = ks_log_epochs(log);
    ck_assert_int_eq(c->n, 2);
    ck_assert_int_eq(c->v[0].epoch, 2);
    ck_assert_int_eq(c->v[0].start_offset, 12);
    /* a full truncation empties it */
    ck_assert_int_eq(ks_log_truncate_to(log, 5, 1000, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_latest_epoch(log), -1);
    ck_assert_int_eq(ks_log_delete(log, NULL), KP_ERR_NONE);
    ck_assert_int_ne(access(dir, F_OK), 0);
}
END_TEST

Suite *epoch_cache_suite(void)
{
    Suite *s = suite_create("epoch_cache");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_add_test(tc, test_epoch_assign_and_end_offset);
    tcase_add_test(tc, test_epoch_truncate_both_ends);
    tcase_add_test(tc, test_epoch_file_round_trip_and_corrupt);
    tcase_add_test(tc, test_epoch_log_keeps_and_rebuilds);
    suite_add_tcase(s, tc);
    return s;
}
