#include "kp_compress.h"

#include <errno.h>
#include <limits.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "kp_batch.h"

/* xerial framing: magic, then int32 version and int32 min-compatible version. */
static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define XERIAL_HDR_SIZE    16
#define XERIAL_VERSION     1
#define XERIAL_BLOCK_SIZE  (32 * 1024) /* what snappy-java and kafka-python write */

/* One snappy tag byte plus operands never yields more than 64 bytes per 3
 * input bytes, so a stream claiming more than this is lying. */
#define SNAPPY_MAX_RATIO 22

/* zstd frames may ask for any window; we accept at least 8 MiB (levels up to
 * 19 with unknown content size), more only when the output cap is larger. */
#define ZSTD_WLOG_FLOOR 23
#define ZSTD_WLOG_CEIL  27

#define OBUF_FIRST 4096

const char *kp_codec_name(int codec)
{
    switch (codec) {
    case KP_CODEC_NONE:
        return "none";
    case KP_CODEC_GZIP:
        return "gzip";
    case KP_CODEC_SNAPPY:
        return "snappy";
    case KP_CODEC_LZ4:
        return "lz4";
    case KP_CODEC_ZSTD:
        return "zstd";
    default:
        return "unknown";
    }
}

/* ---- capped output buffer ------------------------------------------------ */

/* Decompressed output: never more than limit + 1 bytes are allocated, and
 * holding limit + 1 bytes means the input expands past the cap. */
typedef struct obuf {
    uint8_t *p;
    size_t len;
    size_t cap;
    size_t limit; /* max_out */
    kp_errctx *ctx;
    const char *codec;
} obuf;

static size_t obuf_ceiling(const obuf *o)
{
    return o->limit < SIZE_MAX ? o->limit + 1 : o->limit;
}

static kp_err obuf_over_cap(const obuf *o)
{
    return KP_ERRCTX(o->ctx, KP_ERR__CORRUPT, EFBIG, "%s: output exceeds %zu bytes", o->codec,
                     o->limit);
}

static kp_err obuf_corrupt(const obuf *o, const char *what)
{
    return KP_ERRCTX(o->ctx, KP_ERR__CORRUPT, 0, "%s: %s", o->codec, what);
}

/* Sets the capacity to exactly cap bytes (cap <= the ceiling). */
static kp_err obuf_resize(obuf *o, size_t cap)
{
    uint8_t *p = realloc(o->p, cap > 0 ? cap : 1);
    if (p == NULL)
        return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "%s: out of memory (%zu bytes)",
                         o->codec, cap);
    o->p = p;
    o->cap = cap;
    return KP_ERR_NONE;
}

/* Makes room for more output of unknown size: doubles, up to the ceiling. */
static kp_err obuf_grow(obuf *o)
{
    size_t ceiling = obuf_ceiling(o);
    if (o->cap >= ceiling)
        return obuf_over_cap(o);
    size_t cap = o->cap < OBUF_FIRST ? OBUF_FIRST : o->cap;
    cap = cap <= ceiling / 2 ? cap * 2 : ceiling;
    return obuf_resize(o, cap);
}

/* Makes room for exactly n more bytes whose size the input announced. */
static kp_err obuf_reserve(obuf *o, size_t n)
{
    if (n > o->limit - o->len)
        return obuf_over_cap(o);
    if (o->cap - o->len >= n)
        return KP_ERR_NONE;
    return obuf_resize(o, o->len + n);
}

/* ---- gzip (zlib) ---------------------------------------------------------- */

/* Window bits for inflateInit2: gzip or zlib by auto-detection, else raw deflate. */
static int inflate_window_bits(const uint8_t *in, size_t len)
{
    if (len >= 2 && in[0] == 0x1f && in[1] == 0x8b)
        return 15 + 32;
    if (len >= 2 && (in[0] & 0x0f) == Z_DEFLATED && (in[0] >> 4) <= 7 &&
        ((in[0] << 8) | in[1]) % 31 == 0)
        return 15 + 32;
    return -15;
}

static uInt zlib_chunk(size_t n)
{
    return n > UINT_MAX ? UINT_MAX : (uInt)n;
}

