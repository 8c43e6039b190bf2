/* Idempotent-producer state: duplicates, gaps, epochs, and the rebuild
 * from a real log on disk after a restart (also by kb_partition_load, the opening of
 * a partition on a helper thread). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_producer_state.h"
#include "kb_logscan.h"
#include "kb_partition_load.h"
#include "kp_records.h"
#include "ks_log.h"

START_TEST(test_pidstate_duplicate_of_cached_batch)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 0, 0, 4, &dup), KP_ERR_NONE);
    kb_pid_batch b0 = {0, 4, 100, 104, 5000};
    ck_assert_int_eq(kb_producer_state_record(ps, 7, 0, &b0), KP_ERR_NONE);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 0, 0, 4, &dup), KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(dup.first_offset, 100);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 0, 5, 9, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
}
END_TEST

START_TEST(test_pidstate_gap_is_out_of_order)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch dup, b0 = {0, 4, 0, 4, 5000};
    kb_producer_state_record(ps, 7, 0, &b0);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 0, 6, 9, &dup), KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* a new producer must start at sequence 0... */
    ck_assert_int_eq(kb_producer_state_check(ps, 8, 0, 0, 0, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
}
END_TEST

START_TEST(test_pidstate_epochs)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch dup, b0 = {0, 0, 0, 0, 5000};
    kb_producer_state_record(ps, 7, 3, &b0);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 2, 1, 1, &dup), KP_ERR_INVALID_PRODUCER_EPOCH);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 4, 5, 5, &dup), KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 7, 4, 0, 0, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
}
END_TEST

START_TEST(test_pidstate_keeps_last_five)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch dup;
    for (int32_t i = 0; i < 7; i++) {
        kb_pid_batch b = {i, i, i, i, 1000 + i};
        kb_producer_state_record(ps, 1, 0, &b);
    }
    /* batches 2..6 are cached; 0 and 1 fell out */
    ck_assert_int_eq(kb_producer_state_check(ps, 1, 0, 2, 2, &dup), KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 1, 0, 1, 1, &dup), KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    kb_producer_state_free(ps);
}
END_TEST

START_TEST(test_pidstate_sequence_wraps)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch dup, b = {INT32_MAX - 1, INT32_MAX, 0, 1, 5000};
    kb_producer_state_record(ps, 1, 0, &b);
    ck_assert_int_eq(kb_producer_state_check(ps, 1, 0, 0, 3, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
}
END_TEST

START_TEST(test_pidstate_marker_is_last)
{
    kb_producer_state *ps = kb_producer_state_new();
    kb_pid_batch b = {0, 2, 10, 12, 5000};
    kb_producer_state_record(ps, 7, 0, &b);
    kb_pid_info info;
    ck_assert(kb_producer_state_at(ps, 0, &info));
    ck_assert_int_eq(info.last_timestamp, 5000);
    ck_assert_int_eq(info.coordinator_epoch, -1);
    kb_producer_state_on_marker(ps, 7, 6000, 3);
    kb_producer_state_on_marker(ps, 8, 7000, 4); /* not tracked here: nothing */
    ck_assert_int_eq(kb_producer_state_count(ps), 1);
    ck_assert(kb_producer_state_at(ps, 0, &info));
    ck_assert_int_eq(info.last_timestamp, 6000);
    ck_assert_int_eq(info.coordinator_epoch, 3);
    ck_assert_int_eq(info.last_seq, 2);
    kb_producer_state_free(ps);
}
END_TEST

void append_idempotent(ks_log *log, int64_t pid, int16_t epoch, int32_t seq, int n)
{
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, pid, epoch, seq);
    for (int i = 0; i < n; i++)
        kp_batch_builder_add(&bb, 1000 + seq + i, (kp_slice){(const uint8_t *)"k", 1},
                             (kp_slice){(const uint8_t *)"v", 1}, NULL, 0);
    size_t len;
    uint8_t *batch = kp_batch_builder_finish(&bb, &len);
    ck_assert_ptr_nonnull(batch);
    ks_append_result res;
    ck_assert_int_eq(ks_log_append(log, batch, len, 0, 1000, &res, NULL), KP_ERR_NONE);
    free(batch);
}

