/* Records inside a v2 batch: the builder's output iterates back to the same
 * records, passes the batch checks, and corrupt records are refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"
#include "kp_records.h"
#include "protocol_suites.h"

static kp_slice sl(const char *s)
{
    return s == NULL ? (kp_slice){NULL, -1} : (kp_slice){(const uint8_t *)s, (int32_t)strlen(s)};
}

static uint8_t *build_three(size_t *len)
{
    kp_batch_builder b;
    kp_batch_builder_init(&b, 0, 0, 9, 2, 17);
    kp_record_header hs[2] = {{sl("h1"), sl("v1")}, {sl("h2"), sl(NULL)}};
    kp_batch_builder_add(&b, 5000, sl("k0"), sl("value0"), hs, 2);
    kp_batch_builder_add(&b, 4000, sl(NULL), sl("value1"), NULL, 0);
    kp_batch_builder_add(&b, 7000, sl("k2"), sl(NULL), NULL, 0);
    uint8_t *batch = kp_batch_builder_finish(&b, len);
    kp_batch_builder_fini(&b);
    return batch;
}

START_TEST(test_records_builder_round_trip)
{
    size_t len;
    uint8_t *batch = build_three(&len);
    ck_assert_ptr_nonnull(batch);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_check(batch, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(h.records_count, 3);
    ck_assert_int_eq(h.last_offset_delta, 2);
    ck_assert(h.base_timestamp == 5000);
    ck_assert(h.max_timestamp == 7000);
    ck_assert(h.producer_id == 9);
    ck_assert_int_eq(h.producer_epoch, 2);
    ck_assert_int_eq(h.base_sequence, 17);

    kp_record_iter it;
    kp_record r;
    kp_record_header rh;
    kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, len - KP_BATCH_HDR_SIZE, 3);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(r.offset_delta, 0);
    ck_assert_mem_eq(r.key.p, "k0", 2);
    ck_assert_int_eq(r.header_count, 2);
    ck_assert_int_eq(kp_record_header_next(&r, &rh), KP_ERR_NONE);
    ck_assert_mem_eq(rh.key.p, "h1", 2);
    ck_assert_mem_eq(rh.value.p, "v1", 2);
    ck_assert_int_eq(kp_record_header_next(&r, &rh), KP_ERR_NONE);
    ck_assert_int_eq(rh.value.len, -1);
    ck_assert_int_eq(kp_record_header_next(&r, &rh), KP_ERR__NOENT);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(r.key.len, -1);
    ck_assert(r.timestamp_delta == -1000);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(r.offset_delta, 2);
    ck_assert_int_eq(r.value.len, -1);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR__NOENT);
    free(batch);
}
END_TEST

START_TEST(test_records_count_mismatch_is_corrupt)
{
    size_t len;
    uint8_t *batch = build_three(&len);
    kp_record_iter it;
    kp_record r;
    /* Claiming two records leaves bytes over. */
    kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, len - KP_BATCH_HDR_SIZE, 2);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR__CORRUPT);
    /* Claiming four runs out. */
    kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, len - KP_BATCH_HDR_SIZE, 4);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR__CORRUPT);
    free(batch);
}
END_TEST

START_TEST(test_records_truncated_record_is_corrupt)
{
    size_t len;
    uint8_t *batch = build_three(&len);
    for (size_t cut = KP_BATCH_HDR_SIZE; cut < len; cut++) {
        kp_record_iter it;
        kp_record r;
        kp_err e = KP_ERR_NONE;
        kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, cut - KP_BATCH_HDR_SIZE, 3);
        int ok = 0;
        while ((e = kp_records_next(&it, &r)) == KP_ERR_NONE)
            ok++;
        ck_assert_int_lt(ok, 3);
        ck_assert_int_eq(e, KP_ERR__CORRUPT);
    }
    free(batch);
}
END_TEST

START_TEST(test_records_header_count_bounded)
{
    /* A record claiming 2^30 headers in a few bytes is refused up front. */
    static const uint8_t rec[] = {
        0x0e,                   /* length 7 */
        0x00, 0x00, 0x00,       /* attributes, ts delta, offset delta */
        0x01, 0x01,             /* key null, value null */
        0x80, 0x80, 0x80, 0x80, /* header count varint... */
    };
    kp_record_iter it;
    kp_record r;
    kp_records_iter_init(&it, rec, sizeof(rec), 1);
    ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR__CORRUPT);
}
END_TEST

Suite *records_suite(void)
{
    Suite *s = suite_create("records");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, test_records_builder_round_trip);
    tcase_add_test(tc, test_records_count_mismatch_is_corrupt);
    tcase_add_test(tc, test_records_truncated_record_is_corrupt);
    tcase_add_test(tc, test_records_header_count_bounded);
    suite_add_tcase(s, tc);
    return s;
}
