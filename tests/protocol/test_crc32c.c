#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_crc32c.h"
#include "kt_batch_suites.h"

/* Bit-at-a-time reference, independent of the tables. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

START_TEST(test_crc32c_check_value)
{
    ck_assert_uint_eq(kp_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(kp_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(kp_crc32c(0, "", 0), 0);
}
END_TEST

/* The iSCSI vectors of RFC 3720, appendix B.4. */
START_TEST(test_crc32c_rfc3720_vectors)
{
    uint8_t buf[32];
    memset(buf, 0, sizeof(buf));
    ck_assert_uint_eq(kp_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof(buf));
    ck_assert_uint_eq(kp_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    ck_assert_uint_eq(kp_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    ck_assert_uint_eq(kp_crc32c(0, buf, 32), 0x113FDB5Cu);
    ck_assert_uint_eq(kp_crc32c_sw(0, buf, 32), 0x113FDB5Cu);
}
END_TEST

START_TEST(test_crc32c_paths_agree)
{
    enum { N = 4099 };
    uint8_t *buf = malloc(N + 8);
    ck_assert_ptr_nonnull(buf);
    srand(7);
    for (size_t i = 0; i < N + 8; i++)
        buf[i] = (uint8_t)rand();
    for (size_t off = 0; off < 8; off++) {
        for (size_t len = 0; len < N; len += 1 + len / 3) {
            uint32_t ref = crc_bitwise(buf + off, len);
            ck_assert_uint_eq(kp_crc32c_sw(0, buf + off, len), ref);
            ck_assert_uint_eq(kp_crc32c(0, buf + off, len), ref);
        }
    }
    free(buf);
}
END_TEST

START_TEST(test_crc32c_incremental)
{
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 31 + 7);
    uint32_t whole = kp_crc32c(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
        uint32_t c = kp_crc32c(0, buf, cut);
        ck_assert_uint_eq(kp_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
        c = kp_crc32c_sw(0, buf, cut);
        ck_assert_uint_eq(kp_crc32c_sw(c, buf + cut, sizeof(buf) - cut), whole);
    }
}
END_TEST

Suite *crc32c_suite(void)
{
    Suite *s = suite_create("crc32c");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_crc32c_check_value);
    tcase_add_test(tc, test_crc32c_rfc3720_vectors);
    tcase_add_test(tc, test_crc32c_paths_agree);
    tcase_add_test(tc, test_crc32c_incremental);
    suite_add_tcase(s, tc);
    return s;
}