/* A fresh log "t" partition 0 in a new temporary directory dir (a
 * mkdtemp template). */
static ks_log *temp_log(char *dir, ks_io *io)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    *io = ks_io_posix();
    ks_log_config cfg;
    ks_log_config_default(&cfg);
    ks_log_open_args args = {-1, -1, false, 1000};
    ks_log *log;
    ck_assert_int_eq(ks_log_open(io, dir, "t", 0, &cfg, &args, &log, NULL, NULL), KP_ERR_NONE);
    return log;
}

START_TEST(test_pidstate_rebuilt_from_log)
{
    char dir[] = "/tmp/runnel-pidstate-XXXXXX";
    ks_io io;
    ks_log *log = temp_log(dir, &io);
    for (int32_t s = 0; s < 40; s += 4)
        append_idempotent(log, 42, 1, s, 4);
    append_idempotent(log, -1, -1, -1, 3); /* not idempotent: ignored */

    kb_producer_state *ps = kb_producer_state_new();
    ck_assert_int_eq(kb_producer_state_rebuild(ps, &io, log), KP_ERR_NONE);
    ck_assert_int_eq(kb_producer_state_count(ps), 1);
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 1, 36, 39, &dup), KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(dup.first_offset, 36);
    ck_assert_int_eq(dup.last_offset, 39);
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 1, 40, 43, &dup), KP_ERR_NONE);
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 1, 44, 47, &dup), KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* the producer's last timestamp (DescribeProducers) is its last batch's */
    kb_pid_info info;
    ck_assert(kb_producer_state_at(ps, 0, &info));
    ck_assert_int_eq(info.producer_id, 42);
    ck_assert_int_eq(info.last_seq, 39);
    ck_assert_int_eq(info.last_timestamp, 1000 + 36 + 3);
    ck_assert_int_eq(info.coordinator_epoch, -1);
    kb_producer_state_free(ps);
    ck_assert_int_eq(ks_log_delete(log, NULL), KP_ERR_NONE);
    rmdir(dir);
}
END_TEST

static void *pload_main(void *arg)
{
    kb_partition_load_run(arg);
    return NULL;
}

/* Runs ld on a thread of its own, as the broker's loader does. */
static void pload_on_thread(kb_partition_load *ld)
{
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pload_main, ld), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
}

START_TEST(test_pidstate_loaded_on_a_helper_thread)
{
    char dir[] = "/tmp/runnel-pload-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ks_io io = ks_io_posix();
    kb_partition_load ld = {.io = &io, .dir = dir, .topic = "t", .partition = 0,
                   .args = {-1, -1, false, 1000}, .cleaner_offset = 5};
    ks_log_config_default(&ld.lc);
    ks_log *log;
    ck_assert_int_eq(ks_log_open(&io, dir, "t", 0, &ld.lc, &ld.args, &log, NULL, NULL),
                     KP_ERR_NONE);
    for (int32_t s = 0; s < 20; s += 4)
        append_idempotent(log, 42, 1, s, 4);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);

    pload_on_thread(&ld);
    ck_assert_int_eq(ld.err, KP_ERR_NONE);
    ck_assert_ptr_null(ld.failed);
    ck_assert_ptr_nonnull(ld.log);
    ck_assert_ptr_nonnull(ld.pids);
    ck_assert_int_eq(ks_log_end_offset(ld.log), 20);
    ck_assert_int_eq(ks_log_cleaner_offset(ld.log), 5);
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ld.pids, 42, 1, 16, 19, &dup),
                     KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ld.pids, 42, 1, 20, 23, &dup), KP_ERR_NONE);
    kb_partition_load_discard(&ld);
    ck_assert_ptr_null(ld.log);
    ck_assert_ptr_null(ld.pids);

    /* A log that cannot be opened: the failed step named, nothing left open. */
    char file[sizeof(dir) + 8];
    snprintf(file, sizeof(file), "%s/t-1", dir);
    FILE *f = fopen(file, "w"); /* a file where the partition's directory goes */
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ld.partition = 1;
    pload_on_thread(&ld);
    ck_assert_int_ne(ld.err, KP_ERR_NONE);
    ck_assert_str_eq(ld.failed, "open log");
    ck_assert_ptr_null(ld.log);
    ck_assert_ptr_null(ld.pids);
    unlink(file);

    ld.partition = 0;
    pload_on_thread(&ld);
    ck_assert_int_eq(ld.err, KP_ERR_NONE);
    ck_assert_int_eq(ks_log_delete(ld.log, NULL), KP_ERR_NONE);
    ld.log = NULL;
    kb_partition_load_discard(&ld);
    rmdir(dir);
}
END_TEST