/* After one member ends: another gzip member may follow (Java reads them all). */
static bool gzip_next_member(z_stream *zs, const uint8_t *end)
{
    size_t left = (size_t)(end - zs->next_in);
    if (left < 2 || zs->next_in[0] != 0x1f || zs->next_in[1] != 0x8b)
        return false;
    return inflateReset(zs) == Z_OK;
}

static kp_err gzip_inflate(z_stream *zs, const uint8_t *in, size_t len, obuf *o)
{
    const uint8_t *end = in + len;
    zs->next_in = (Bytef *)(uintptr_t)in;
    for (;;) {
        zs->avail_in = zlib_chunk((size_t)(end - zs->next_in));
        if (o->len == o->cap) {
            kp_err err = obuf_grow(o);
            if (err != KP_ERR_NONE)
                return err;
        }
        uInt room = zlib_chunk(o->cap - o->len);
        zs->next_out = o->p + o->len;
        zs->avail_out = room;
        int rc = inflate(zs, Z_NO_FLUSH);
        o->len += room - zs->avail_out;
        if (rc == Z_STREAM_END) {
            if (zs->next_in == end)
                return KP_ERR_NONE;
            if (!gzip_next_member(zs, end))
                return obuf_corrupt(o, "trailing bytes after the stream");
            continue;
        }
        if (rc == Z_MEM_ERROR)
            return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "gzip: out of memory");
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return obuf_corrupt(o, zs->msg != NULL ? zs->msg : "invalid stream");
        if (zs->avail_out != 0 && zs->next_in == end)
            return obuf_corrupt(o, "truncated stream");
    }
}

static kp_err gzip_decode(const uint8_t *in, size_t len, obuf *o)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    int rc = inflateInit2(&zs, inflate_window_bits(in, len));
    if (rc != Z_OK)
        return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "gzip: inflateInit2 failed (%d)", rc);
    kp_err err = gzip_inflate(&zs, in, len, o);
    inflateEnd(&zs);
    return err;
}

/* ---- snappy --------------------------------------------------------------- */

/* One raw snappy block appended to o. */
static kp_err snappy_block_decode(const uint8_t *in, size_t len, obuf *o)
{
    size_t n;
    if (snappy_uncompressed_length((const char *)in, len, &n) != SNAPPY_OK)
        return obuf_corrupt(o, "bad length preamble");
    if (n > o->limit - o->len)
        return obuf_over_cap(o);
    if (len == 0 || n / SNAPPY_MAX_RATIO > len)
        return obuf_corrupt(o, "length preamble larger than the block can hold");
    kp_err err = obuf_reserve(o, n);
    if (err != KP_ERR_NONE)
        return err;
    size_t got = n;
    char *dst = o->p != NULL ? (char *)o->p + o->len : NULL; /* NULL: n == 0, nothing yet */
    if (snappy_uncompress((const char *)in, len, dst, &got) != SNAPPY_OK ||
        got != n)
        return obuf_corrupt(o, "invalid block");
    o->len += n;
    return KP_ERR_NONE;
}

static bool is_xerial(const uint8_t *in, size_t len)
{
    return len >= XERIAL_HDR_SIZE && memcmp(in, xerial_magic, sizeof(xerial_magic)) == 0;
}

/* Header, then int32 length + raw block, repeated; concatenated streams
 * (a header again where a block length is expected) are accepted. */
static kp_err xerial_decode(const uint8_t *in, size_t len, obuf *o)
{
    size_t pos = 0;
    while (pos < len) {
        if (is_xerial(in + pos, len - pos)) {
            pos += XERIAL_HDR_SIZE;
            continue;
        }
        if (len - pos < 4)
            return obuf_corrupt(o, "truncated xerial block length");
        int32_t n = kp_be32_get(in + pos);
        pos += 4;
        if (n < 0 || (size_t)n > len - pos)
            return obuf_corrupt(o, "xerial block length out of range");
        kp_err err = snappy_block_decode(in + pos, (size_t)n, o);
        if (err != KP_ERR_NONE)
            return err;
        pos += (size_t)n;
    }
    return KP_ERR_NONE;
}

static kp_err snappy_decode(const uint8_t *in, size_t len, obuf *o)
{
    if (is_xerial(in, len))
        return xerial_decode(in, len, o);
    return snappy_block_decode(in, len, o);
}

