/* Unit tests of kb_share_state_rec (the ShareSnapshot and ShareUpdate
 * records of __share_group_state, byte for byte) and of the persisted view
 * of a share-partition (kb_share_part_batches, kb_share_part_restore). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_share_partition.h"
#include "kb_share_state_rec.h"

static const kp_uuid topic = {{9}};
static const kb_share_limits lim = {1000, 3, 100};

/* Kafka's layout of a ShareUpdateValue v0 with one batch and
 * DeliveryCompleteCount 7 (tag 0). */
static const uint8_t update_bytes[] = {
    0x00, 0x00,                                     /* version 0 */
    0x00, 0x00, 0x00, 0x02,                         /* SnapshotEpoch 2 */
    0x00, 0x00, 0x00, 0x05,                         /* LeaderEpoch 5 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, /* StartOffset 10 */
    0x02,                                           /* 1 batch (compact) */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, /* FirstOffset 12 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, /* LastOffset 14 */
    0x04,                                           /* Archived */
    0x00, 0x03,                                     /* DeliveryCount 3 */
    0x00,                                           /* no tags */
    0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x07,       /* tag 0: DeliveryCompleteCount 7 */
};

START_TEST(test_share_state_update_bytes)
{
    kb_share_state_batch b = {12, 14, KB_SR_ARCHIVED, 3};
    kb_share_state_value v = {2, -1, 5, 10, 7, -1, -1, &b, 1};
    kp_arena a;
    kp_arena_init(&a);
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_share_state_write_value(&w, KB_SHARE_STATE_UPDATE, &v, &a);
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_uint_eq(w.len, sizeof(update_bytes));
    ck_assert_mem_eq(w.buf, update_bytes, sizeof(update_bytes));
    kb_share_state_value d;
    kp_slice s = {update_bytes, (int32_t)sizeof(update_bytes)};
    ck_assert_int_eq(kb_share_state_read_value(KB_SHARE_STATE_UPDATE, s, &a, &d), KP_ERR_NONE);
    ck_assert(d.snapshot_epoch == 2 && d.leader_epoch == 5 && d.start == 10);
    ck_assert(d.delivery_complete_count == 7 && d.nbatches == 1);
    ck_assert(d.batches[0].first == 12 && d.batches[0].last == 14);
    ck_assert(d.batches[0].state == KB_SR_ARCHIVED && d.batches[0].delivery_count == 3);
    /* every truncation is refused, never read past the end */
    for (int32_t n = 0; n < (int32_t)sizeof(update_bytes) - 7; n++)
        ck_assert_int_eq(kb_share_state_read_value(KB_SHARE_STATE_UPDATE,
                                                   (kp_slice){update_bytes, n}, &a, &d),
                         KP_ERR__CORRUPT);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_share_state_key_and_snapshot_round_trip)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_writer k;
    kp_writer_init(&k, 64);
    kb_share_state_write_key(&k, KB_SHARE_STATE_UPDATE, kp_str_from("grp"), &topic, 3);
    /* type 1 | string "grp" | uuid | partition 3 */
    ck_assert_uint_eq(k.len, 2 + 2 + 3 + 16 + 4);
    ck_assert(k.buf[0] == 0 && k.buf[1] == 1 && k.buf[3] == 3 && k.buf[7] == 9);
    kb_share_state_key dk;
    ck_assert_int_eq(kb_share_state_read_key((kp_slice){k.buf, (int32_t)k.len}, &a, &dk),
                     KP_ERR_NONE);
    ck_assert(dk.type == KB_SHARE_STATE_UPDATE && kp_str_eq_c(dk.group, "grp"));
    ck_assert(dk.partition == 3 && memcmp(&dk.topic, &topic, sizeof(topic)) == 0);
    k.buf[1] = 2; /* another coordinator record type */
    ck_assert_int_eq(kb_share_state_read_key((kp_slice){k.buf, (int32_t)k.len}, &a, &dk),
                     KP_ERR__NOENT);
    kp_writer_fini(&k);

    kb_share_state_batch b[2] = {{4, 4, KB_SR_AVAILABLE, 1}, {6, 9, KB_SR_ACKNOWLEDGED, 2}};
    kb_share_state_value v = {1, 3, 0, 4, -1, 1000, 2000, b, 2};
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_share_state_write_value(&w, KB_SHARE_STATE_SNAPSHOT, &v, &a);
    kb_share_state_value d;
    ck_assert_int_eq(kb_share_state_read_value(KB_SHARE_STATE_SNAPSHOT,
                                               (kp_slice){w.buf, (int32_t)w.len}, &a, &d),
                     KP_ERR_NONE);
    ck_assert(d.snapshot_epoch == 1 && d.state_epoch == 3 && d.start == 4);
    ck_assert(d.delivery_complete_count == -1); /* the default: no tag written */
    ck_assert(d.create_ts == 1000 && d.write_ts == 2000 && d.nbatches == 2);
    for (int i = 0; i < 2; i++)
        ck_assert(d.batches[i].first == b[i].first && d.batches[i].last == b[i].last &&
                  d.batches[i].state == b[i].state &&
                  d.batches[i].delivery_count == b[i].delivery_count);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
    /* Kafka: abs("grp:CQAAAAAAAAAAAAAAAAAAAA:3".hashCode()) % 50 */
    ck_assert_int_eq(kb_share_state_partition_for(kp_str_from("grp"), &topic, 3, 50), 6);
}
END_TEST

