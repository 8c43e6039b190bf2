#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"
#include "kt_batch_build.h"
#include "kt_batch_suites.h"

START_TEST(test_batch_parse_fields)
{
    size_t len;
    uint8_t *b = kt_batch_build(5, 10, 1000, 3, &len);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_check(b, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(h.base_offset, 0);
    ck_assert_int_eq(kp_batch_total_size(&h), (int64_t)len);
    ck_assert_int_eq(h.partition_leader_epoch, -1);
    ck_assert_int_eq(h.magic, 2);
    ck_assert_int_eq(h.attributes, 0);
    ck_assert_int_eq(h.last_offset_delta, 4);
    ck_assert_int_eq(h.base_timestamp, 1000);
    ck_assert_int_eq(h.max_timestamp, 1012);
    ck_assert_int_eq(h.producer_id, -1);
    ck_assert_int_eq(h.producer_epoch, -1);
    ck_assert_int_eq(h.base_sequence, -1);
    ck_assert_int_eq(h.records_count, 5);
    ck_assert_int_eq(kp_batch_last_offset(&h), 4);
    free(b);
}
END_TEST

START_TEST(test_batch_short_and_bad)
{
    size_t len;
    uint8_t *b = kt_batch_build(2, 4, 0, 1, &len);
    kp_batch_hdr h;
    for (size_t n = 0; n < KP_BATCH_HDR_SIZE; n++)
        ck_assert_int_eq(kp_batch_hdr_parse(b, n, &h), KP_ERR__UNDERFLOW);
    ck_assert_int_eq(kp_batch_check(b, len - 1, &h), KP_ERR__UNDERFLOW);
    b[16] = 1;
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR__CORRUPT);
    b[16] = 2;
    kp_be32_put(b + 8, 10);
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR__CORRUPT);
    free(b);
}
END_TEST

/* A base offset whose last offset + 1 overflows int64_t is corrupt. */
START_TEST(test_batch_offset_overflow)
{
    size_t len;
    uint8_t *b = kt_batch_build(2, 4, 0, 1, &len);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR_NONE);
    int64_t highest = INT64_MAX - 1 - h.last_offset_delta;
    kp_be64_put(b, highest);
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(kp_batch_last_offset(&h), INT64_MAX - 1);
    kp_be64_put(b, highest + 1);
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR__CORRUPT);
    kp_be64_put(b, INT64_MAX);
    ck_assert_int_eq(kp_batch_hdr_parse(b, len, &h), KP_ERR__CORRUPT);
    free(b);
}
END_TEST

/* Any flipped bit from the attributes on breaks the CRC. */
START_TEST(test_batch_crc_detects_flips)
{
    size_t len;
    uint8_t *b = kt_batch_build(3, 20, 5, 1, &len);
    for (size_t i = KP_BATCH_CRC_START; i < len; i++) {
        b[i] ^= 0x10;
        kp_batch_hdr h;
        kp_err err = kp_batch_check(b, len, &h);
        ck_assert_int_ne(err, KP_ERR_NONE);
        b[i] ^= 0x10;
    }
    ck_assert_int_eq(kp_batch_check(b, len, NULL), KP_ERR_NONE);
    free(b);
}
END_TEST

START_TEST(test_batch_rewrites)
{
    size_t len;
    uint8_t *b = kt_batch_build(3, 20, 5, 1, &len);
    kp_batch_hdr h;
    kp_batch_set_base_offset(b, 123456789012LL);
    kp_batch_set_leader_epoch(b, 77);
    ck_assert_int_eq(kp_batch_check(b, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(h.base_offset, 123456789012LL);
    ck_assert_int_eq(h.partition_leader_epoch, 77);
    kp_batch_set_log_append_time(b, 999999);
    ck_assert_int_eq(kp_batch_check(b, len, &h), KP_ERR__CORRUPT);
    kp_batch_crc_store(b, len);
    ck_assert_int_eq(kp_batch_check(b, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(h.max_timestamp, 999999);
    ck_assert_int_eq(h.attributes & KP_BATCH_ATTR_LOG_APPEND_TIME, KP_BATCH_ATTR_LOG_APPEND_TIME);
    ck_assert_int_eq(h.base_timestamp, 5);
    free(b);
}
END_TEST

Suite *batch_suite(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_batch_parse_fields);
    tcase_add_test(tc, test_batch_short_and_bad);
    tcase_add_test(tc, test_batch_offset_overflow);
    tcase_add_test(tc, test_batch_crc_detects_flips);
    tcase_add_test(tc, test_batch_rewrites);
    suite_add_tcase(s, tc);
    return s;
}
