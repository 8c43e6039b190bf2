/* kb_longpoll: appends wake only their partition's waiters; wakes may
 * unpark and free any waiter mid-walk (run under ASan). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_longpoll.h"

typedef struct test_waiter {
    kb_poll_waiter w;
    kb_longpoll *lp;
    int woken;
    struct test_waiter *victims[3]; /* unparked (and freed if heap) by our wake */
    bool free_self;
} test_waiter;

static void on_wake(kb_poll_waiter *w)
{
    test_waiter *tw = w->arg;
    tw->woken++;
    for (int i = 0; i < 3 && tw->victims[i] != NULL; i++)
        kb_longpoll_unpark(tw->lp, &tw->victims[i]->w);
    if (tw->free_self) {
        kb_longpoll_unpark(tw->lp, &tw->w);
        free(tw);
    }
}

static test_waiter *waiter_new(kb_longpoll *lp)
{
    test_waiter *tw = calloc(1, sizeof(*tw));
    tw->lp = lp;
    tw->w.wake = on_wake;
    tw->w.arg = tw;
    return tw;
}

static void park(kb_longpoll *lp, test_waiter *tw, kb_topic *t1, int32_t p1, kb_topic *t2, int32_t p2)
{
    kb_topic *topics[2] = {t1, t2};
    int32_t parts[2] = {p1, p2};
    ck_assert_int_eq(kb_longpoll_park(lp, &tw->w, topics, parts, t2 != NULL ? 2 : 1), KP_ERR_NONE);
}

static void topic_init(kb_topic *t, unsigned char id)
{
    memset(t, 0, sizeof(*t));
    memset(t->id.b, id, sizeof(t->id.b));
}

START_TEST(test_longpoll_wakes_only_its_partition)
{
    kb_topic t1, t2;
    topic_init(&t1, 1);
    topic_init(&t2, 2);
    kb_longpoll *lp = kb_longpoll_new();
    test_waiter *a = waiter_new(lp), *b = waiter_new(lp);
    park(lp, a, &t1, 0, &t1, 1);
    park(lp, b, &t1, 1, &t2, 0);
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t1, 1), 2);
    kb_longpoll_appended(lp, &t1, 1);
    ck_assert_int_eq(a->woken, 1);
    ck_assert_int_eq(b->woken, 1);
    kb_longpoll_appended(lp, &t2, 0);
    kb_longpoll_appended(lp, &t1, 5);
    kb_longpoll_appended(lp, &t2, 1);
    ck_assert_int_eq(a->woken, 1);
    ck_assert_int_eq(b->woken, 2);
    kb_longpoll_unpark(lp, &a->w);
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t1, 0), 0);
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t1, 1), 1);
    kb_longpoll_appended(lp, &t1, 0);
    ck_assert_int_eq(a->woken, 1);
    kb_longpoll_unpark(lp, &b->w);
    kb_longpoll_unpark(lp, &b->w); /* a second unpark does nothing */
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t1, 1), 0);
    free(a);
    free(b);
    kb_longpoll_free(lp);
}
END_TEST

START_TEST(test_longpoll_wake_may_unpark_and_free_others)
{
    kb_topic t;
    topic_init(&t, 3);
    kb_longpoll *lp = kb_longpoll_new();
    test_waiter *first = waiter_new(lp), *second = waiter_new(lp), *third = waiter_new(lp);
    park(lp, first, &t, 0, &t, 1);
    park(lp, second, &t, 0, NULL, 0);
    park(lp, third, &t, 0, NULL, 0); /* newest: woken first */
    third->victims[0] = first;
    third->victims[1] = second;
    third->free_self = true;
    kb_longpoll_appended(lp, &t, 0);
    ck_assert_int_eq(first->woken, 0); /* unparked before its turn */
    ck_assert_int_eq(second->woken, 0);
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t, 0), 0);
    ck_assert_int_eq(kb_longpoll_waiting(lp, &t, 1), 0);
    free(first); /* their watches are gone: ASan sees no later use */
    free(second);
    kb_longpoll_appended(lp, &t, 0);
    kb_longpoll_appended(lp, &t, 1);
    kb_longpoll_free(lp);
}
END_TEST

START_TEST(test_longpoll_many_partitions)
{
    enum { N = 3000 };
    kb_topic t;
    topic_init(&t, 4);
    kb_longpoll *lp = kb_longpoll_new();
    test_waiter *w[N];
    for (int i = 0; i < N; i++) {
        w[i] = waiter_new(lp);
        park(lp, w[i], &t, i, &t, (i + 1) % N);
    }
    kb_longpoll_appended(lp, &t, 7);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(w[i]->woken, i == 6 || i == 7);
    for (int i = 0; i < N; i++) {
        kb_longpoll_unpark(lp, &w[i]->w);
        free(w[i]);
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(kb_longpoll_waiting(lp, &t, i), 0);
    kb_longpoll_free(lp);
}
END_TEST

Suite *longpoll_suite(void)
{
    Suite *s = suite_create("longpoll");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_longpoll_wakes_only_its_partition);
    tcase_add_test(tc, test_longpoll_wake_may_unpark_and_free_others);
    tcase_add_test(tc, test_longpoll_many_partitions);
    suite_add_tcase(s, tc);
    return s;
}
