/* Produce-side batch validation: one test per rejection rule with the code
 * Kafka answers, valid batches in every codec, golden batches written by
 * kafka-python, and recompression. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"
#include "kp_validate.h"
#include "protocol_suites.h"

#define NOW        1700000000000LL
#define HOUR_MS    3600000LL
#define N_RECORDS  20
#define OFF_COUNT  (KP_BATCH_HDR_SIZE - 4)
#define OFF_SEQ    53

static kp_validate_opts default_opts(void)
{
    kp_validate_opts o = {
        .single_batch = true,
        .allow_zstd = true,
        .max_message_bytes = 1 << 20,
        .now_ms = NOW,
        .timestamp_before_max_ms = 24 * HOUR_MS,
        .timestamp_after_max_ms = HOUR_MS,
        .max_decompressed = 8u << 20,
    };
    return o;
}

/* n records: key "k<i>" (null for i == null_key), a value of value_len
 * bytes, one header on odd records, timestamps NOW - 1000 + i. */
static uint8_t *build_batch(int codec, int n, size_t value_len, int null_key, size_t *len)
{
    kp_batch_builder b;
    kp_batch_builder_init(&b, 0, 0, 77, 3, 1000);
    uint8_t *value = malloc(value_len + 1);
    memset(value, 'v', value_len);
    for (int i = 0; i < n; i++) {
        char key[16];
        int klen = snprintf(key, sizeof(key), "k%d", i);
        kp_record_header h = {{(const uint8_t *)"hk", 2}, {(const uint8_t *)key, klen}};
        kp_slice k = i == null_key ? (kp_slice){NULL, -1} : (kp_slice){(const uint8_t *)key, klen};
        kp_batch_builder_add(&b, NOW - 1000 + i, k, (kp_slice){value, (int32_t)value_len}, &h,
                             i % 2);
    }
    free(value);
    uint8_t *out;
    ck_assert_int_eq(kp_batch_builder_finish_codec(&b, codec, KP_COMPRESS_LEVEL_DEFAULT, &out, len),
                     KP_ERR_NONE);
    kp_batch_builder_fini(&b);
    return out;
}

static uint8_t *plain_batch(size_t *len)
{
    return build_batch(KP_CODEC_NONE, N_RECORDS, 10, -1, len);
}

static kp_err validate(const uint8_t *p, size_t len, const kp_validate_opts *o,
                       kp_validate_result *res)
{
    return kp_validate_batches(p, len, o, res);
}

static void expect(const uint8_t *p, size_t len, const kp_validate_opts *o, kp_err want)
{
    kp_validate_result res;
    kp_err got = validate(p, len, o, &res);
    ck_assert_msg(got == want, "want %s, got %s (%s)", kp_err_name(want), kp_err_name(got),
                  res.msg);
    ck_assert(want == KP_ERR_NONE || res.msg[0] != '\0');
    kp_validate_result_fini(&res);
}

static void expect_default(const uint8_t *p, size_t len, kp_err want)
{
    kp_validate_opts o = default_opts();
    expect(p, len, &o, want);
}

/* A rejection: the code, and the records it lists (index -1: none). */
static void expect_record_error(const uint8_t *p, size_t len, const kp_validate_opts *o,
                                kp_err want, int index)
{
    kp_validate_result res;
    kp_err got = validate(p, len, o, &res);
    ck_assert_msg(got == want, "want %s, got %s (%s)", kp_err_name(want), kp_err_name(got),
                  res.msg);
    ck_assert_int_eq(res.record_errors_listed, index < 0 ? 0 : 1);
    ck_assert_int_eq(res.record_error_count, index < 0 ? 0 : 1);
    if (index >= 0)
        ck_assert_int_eq(res.record_errors[0].index, index);
    kp_validate_result_fini(&res);
}

/* Rewrites a big-endian int32 field, then the CRC of len bytes. */
static void patch32(uint8_t *b, size_t len, size_t off, int32_t v)
{
    kp_be32_put(b + off, v);
    kp_batch_crc_store(b, len);
}

/* Record i of an uncompressed batch whose length varints are one byte. */
static uint8_t *record_at(uint8_t *b, int i)
{
    uint8_t *r = b + KP_BATCH_HDR_SIZE;
    for (int k = 0; k < i; k++)
        r += 1 + r[0] / 2;
    return r;
}

