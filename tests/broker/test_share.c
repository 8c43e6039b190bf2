/* Unit tests of kb_share_group (membership, the simple assignor, epochs,
 * sessions timing out) and kb_share_partition (acquisition, locks, delivery
 * counts, acknowledgements and their checks) on a fake clock. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"

static kb_cg_topic the_topic = {"t", {{1}}, 2};

static bool topic_by_name(void *ctx, const char *name, kb_cg_topic *out)
{
    (void)ctx;
    if (strcmp(name, the_topic.name) != 0)
        return false;
    *out = the_topic;
    return true;
}

static const kb_share_group_env env = {topic_by_name, NULL, 5000, 45000, 200};

static kb_share_group_result join(kb_share_group *sg, const char *member, int32_t epoch,
                                  int64_t now)
{
    kp_str topics[1] = {kp_str_from("t")};
    kp_share_group_heartbeat_req rq = {kp_str_from("g"), kp_str_from(member), epoch, KP_STR_NULL,
                                       {1, topics}};
    kb_share_group_client cl = {kp_str_from("c"), kp_str_from("h")};
    kb_share_group_result res;
    ck_assert_int_eq(kb_share_group_heartbeat(sg, &env, &rq, &cl, now, &res), KP_ERR_NONE);
    return res;
}

START_TEST(test_share_assign_more_members_than_partitions)
{
    kb_share_group *sg = kb_share_group_new();
    for (int i = 0; i < 5; i++) {
        char id[8];
        snprintf(id, sizeof(id), "m%d", i);
        ck_assert_int_eq(join(sg, id, 0, 0).err, KP_ERR_NONE);
    }
    /* 5 members, 2 partitions: 3 rounds of slots, each partition shared. */
    int per_part[2] = {0, 0};
    for (int i = 0; i < sg->nmembers; i++) {
        const kb_sg_member *m = sg->members[i];
        ck_assert_int_ge(m->target.n, 1);
        ck_assert_int_le(m->target.n, 2);
        for (int32_t j = 0; j < m->target.n; j++)
            per_part[m->target.v[j].partition]++;
    }
    ck_assert_int_eq(per_part[0], 3);
    ck_assert_int_eq(per_part[1], 3);
    kb_share_group_free(sg, NULL);
}
END_TEST

START_TEST(test_share_epochs_fencing_and_session_timeout)
{
    kb_share_group *sg = kb_share_group_new();
    kb_share_group_result r = join(sg, "a", 0, 0);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 2);
    ck_assert_int_eq(join(sg, "a", 7, 10).err, KP_ERR_FENCED_MEMBER_EPOCH);
    ck_assert_int_eq(join(sg, "zz", 1, 10).err, KP_ERR_UNKNOWN_MEMBER_ID);
    r = join(sg, "b", 0, 100);
    ck_assert_int_eq(r.epoch, 2);
    r = join(sg, "a", 1, 200); /* a takes the new target and its epoch */
    ck_assert_int_eq(r.epoch, 2);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 1);
    kb_share_group_tick(sg, &env, 100 + 45000); /* a heartbeated later than b */
    ck_assert_int_eq(sg->nmembers, 1);
    ck_assert_str_eq(sg->members[0]->member_id, "a");
    ck_assert_int_eq(sg->group_epoch, 3);
    ck_assert_int_eq(join(sg, "a", -1, 300).epoch, -1);
    ck_assert_int_eq(kb_share_group_state_of(sg), KB_SGS_EMPTY);
    kb_share_group_free(sg, NULL);
}
END_TEST

static const kb_share_limits lim = {1000, 3, 100};

static kb_share_part *part(kb_share_parts *ps)
{
    kb_share_part *sp;
    kp_uuid id = {{9}};
    ck_assert_int_eq(kb_share_parts_get(ps, &id, 0, 0, &sp), KP_ERR_NONE);
    return sp;
}