typedef struct seen {
    int64_t base[32];
    int n;
} seen;

static kp_err note_batch(void *arg, const kp_batch_hdr *h, const uint8_t *batch, size_t len)
{
    seen *s = arg;
    ck_assert_ptr_nonnull(batch);
    ck_assert_int_eq((int64_t)len, kp_batch_total_size(h));
    ck_assert_int_lt(s->n, 32);
    s->base[s->n++] = h->base_offset;
    return KP_ERR_NONE;
}

/* A coordinator's load (kb_coord_load) walks its partition in bounded
 * steps: each step resumes where the last ended and none passes end. */
START_TEST(test_logscan_steps_resume_and_stop_at_end)
{
    char dir[] = "/tmp/runnel-logscan-XXXXXX";
    ks_io io;
    ks_log *log = temp_log(dir, &io);
    for (int i = 0; i < 10; i++)
        append_idempotent(log, -1, -1, -1, 2); /* offsets 2i, 2i + 1 */
    seen s = {.n = 0};
    int64_t from = 0, next = -1;
    int steps = 0;
    for (; steps < 20; steps++, from = next) {
        ck_assert_int_eq(kb_log_scan_batches_step(&io, log, from, 10, 1, 1 << 20, note_batch, &s,
                                                  &next),
                         KP_ERR_NONE);
        if (next == from)
            break;
    }
    ck_assert_int_eq(steps, 5); /* one batch per step: 0, 2, 4, 6, 8 */
    ck_assert_int_eq(next, 10);
    ck_assert_int_eq(s.n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(s.base[i], 2 * i);
    /* a large step takes the rest at once, up to the log end */
    ck_assert_int_eq(kb_log_scan_batches_step(&io, log, 10, 20, 1 << 20, 1 << 20, note_batch, &s,
                                              &next),
                     KP_ERR_NONE);
    ck_assert_int_eq(next, 20);
    ck_assert_int_eq(s.n, 10);
    ck_assert_int_eq(s.base[9], 18);
    ck_assert_int_eq(ks_log_delete(log, NULL), KP_ERR_NONE);
    rmdir(dir);
}
END_TEST

Suite *pidstate_suite(void)
{
    Suite *s = suite_create("pidstate");
    TCase *tc = tcase_create("pidstate");
    tcase_add_test(tc, test_pidstate_duplicate_of_cached_batch);
    tcase_add_test(tc, test_pidstate_gap_is_out_of_order);
    tcase_add_test(tc, test_pidstate_epochs);
    tcase_add_test(tc, test_pidstate_keeps_last_five);
    tcase_add_test(tc, test_pidstate_sequence_wraps);
    tcase_add_test(tc, test_pidstate_marker_is_last);
    tcase_add_test(tc, test_pidstate_rebuilt_from_log);
    tcase_add_test(tc, test_pidstate_loaded_on_a_helper_thread);
    tcase_add_test(tc, test_logscan_steps_resume_and_stop_at_end);
    suite_add_tcase(s, tc);
    return s;
}