/* Acquired records are persisted as they were before the acquisition;
 * a snapshot of that view, restored, gives the same window back. */
START_TEST(test_share_state_part_view_and_restore)
{
    kb_share_parts *ps = kb_share_parts_new();
    kb_share_part *sp;
    ck_assert_int_eq(kb_share_parts_get(ps, &topic, 0, 0, &sp), KP_ERR_NONE);
    ck_assert(sp->persist.snapshot_due);
    kb_share_range r[8];
    kp_str m = kp_str_from("m");
    ck_assert_int_eq(kb_share_part_acquire(sp, m, 0, 9, 100, &lim, 0, r, 8), 1);
    int8_t accept = KB_ACK_ACCEPT, reject = KB_ACK_REJECT, release = KB_ACK_RELEASE;
    kb_share_part_ack(sp, 0, 1, &accept, 1, &lim, 0);
    kb_share_part_ack(sp, 3, 3, &reject, 1, &lim, 0);
    kb_share_part_ack(sp, 5, 5, &release, 1, &lim, 0);
    ck_assert(sp->start == 2 && sp->persist.start_moved);
    ck_assert(sp->persist.dirty_first == 0 && sp->persist.dirty_last == 5);
    kb_share_state_batch b[16];
    /* 2 acquired (was never delivered: left out), 3 archived, 4 acquired,
     * 5 available once delivered, 6-9 acquired */
    int32_t n = kb_share_part_batches(sp, sp->start, sp->end - 1, b, 16);
    ck_assert_int_eq(n, 2);
    ck_assert(b[0].first == 3 && b[0].last == 3 && b[0].state == KB_SR_ARCHIVED);
    ck_assert(b[1].first == 5 && b[1].last == 5 && b[1].state == KB_SR_AVAILABLE &&
              b[1].delivery_count == 1);
    ck_assert_int_eq(kb_share_part_done_count(sp), 1);
    ck_assert_int_eq(kb_share_part_batches(sp, 2, 9, b, 1), -1); /* no room */

    kb_share_part *copy;
    kp_uuid other = {{10}};
    ck_assert_int_eq(kb_share_parts_get(ps, &other, 0, 0, &copy), KP_ERR_NONE);
    ck_assert_int_eq(kb_share_part_restore(copy, true, 2, b, 2), KP_ERR_NONE);
    ck_assert(copy->start == 2 && copy->end == 6);
    ck_assert_int_eq(kb_share_part_acquire(copy, m, 0, 5, 100, &lim, 0, r, 8), 3);
    ck_assert(r[0].first == 2 && r[0].last == 2 && r[0].delivery_count == 1);
    ck_assert(r[1].first == 4 && r[1].last == 4 && r[1].delivery_count == 1);
    ck_assert(r[2].first == 5 && r[2].last == 5 && r[2].delivery_count == 2);
    /* an update: 2 acknowledged moves the start past 3 (archived) */
    kb_share_state_batch u = {2, 2, KB_SR_ACKNOWLEDGED, 1};
    ck_assert_int_eq(kb_share_part_restore(copy, false, -1, &u, 1), KP_ERR_NONE);
    ck_assert_int_eq(copy->start, 4);
    /* an update moving the start forward drops what lies below */
    ck_assert_int_eq(kb_share_part_restore(copy, false, 7, NULL, 0), KP_ERR_NONE);
    ck_assert_int_eq(copy->start, 7);
    /* a batch with an unknown state changes nothing */
    kb_share_state_batch bad = {8, 9, 1, 0};
    ck_assert_int_eq(kb_share_part_restore(copy, false, -1, &bad, 1), KP_ERR__CORRUPT);
    ck_assert_int_eq(copy->start, 7);
    /* a start whose window would overflow, nor a batch near INT64_MAX */
    ck_assert_int_eq(kb_share_part_restore(copy, true, INT64_MAX - 5, NULL, 0), KP_ERR__CORRUPT);
    kb_share_state_batch far = {INT64_MAX - 1, INT64_MAX, KB_SR_ARCHIVED, 1};
    ck_assert_int_eq(kb_share_part_restore(copy, false, -1, &far, 1), KP_ERR_NONE);
    ck_assert(copy->start == 7 && copy->end <= 7 + KB_SHARE_PART_MAX_WINDOW);
    /* a reset starts a new state epoch with a snapshot */
    copy->persist.snapshot_due = false;
    kb_share_part_reset(copy, 100);
    ck_assert(copy->persist.snapshot_due && copy->persist.state_epoch == 1);
    kb_share_parts_free(ps);
}
END_TEST

Suite *share_state_suite(void)
{
    Suite *s = suite_create("share_state");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_share_state_update_bytes);
    tcase_add_test(tc, test_share_state_key_and_snapshot_round_trip);
    tcase_add_test(tc, test_share_state_part_view_and_restore);
    suite_add_tcase(s, tc);
    return s;
}
