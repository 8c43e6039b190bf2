/* The four record batch codecs: round trips, both snappy framings, gzip
 * variants, compression-bomb caps, and corrupt inputs failing cleanly. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include "kp_compress.h"
#include "protocol_suites.h"

#define MIB (1024u * 1024u)

static const size_t sizes[] = {0, 1, 100, 65539, MIB};

/* Text-like bytes that compress well, or xorshift noise that does not. */
static uint8_t *make_input(size_t len, bool noise)
{
    uint8_t *p = malloc(len > 0 ? len : 1);
    ck_assert_ptr_nonnull(p);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = noise ? (uint8_t)x : (uint8_t)("runnel record "[i % 14] + (i / 4096) % 7);
    }
    return p;
}

static void assert_decodes_to(kp_codec codec, const uint8_t *z, size_t zlen, const uint8_t *want,
                              size_t len)
{
    uint8_t *out;
    size_t out_len;
    kp_errctx ctx = {.msg = ""};
    kp_err err = kp_decompress(codec, z, zlen, len, &out, &out_len, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "%s len %zu: %s", kp_codec_name((int)codec), len, ctx.msg);
    ck_assert_uint_eq(out_len, len);
    ck_assert(len == 0 || memcmp(out, want, len) == 0);
    free(out);
}

static void assert_over_cap(kp_codec codec, const uint8_t *z, size_t zlen, size_t max_out)
{
    uint8_t *out = (uint8_t *)1;
    size_t out_len = 1;
    kp_errctx ctx = {.msg = ""};
    ck_assert_int_eq(kp_decompress(codec, z, zlen, max_out, &out, &out_len, &ctx),
                     KP_ERR__CORRUPT);
    ck_assert_msg(ctx.sys_errno == EFBIG, "%s: %s", kp_codec_name((int)codec), ctx.msg);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(out_len, 0);
}

static void assert_corrupt(kp_codec codec, const uint8_t *z, size_t zlen)
{
    uint8_t *out;
    size_t out_len;
    kp_errctx ctx = {.msg = ""};
    kp_err err = kp_decompress(codec, z, zlen, MIB, &out, &out_len, &ctx);
    ck_assert_msg(err == KP_ERR__CORRUPT, "%s, %zu bytes: got %s", kp_codec_name((int)codec),
                  zlen, kp_err_name(err));
    ck_assert_int_ne(ctx.sys_errno, EFBIG);
}

static uint8_t *compress_ok(kp_codec codec, const uint8_t *in, size_t len, int32_t level,
                            size_t *zlen)
{
    uint8_t *z;
    kp_errctx ctx = {.msg = ""};
    kp_err err = kp_compress(codec, in, len, level, &z, zlen, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "%s: %s", kp_codec_name((int)codec), ctx.msg);
    return z;
}

/* Every codec, every size, compressible and incompressible input; a cap one
 * byte below the true size fails as a bomb. Loop index = codec id. */
START_TEST(test_compress_round_trip)
{
    kp_codec codec = (kp_codec)_i;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int noise = 0; noise < 2; noise++) {
            size_t len = sizes[s], zlen;
            uint8_t *in = make_input(len, noise);
            uint8_t *z = compress_ok(codec, in, len, KP_COMPRESS_LEVEL_DEFAULT, &zlen);
            if (!noise && len == MIB && codec != KP_CODEC_NONE)
                ck_assert_uint_lt(zlen, len / 4);
            assert_decodes_to(codec, z, zlen, in, len);
            if (len > 0)
                assert_over_cap(codec, z, zlen, len - 1);
            free(z);
            free(in);
        }
    }
}
END_TEST

START_TEST(test_compress_levels)
{
    static const struct {
        kp_codec codec;
        int32_t level;
    } cases[] = {{KP_CODEC_GZIP, 1},  {KP_CODEC_GZIP, 9},  {KP_CODEC_GZIP, 42},
                 {KP_CODEC_LZ4, 9},   {KP_CODEC_LZ4, 17},  {KP_CODEC_ZSTD, 1},
                 {KP_CODEC_ZSTD, 19}, {KP_CODEC_ZSTD, -5}, {KP_CODEC_SNAPPY, 3}};
    size_t len = 65536 + 17;
    uint8_t *in = make_input(len, false);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t zlen;
        uint8_t *z = compress_ok(cases[i].codec, in, len, cases[i].level, &zlen);
        assert_decodes_to(cases[i].codec, z, zlen, in, len);
        free(z);
    }
    free(in);
}
END_TEST

