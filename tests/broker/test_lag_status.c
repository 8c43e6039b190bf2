/* kb_lag_status: Burrow's rules on a fake clock: a consumer that falls
 * behind, stops and resumes goes OK -> WARNING -> ERROR -> OK; lag 0 is
 * always OK; a window not yet full judges only STOPPED; a stalled offset. */
#include <check.h>
#include <stdbool.h>

#include "broker_suites.h"
#include "kb_lag_status.h"

#define WINDOW    5
#define MIN_STOP  10000
#define EVERY_MS  1000 /* a commit each second, as auto-commit would */

typedef struct consumer {
    kb_lag_window w;
    int64_t now;
    int64_t offset;
    int64_t log_end;
} consumer;

static consumer c; /* each test's, from setup */

static void setup(void)
{
    ck_assert_int_eq(kb_lag_window_init(&c.w, WINDOW), KP_ERR_NONE);
    c.now = 1000000;
    c.offset = 0;
    c.log_end = 0;
}

static void teardown(void)
{
    kb_lag_window_fini(&c.w);
}

/* One second passes: produced records arrive, the consumer reads `read` of them and commits. */
static void tick(consumer *k, int64_t produced, int64_t read, bool commits)
{
    k->now += EVERY_MS;
    k->log_end += produced;
    k->offset += read;
    if (commits)
        kb_lag_window_add(&k->w, k->now, k->offset, k->log_end);
}

static void ticks(consumer *k, int n, int64_t produced, int64_t read, bool commits)
{
    for (int i = 0; i < n; i++)
        tick(k, produced, read, commits);
}

static kb_lag_status status(const consumer *k)
{
    return kb_lag_evaluate(&k->w, k->now, k->log_end - k->offset, MIN_STOP);
}

static kb_lag_group_status group_of(kb_lag_status s)
{
    return kb_lag_group_fold(KB_LAG_GROUP_OK, s);
}

START_TEST(stops_and_resumes)
{
    ticks(&c, WINDOW, 100, 100, true); /* keeps up: lag 0 each commit */
    ck_assert_int_eq(status(&c), KB_LAG_OK);
    ticks(&c, WINDOW, 100, 60, true); /* falls behind: lag grows by 40 a commit */
    ck_assert_int_eq(status(&c), KB_LAG_WARNING);
    ck_assert_int_eq(group_of(status(&c)), KB_LAG_GROUP_WARNING);
    ticks(&c, MIN_STOP / EVERY_MS + 1, 100, 0, false); /* stops: no commits while data arrives */
    ck_assert_int_eq(status(&c), KB_LAG_STOPPED);
    ck_assert_int_eq(group_of(status(&c)), KB_LAG_GROUP_ERROR);
    tick(&c, 0, c.log_end - c.offset - 500, true); /* resumes, still behind */
    ck_assert_int_ne(status(&c), KB_LAG_STOPPED);
    tick(&c, 0, 500, true); /* caught up */
    ck_assert_int_eq(status(&c), KB_LAG_OK);
    ck_assert_int_eq(group_of(status(&c)), KB_LAG_GROUP_OK);
}
END_TEST

START_TEST(lag_zero_is_ok)
{
    ticks(&c, WINDOW, 100, 100, true);
    c.now += 100 * MIN_STOP; /* no commits for ages, but nothing to read */
    ck_assert_int_eq(status(&c), KB_LAG_OK);
}
END_TEST

START_TEST(window_not_full)
{
    ticks(&c, WINDOW - 1, 100, 10, true); /* lag growing, but too few commits to judge */
    ck_assert_int_eq(status(&c), KB_LAG_OK);
    c.now += MIN_STOP + 1; /* STOPPED needs no full window */
    ck_assert_int_eq(status(&c), KB_LAG_STOPPED);
    kb_lag_window w;
    ck_assert_int_eq(kb_lag_window_init(&w, WINDOW), KP_ERR_NONE);
    ck_assert_int_eq(kb_lag_evaluate(&w, 0, 100, MIN_STOP), KB_LAG_OK); /* no commits */
    kb_lag_window_fini(&w);
}
END_TEST

START_TEST(stall_and_steady)
{
    tick(&c, 100, 50, true);
    ticks(&c, WINDOW, 10, 0, true); /* commits, the offset never moves */
    ck_assert_int_eq(status(&c), KB_LAG_STALL);
    ck_assert_int_eq(group_of(status(&c)), KB_LAG_GROUP_ERROR);
    ticks(&c, WINDOW, 10, 10, true); /* keeps pace at a fixed lag */
    ck_assert_int_eq(status(&c), KB_LAG_OK);
}
END_TEST

START_TEST(stopped_needs_the_span)
{
    for (int i = 0; i < WINDOW; i++) {
        c.now += 30000; /* commits every 30 s: the window spans 120 s */
        c.log_end += 10;
        c.offset += 9;
        kb_lag_window_add(&c.w, c.now, c.offset, c.log_end);
    }
    c.now += 60000; /* past min_stop, within the span */
    ck_assert_int_ne(status(&c), KB_LAG_STOPPED);
    c.now += 61000;
    ck_assert_int_eq(status(&c), KB_LAG_STOPPED);
}
END_TEST

START_TEST(rewind_clears)
{
    ticks(&c, WINDOW, 100, 60, true);
    ck_assert_int_eq(c.w.n, WINDOW);
    c.offset = 0; /* reset to earliest */
    tick(&c, 0, 0, true);
    ck_assert_int_eq(c.w.n, 1);
    ck_assert_int_eq(kb_lag_window_last(&c.w)->offset, 0);
    ck_assert_int_eq(status(&c), KB_LAG_OK);
    ck_assert_str_eq(kb_lag_status_name(KB_LAG_STOPPED), "STOPPED");
    ck_assert_str_eq(kb_lag_group_status_name(KB_LAG_GROUP_ERROR), "ERROR");
}
END_TEST

Suite *lag_status_suite(void)
{
    Suite *s = suite_create("lag_status");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, stops_and_resumes);
    tcase_add_test(tc, lag_zero_is_ok);
    tcase_add_test(tc, window_not_full);
    tcase_add_test(tc, stall_and_steady);
    tcase_add_test(tc, stopped_needs_the_span);
    tcase_add_test(tc, rewind_clears);
    suite_add_tcase(s, tc);
    return s;
}
