/* Codec round trips for every served API at every version, both directions,
 * and the decode error paths. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_msg.h"
#include "kp_msg_fill.h"
#include "protocol_suites.h"

/* Encodes a filled struct, decodes it, re-encodes, and compares the bytes. */
static void round_trip(const kp_api_info *api, bool response, int16_t v, uint32_t seed)
{
    const kp_msg_codec *codec = response ? &api->response : &api->request;
    kp_fill_fn fill = response ? kp_fill_response(api->key) : kp_fill_request(api->key);
    ck_assert_ptr_nonnull(fill);

    kp_arena arena;
    kp_arena_init(&arena);
    void *orig = kp_arena_alloc(&arena, codec->size);
    void *copy = kp_arena_alloc(&arena, codec->size);
    fill(orig, &arena, v, &seed);

    kp_writer w1, w2;
    kp_writer_init(&w1, 256);
    kp_writer_init(&w2, 256);
    codec->encode(&w1, orig, v);
    ck_assert_int_eq(w1.err, KP_ERR_NONE);

    kp_reader r = kp_reader_make(w1.buf, w1.len);
    kp_err err = codec->decode(&r, &arena, copy, v);
    ck_assert_msg(err == KP_ERR_NONE, "%s v%d %s: decode failed: %s", api->name, v,
                  response ? "response" : "request", kp_err_name(err));
    ck_assert_msg(kp_reader_left(&r) == 0, "%s v%d: %zu bytes left", api->name, v,
                  kp_reader_left(&r));

    codec->encode(&w2, copy, v);
    ck_assert_uint_eq(w1.len, w2.len);
    ck_assert_msg(memcmp(w1.buf, w2.buf, w1.len) == 0, "%s v%d %s: re-encoding differs",
                  api->name, v, response ? "response" : "request");

    /* Every strict prefix must fail cleanly, never read past the end. */
    for (size_t cut = 0; cut < w1.len; cut += 1 + w1.len / 64) {
        kp_arena scratch;
        kp_arena_init(&scratch);
        void *p = kp_arena_alloc(&scratch, codec->size);
        uint8_t *prefix = malloc(cut + 1);
        memcpy(prefix, w1.buf, cut);
        kp_reader pr = kp_reader_make(prefix, cut);
        (void)codec->decode(&pr, &scratch, p, v);
        ck_assert_uint_le(scratch.total, 64 * (cut + 64) + codec->size + 4096);
        free(prefix);
        kp_arena_fini(&scratch);
    }
    kp_writer_fini(&w1);
    kp_writer_fini(&w2);
    kp_arena_fini(&arena);
}

START_TEST(test_codec_round_trip_every_api_version)
{
    int n;
    const kp_api_info *apis = kp_api_all(&n);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        for (int16_t v = apis[i].min_version; v <= apis[i].max_version; v++) {
            for (uint32_t seed = 1; seed <= 8; seed++) {
                round_trip(&apis[i], false, v, seed * 7919u + (uint32_t)v);
                round_trip(&apis[i], true, v, seed * 104729u + (uint32_t)v);
            }
            checked++;
        }
    }
    ck_assert_int_ge(checked, 250);
}
END_TEST

START_TEST(test_codec_api_table_matches_schema)
{
    const kp_api_info *produce = kp_api_lookup(KP_API_PRODUCE);
    ck_assert_ptr_nonnull(produce);
    ck_assert_int_eq(produce->min_version, 0); /* v0-2 kept below Kafka 4.4's 3 */
    ck_assert_int_eq(produce->max_version, 13);
    ck_assert_int_eq(produce->first_flexible, 9);
    const kp_api_info *av = kp_api_lookup(KP_API_API_VERSIONS);
    ck_assert_int_eq(av->min_version, 0);
    ck_assert_int_eq(av->max_version, 5);
    ck_assert_int_eq(kp_api_lookup(KP_API_FETCH)->min_version, 4); /* Kafka 4.4's floor */
    ck_assert_int_eq(kp_api_lookup(76)->max_version, 1); /* ShareGroupHeartbeat */
    ck_assert_int_eq(kp_api_lookup(85)->max_version, 1); /* WriteShareGroupState */
    ck_assert_int_eq(kp_api_lookup(88)->max_version, 1); /* StreamsGroupHeartbeat */
    ck_assert_ptr_null(kp_api_lookup(34)); /* AlterReplicaLogDirs: not served */
    ck_assert_ptr_null(kp_api_lookup(4)); /* LeaderAndIsr: not served by a broker */
    ck_assert_ptr_null(kp_api_lookup(52)); /* Vote: controller only */
    ck_assert_ptr_null(kp_api_lookup(-1));
    ck_assert_ptr_null(kp_api_lookup(KP_API_KEY_MAX + 1));
}
END_TEST

/* A known frame: Metadata v1 request body for topics ["ab"]. */
START_TEST(test_codec_known_bytes_metadata_v1)
{
    static const uint8_t body[] = {0, 0, 0, 1, 0, 2, 'a', 'b'};
    kp_arena a;
    kp_arena_init(&a);
    kp_metadata_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_metadata_req_decode(&r, &a, &req, 1), KP_ERR_NONE);
    ck_assert_int_eq(req.topics.n, 1);
    ck_assert(kp_str_eq_c(req.topics.v[0].name, "ab"));
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_metadata_req_encode(&w, &req, 1);
    ck_assert_uint_eq(w.len, sizeof(body));
    ck_assert_mem_eq(w.buf, body, sizeof(body));
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}
END_TEST