START_TEST(test_compress_snappy_both_framings)
{
    static const size_t lens[] = {0, 5, 32768, 32769, 100000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t *in = make_input(lens[i], false);
        uint8_t *z;
        size_t zlen;
        ck_assert_int_eq(kp_compress_snappy_xerial(in, lens[i], &z, &zlen, NULL), KP_ERR_NONE);
        ck_assert_uint_eq(z[0], 0x82);
        assert_decodes_to(KP_CODEC_SNAPPY, z, zlen, in, lens[i]);
        free(z);
        z = compress_ok(KP_CODEC_SNAPPY, in, lens[i], KP_COMPRESS_LEVEL_DEFAULT, &zlen);
        ck_assert_uint_ne(z[0], 0x82);
        assert_decodes_to(KP_CODEC_SNAPPY, z, zlen, in, lens[i]);
        free(z);
        free(in);
    }
}
END_TEST

/* Hand-made streams, independent of our encoder: raw snappy of "hello"
 * (preamble 5, one literal tag), then the same block in xerial framing, then
 * two xerial streams back to back (as concatenated Java buffers are). */
START_TEST(test_compress_snappy_known_bytes)
{
    static const uint8_t raw[] = {0x05, 0x10, 'h', 'e', 'l', 'l', 'o'};
    static const uint8_t xerial[] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0,   0,   1,
                                     0,    0,   0,   1,   0,   0,   0,   7, 5, 0x10, 'h', 'e',
                                     'l',  'l', 'o'};
    uint8_t twice[2 * sizeof(xerial)];
    memcpy(twice, xerial, sizeof(xerial));
    memcpy(twice + sizeof(xerial), xerial, sizeof(xerial));
    assert_decodes_to(KP_CODEC_SNAPPY, raw, sizeof(raw), (const uint8_t *)"hello", 5);
    assert_decodes_to(KP_CODEC_SNAPPY, xerial, sizeof(xerial), (const uint8_t *)"hello", 5);
    assert_decodes_to(KP_CODEC_SNAPPY, twice, sizeof(twice), (const uint8_t *)"hellohello", 10);
    /* A block length past the end, and a cut length field. */
    uint8_t bad[sizeof(xerial)];
    memcpy(bad, xerial, sizeof(bad));
    bad[19] = 8;
    assert_corrupt(KP_CODEC_SNAPPY, bad, sizeof(bad));
    assert_corrupt(KP_CODEC_SNAPPY, xerial, 18);
    /* Preamble claims 6 bytes, the literal holds 5. */
    uint8_t lie[sizeof(raw)];
    memcpy(lie, raw, sizeof(lie));
    lie[0] = 6;
    assert_corrupt(KP_CODEC_SNAPPY, lie, sizeof(lie));
}
END_TEST

/* zlib-wrapped and raw deflate are accepted as gzip, and so are several
 * gzip members back to back. */
START_TEST(test_compress_gzip_variants)
{
    static const char text[] = "runnel runnel runnel runnel gzip variants";
    size_t len = sizeof(text) - 1;
    uint8_t zbuf[256];
    uLongf zlen = sizeof(zbuf);
    ck_assert_int_eq(compress2(zbuf, &zlen, (const Bytef *)text, (uLong)len, 6), Z_OK);
    assert_decodes_to(KP_CODEC_GZIP, zbuf, zlen, (const uint8_t *)text, len);

    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    ck_assert_int_eq(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = (Bytef *)(uintptr_t)text;
    zs.avail_in = (uInt)len;
    zs.next_out = zbuf;
    zs.avail_out = sizeof(zbuf);
    ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    assert_decodes_to(KP_CODEC_GZIP, zbuf, zs.total_out, (const uint8_t *)text, len);
    deflateEnd(&zs);

    size_t glen;
    uint8_t *g = compress_ok(KP_CODEC_GZIP, (const uint8_t *)text, len, 6, &glen);
    uint8_t *two = malloc(2 * glen);
    memcpy(two, g, glen);
    memcpy(two + glen, g, glen);
    uint8_t want[2 * sizeof(text)];
    memcpy(want, text, len);
    memcpy(want + len, text, len);
    assert_decodes_to(KP_CODEC_GZIP, two, 2 * glen, want, 2 * len);
    free(two);
    free(g);
}
END_TEST

/* Caps this process's address space at what it maps now plus headroom, so
 * that an allocation the size an input claims fails (under ASan it aborts)
 * instead of quietly succeeding; returns the old limit. */
static struct rlimit cap_address_space(size_t headroom)
{
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &old), 0);
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    rlim_t want = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + headroom;
    struct rlimit lim = {old.rlim_cur < want ? old.rlim_cur : want, old.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    return old;
}

/* 8 MiB of zeros compress to a few KiB in every codec; with a 64 KiB cap
 * each decompression stops at the cap with at most ~256 MiB of headroom. */
START_TEST(test_compress_bomb_caps)
{
    kp_codec codec = (kp_codec)_i;
    size_t len = 8 * MIB, zlen;
    uint8_t *zeros = calloc(len, 1);
    ck_assert_ptr_nonnull(zeros);
    uint8_t *z = compress_ok(codec, zeros, len, KP_COMPRESS_LEVEL_DEFAULT, &zlen);
    free(zeros);
    ck_assert_uint_lt(zlen, len / 20);
    struct rlimit old = cap_address_space(256 * MIB);
    assert_over_cap(codec, z, zlen, 64 * 1024);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
    free(z);
}
END_TEST