/* ---- lz4 frame ------------------------------------------------------------ */

static kp_err lz4_frames(LZ4F_dctx *d, const uint8_t *in, size_t len, obuf *o)
{
    size_t pos = 0;
    for (;;) {
        if (o->len == o->cap) {
            kp_err err = obuf_grow(o);
            if (err != KP_ERR_NONE)
                return err;
        }
        size_t room = o->cap - o->len;
        size_t dst = room;
        size_t src = len - pos;
        size_t r = LZ4F_decompress(d, o->p + o->len, &dst, in + pos, &src, NULL);
        if (LZ4F_isError(r))
            return obuf_corrupt(o, LZ4F_getErrorName(r));
        pos += src;
        o->len += dst;
        if (r == 0 && pos == len)
            return KP_ERR_NONE;
        if (r != 0 && dst < room && (pos == len || src == 0))
            return obuf_corrupt(o, "truncated frame");
    }
}

static kp_err lz4_decode(const uint8_t *in, size_t len, obuf *o)
{
    LZ4F_dctx *d = NULL;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
        return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "lz4: no decompression context");
    kp_err err = len == 0 ? obuf_corrupt(o, "empty input") : lz4_frames(d, in, len, o);
    LZ4F_freeDecompressionContext(d);
    return err;
}

/* ---- zstd ----------------------------------------------------------------- */

/* Largest window a frame may ask for: enough for the cap, within [floor, ceil]. */
static int zstd_window_log(size_t limit)
{
    int wlog = ZSTD_WLOG_FLOOR;
    while (wlog < ZSTD_WLOG_CEIL && ((size_t)1 << wlog) < limit)
        wlog++;
    return wlog;
}

static kp_err zstd_error(const obuf *o, size_t r)
{
    if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
        return KP_ERRCTX(o->ctx, KP_ERR__CORRUPT, EFBIG, "zstd: frame window too large for %zu",
                         o->limit);
    if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
        return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "zstd: out of memory");
    return obuf_corrupt(o, ZSTD_getErrorName(r));
}

static kp_err zstd_frames(ZSTD_DCtx *d, const uint8_t *in, size_t len, obuf *o)
{
    ZSTD_inBuffer ib = {in, len, 0};
    for (;;) {
        if (o->len == o->cap) {
            kp_err err = obuf_grow(o);
            if (err != KP_ERR_NONE)
                return err;
        }
        ZSTD_outBuffer ob = {o->p + o->len, o->cap - o->len, 0};
        size_t in_before = ib.pos;
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(r))
            return zstd_error(o, r);
        o->len += ob.pos;
        if (r == 0 && ib.pos == ib.size)
            return KP_ERR_NONE;
        if (r != 0 && ob.pos < ob.size && (ib.pos == ib.size || ib.pos == in_before))
            return obuf_corrupt(o, "truncated frame");
    }
}

static kp_err zstd_decode(const uint8_t *in, size_t len, obuf *o)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (d == NULL)
        return KP_ERRCTX(o->ctx, KP_ERR__NOMEM, ENOMEM, "zstd: no decompression context");
    kp_err err;
    size_t r = ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, zstd_window_log(o->limit));
    if (ZSTD_isError(r))
        err = zstd_error(o, r);
    else
        err = len == 0 ? obuf_corrupt(o, "empty input") : zstd_frames(d, in, len, o);
    ZSTD_freeDCtx(d);
    return err;
}

/* ---- decompress entry point ---------------------------------------------- */

static kp_err copy_decode(const uint8_t *in, size_t len, obuf *o)
{
    kp_err err = obuf_reserve(o, len);
    if (err == KP_ERR_NONE && len > 0) {
        memcpy(o->p, in, len);
        o->len = len;
    }
    return err;
}

static kp_err decode_any(kp_codec codec, const uint8_t *in, size_t len, obuf *o)
{
    switch (codec) {
    case KP_CODEC_NONE:
        return copy_decode(in, len, o);
    case KP_CODEC_GZIP:
        return gzip_decode(in, len, o);
    case KP_CODEC_SNAPPY:
        return snappy_decode(in, len, o);
    case KP_CODEC_LZ4:
        return lz4_decode(in, len, o);
    case KP_CODEC_ZSTD:
        return zstd_decode(in, len, o);
    }
    return KP_ERRCTX(o->ctx, KP_ERR_UNSUPPORTED_COMPRESSION_TYPE, 0,
                     "unknown compression codec %d", (int)codec);
}

