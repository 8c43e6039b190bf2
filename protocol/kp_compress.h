/*
 * kp_compress: the four record batch codecs: gzip (zlib), snappy (raw, and
 * the xerial framing that Java and kafka-python send), lz4 (frame format)
 * and zstd.
 *
 * Job: turn the records part of a compressed batch into plain records and
 * back, with a hard cap on decompressed size so a compression bomb costs
 * bounded memory.
 *
 * Invariants:
 *   1. kp_decompress never allocates more than max_out + 1 bytes of output,
 *      plus the codec's own state (zlib ~40 KiB, lz4 frame <= ~8.2 MiB, zstd
 *      window <= max(8 MiB, max_out rounded up to a power of two, capped at
 *      128 MiB)); a size announced by the input (snappy preamble, zstd frame
 *      content size) is never trusted for allocation beyond max_out. Output
 *      that would exceed max_out is KP_ERR__CORRUPT with ctx->sys_errno set
 *      to EFBIG, so callers can tell a compression bomb from garbage.
 *   2. kp_compress output decompresses to the input, byte for byte.
 *   3. Snappy input in xerial framing (magic 82 53 4e 41 50 50 59 00) is
 *      recognised and unframed (concatenated xerial streams too); raw snappy
 *      otherwise. gzip input may also be zlib-wrapped or raw deflate, and
 *      several gzip members are read back to back, as Java's GZIPInputStream
 *      does. lz4 and zstd accept several frames back to back.
 *   4. KP_CODEC_NONE copies (still capped by max_out on decompress).
 *
 * Compression: gzip writes a gzip wrapper (level 1-9, default 6); snappy
 * writes raw snappy (what librdkafka sends; Java and kafka-python read it);
 * lz4 writes one frame with 64 KiB independent blocks and no content size,
 * as Kafka's Java client does (level 0-17, default 0 = fast); zstd writes
 * one frame (default level 3). Levels out of range are clamped.
 *
 * Ownership: *out is malloc()ed; the caller free()s it. On error *out is
 * NULL and *out_len 0.
 * Threading: no shared state; callable from any thread.
 * Errors: KP_ERR__CORRUPT (undecodable input, or output over max_out),
 * KP_ERR_UNSUPPORTED_COMPRESSION_TYPE (codec id 5-7), KP_ERR__NOMEM.
 * ctx (optional) gets the reason.
 */
#ifndef KP_COMPRESS_H
#define KP_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

typedef enum kp_codec {
    KP_CODEC_NONE = 0,
    KP_CODEC_GZIP = 1,
    KP_CODEC_SNAPPY = 2,
    KP_CODEC_LZ4 = 3,
    KP_CODEC_ZSTD = 4,
} kp_codec;

/* "none", "gzip", "snappy", "lz4", "zstd", or "unknown". */
const char *kp_codec_name(int codec);

kp_err kp_decompress(kp_codec codec, const uint8_t *in, size_t len, size_t max_out, uint8_t **out,
                     size_t *out_len, kp_errctx *ctx);

/* level: the codec's default when KP_COMPRESS_LEVEL_DEFAULT. */
#define KP_COMPRESS_LEVEL_DEFAULT INT32_MIN
kp_err kp_compress(kp_codec codec, const uint8_t *in, size_t len, int32_t level, uint8_t **out,
                   size_t *out_len, kp_errctx *ctx);

/* Test hook: snappy in xerial framing (what the Java client sends). */
kp_err kp_compress_snappy_xerial(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
                                 kp_errctx *ctx);

#endif
