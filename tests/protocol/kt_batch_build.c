#include "kt_batch_build.h"

#include <stdlib.h>
#include <string.h>

#include "kp_batch.h"

static size_t put_varlong(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

/* Encodes one record body after its length prefix; returns its size. */
static size_t record_body(uint8_t *p, int64_t ts_delta, int32_t off_delta, size_t value_len)
{
    size_t n = 0;
    p[n++] = 0; /* attributes */
    n += put_varlong(p + n, ts_delta);
    n += put_varlong(p + n, off_delta);
    n += put_varlong(p + n, -1); /* null key */
    n += put_varlong(p + n, (int64_t)value_len);
    for (size_t i = 0; i < value_len; i++)
        p[n++] = (uint8_t)('a' + (off_delta + (int32_t)i) % 26);
    n += put_varlong(p + n, 0); /* headers */
    return n;
}

uint8_t *kt_batch_build(int32_t n, size_t value_len, int64_t ts0, int64_t ts_step, size_t *len)
{
    size_t cap = KP_BATCH_HDR_SIZE + (size_t)n * (value_len + 48);
    uint8_t *b = calloc(1, cap);
    uint8_t *tmp = malloc(value_len + 48);
    if (b == NULL || tmp == NULL)
        abort();
    size_t pos = KP_BATCH_HDR_SIZE;
    for (int32_t i = 0; i < n; i++) {
        size_t body = record_body(tmp, (int64_t)i * ts_step, i, value_len);
        pos += put_varlong(b + pos, (int64_t)body);
        memcpy(b + pos, tmp, body);
        pos += body;
    }
    free(tmp);
    kp_be64_put(b + 0, 0);
    kp_be32_put(b + 8, (int32_t)(pos - KP_BATCH_LOG_OVERHEAD));
    kp_be32_put(b + 12, -1);
    b[16] = KP_BATCH_MAGIC;
    /* attributes 0 at 21..22 */
    kp_be32_put(b + 23, n - 1);
    kp_be64_put(b + 27, ts0);
    kp_be64_put(b + 35, ts0 + (int64_t)(n - 1) * ts_step);
    kp_be64_put(b + 43, -1);
    b[51] = 0xff;
    b[52] = 0xff;
    kp_be32_put(b + 53, -1);
    kp_be32_put(b + 57, n);
    kp_batch_crc_store(b, pos);
    *len = pos;
    return b;
}