START_TEST(test_validate_valid_each_codec)
{
    int codec = _i;
    size_t len;
    uint8_t *b = build_batch(codec, N_RECORDS, 300, -1, &len);
    kp_validate_opts o = default_opts();
    kp_validate_result res;
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_NONE);
    ck_assert_int_eq(res.batches, 1);
    ck_assert_int_eq(res.records, N_RECORDS);
    ck_assert(res.max_timestamp == NOW - 1000 + N_RECORDS - 1);
    ck_assert_int_eq(res.attributes & KP_BATCH_ATTR_CODEC_MASK, codec);
    ck_assert(res.producer_id == 77);
    ck_assert_int_eq(res.producer_epoch, 3);
    ck_assert_int_eq(res.base_sequence, 1000);
    ck_assert_int_eq(res.last_offset_delta, N_RECORDS - 1);
    ck_assert_int_eq(res.record_errors_listed, 0);
    ck_assert_ptr_null(res.record_errors);
    if (codec != KP_CODEC_NONE)
        ck_assert_uint_lt(len, N_RECORDS * 300 / 4);
    free(b);
}
END_TEST

START_TEST(test_validate_no_whole_batch)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    expect_default(b, 0, KP_ERR_INVALID_RECORD);
    expect_default(b, 11, KP_ERR_INVALID_RECORD);
    expect_default(b, len - 1, KP_ERR_INVALID_RECORD);
    free(b);
}
END_TEST

START_TEST(test_validate_trailing_partial)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    uint8_t *two = malloc(len + 30);
    memcpy(two, b, len);
    memcpy(two + len, b, 30); /* a second batch cut short */
    expect_default(two, len + 5, KP_ERR_CORRUPT_MESSAGE);
    expect_default(two, len + 30, KP_ERR_CORRUPT_MESSAGE);
    kp_validate_opts o = default_opts();
    o.single_batch = false;
    expect(two, len + 30, &o, KP_ERR_CORRUPT_MESSAGE);
    free(two);
    free(b);
}
END_TEST

START_TEST(test_validate_second_batch)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    uint8_t *two = malloc(2 * len);
    memcpy(two, b, len);
    memcpy(two + len, b, len);
    expect_default(two, 2 * len, KP_ERR_INVALID_RECORD);
    kp_validate_opts o = default_opts();
    o.single_batch = false;
    kp_validate_result res;
    ck_assert_int_eq(validate(two, 2 * len, &o, &res), KP_ERR_NONE);
    ck_assert_int_eq(res.batches, 2);
    ck_assert_int_eq(res.records, 2 * N_RECORDS);
    two[len + KP_BATCH_OFF_MAGIC] = 1;
    expect(two, 2 * len, &o, KP_ERR_INVALID_RECORD);
    free(two);
    free(b);
}
END_TEST

START_TEST(test_validate_max_message_bytes)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_validate_opts o = default_opts();
    o.max_message_bytes = (int32_t)len;
    expect(b, len, &o, KP_ERR_NONE);
    o.max_message_bytes = (int32_t)len - 1;
    expect(b, len, &o, KP_ERR_MESSAGE_TOO_LARGE);
    free(b);
}
END_TEST

/* A magic-2 batch whose length (14..48) leaves no room for its header. */
START_TEST(test_validate_shorter_than_header)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_be32_put(b + KP_BATCH_OFF_LENGTH, 40);
    expect_default(b, 52, KP_ERR_CORRUPT_MESSAGE);
    free(b);
}
END_TEST

START_TEST(test_validate_zstd_before_v7)
{
    size_t len;
    uint8_t *b = build_batch(KP_CODEC_ZSTD, N_RECORDS, 100, -1, &len);
    kp_validate_opts o = default_opts();
    o.allow_zstd = false;
    expect(b, len, &o, KP_ERR_UNSUPPORTED_COMPRESSION_TYPE);
    free(b);
}
END_TEST

