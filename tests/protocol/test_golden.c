/* Golden frames captured from real clients talking to real Apache Kafka
 * (tests/data/frames, refreshed by capture_all.py there): every request and
 * response decodes with the generated codec and re-encodes byte for byte. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_msg.h"
#include "protocol_suites.h"

#ifndef KT_DATA_DIR
#error "KT_DATA_DIR must name tests/data"
#endif
#define GOLDEN_DIR KT_DATA_DIR "/frames"

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static bool flexible(const kp_api_info *api, int16_t v)
{
    return api->first_flexible >= 0 && v >= api->first_flexible;
}

/* Decodes header + body and re-encodes both; returns the re-encoded bytes. */
static void check_frame(const char *name, const uint8_t *frame, size_t len, int api_key,
                        int16_t v, bool response)
{
    const kp_api_info *api = kp_api_lookup(api_key);
    ck_assert_msg(api != NULL, "%s: api %d not served", name, api_key);
    ck_assert_msg(v >= api->min_version && v <= api->max_version, "%s: version %d out of range",
                  name, v);
    kp_arena a;
    kp_arena_init(&a);
    kp_reader r = kp_reader_make(frame, len);
    kp_writer w;
    kp_writer_init(&w, len + 16);
    if (response) {
        int32_t corr = kp_read_i32(&r);
        kp_write_i32(&w, corr);
        if (flexible(api, v) && api_key != KP_API_API_VERSIONS) {
            kp_skip_tags(&r);
            kp_write_uvarint(&w, 0);
        }
    } else {
        kp_request_header hdr;
        int16_t hv = flexible(api, v) ? 2 : 1;
        ck_assert_int_eq(kp_request_header_decode(&r, &a, &hdr, hv), KP_ERR_NONE);
        kp_request_header_encode(&w, &hdr, hv);
    }
    const kp_msg_codec *codec = response ? &api->response : &api->request;
    void *body = kp_arena_alloc(&a, codec->size);
    kp_err e = codec->decode(&r, &a, body, v);
    ck_assert_msg(e == KP_ERR_NONE, "%s: decode failed: %s", name, kp_err_name(e));
    ck_assert_msg(kp_reader_left(&r) == 0, "%s: %zu bytes left over", name, kp_reader_left(&r));
    codec->encode(&w, body, v);
    ck_assert_msg(w.len == len, "%s: re-encoded %zu bytes, captured %zu", name, w.len, len);
    ck_assert_msg(memcmp(w.buf, frame, len) == 0, "%s: re-encoded bytes differ", name);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}

START_TEST(test_golden_frames_round_trip)
{
    DIR *d = opendir(GOLDEN_DIR);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int checked = 0, requests = 0, responses = 0;
    while ((de = readdir(d)) != NULL) {
        int api, version;
        char client[64], kind[8];
        if (sscanf(de->d_name, "%d-v%d-%63[a-z]-%7[a-z].bin", &api, &version, client, kind) != 4)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, de->d_name);
        size_t len;
        uint8_t *frame = slurp(path, &len);
        bool response = strcmp(kind, "resp") == 0;
        check_frame(de->d_name, frame, len, api, (int16_t)version, response);
        free(frame);
        checked++;
        requests += !response;
        responses += response;
    }
    closedir(d);
    /* kcat, kafka-python, kafkajs, confluent-kafka and the Java tools together */
    ck_assert_int_ge(checked, 50);
    ck_assert_int_ge(requests, 25);
    ck_assert_int_ge(responses, 25);
}
END_TEST

Suite *golden_suite(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_golden_frames_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
