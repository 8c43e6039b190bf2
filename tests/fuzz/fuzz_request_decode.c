/*
 * fuzz_request_decode: a request frame body (header + request, without the
 * 4-byte length) as kb_dispatch sees it. The header's api key and version
 * choose the codec (folded into a served API and version range so every
 * input exercises a decoder); the body is decoded into an arena with the
 * generated codec, re-encoded, decoded again and re-encoded, and the two
 * encodings must be identical.
 *
 * Catches: reads outside the frame, allocation not bounded by the input
 * (the arena's total is checked against a multiple of the input size),
 * encoders emitting what the decoders refuse, unstable round trips.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kp_msg.h"
#include "kp_types.h"

/* Decoded structs may be larger than the bytes they came from (an empty
 * array element is one byte on the wire and a whole struct in memory), but
 * never by more than this factor plus a constant. */
#define ARENA_FACTOR 512
#define ARENA_SLACK (64 * 1024)

static void check(int ok, const char *what, const kp_api_info *api, int16_t v)
{
    if (!ok) {
        fprintf(stderr, "fuzz_request_decode: %s (api %s v%d)\n", what, api->name, v);
        abort();
    }
}

static int roundtrip(const kp_api_info *api, int16_t v, const uint8_t *p, size_t n,
                     kp_writer *out)
{
    kp_arena a;
    kp_arena_init(&a);
    int rc = -1;
    void *msg = kp_arena_alloc(&a, api->request.size);
    if (msg != NULL) {
        kp_reader r = kp_reader_make(p, n);
        if (api->request.decode(&r, &a, msg, v) == KP_ERR_NONE) {
            check(a.total <= n * ARENA_FACTOR + ARENA_SLACK, "arena grew past the bound", api, v);
            api->request.encode(out, msg, v);
            rc = out->err == KP_ERR_NONE ? 0 : -1;
        }
    }
    kp_arena_fini(&a);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int napis = 0;
    const kp_api_info *all = kp_api_all(&napis);
    int16_t key = (int16_t)(data[0] << 8 | data[1]);
    int16_t v = (int16_t)(data[2] << 8 | data[3]);
    const kp_api_info *api = kp_api_lookup(key);
    if (api == NULL)
        api = &all[(uint16_t)key % (unsigned)napis];
    int range = api->max_version - api->min_version + 1;
    if (v < api->min_version || v > api->max_version)
        v = (int16_t)(api->min_version + (uint16_t)v % range);
    bool flexible = api->first_flexible >= 0 && v >= api->first_flexible;

    kp_arena a;
    kp_arena_init(&a);
    kp_reader r = kp_reader_make(data, size);
    kp_request_header hdr;
    kp_request_header_defaults(&hdr);
    kp_err e = kp_request_header_decode(&r, &a, &hdr, flexible ? 2 : 1);
    if (e == KP_ERR_NONE) {
        kp_writer w1, w2;
        kp_writer_init(&w1, 256);
        kp_writer_init(&w2, 256);
        if (roundtrip(api, v, r.p, kp_reader_left(&r), &w1) == 0) {
            check(w1.nchunks == 0, "request encoding has file chunks", api, v);
            check(roundtrip(api, v, w1.buf, w1.len, &w2) == 0,
                  "re-encoded request does not decode", api, v);
            check(w1.len == w2.len && memcmp(w1.buf, w2.buf, w1.len) == 0,
                  "second round trip differs", api, v);
        }
        kp_writer_fini(&w1);
        kp_writer_fini(&w2);
    }
    kp_arena_fini(&a);
    return 0;
}