/* One field of a plain batch rewritten, and the code Kafka answers. */
static const struct header_case {
    const char *what;
    size_t off;
    int width; /* 1, 4 or 8 bytes */
    int64_t value;
    bool crc; /* recompute the CRC after */
    kp_err want;
} header_cases[] = {
    {"batch length below 14", KP_BATCH_OFF_LENGTH, 4, 13, false, KP_ERR_CORRUPT_MESSAGE},
    {"magic 0", KP_BATCH_OFF_MAGIC, 1, 0, false, KP_ERR_INVALID_RECORD},
    {"magic 1", KP_BATCH_OFF_MAGIC, 1, 1, false, KP_ERR_INVALID_RECORD},
    {"magic 3", KP_BATCH_OFF_MAGIC, 1, 3, false, KP_ERR_CORRUPT_MESSAGE},
    {"magic -1", KP_BATCH_OFF_MAGIC, 1, 0xff, false, KP_ERR_CORRUPT_MESSAGE},
    {"base offset 5", KP_BATCH_OFF_BASE_OFFSET, 8, 5, false, KP_ERR_INVALID_RECORD},
    {"stored crc wrong", KP_BATCH_OFF_CRC, 4, 0x1234567, false, KP_ERR_CORRUPT_MESSAGE},
    {"a record byte flipped", KP_BATCH_HDR_SIZE + 5, 1, 0x7f, false, KP_ERR_CORRUPT_MESSAGE},
    {"codec 5", KP_BATCH_OFF_ATTRIBUTES + 1, 1, 5, true, KP_ERR_UNKNOWN_SERVER_ERROR},
    {"codec 6", KP_BATCH_OFF_ATTRIBUTES + 1, 1, 6, true, KP_ERR_UNKNOWN_SERVER_ERROR},
    {"codec 7", KP_BATCH_OFF_ATTRIBUTES + 1, 1, 7, true, KP_ERR_UNKNOWN_SERVER_ERROR},
    {"control bit", KP_BATCH_OFF_ATTRIBUTES + 1, 1, KP_BATCH_ATTR_CONTROL, true,
     KP_ERR_INVALID_RECORD},
    {"count 0 (empty batch)", OFF_COUNT, 4, 0, true, KP_ERR_INVALID_RECORD},
    {"last delta = count", KP_BATCH_OFF_LAST_DELTA, 4, N_RECORDS, true, KP_ERR_INVALID_RECORD},
    {"last delta -1", KP_BATCH_OFF_LAST_DELTA, 4, -1, true, KP_ERR_INVALID_RECORD},
    {"producer id without sequence", OFF_SEQ, 4, -1, true, KP_ERR_INVALID_RECORD},
    {"transactional bit (left to the broker)", KP_BATCH_OFF_ATTRIBUTES + 1, 1,
     KP_BATCH_ATTR_TRANSACTIONAL, true, KP_ERR_NONE},
};

START_TEST(test_validate_header_rules)
{
    const struct header_case *c = &header_cases[_i];
    size_t len;
    uint8_t *b = plain_batch(&len);
    if (c->width == 1)
        b[c->off] = (uint8_t)c->value;
    else if (c->width == 4)
        kp_be32_put(b + c->off, (int32_t)c->value);
    else
        kp_be64_put(b + c->off, c->value);
    if (c->crc)
        kp_batch_crc_store(b, len);
    kp_validate_opts o = default_opts();
    kp_validate_result res;
    kp_err got = validate(b, len, &o, &res);
    ck_assert_msg(got == c->want, "%s: want %s, got %s (%s)", c->what, kp_err_name(c->want),
                  kp_err_name(got), res.msg);
    free(b);
}
END_TEST

/* A header alone: count 0, no records bytes. */
START_TEST(test_validate_header_only_batch)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_be32_put(b + KP_BATCH_OFF_LENGTH, KP_BATCH_HDR_SIZE - KP_BATCH_LOG_OVERHEAD);
    kp_be32_put(b + KP_BATCH_OFF_LAST_DELTA, 0);
    patch32(b, KP_BATCH_HDR_SIZE, OFF_COUNT, 0);
    expect_default(b, KP_BATCH_HDR_SIZE, KP_ERR_INVALID_RECORD);
    free(b);
}
END_TEST

START_TEST(test_validate_count_vs_records_present)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_be32_put(b + KP_BATCH_OFF_LAST_DELTA, N_RECORDS);
    patch32(b, len, OFF_COUNT, N_RECORDS + 1);
    expect_default(b, len, KP_ERR_INVALID_RECORD); /* fewer records than count */
    kp_be32_put(b + KP_BATCH_OFF_LAST_DELTA, N_RECORDS - 2);
    patch32(b, len, OFF_COUNT, N_RECORDS - 1);
    expect_default(b, len, KP_ERR_INVALID_RECORD); /* bytes left after count */
    free(b);
}
END_TEST

