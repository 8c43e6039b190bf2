/* Primitive encodings, the arena, the writer's file chunks, and the
 * lengths the writer refuses rather than truncates. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kp_types.h"
#include "protocol_suites.h"

START_TEST(test_types_varint_round_trip)
{
    static const int64_t values[] = {0, 1, -1, 63, -64, 64, 300, INT32_MAX, INT32_MIN,
                                     INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        kp_writer w;
        kp_writer_init(&w, 16);
        kp_write_varlong(&w, values[i]);
        ck_assert_uint_eq(w.len, kp_varlong_size(values[i]));
        kp_reader r = kp_reader_make(w.buf, w.len);
        ck_assert(kp_read_varlong(&r) == values[i]);
        ck_assert_int_eq(r.err, KP_ERR_NONE);
        kp_writer_fini(&w);
    }
    /* Zig-zag: -1 is 0x01, 1 is 0x02, -64 is 0x7f. */
    kp_writer w;
    kp_writer_init(&w, 16);
    kp_write_varint(&w, -1);
    kp_write_varint(&w, 1);
    kp_write_varint(&w, -64);
    ck_assert_uint_eq(w.len, 3);
    ck_assert_uint_eq(w.buf[0], 1);
    ck_assert_uint_eq(w.buf[1], 2);
    ck_assert_uint_eq(w.buf[2], 0x7f);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_big_endian_ints)
{
    kp_writer w;
    kp_writer_init(&w, 4);
    kp_write_i16(&w, 0x0102);
    kp_write_i32(&w, -2);
    kp_write_i64(&w, 0x0102030405060708);
    static const uint8_t want[] = {1, 2, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_mem_eq(w.buf, want, sizeof(want));
    kp_reader r = kp_reader_make(w.buf, w.len);
    ck_assert_int_eq(kp_read_i16(&r), 0x0102);
    ck_assert_int_eq(kp_read_i32(&r), -2);
    ck_assert(kp_read_i64(&r) == 0x0102030405060708);
    /* Past the end: zero, and the error sticks. */
    ck_assert_int_eq(kp_read_i8(&r), 0);
    ck_assert_int_eq(r.err, KP_ERR__UNDERFLOW);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_compact_string_and_null)
{
    kp_writer w;
    kp_writer_init(&w, 4);
    kp_write_str(&w, true, KP_STR_LIT("abc"));
    kp_write_str(&w, true, KP_STR_NULL);
    kp_write_str(&w, false, KP_STR_NULL);
    static const uint8_t want[] = {4, 'a', 'b', 'c', 0, 0xff, 0xff};
    ck_assert_mem_eq(w.buf, want, sizeof(want));
    kp_reader r = kp_reader_make(w.buf, w.len);
    ck_assert(kp_str_eq_c(kp_read_str(&r, true), "abc"));
    ck_assert_int_eq(kp_read_str(&r, true).len, -1);
    ck_assert_int_eq(kp_read_str(&r, false).len, -1);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_array_count_bounded_by_bytes)
{
    static const uint8_t body[] = {0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_read_array_len(&r, false, 4), -1);
    ck_assert_int_eq(r.err, KP_ERR__MALFORMED);
    r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_read_array_len(&r, false, 3), 3);
}
END_TEST

/* Kafka 4.4's generated readers refuse arrays of more than 1,000,000
 * elements even when the bytes are there, and more than 10,000 tagged
 * fields. */
START_TEST(test_types_decoder_limits_as_kafka)
{
    size_t len = 4 + KP_MAX_ARRAY_LEN + 1;
    uint8_t *body = calloc(1, len);
    ck_assert_ptr_nonnull(body);
    kp_writer w;
    kp_writer_init(&w, 8);
    kp_write_i32(&w, KP_MAX_ARRAY_LEN);
    memcpy(body, w.buf, 4);
    kp_reader r = kp_reader_make(body, len);
    ck_assert_int_eq(kp_read_array_len(&r, false, 1), KP_MAX_ARRAY_LEN);
    w.len = 0;
    kp_write_i32(&w, KP_MAX_ARRAY_LEN + 1);
    memcpy(body, w.buf, 4);
    r = kp_reader_make(body, len);
    ck_assert_int_eq(kp_read_array_len(&r, false, 1), -1);
    ck_assert_int_eq(r.err, KP_ERR__MALFORMED);

    /* KP_MAX_TAGGED_FIELDS empty tags (tag i, size 0) are read; one more is not. */
    for (uint32_t count = KP_MAX_TAGGED_FIELDS; count <= KP_MAX_TAGGED_FIELDS + 1; count++) {
        w.len = 0;
        kp_write_uvarint(&w, count);
        for (uint32_t t = 0; t < count; t++)
            kp_write_tag_header(&w, t, 0);
        r = kp_reader_make(w.buf, w.len);
        kp_skip_tags(&r);
        ck_assert_int_eq(r.err, count == KP_MAX_TAGGED_FIELDS ? KP_ERR_NONE : KP_ERR__MALFORMED);
    }
    kp_writer_fini(&w);
    free(body);
}
END_TEST