kp_err kp_decompress(kp_codec codec, const uint8_t *in, size_t len, size_t max_out, uint8_t **out,
                     size_t *out_len, kp_errctx *ctx)
{
    obuf o = {NULL, 0, 0, max_out, ctx, kp_codec_name((int)codec)};
    *out = NULL;
    *out_len = 0;
    kp_err err = decode_any(codec, in, len, &o);
    if (err == KP_ERR_NONE && o.len > o.limit)
        err = obuf_over_cap(&o);
    if (err == KP_ERR_NONE && o.p == NULL)
        err = obuf_resize(&o, 0);
    if (err != KP_ERR_NONE) {
        free(o.p);
        return err;
    }
    *out = o.p;
    *out_len = o.len;
    return KP_ERR_NONE;
}

/* ---- compress ------------------------------------------------------------- */

static kp_err out_alloc(size_t cap, uint8_t **out, kp_errctx *ctx)
{
    *out = malloc(cap > 0 ? cap : 1);
    if (*out == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, ENOMEM, "compress: out of memory (%zu bytes)", cap);
    return KP_ERR_NONE;
}

static int clamp_level(int32_t level, int dflt, int lo, int hi)
{
    if (level == KP_COMPRESS_LEVEL_DEFAULT)
        return dflt;
    return level < lo ? lo : level > hi ? hi : (int)level;
}

/* Deflates all of in into out (cap bytes, deflateBound's size). */
static bool gzip_deflate(z_stream *zs, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                         size_t *out_len)
{
    const uint8_t *end = in + len;
    zs->next_in = (Bytef *)(uintptr_t)in;
    zs->next_out = out;
    int rc;
    do {
        zs->avail_in = zlib_chunk((size_t)(end - zs->next_in));
        zs->avail_out = zlib_chunk(cap - (size_t)(zs->next_out - out));
        bool last = (size_t)(end - zs->next_in) == zs->avail_in;
        rc = deflate(zs, last ? Z_FINISH : Z_NO_FLUSH);
    } while (rc == Z_OK);
    *out_len = (size_t)(zs->next_out - out);
    return rc == Z_STREAM_END;
}

static kp_err gzip_encode(const uint8_t *in, size_t len, int32_t level, uint8_t **out,
                          size_t *out_len, kp_errctx *ctx)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    int lvl = clamp_level(level, Z_DEFAULT_COMPRESSION, 1, 9);
    if (deflateInit2(&zs, lvl, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, ENOMEM, "gzip: deflateInit2 failed");
    size_t cap = deflateBound(&zs, len);
    kp_err err = out_alloc(cap, out, ctx);
    if (err == KP_ERR_NONE && !gzip_deflate(&zs, in, len, *out, cap, out_len))
        err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "gzip: deflate failed");
    deflateEnd(&zs);
    return err;
}

static kp_err snappy_encode(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
                            kp_errctx *ctx)
{
    size_t cap = snappy_max_compressed_length(len);
    kp_err err = out_alloc(cap, out, ctx);
    if (err != KP_ERR_NONE)
        return err;
    *out_len = cap;
    if (snappy_compress((const char *)in, len, (char *)*out, out_len) != SNAPPY_OK)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "snappy: compress failed");
    return KP_ERR_NONE;
}

static kp_err lz4_encode(const uint8_t *in, size_t len, int32_t level, uint8_t **out,
                         size_t *out_len, kp_errctx *ctx)
{
    /* Kafka's LZ4 streams: 64 KiB independent blocks, no content size. */
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof(prefs));
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.compressionLevel = clamp_level(level, 0, 0, 17);
    size_t cap = LZ4F_compressFrameBound(len, &prefs);
    kp_err err = out_alloc(cap, out, ctx);
    if (err != KP_ERR_NONE)
        return err;
    size_t r = LZ4F_compressFrame(*out, cap, in, len, &prefs);
    if (LZ4F_isError(r))
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "lz4: %s", LZ4F_getErrorName(r));
    *out_len = r;
    return KP_ERR_NONE;
}