START_TEST(test_validate_offset_delta_out_of_sequence)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    uint8_t *r = record_at(b, 4);
    /* length, attributes, timestamp delta, then the zig-zag offset delta */
    ck_assert_uint_eq(r[3], 2 * 4);
    r[3] = 2 * 5;
    kp_batch_crc_store(b, len);
    kp_validate_opts o = default_opts();
    expect_record_error(b, len, &o, KP_ERR_INVALID_RECORD, 4);
    free(b);
}
END_TEST

START_TEST(test_validate_record_structure)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    uint8_t *r = record_at(b, 7);
    r[0] += 2; /* record length one byte longer than its fields */
    kp_batch_crc_store(b, len);
    kp_validate_opts o = default_opts();
    expect_record_error(b, len, &o, KP_ERR_INVALID_RECORD, -1);
    free(b);
}
END_TEST

START_TEST(test_validate_keyless_on_compacted)
{
    size_t len;
    uint8_t *b = build_batch(_i, N_RECORDS, 50, 6, &len);
    kp_validate_opts o = default_opts();
    expect(b, len, &o, KP_ERR_NONE);
    o.compacted = true;
    expect_record_error(b, len, &o, KP_ERR_INVALID_RECORD, 6);
    free(b);
}
END_TEST

START_TEST(test_validate_timestamps)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_validate_opts o = default_opts();
    /* The last record is exactly at the upper bound, then one past it. */
    o.now_ms = NOW - 1000 + N_RECORDS - 1 - o.timestamp_after_max_ms;
    expect(b, len, &o, KP_ERR_NONE);
    o.now_ms--;
    expect_record_error(b, len, &o, KP_ERR_INVALID_TIMESTAMP, N_RECORDS - 1);
    /* The first record too old. */
    o.now_ms = NOW - 1000 + o.timestamp_before_max_ms + 1;
    expect_record_error(b, len, &o, KP_ERR_INVALID_TIMESTAMP, 0);
    /* Under LogAppendTime the producer's timestamps are not checked. */
    o.log_append_time = true;
    expect(b, len, &o, KP_ERR_NONE);
    free(b);
}
END_TEST

/* Timestamp -1 (none) is never out of range. */
START_TEST(test_validate_no_timestamp)
{
    kp_batch_builder bld;
    kp_batch_builder_init(&bld, 0, 0, -1, -1, -1);
    kp_batch_builder_add(&bld, -1, (kp_slice){(const uint8_t *)"k", 1}, (kp_slice){NULL, -1},
                         NULL, 0);
    size_t len;
    uint8_t *b = kp_batch_builder_finish(&bld, &len);
    kp_batch_builder_fini(&bld);
    kp_validate_opts o = default_opts();
    kp_validate_result res;
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_NONE);
    ck_assert(res.max_timestamp == -1);
    free(b);
}
END_TEST

/* The LogAppendTime bit from a producer: refused on a LogAppendTime topic,
 * and on a CreateTime one when the batch has no max timestamp (Kafka then
 * reads every record's timestamp as the batch max). */
START_TEST(test_validate_log_append_time_from_producer)
{
    size_t len;
    uint8_t *b = plain_batch(&len);
    kp_validate_opts o = default_opts();
    kp_batch_set_log_append_time(b, NOW);
    kp_batch_crc_store(b, len);
    expect(b, len, &o, KP_ERR_NONE);
    o.log_append_time = true;
    expect(b, len, &o, KP_ERR_INVALID_TIMESTAMP);
    o.log_append_time = false;
    kp_batch_set_log_append_time(b, -1);
    kp_batch_crc_store(b, len);
    expect(b, len, &o, KP_ERR_INVALID_TIMESTAMP);
    free(b);
}
END_TEST

/* n records with value "v"; record i keyless where keyless(i), timestamp
 * ts(i). Uncompressed unless codec says otherwise. */