/* Inputs whose headers claim far more output than the bytes can hold must
 * fail without allocating what they claim. */
START_TEST(test_compress_bomb_claims)
{
    /* Raw snappy: preamble 512 MiB (varint 80 80 80 80 02), 1 KiB of body;
     * allowed by a 1 GiB cap, yet impossible for 1 KiB of snappy. */
    uint8_t snappy[1029] = {0x80, 0x80, 0x80, 0x80, 0x02};
    /* Raw snappy claiming 3.75 GiB (the most a 32-bit preamble holds). */
    uint8_t snappy4g[1029] = {0x80, 0x80, 0x80, 0x80, 0x0f};
    /* zstd frame, single segment (window = content size), content size
     * 1 GiB, then 256 RLE blocks of 128 KiB each (the last flagged last):
     * 1 KiB making 32 MiB, and asking for a 1 GiB window. */
    uint8_t zstd[4 + 1 + 8 + 256 * 4] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};
    zstd[5 + 3] = 0x40; /* frame content size 1 << 30, little endian */
    for (int i = 0; i < 256; i++) {
        uint32_t bh = (128u * 1024u) << 3 | 1u << 1 | (i == 255 ? 1u : 0u);
        uint8_t *p = zstd + 13 + 4 * i;
        p[0] = (uint8_t)bh;
        p[1] = (uint8_t)(bh >> 8);
        p[2] = (uint8_t)(bh >> 16);
        p[3] = 'z';
    }
    struct rlimit old = cap_address_space(256 * MIB);
    uint8_t *out;
    size_t out_len;
    ck_assert_int_eq(kp_decompress(KP_CODEC_SNAPPY, snappy, sizeof(snappy), 1024 * MIB, &out,
                                   &out_len, NULL),
                     KP_ERR__CORRUPT);
    assert_over_cap(KP_CODEC_SNAPPY, snappy4g, sizeof(snappy4g), 1024 * MIB);
    assert_over_cap(KP_CODEC_ZSTD, zstd, sizeof(zstd), MIB);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
}
END_TEST

/* Truncations, a damaged first byte and trailing garbage fail as corrupt,
 * for every real codec. Loop index = codec id (1-4). */
START_TEST(test_compress_corrupt_inputs)
{
    kp_codec codec = (kp_codec)_i;
    size_t len = 65536, zlen;
    uint8_t *in = make_input(len, false);
    uint8_t *z = compress_ok(codec, in, len, KP_COMPRESS_LEVEL_DEFAULT, &zlen);
    for (size_t cut = 0; cut < zlen; cut += zlen / 9 + 1)
        assert_corrupt(codec, z, cut);
    assert_corrupt(codec, z, zlen - 1);
    uint8_t *bad = malloc(zlen + 8);
    memcpy(bad, z, zlen);
    memcpy(bad + zlen, "garbage!", 8);
    assert_corrupt(codec, bad, zlen + 8);
    bad[0] ^= 0x5a;
    bad[1] ^= 0xa5;
    assert_corrupt(codec, bad, zlen);
    free(bad);
    free(z);
    free(in);
}
END_TEST

START_TEST(test_compress_unknown_codec)
{
    uint8_t *out;
    size_t out_len;
    for (int codec = 5; codec <= 7; codec++) {
        ck_assert_int_eq(kp_decompress((kp_codec)codec, (const uint8_t *)"x", 1, 10, &out,
                                       &out_len, NULL),
                         KP_ERR_UNSUPPORTED_COMPRESSION_TYPE);
        ck_assert_int_eq(kp_compress((kp_codec)codec, (const uint8_t *)"x", 1,
                                     KP_COMPRESS_LEVEL_DEFAULT, &out, &out_len, NULL),
                         KP_ERR_UNSUPPORTED_COMPRESSION_TYPE);
        ck_assert_str_eq(kp_codec_name(codec), "unknown");
    }
    ck_assert_str_eq(kp_codec_name(KP_CODEC_SNAPPY), "snappy");
    ck_assert_str_eq(kp_codec_name(KP_CODEC_ZSTD), "zstd");
}
END_TEST

Suite *compress_suite(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_compress_round_trip, KP_CODEC_NONE, KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_compress_levels);
    tcase_add_test(tc, test_compress_snappy_both_framings);
    tcase_add_test(tc, test_compress_snappy_known_bytes);
    tcase_add_test(tc, test_compress_gzip_variants);
    tcase_add_loop_test(tc, test_compress_bomb_caps, KP_CODEC_GZIP, KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_compress_bomb_claims);
    tcase_add_loop_test(tc, test_compress_corrupt_inputs, KP_CODEC_GZIP, KP_CODEC_ZSTD + 1);
    tcase_add_test(tc, test_compress_unknown_codec);
    suite_add_tcase(s, tc);
    return s;
}
