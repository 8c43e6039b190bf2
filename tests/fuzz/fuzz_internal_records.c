/*
 * fuzz_internal_records: the __consumer_offsets record decoders, which the
 * group coordinator runs over its own topic at start-up (a damaged or
 * foreign record there must not take the broker down).
 *
 * Input: byte 0 picks the decoder (bits 0-1) and whether the bytes go
 * through kb_offsets' readers (version prefix included) or straight into
 * the generated codecs at a version (byte 1) for OffsetCommitKey/Value and
 * GroupMetadataKey/Value; the rest is the record key or value.
 *
 * Checks: no sanitizer report; anything that decodes re-encodes and decodes
 * again to the same encoding.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kb_offsets.h"
#include "kp_msg.h"

typedef struct codec {
    size_t size;
    kp_err (*decode)(kp_reader *, kp_arena *, void *, int16_t);
    void (*encode)(kp_writer *, const void *, int16_t);
    int16_t max_version;
} codec;

#define CODEC(name, maxv)                                                                   \
    static kp_err name##_dec(kp_reader *r, kp_arena *a, void *p, int16_t v)                 \
    {                                                                                       \
        return kp_##name##_decode(r, a, p, v);                                              \
    }                                                                                       \
    static void name##_enc(kp_writer *w, const void *p, int16_t v)                          \
    {                                                                                       \
        kp_##name##_encode(w, p, v);                                                        \
    }                                                                                       \
    static const codec name##_codec = {sizeof(kp_##name), name##_dec, name##_enc, maxv};

CODEC(offset_commit_key, 1)
CODEC(offset_commit_value, 4)
CODEC(group_metadata_key, 2)
CODEC(group_metadata_value, 4)

static const codec *const codecs[] = {&offset_commit_key_codec, &offset_commit_value_codec,
                                      &group_metadata_key_codec, &group_metadata_value_codec};

static int encode_once(const codec *c, int16_t v, const uint8_t *p, size_t n, kp_writer *w)
{
    kp_arena a;
    kp_arena_init(&a);
    int rc = -1;
    void *msg = kp_arena_alloc(&a, c->size);
    kp_reader r = kp_reader_make(p, n);
    if (msg != NULL && c->decode(&r, &a, msg, v) == KP_ERR_NONE) {
        c->encode(w, msg, v);
        rc = w->err == KP_ERR_NONE ? 0 : -1;
    }
    kp_arena_fini(&a);
    return rc;
}

static void generated(const codec *c, int16_t v, const uint8_t *p, size_t n)
{
    kp_writer w1, w2;
    kp_writer_init(&w1, 128);
    kp_writer_init(&w2, 128);
    if (encode_once(c, v, p, n, &w1) == 0) {
        if (encode_once(c, v, w1.buf, w1.len, &w2) != 0)
            abort(); /* our own encoding does not decode */
        if (w1.len != w2.len || memcmp(w1.buf, w2.buf, w1.len) != 0)
            abort(); /* unstable round trip */
    }
    kp_writer_fini(&w1);
    kp_writer_fini(&w2);
}

static void via_kb_offsets(int which, const uint8_t *p, size_t n)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_slice s = {p, (int32_t)n};
    if (which == 0) {
        kb_offsets_key k;
        (void)kb_offsets_read_key(s, &a, &k);
    } else if (which == 1) {
        kb_offset o;
        memset(&o, 0, sizeof(o));
        (void)kb_offsets_read_commit_value(s, &a, &o);
    } else if (which == 2) {
        kp_group_metadata_value g;
        memset(&g, 0, sizeof(g));
        (void)kb_offsets_read_group_value(s, &a, &g);
    } else {
        int32_t epoch;
        (void)kb_offsets_read_cgroup_value(s, &a, &epoch);
    }
    kp_arena_fini(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > INT32_MAX)
        return 0;
    int which = data[0] & 3;
    if (data[0] & 4) {
        via_kb_offsets(which, data + 2, size - 2);
        return 0;
    }
    const codec *c = codecs[which];
    int16_t v = (int16_t)(data[1] % (c->max_version + 1));
    generated(c, v, data + 2, size - 2);
    return 0;
}