static uint8_t *build_faulty(int codec, int n, bool (*keyless)(int), int64_t (*ts)(int),
                             size_t *len)
{
    kp_batch_builder b;
    kp_batch_builder_init(&b, 0, 0, -1, -1, -1);
    for (int i = 0; i < n; i++) {
        kp_slice k = keyless(i) ? (kp_slice){NULL, -1} : (kp_slice){(const uint8_t *)"key", 3};
        kp_batch_builder_add(&b, ts(i), k, (kp_slice){(const uint8_t *)"v", 1}, NULL, 0);
    }
    uint8_t *out;
    ck_assert_int_eq(kp_batch_builder_finish_codec(&b, codec, KP_COMPRESS_LEVEL_DEFAULT, &out, len),
                     KP_ERR_NONE);
    kp_batch_builder_fini(&b);
    return out;
}

static bool keyless_1_3_4(int i)
{
    return i == 1 || i == 3 || i == 4;
}

static bool keyless_1(int i)
{
    return i == 1;
}

static bool keyless_all(int i)
{
    (void)i;
    return true;
}

static int64_t ts_now(int i)
{
    (void)i;
    return NOW;
}

/* Records 1 and 2 far in the past: 1 is keyless too, so only its key counts. */
static int64_t ts_old_1_2(int i)
{
    return i == 1 || i == 2 ? 1000 : NOW;
}

/* Kafka's LogValidator lists every refused record of the batch, not only the
 * first, and checks a record's timestamp only once its key passed. */
START_TEST(test_validate_lists_every_faulty_record)
{
    size_t len;
    uint8_t *b = build_faulty(_i, 6, keyless_1_3_4, ts_now, &len);
    kp_validate_opts o = default_opts();
    o.compacted = true;
    kp_validate_result res;
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_INVALID_RECORD);
    ck_assert_int_eq(res.record_error_count, 3);
    ck_assert_int_eq(res.record_errors_listed, 3);
    const int want[] = {1, 3, 4};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res.record_errors[i].index, want[i]);
        ck_assert_int_eq(res.record_errors[i].fault, KP_RECORD_FAULT_NO_KEY);
    }
    ck_assert(!res.timestamp_fault);
    kp_validate_result_fini(&res);
    ck_assert_ptr_null(res.record_errors);
    free(b);

    b = build_faulty(_i, 4, keyless_1, ts_old_1_2, &len);
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_INVALID_TIMESTAMP);
    ck_assert_int_eq(res.record_error_count, 2);
    ck_assert_int_eq(res.record_errors[0].index, 1);
    ck_assert_int_eq(res.record_errors[0].fault, KP_RECORD_FAULT_NO_KEY);
    ck_assert_int_eq(res.record_errors[1].index, 2);
    ck_assert_int_eq(res.record_errors[1].fault, KP_RECORD_FAULT_TIMESTAMP);
    ck_assert(res.record_errors[1].timestamp == 1000);
    ck_assert(res.timestamp_fault);
    kp_validate_result_fini(&res);
    free(b);
}
END_TEST

/* Past the cap the faults are still counted, not listed. */
START_TEST(test_validate_record_errors_capped)
{
    int n = KP_VALIDATE_MAX_RECORD_ERRORS + 10;
    size_t len;
    uint8_t *b = build_faulty(KP_CODEC_NONE, n, keyless_all, ts_now, &len);
    kp_validate_opts o = default_opts();
    o.compacted = true;
    kp_validate_result res;
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_INVALID_RECORD);
    ck_assert_int_eq(res.record_error_count, n);
    ck_assert_int_eq(res.record_errors_listed, KP_VALIDATE_MAX_RECORD_ERRORS);
    ck_assert_int_eq(res.record_errors[KP_VALIDATE_MAX_RECORD_ERRORS - 1].index,
                     KP_VALIDATE_MAX_RECORD_ERRORS - 1);
    kp_validate_result_fini(&res);
    free(b);
}
END_TEST

