/*
 * fuzz_record_batch: the Produce-side batch checks and every decompressor.
 *
 * Input: one option byte, then the records bytes of a Produce partition.
 *   bit 0  single_batch        bit 3  log_append_time
 *   bit 1  compacted           bit 4  recompute each batch's CRC-32C first,
 *   bit 2  allow_zstd                 so mutations get past the checksum
 *   bits 5-7  codec for a direct kp_decompress of the whole records bytes
 *             (5-7: unknown ids, which must be refused)
 *
 * Checks: no sanitizer report; kp_decompress never returns more than its
 * cap; a batch set that validates can be recompressed with every codec and
 * the result validates again with the same record count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_crc32c.h"
#include "kp_validate.h"

#define FUZZ_MAX_OUT (1024 * 1024)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Rewrites the CRC of every whole batch in buf. */
static void fix_crcs(uint8_t *buf, size_t len)
{
    size_t off = 0;
    for (int i = 0; i < 4096 && off + KP_BATCH_HDR_SIZE <= len; i++) {
        int32_t blen = (int32_t)be32(buf + off + KP_BATCH_OFF_LENGTH);
        if (blen < KP_BATCH_MIN_LENGTH || (size_t)blen > len - off - KP_BATCH_LOG_OVERHEAD)
            return;
        size_t end = off + KP_BATCH_LOG_OVERHEAD + (size_t)blen;
        uint32_t crc = kp_crc32c(0, buf + off + KP_BATCH_CRC_START, end - off - KP_BATCH_CRC_START);
        buf[off + KP_BATCH_OFF_CRC] = (uint8_t)(crc >> 24);
        buf[off + KP_BATCH_OFF_CRC + 1] = (uint8_t)(crc >> 16);
        buf[off + KP_BATCH_OFF_CRC + 2] = (uint8_t)(crc >> 8);
        buf[off + KP_BATCH_OFF_CRC + 3] = (uint8_t)crc;
        off = end;
    }
}

static void fail(const char *what, int codec)
{
    fprintf(stderr, "fuzz_record_batch: %s (codec %d)\n", what, codec);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    size_t len = size - 1;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 1, len);
    if (flags & 0x10)
        fix_crcs(buf, len);

    int codec = flags >> 5;
    uint8_t *out = NULL;
    size_t out_len = 0;
    kp_err e = kp_decompress((kp_codec)codec, buf, len, FUZZ_MAX_OUT, &out, &out_len, NULL);
    if (e == KP_ERR_NONE && out_len > FUZZ_MAX_OUT)
        fail("decompressed past the cap", codec);
    if (codec > KP_CODEC_ZSTD && e == KP_ERR_NONE)
        fail("unknown codec accepted", codec);
    free(out);

    kp_validate_opts o;
    memset(&o, 0, sizeof(o));
    o.single_batch = flags & 0x01;
    o.compacted = flags & 0x02;
    o.allow_zstd = flags & 0x04;
    o.log_append_time = flags & 0x08;
    o.max_message_bytes = INT32_MAX;
    o.now_ms = 1700000000000;
    o.timestamp_before_max_ms = INT64_MAX;
    o.timestamp_after_max_ms = INT64_MAX;
    o.max_decompressed = FUZZ_MAX_OUT;
    kp_validate_result res;
    memset(&res, 0, sizeof(res));
    if (kp_validate_batches(buf, len, &o, &res) == KP_ERR_NONE) {
        for (int c = KP_CODEC_NONE; c <= KP_CODEC_ZSTD; c++) {
            uint8_t *re = NULL;
            size_t re_len = 0;
            if (kp_recompress_batches(buf, len, c, KP_COMPRESS_LEVEL_DEFAULT, FUZZ_MAX_OUT, &re,
                                      &re_len) != KP_ERR_NONE)
                continue; /* e.g. the plain records exceed the cap */
            kp_validate_opts o2 = o;
            o2.single_batch = true;
            o2.allow_zstd = true;
            o2.max_decompressed = (size_t)FUZZ_MAX_OUT * 2;
            kp_validate_result res2;
            memset(&res2, 0, sizeof(res2));
            kp_err e2 = kp_validate_batches(re, re_len, &o2, &res2);
            /* The LogAppendTime bit is dropped by design; any other refusal,
             * or a different record count, is a bug. */
            if (e2 != KP_ERR_NONE || res2.records != res.records) {
                fprintf(stderr, "recompressed: %s (%s), records %lld vs %lld\n", kp_err_name(e2),
                        res2.msg, (long long)res2.records, (long long)res.records);
                fail("recompressed batch does not validate", c);
            }
            kp_validate_result_fini(&res2);
            free(re);
        }
    }
    kp_validate_result_fini(&res);
    free(buf);
    return 0;
}
