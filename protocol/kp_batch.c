#include "kp_batch.h"

#include "kp_crc32c.h"

int64_t kp_be64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

int32_t kp_be32_get(const uint8_t *p)
{
    uint32_t v = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return (int32_t)v;
}

static int16_t be16_get(const uint8_t *p)
{
    return (int16_t)(uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

void kp_be64_put(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(u & 0xffu);
        u >>= 8;
    }
}

void kp_be32_put(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
}

static void be16_put(uint8_t *p, int16_t v)
{
    uint16_t u = (uint16_t)v;
    p[0] = (uint8_t)(u >> 8);
    p[1] = (uint8_t)u;
}

kp_err kp_batch_hdr_parse(const uint8_t *p, size_t len, kp_batch_hdr *out)
{
    if (len < KP_BATCH_HDR_SIZE)
        return KP_ERR__UNDERFLOW;
    out->base_offset = kp_be64_get(p);
    out->batch_length = kp_be32_get(p + 8);
    out->partition_leader_epoch = kp_be32_get(p + 12);
    out->magic = (int8_t)p[16];
    out->crc = (uint32_t)kp_be32_get(p + 17);
    out->attributes = be16_get(p + 21);
    out->last_offset_delta = kp_be32_get(p + 23);
    out->base_timestamp = kp_be64_get(p + 27);
    out->max_timestamp = kp_be64_get(p + 35);
    out->producer_id = kp_be64_get(p + 43);
    out->producer_epoch = be16_get(p + 51);
    out->base_sequence = kp_be32_get(p + 53);
    out->records_count = kp_be32_get(p + 57);
    if (out->magic != KP_BATCH_MAGIC || out->batch_length < KP_BATCH_MIN_LENGTH)
        return KP_ERR__CORRUPT;
    if (out->records_count < 0 || out->last_offset_delta < 0 || out->base_offset < 0)
        return KP_ERR__CORRUPT;
    /* The offset after the batch's last one must be representable. */
    if (out->base_offset > INT64_MAX - 1 - out->last_offset_delta)
        return KP_ERR__CORRUPT;
    return KP_ERR_NONE;
}

int64_t kp_batch_total_size(const kp_batch_hdr *h)
{
    return (int64_t)h->batch_length + KP_BATCH_LOG_OVERHEAD;
}

int64_t kp_batch_last_offset(const kp_batch_hdr *h)
{
    return h->base_offset + h->last_offset_delta;
}

uint32_t kp_batch_crc_compute(const uint8_t *batch, size_t total)
{
    return kp_crc32c(0, batch + KP_BATCH_CRC_START, total - KP_BATCH_CRC_START);
}

kp_err kp_batch_check(const uint8_t *batch, size_t len, kp_batch_hdr *out)
{
    kp_batch_hdr h;
    kp_err err = kp_batch_hdr_parse(batch, len, &h);
    if (err != KP_ERR_NONE)
        return err;
    int64_t total = kp_batch_total_size(&h);
    if ((uint64_t)total > len)
        return KP_ERR__UNDERFLOW;
    if (kp_batch_crc_compute(batch, (size_t)total) != h.crc)
        return KP_ERR__CORRUPT;
    if (out != NULL)
        *out = h;
    return KP_ERR_NONE;
}

void kp_batch_set_base_offset(uint8_t *batch, int64_t base_offset)
{
    kp_be64_put(batch + KP_BATCH_OFF_BASE_OFFSET, base_offset);
}

void kp_batch_set_leader_epoch(uint8_t *batch, int32_t epoch)
{
    kp_be32_put(batch + KP_BATCH_OFF_LEADER_EPOCH, epoch);
}

void kp_batch_set_log_append_time(uint8_t *batch, int64_t timestamp_ms)
{
    int16_t attr = be16_get(batch + KP_BATCH_OFF_ATTRIBUTES);
    be16_put(batch + KP_BATCH_OFF_ATTRIBUTES, (int16_t)(attr | KP_BATCH_ATTR_LOG_APPEND_TIME));
    kp_be64_put(batch + KP_BATCH_OFF_MAX_TIMESTAMP, timestamp_ms);
}

void kp_batch_crc_store(uint8_t *batch, size_t total)
{
    kp_be32_put(batch + KP_BATCH_OFF_CRC, (int32_t)kp_batch_crc_compute(batch, total));
}