/* The texts, word for word as Kafka 4.1 answers them. */
START_TEST(test_validate_record_error_texts)
{
    kp_validate_opts o = default_opts();
    o.timestamp_before_max_ms = HOUR_MS;
    kp_record_error key = {.timestamp = NOW, .index = 1, .key_len = -1, .value_len = 1,
                           .fault = KP_RECORD_FAULT_NO_KEY};
    kp_record_error ts = {.timestamp = 1000, .index = 2, .key_len = 2, .value_len = 1,
                          .fault = KP_RECORD_FAULT_TIMESTAMP};
    kp_record_error lat = {.timestamp = 42, .index = 0, .key_len = -1, .value_len = 5,
                           .fault = KP_RECORD_FAULT_LOG_APPEND_TIME};
    char buf[512];
    kp_record_error_text(&key, &o, "orders", 3, buf, sizeof(buf));
    ck_assert_str_eq(buf, "Compacted topic cannot accept message without key in topic partition "
                          "orders-3");
    kp_record_error_text(&ts, &o, "orders", 3, buf, sizeof(buf));
    ck_assert_str_eq(buf, "Timestamp 1000 of message with offset 2 is out of range. The "
                          "timestamp should be within [1699996400000, 1700003600000]");
    kp_record_error_text(&lat, &o, "orders", 3, buf, sizeof(buf));
    ck_assert_str_eq(buf, "Invalid timestamp type in message DefaultRecord(offset=0, "
                          "timestamp=42, key=0 bytes, value=5 bytes). Producer should not set "
                          "timestamp type to LogAppendTime.");
    /* Kafka's bounds wrap as Java longs do. */
    o.timestamp_before_max_ms = INT64_MAX;
    kp_record_error_text(&ts, &o, "t", 0, buf, sizeof(buf));
    ck_assert_str_eq(buf, "Timestamp 1000 of message with offset 2 is out of range. The "
                          "timestamp should be within [-9223370336854775807, "
                          "1700003600000]");

    kp_record_error four[4] = {key, key, key, key};
    for (int i = 0; i < 4; i++)
        four[i].index = 2 * i;
    kp_validate_result res = {.record_errors = four, .record_errors_listed = 4,
                              .record_error_count = 9};
    kp_record_errors_summary(&res, &o, "p", 0, buf, sizeof(buf));
    const char *m = "Compacted topic cannot accept message without key in topic partition p-0";
    char want[512];
    snprintf(want, sizeof(want),
             "One or more records have been rejected due to 9 record errors in total, and only "
             "showing the first three errors at most: [RecordError(batchIndex=0, message='%s'), "
             "RecordError(batchIndex=2, message='%s'), RecordError(batchIndex=4, message='%s')]",
             m, m, m);
    ck_assert_str_eq(buf, want);
    /* Cut short, still terminated. */
    kp_record_errors_summary(&res, &o, "p", 0, buf, 40);
    ck_assert_uint_eq(strlen(buf), 39);
    res.timestamp_fault = true;
    kp_record_errors_summary(&res, &o, "p", 0, buf, sizeof(buf));
    ck_assert_str_eq(buf, "One or more records have been rejected due to invalid timestamp");
}
END_TEST

START_TEST(test_validate_undecodable_compressed)
{
    size_t len;
    uint8_t *b = build_batch(_i, N_RECORDS, 100, -1, &len);
    for (size_t i = KP_BATCH_HDR_SIZE; i < KP_BATCH_HDR_SIZE + 8; i++)
        b[i] ^= 0x3c;
    kp_batch_crc_store(b, len);
    expect_default(b, len, KP_ERR_UNKNOWN_SERVER_ERROR);
    free(b);
}
END_TEST

START_TEST(test_validate_decompression_cap)
{
    size_t len;
    uint8_t *b = build_batch(_i, 200, 4000, -1, &len);
    kp_validate_opts o = default_opts();
    expect(b, len, &o, KP_ERR_NONE);
    o.max_decompressed = 64 * 1024;
    expect(b, len, &o, KP_ERR_MESSAGE_TOO_LARGE);
    free(b);
}
END_TEST

/* ---- recompression ------------------------------------------------------- */

/* The records of a whole valid batch, decompressed (caller frees *owned). */
static kp_record_iter open_batch(const uint8_t *b, size_t len, kp_batch_hdr *h, uint8_t **owned)
{
    ck_assert_int_eq(kp_batch_check(b, len, h), KP_ERR_NONE);
    const uint8_t *recs = b + KP_BATCH_HDR_SIZE;
    size_t rlen = len - KP_BATCH_HDR_SIZE;
    *owned = NULL;
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    if (codec != KP_CODEC_NONE) {
        ck_assert_int_eq(kp_decompress((kp_codec)codec, recs, rlen, 1u << 24, owned, &rlen, NULL),
                         KP_ERR_NONE);
        recs = *owned;
    }
    kp_record_iter it;
    kp_records_iter_init(&it, recs, rlen, h->records_count);
    return it;
}

