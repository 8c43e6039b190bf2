#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "ks_flush.h"
#include "kt_storage.h"
#include "storage_suites.h"

/* Waits on the eventfd and drains until want completions arrived. */
static void drain(ks_flush *f, ks_flush_done *out, size_t want)
{
    size_t got = 0;
    while (got < want) {
        struct pollfd p = {.fd = ks_flush_eventfd(f), .events = POLLIN};
        ck_assert_int_eq(poll(&p, 1, 10000), 1);
        got += ks_flush_drain(f, 7000, out + got, want - got);
    }
}

/* A log on the fault file system with three batches, and a flusher. */
static ks_log *open_with_flusher(ks_flush **f, kt_model *m)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 4096);
    ks_log *log = kt_open(&kt_fio()->io, kt_dir(), &cfg, false, 0, NULL);
    ck_assert_int_eq(ks_flush_new(f, NULL), KP_ERR_NONE);
    kt_model_fill(log, m, 3, 5000, 51);
    return log;
}

/* Requests queued while a sync runs share the next round's fdatasync. */
START_TEST(test_flush_group_commit)
{
    ks_flush *f;
    kt_model m = {0};
    ks_log *log = open_with_flusher(&f, &m);
    kt_faultio_gate(kt_fio(), true);
    ck_assert_int_eq(ks_flush_submit(f, log, 1, NULL), KP_ERR_NONE);
    kt_faultio_wait_blocked(kt_fio(), 1);
    for (uint64_t c = 2; c <= 9; c++) {
        kt_model_fill(log, &m, 1, 5000, (unsigned)c);
        ck_assert_int_eq(ks_flush_submit(f, log, c, NULL), KP_ERR_NONE);
    }
    ck_assert_int_eq(ks_log_flush_pending(log), 9);
    kt_faultio_gate(kt_fio(), false);
    ks_flush_done done[9];
    drain(f, done, 9);
    for (int i = 0; i < 9; i++) {
        ck_assert_int_eq(done[i].err, KP_ERR_NONE);
        ck_assert_uint_eq(done[i].cookie, (uint64_t)i + 1);
    }
    ck_assert_int_eq(done[8].offset, ks_log_end_offset(log));
    ck_assert_int_eq(ks_log_recovery_point(log), ks_log_end_offset(log));
    ck_assert_int_eq(ks_log_flush_pending(log), 0);
    uint64_t rounds, syncs;
    ks_flush_stats(f, &rounds, &syncs);
    ck_assert_uint_eq(rounds, 2);
    ck_assert_uint_eq(syncs, 2);
    ks_flush_free(f, 7000);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_flush_failure_reported)
{
    ks_flush *f;
    kt_model m = {0};
    ks_log *log = open_with_flusher(&f, &m);
    kt_faultio_set_sync(kt_fio(), EIO);
    ck_assert_int_eq(ks_flush_submit(f, log, 1, NULL), KP_ERR_NONE);
    ks_flush_done done;
    drain(f, &done, 1);
    ck_assert_int_eq(done.err, KP_ERR__IO);
    ck_assert_int_eq(ks_log_recovery_point(log), 0);
    kt_faultio_set_sync(kt_fio(), 0);
    ck_assert_int_eq(ks_flush_submit(f, log, 2, NULL), KP_ERR__IO);
    ks_flush_free(f, 7000);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

/* A task's record of when it ran: after the syncs of its round. */
typedef struct task_seen {
    int runs;
    uint64_t syncs_before;
    ks_flush *f;
} task_seen;

static void note_task(void *arg)
{
    task_seen *t = arg;
    uint64_t rounds;
    ks_flush_stats(t->f, &rounds, &t->syncs_before);
    t->runs++;
}

/* Tasks run once, on the thread, after the flushes queued before them,
 * count as pending on their log, and complete with cookie 0; a task still
 * queued when the flusher is freed runs before the free returns. */
START_TEST(test_flush_task_order)
{
    ks_flush *f;
    kt_model m = {0};
    ks_log *log = open_with_flusher(&f, &m);
    task_seen a = {.f = f}, b = {.f = f};
    kt_faultio_gate(kt_fio(), true);
    ck_assert_int_eq(ks_flush_submit(f, log, 5, NULL), KP_ERR_NONE);
    kt_faultio_wait_blocked(kt_fio(), 1);
    ck_assert_int_eq(ks_flush_submit_task(f, log, note_task, &a, NULL), KP_ERR_NONE);
    ck_assert_int_eq(ks_log_flush_pending(log), 2);
    ck_assert_int_eq(a.runs, 0);
    kt_faultio_gate(kt_fio(), false);
    ks_flush_done done[2];
    drain(f, done, 2);
    ck_assert_uint_eq(done[0].cookie, 5);
    ck_assert_uint_eq(done[1].cookie, 0);
    ck_assert_int_eq(done[1].err, KP_ERR_NONE);
    ck_assert_int_eq(a.runs, 1);
    ck_assert_uint_eq(a.syncs_before, 1);
    ck_assert_int_eq(ks_log_flush_pending(log), 0);
    ck_assert_int_eq(ks_log_recovery_point(log), ks_log_end_offset(log));
    ck_assert_int_eq(ks_flush_submit_task(f, log, note_task, &b, NULL), KP_ERR_NONE);
    ks_flush_free(f, 7000);
    ck_assert_int_eq(b.runs, 1);
    ck_assert_int_eq(ks_log_flush_pending(log), 0);
    ks_log_close(log, NULL);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_flush_policy)
{
    ks_log_config cfg;
    kt_small_config(&cfg, 1 << 20, 4096);
    cfg.flush_messages = 5;
    cfg.flush_ms = 100;

    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, 0, NULL);
    ck_assert(!ks_flush_policy_due(log, 1000000));
    kt_append(log, 4, 10, 1, 1000);
    ck_assert(!ks_flush_policy_due(log, 1050));
    ck_assert_int_eq(ks_flush_policy_deadline(log), 1100);
    ck_assert(ks_flush_policy_due(log, 1100));
    kt_append(log, 1, 10, 1, 1000);
    ck_assert(ks_flush_policy_due(log, 1000));
    ck_assert_int_eq(ks_log_flush(log, 1200, NULL), KP_ERR_NONE);
    ck_assert(!ks_flush_policy_due(log, 1250));
    ck_assert_int_eq(ks_log_unflushed_messages(log), 0);
    ks_log_close(log, NULL);
}
END_TEST

Suite *flush_suite(void)
{
    Suite *s = suite_create("flush");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_add_test(tc, test_flush_group_commit);
    tcase_add_test(tc, test_flush_failure_reported);
    tcase_add_test(tc, test_flush_policy);
    tcase_add_test(tc, test_flush_task_order);
    suite_add_tcase(s, tc);
    return s;
}