static kp_err zstd_encode(const uint8_t *in, size_t len, int32_t level, uint8_t **out,
                          size_t *out_len, kp_errctx *ctx)
{
    size_t cap = ZSTD_compressBound(len);
    kp_err err = out_alloc(cap, out, ctx);
    if (err != KP_ERR_NONE)
        return err;
    int lvl = clamp_level(level, ZSTD_CLEVEL_DEFAULT, ZSTD_minCLevel(), ZSTD_maxCLevel());
    size_t r = ZSTD_compress(*out, cap, in, len, lvl);
    if (ZSTD_isError(r))
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "zstd: %s", ZSTD_getErrorName(r));
    *out_len = r;
    return KP_ERR_NONE;
}

static kp_err encode_any(kp_codec codec, const uint8_t *in, size_t len, int32_t level,
                         uint8_t **out, size_t *out_len, kp_errctx *ctx)
{
    switch (codec) {
    case KP_CODEC_NONE: {
        kp_err err = out_alloc(len, out, ctx);
        if (err == KP_ERR_NONE && len > 0)
            memcpy(*out, in, len);
        *out_len = len;
        return err;
    }
    case KP_CODEC_GZIP:
        return gzip_encode(in, len, level, out, out_len, ctx);
    case KP_CODEC_SNAPPY:
        return snappy_encode(in, len, out, out_len, ctx);
    case KP_CODEC_LZ4:
        return lz4_encode(in, len, level, out, out_len, ctx);
    case KP_CODEC_ZSTD:
        return zstd_encode(in, len, level, out, out_len, ctx);
    }
    return KP_ERRCTX(ctx, KP_ERR_UNSUPPORTED_COMPRESSION_TYPE, 0, "unknown compression codec %d",
                     (int)codec);
}

kp_err kp_compress(kp_codec codec, const uint8_t *in, size_t len, int32_t level, uint8_t **out,
                   size_t *out_len, kp_errctx *ctx)
{
    *out = NULL;
    *out_len = 0;
    kp_err err = encode_any(codec, in, len, level, out, out_len, ctx);
    if (err != KP_ERR_NONE) {
        free(*out);
        *out = NULL;
        *out_len = 0;
    }
    return err;
}

/* Header, then each 32 KiB of input as int32 length + raw snappy block. */
static size_t xerial_bound(size_t len)
{
    size_t blocks = len / XERIAL_BLOCK_SIZE + 1;
    return XERIAL_HDR_SIZE + blocks * (4 + snappy_max_compressed_length(XERIAL_BLOCK_SIZE));
}

static kp_err xerial_encode(const uint8_t *in, size_t len, uint8_t *out, size_t *out_len)
{
    memcpy(out, xerial_magic, sizeof(xerial_magic));
    kp_be32_put(out + 8, XERIAL_VERSION);
    kp_be32_put(out + 12, XERIAL_VERSION);
    size_t pos = XERIAL_HDR_SIZE;
    for (size_t off = 0; off < len; off += XERIAL_BLOCK_SIZE) {
        size_t n = len - off < XERIAL_BLOCK_SIZE ? len - off : XERIAL_BLOCK_SIZE;
        size_t clen = snappy_max_compressed_length(n);
        if (snappy_compress((const char *)in + off, n, (char *)out + pos + 4, &clen) !=
            SNAPPY_OK)
            return KP_ERR__NOMEM;
        kp_be32_put(out + pos, (int32_t)clen);
        pos += 4 + clen;
    }
    *out_len = pos;
    return KP_ERR_NONE;
}

kp_err kp_compress_snappy_xerial(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
                                 kp_errctx *ctx)
{
    *out_len = 0;
    kp_err err = out_alloc(xerial_bound(len), out, ctx);
    if (err != KP_ERR_NONE)
        return err;
    err = xerial_encode(in, len, *out, out_len);
    if (err != KP_ERR_NONE) {
        free(*out);
        *out = NULL;
        *out_len = 0;
        return KP_ERRCTX(ctx, err, 0, "snappy: xerial compress failed");
    }
    return KP_ERR_NONE;
}