static bool slice_eq(kp_slice a, kp_slice b)
{
    return a.len == b.len && (a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

/* Same records (timestamps, keys, values, header bytes) in two batches. */
static void assert_same_records(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    kp_batch_hdr ha, hb;
    uint8_t *oa, *ob;
    kp_record_iter ia = open_batch(a, alen, &ha, &oa);
    kp_record_iter ib = open_batch(b, blen, &hb, &ob);
    ck_assert_int_eq(ha.records_count, hb.records_count);
    kp_record ra, rb;
    for (int32_t i = 0; i < ha.records_count; i++) {
        ck_assert_int_eq(kp_records_next(&ia, &ra), KP_ERR_NONE);
        ck_assert_int_eq(kp_records_next(&ib, &rb), KP_ERR_NONE);
        ck_assert(ha.base_timestamp + ra.timestamp_delta == hb.base_timestamp + rb.timestamp_delta);
        ck_assert(slice_eq(ra.key, rb.key) && slice_eq(ra.value, rb.value));
        ck_assert_int_eq(ra.header_count, rb.header_count);
        ck_assert_uint_eq(kp_reader_left(&ra.headers), kp_reader_left(&rb.headers));
        ck_assert_mem_eq(ra.headers.p, rb.headers.p, kp_reader_left(&ra.headers));
    }
    ck_assert_int_eq(kp_records_next(&ia, &ra), KP_ERR__NOENT);
    ck_assert_int_eq(kp_records_next(&ib, &rb), KP_ERR__NOENT);
    free(oa);
    free(ob);
}

static void assert_recompresses(const uint8_t *b, size_t len, int codec,
                                const kp_validate_opts *o)
{
    uint8_t *out;
    size_t out_len;
    ck_assert_int_eq(kp_recompress_batches(b, len, codec, KP_COMPRESS_LEVEL_DEFAULT, 1u << 24,
                                           &out, &out_len),
                     KP_ERR_NONE);
    kp_validate_result in_res, out_res;
    ck_assert_int_eq(validate(b, len, o, &in_res), KP_ERR_NONE);
    ck_assert_int_eq(validate(out, out_len, o, &out_res), KP_ERR_NONE);
    ck_assert_int_eq(out_res.attributes & KP_BATCH_ATTR_CODEC_MASK, codec);
    ck_assert(out_res.producer_id == in_res.producer_id);
    ck_assert_int_eq(out_res.producer_epoch, in_res.producer_epoch);
    ck_assert_int_eq(out_res.base_sequence, in_res.base_sequence);
    ck_assert(out_res.max_timestamp == in_res.max_timestamp);
    ck_assert_int_eq(out_res.records, in_res.records);
    assert_same_records(b, len, out, out_len);
    free(out);
}

/* Every source codec (loop index) into every target codec. */
START_TEST(test_validate_recompress)
{
    size_t len;
    uint8_t *b = build_batch(_i, N_RECORDS, 200, 3, &len);
    kp_validate_opts o = default_opts();
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        assert_recompresses(b, len, codec, &o);
    uint8_t *bad;
    size_t bad_len;
    ck_assert_int_eq(kp_recompress_batches(b, len - 1, KP_CODEC_GZIP, KP_COMPRESS_LEVEL_DEFAULT,
                                           1u << 24, &bad, &bad_len),
                     KP_ERR__CORRUPT);
    ck_assert_ptr_null(bad);
    free(b);
}
END_TEST

/* ---- golden batches from kafka-python (tests/data/batches/gen.py) ------- */

#define GOLDEN_TS 1700000000000LL

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    uint8_t *buf = malloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    ck_assert_uint_gt(*len, 0);
    return buf;
}

/* What gen.py writes for record i. */
static void golden_expect(int i, const kp_record *r, const kp_batch_hdr *h)
{
    char key[16], value[400], hv[8];
    int klen = snprintf(key, sizeof(key), "key-%d", i);
    int vlen = 0;
    for (int k = 0; k < 20; k++)
        vlen += snprintf(value + vlen, sizeof(value) - (size_t)vlen, "value %d ", i);
    ck_assert(h->base_timestamp + r->timestamp_delta == GOLDEN_TS + 10 * i);
    ck_assert_int_eq(r->offset_delta, i);
    if (i == 3)
        ck_assert_int_eq(r->key.len, -1);
    else
        ck_assert(slice_eq(r->key, (kp_slice){(const uint8_t *)key, klen}));
    ck_assert(slice_eq(r->value, (kp_slice){(const uint8_t *)value, vlen}));
    ck_assert_int_eq(r->header_count, i % 2 == 0 ? 1 : 0);
    kp_record copy = *r;
    kp_record_header hdr;
    if (kp_record_header_next(&copy, &hdr) == KP_ERR_NONE) {
        int hlen = snprintf(hv, sizeof(hv), "v%d", i);
        ck_assert(slice_eq(hdr.key, (kp_slice){(const uint8_t *)"h", 1}));
        ck_assert(slice_eq(hdr.value, (kp_slice){(const uint8_t *)hv, hlen}));
    }
}

START_TEST(test_validate_golden_kafka_python)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/batches/kafka-python-%s.bin", KT_DATA_DIR,
             kp_codec_name(_i));
    size_t len;
    uint8_t *b = read_file(path, &len);
    kp_validate_opts o = default_opts();
    o.now_ms = GOLDEN_TS + 5000;
    kp_validate_result res;
    ck_assert_int_eq(validate(b, len, &o, &res), KP_ERR_NONE);
    ck_assert_int_eq(res.attributes & KP_BATCH_ATTR_CODEC_MASK, _i);
    ck_assert_int_eq(res.records, 10);
    ck_assert(res.producer_id == 4242);
    ck_assert_int_eq(res.producer_epoch, 7);
    ck_assert_int_eq(res.base_sequence, 100);
    ck_assert(res.max_timestamp == GOLDEN_TS + 90);
    if (_i == KP_CODEC_SNAPPY)
        ck_assert_uint_eq(b[KP_BATCH_HDR_SIZE], 0x82); /* xerial framing */
    kp_batch_hdr h;
    uint8_t *owned;
    kp_record_iter it = open_batch(b, len, &h, &owned);
    kp_record r;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(kp_records_next(&it, &r), KP_ERR_NONE);
        golden_expect(i, &r, &h);
    }
    free(owned);
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        assert_recompresses(b, len, codec, &o);
    free(b);
}
END_TEST