START_TEST(test_types_writer_file_chunks)
{
    kp_writer w;
    kp_writer_init(&w, 8);
    kp_write_i32(&w, 7);
    kp_file_range f = {3, 100, 50};
    kp_records rec = {NULL, 50, &f};
    kp_write_records(&w, false, &rec);
    kp_write_i16(&w, 1);
    ck_assert_uint_eq(w.len, 4 + 4 + 2);
    ck_assert_uint_eq(w.total, 4 + 4 + 50 + 2);
    ck_assert_int_eq(w.nchunks, 1);
    ck_assert_uint_eq(w.chunks[0].mem_pos, 8);
    ck_assert_int_eq(w.chunks[0].file.len, 50);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_classic_string_over_int16_refused)
{
    /* A classic string's length is an int16: 40000 bytes would go out as
     * -25536 (a null, then garbage); the writer fails instead. */
    static char big[40000];
    memset(big, 'x', sizeof(big));
    kp_str s = {big, (int32_t)sizeof(big)};
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_write_i8(&w, 7);
    kp_write_str(&w, false, s);
    ck_assert_int_eq(w.err, KP_ERR__INVAL);
    ck_assert_uint_eq(w.len, 1);
    kp_write_i8(&w, 8); /* sticky: nothing more is written */
    ck_assert_uint_eq(w.len, 1);
    kp_writer_fini(&w);
    /* INT16_MAX itself fits, and the compact form has no int16 limit. */
    kp_writer_init(&w, 64);
    kp_write_str(&w, false, (kp_str){big, INT16_MAX});
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_uint_eq(w.len, 2 + INT16_MAX);
    ck_assert_uint_eq(w.buf[0], 0x7f);
    ck_assert_uint_eq(w.buf[1], 0xff);
    kp_write_str(&w, true, s);
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    kp_reader r = kp_reader_make(w.buf, w.len);
    ck_assert_int_eq(kp_read_str(&r, false).len, INT16_MAX);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_compact_length_int32_max)
{
    /* The uvarint length of INT32_MAX bytes is INT32_MAX + 1, computed
     * without signed overflow (UBSan watches); counted, not written. */
    static const uint8_t byte;
    kp_writer w;
    kp_writer_init_count(&w);
    kp_write_bytes(&w, true, (kp_slice){&byte, INT32_MAX});
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_uint_eq(w.total, kp_uvarint_size((uint32_t)INT32_MAX + 1u) + INT32_MAX);
    kp_writer_fini(&w);
    kp_writer_init(&w, 16);
    kp_write_bytes(&w, true, (kp_slice){NULL, -1});
    kp_write_bytes(&w, true, (kp_slice){&byte, 0});
    ck_assert_uint_eq(w.len, 2);
    ck_assert_uint_eq(w.buf[0], 0); /* null */
    ck_assert_uint_eq(w.buf[1], 1); /* empty */
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_tag_header_size_checked)
{
    kp_writer w;
    kp_writer_init(&w, 16);
    kp_write_tag_header(&w, 3, 300);
    static const uint8_t want[] = {3, 0xac, 0x02};
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_mem_eq(w.buf, want, sizeof(want));
    kp_write_tag_header(&w, 4, (size_t)INT32_MAX + 1);
    ck_assert_int_eq(w.err, KP_ERR__INVAL);
    ck_assert_uint_eq(w.len, sizeof(want));
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_negative_file_range_refused)
{
    kp_writer w;
    kp_writer_init(&w, 8);
    kp_file_range f = {3, 100, -5};
    kp_records rec = {NULL, -5, &f};
    kp_write_records(&w, false, &rec);
    ck_assert_int_eq(w.err, KP_ERR__INVAL);
    ck_assert_uint_eq(w.total, 0);
    ck_assert_int_eq(w.nchunks, 0);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_types_arena_alignment_and_large_blocks)
{
    kp_arena a;
    kp_arena_init(&a);
    for (int i = 1; i < 200; i++) {
        uint8_t *p = kp_arena_alloc(&a, (size_t)i * 37);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        for (int j = 0; j < i * 37; j++)
            ck_assert_uint_eq(p[j], 0);
        memset(p, 0xab, (size_t)i * 37);
    }
    ck_assert_ptr_null(kp_arena_calloc(&a, SIZE_MAX / 2, 8));
    kp_arena_fini(&a);
}
END_TEST

Suite *types_suite(void)
{
    Suite *s = suite_create("types");
    TCase *tc = tcase_create("types");
    tcase_add_test(tc, test_types_varint_round_trip);
    tcase_add_test(tc, test_types_big_endian_ints);
    tcase_add_test(tc, test_types_compact_string_and_null);
    tcase_add_test(tc, test_types_array_count_bounded_by_bytes);
    tcase_add_test(tc, test_types_decoder_limits_as_kafka);
    tcase_add_test(tc, test_types_writer_file_chunks);
    tcase_add_test(tc, test_types_classic_string_over_int16_refused);
    tcase_add_test(tc, test_types_compact_length_int32_max);
    tcase_add_test(tc, test_types_tag_header_size_checked);
    tcase_add_test(tc, test_types_negative_file_range_refused);
    tcase_add_test(tc, test_types_arena_alignment_and_large_blocks);
    suite_add_tcase(s, tc);
    return s;
}