/* Metadata v1: a null topic array (all topics) survives the round trip. */
START_TEST(test_codec_null_array)
{
    static const uint8_t body[] = {0xff, 0xff, 0xff, 0xff};
    kp_arena a;
    kp_arena_init(&a);
    kp_metadata_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_metadata_req_decode(&r, &a, &req, 1), KP_ERR_NONE);
    ck_assert_int_eq(req.topics.n, -1);
    /* v0 does not allow null: -1 is malformed there. */
    r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_metadata_req_decode(&r, &a, &req, 0), KP_ERR__MALFORMED);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_rejects_huge_array_count_without_allocating)
{
    /* CreateTopics v0: topics count 0x7fffffff with 4 bytes behind it. */
    static const uint8_t body[] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    kp_arena a;
    kp_arena_init(&a);
    kp_create_topics_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_create_topics_req_decode(&r, &a, &req, 0), KP_ERR__MALFORMED);
    ck_assert_uint_lt(a.total, 1024);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_rejects_negative_length)
{
    /* Metadata v1 topic name with length -2. */
    static const uint8_t body[] = {0, 0, 0, 1, 0xff, 0xfe};
    kp_arena a;
    kp_arena_init(&a);
    kp_metadata_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_metadata_req_decode(&r, &a, &req, 1), KP_ERR__MALFORMED);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_rejects_short_frame)
{
    static const uint8_t body[] = {0, 0, 0, 1, 0, 5, 'a'};
    kp_arena a;
    kp_arena_init(&a);
    kp_metadata_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_metadata_req_decode(&r, &a, &req, 1), KP_ERR__UNDERFLOW);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_rejects_overlong_varint)
{
    /* ApiVersions v3: client software name as a 6-byte varint length. */
    static const uint8_t body[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    kp_arena a;
    kp_arena_init(&a);
    kp_api_versions_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_api_versions_req_decode(&r, &a, &req, 3), KP_ERR__MALFORMED);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_skips_unknown_tagged_field)
{
    /* ApiVersions v3: name "a", version "b", then one unknown tag 7 of 2 bytes. */
    static const uint8_t body[] = {2, 'a', 2, 'b', 1, 7, 2, 0xaa, 0xbb};
    kp_arena a;
    kp_arena_init(&a);
    kp_api_versions_req req;
    kp_reader r = kp_reader_make(body, sizeof(body));
    ck_assert_int_eq(kp_api_versions_req_decode(&r, &a, &req, 3), KP_ERR_NONE);
    ck_assert(kp_str_eq_c(req.client_software_name, "a"));
    ck_assert(kp_str_eq_c(req.client_software_version, "b"));
    ck_assert_uint_eq(kp_reader_left(&r), 0);
    /* A tagged field longer than the frame is an underflow. */
    static const uint8_t bad[] = {2, 'a', 2, 'b', 1, 7, 9, 0xaa};
    r = kp_reader_make(bad, sizeof(bad));
    ck_assert_int_eq(kp_api_versions_req_decode(&r, &a, &req, 3), KP_ERR__UNDERFLOW);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_codec_known_tagged_field_decoded)
{
    /* Metadata v12 response is big; use FetchRequest v12's tagged ClusterId (tag 0). */
    kp_arena a;
    kp_arena_init(&a);
    kp_fetch_req req;
    kp_fetch_req_defaults(&req);
    req.cluster_id = KP_STR_LIT("c1");
    req.replica_state.replica_id = 5;
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_fetch_req_encode(&w, &req, 15);
    kp_fetch_req back;
    kp_reader r = kp_reader_make(w.buf, w.len);
    ck_assert_int_eq(kp_fetch_req_decode(&r, &a, &back, 15), KP_ERR_NONE);
    ck_assert(kp_str_eq_c(back.cluster_id, "c1"));
    ck_assert_int_eq(back.replica_state.replica_id, 5);
    /* Defaults stay off the wire: an untouched request has no tagged fields. */
    kp_fetch_req plain;
    kp_fetch_req_defaults(&plain);
    ck_assert_uint_lt(kp_fetch_req_size(&plain, 15), kp_fetch_req_size(&req, 15));
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}
END_TEST

Suite *codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_codec_round_trip_every_api_version);
    tcase_add_test(tc, test_codec_api_table_matches_schema);
    tcase_add_test(tc, test_codec_known_bytes_metadata_v1);
    tcase_add_test(tc, test_codec_null_array);
    tcase_add_test(tc, test_codec_rejects_huge_array_count_without_allocating);
    tcase_add_test(tc, test_codec_rejects_negative_length);
    tcase_add_test(tc, test_codec_rejects_short_frame);
    tcase_add_test(tc, test_codec_rejects_overlong_varint);
    tcase_add_test(tc, test_codec_skips_unknown_tagged_field);
    tcase_add_test(tc, test_codec_known_tagged_field_decoded);
    suite_add_tcase(s, tc);
    return s;
}