Suite *validate_suite(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_validate_valid_each_codec, KP_CODEC_NONE, KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_validate_no_whole_batch);
    tcase_add_test(tc, test_validate_trailing_partial);
    tcase_add_test(tc, test_validate_second_batch);
    tcase_add_loop_test(tc, test_validate_header_rules, 0,
                        (int)(sizeof(header_cases) / sizeof(header_cases[0])));
    tcase_add_test(tc, test_validate_shorter_than_header);
    tcase_add_test(tc, test_validate_max_message_bytes);
    tcase_add_test(tc, test_validate_zstd_before_v7);
    tcase_add_test(tc, test_validate_header_only_batch);
    tcase_add_test(tc, test_validate_count_vs_records_present);
    tcase_add_test(tc, test_validate_offset_delta_out_of_sequence);
    tcase_add_test(tc, test_validate_record_structure);
    tcase_add_loop_test(tc, test_validate_keyless_on_compacted, KP_CODEC_NONE, KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_validate_timestamps);
    tcase_add_test(tc, test_validate_no_timestamp);
    tcase_add_test(tc, test_validate_log_append_time_from_producer);
    tcase_add_loop_test(tc, test_validate_lists_every_faulty_record, KP_CODEC_NONE,
                        KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_validate_record_errors_capped);
    tcase_add_test(tc, test_validate_record_error_texts);
    tcase_add_loop_test(tc, test_validate_undecodable_compressed, KP_CODEC_GZIP,
                        KP_CODEC_ZSTD + 1);
    tcase_add_loop_test(tc, test_validate_decompression_cap, KP_CODEC_GZIP, KP_CODEC_ZSTD + 1);
    suite_add_tcase(s, tc);
    TCase *rc = tcase_create("recompress");
    tcase_set_timeout(rc, 60);
    tcase_add_loop_test(rc, test_validate_recompress, KP_CODEC_NONE, KP_CODEC_ZSTD + 1);
    tcase_add_loop_test(rc, test_validate_golden_kafka_python, KP_CODEC_NONE, KP_CODEC_ZSTD + 1);
    suite_add_tcase(s, rc);
    return s;
}