START_TEST(test_share_partition_acquire_ack_and_locks)
{
    kb_share_parts *ps = kb_share_parts_new();
    kb_share_part *sp = part(ps);
    kb_share_range r[8];
    kp_str a = kp_str_from("a"), b = kp_str_from("b");
    ck_assert_int_eq(kb_share_part_acquire(sp, a, 0, 9, 5, &lim, 0, r, 8), 1);
    ck_assert(r[0].first == 0 && r[0].last == 4 && r[0].delivery_count == 1);
    ck_assert_int_eq(kb_share_part_acquire(sp, b, 0, 9, 100, &lim, 0, r, 8), 1);
    ck_assert(r[0].first == 5 && r[0].last == 9);
    int8_t accept = KB_ACK_ACCEPT, release = KB_ACK_RELEASE, bad = 7;
    /* b does not hold 0-4; a holds them; 10 was never acquired. */
    ck_assert_int_eq(kb_share_part_check_ack(sp, b, 0, 1, &accept, 1, false),
                     KP_ERR_INVALID_RECORD_STATE);
    ck_assert_int_eq(kb_share_part_check_ack(sp, a, 4, 10, &accept, 1, false),
                     KP_ERR_INVALID_RECORD_STATE);
    ck_assert_int_eq(kb_share_part_check_ack(sp, a, 0, 1, &bad, 1, false), KP_ERR_INVALID_REQUEST);
    /* the widest span the wire can name, with two types, is refused */
    int8_t two[2] = {KB_ACK_ACCEPT, KB_ACK_ACCEPT};
    ck_assert_int_eq(kb_share_part_check_ack(sp, a, INT64_MIN, INT64_MAX, two, 2, false),
                     KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_share_part_check_ack(sp, a, 0, 1, &accept, 1, false), KP_ERR_NONE);
    kb_share_part_ack(sp, 0, 1, &accept, 1, &lim, 0);
    ck_assert_int_eq(sp->start, 2); /* the accepted prefix is done */
    ck_assert_int_eq(kb_share_part_check_ack(sp, a, 1, 1, &accept, 1, false),
                     KP_ERR_INVALID_RECORD_STATE);
    kb_share_part_ack(sp, 2, 2, &release, 1, &lim, 0);
    /* b's locks on 5-9 and a's on 3-4 run out at 1000. */
    ck_assert_int_eq(kb_share_parts_next_deadline(ps), 1000);
    kb_share_parts_release(ps, 0, &lim, 1000);
    ck_assert_int_eq(kb_share_part_acquire(sp, b, 0, 9, 100, &lim, 1000, r, 8), 1);
    ck_assert(r[0].first == 2 && r[0].last == 9 && r[0].delivery_count == 2);
    kb_share_parts_free(ps);
}
END_TEST

/* Kafka's share-partition lag: records from start to the high watermark
 * not yet acknowledged or archived; acquired ones count. */
START_TEST(test_share_partition_lag)
{
    kb_share_parts *ps = kb_share_parts_new();
    kb_share_part *sp = part(ps);
    kb_share_range r[8];
    kp_str a = kp_str_from("a");
    ck_assert_int_eq(kb_share_part_lag(sp, 10), 10);
    ck_assert_int_eq(kb_share_part_acquire(sp, a, 0, 5, 100, &lim, 0, r, 8), 1);
    ck_assert_int_eq(kb_share_part_lag(sp, 10), 10); /* acquired: not done */
    int8_t accept = KB_ACK_ACCEPT, reject = KB_ACK_REJECT;
    kb_share_part_ack(sp, 2, 3, &accept, 1, &lim, 0); /* a hole: start stays 0 */
    kb_share_part_ack(sp, 5, 5, &reject, 1, &lim, 0);
    ck_assert_int_eq(sp->start, 0);
    ck_assert_int_eq(kb_share_part_lag(sp, 10), 7);
    ck_assert_int_eq(kb_share_part_lag(sp, 4), 2); /* only done records below hwm count */
    kb_share_part_ack(sp, 0, 1, &accept, 1, &lim, 0);
    ck_assert_int_eq(sp->start, 4);
    ck_assert_int_eq(kb_share_part_lag(sp, 10), 5);
    ck_assert_int_eq(kb_share_part_lag(sp, 3), 0); /* hwm below start */
    kb_share_part_reset(sp, 8);
    ck_assert_int_eq(kb_share_part_lag(sp, 10), 2);
    kb_share_parts_free(ps);
}
END_TEST

START_TEST(test_share_partition_delivery_limit_archives)
{
    kb_share_parts *ps = kb_share_parts_new();
    kb_share_part *sp = part(ps);
    kb_share_range r[8];
    kp_str a = kp_str_from("a");
    int8_t release = KB_ACK_RELEASE;
    for (int i = 1; i <= lim.delivery_limit; i++) {
        ck_assert_int_eq(kb_share_part_acquire(sp, a, 0, 0, 10, &lim, 0, r, 8), 1);
        ck_assert_int_eq(r[0].delivery_count, i);
        kb_share_part_ack(sp, 0, 0, &release, 1, &lim, 0);
    }
    ck_assert_int_eq(sp->start, 1); /* archived at the limit */
    ck_assert_int_eq(kb_share_part_acquire(sp, a, 0, 0, 10, &lim, 0, r, 8), 0);
    kb_share_parts_free(ps);
}
END_TEST

Suite *share_suite(void)
{
    Suite *s = suite_create("share");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_share_assign_more_members_than_partitions);
    tcase_add_test(tc, test_share_epochs_fencing_and_session_timeout);
    tcase_add_test(tc, test_share_partition_acquire_ack_and_locks);
    tcase_add_test(tc, test_share_partition_delivery_limit_archives);
    tcase_add_test(tc, test_share_partition_lag);
    suite_add_tcase(s, tc);
    return s;
}
