/*
 * kp_batch: the record batch v2 ("magic 2") header.
 *
 * Job: parse and check the fixed 61-byte header of a record batch, verify
 * its CRC-32C, and rewrite the fields a leader stamps on append (base offset,
 * partition leader epoch, LogAppendTime) without touching the records.
 *
 * Layout (all integers big-endian; the same bytes travel on the wire and sit
 * in .log files):
 *
 *   offset size field                  meaning
 *   ------ ---- ---------------------- -------------------------------------
 *        0    8 base_offset            offset of the first record
 *        8    4 batch_length           bytes after this field (total - 12)
 *       12    4 partition_leader_epoch stamped by the leader, not in the CRC
 *       16    1 magic                  2
 *       17    4 crc                    CRC-32C of bytes 21 .. end of batch
 *       21    2 attributes             bits 0-2 codec, 3 LogAppendTime,
 *                                      4 transactional, 5 control, 6 delete
 *                                      horizon; bits 7-15 zero
 *       23    4 last_offset_delta      last record's offset - base_offset
 *       27    8 base_timestamp         first record's timestamp
 *       35    8 max_timestamp          largest timestamp (broker time for
 *                                      LogAppendTime)
 *       43    8 producer_id            -1 when not idempotent
 *       51    2 producer_epoch         -1 when none
 *       53    4 base_sequence          -1 when none
 *       57    4 records_count          number of records
 *       61    - records                possibly one compressed stream
 *
 * Invariants:
 *   1. kp_batch_hdr_parse accepts only magic 2, batch_length >= 49 and
 *      records_count >= 0, last_offset_delta >= 0, base_offset >= 0 and a
 *      last offset + 1 that fits in int64_t; it never reads past len.
 *   2. Rewriting base_offset or partition_leader_epoch keeps the CRC valid;
 *      any other rewrite is followed by kp_batch_crc_store.
 *
 * Ownership: functions work on caller buffers and never allocate.
 * Threading: pure functions, callable from any thread.
 * Errors: KP_ERR__UNDERFLOW (fewer than 61 bytes, or fewer than the batch
 * length claims), KP_ERR__CORRUPT (bad magic, length or CRC).
 */
#ifndef KP_BATCH_H
#define KP_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

#define KP_BATCH_HDR_SIZE      61 /* fixed header, up to the records */
#define KP_BATCH_LOG_OVERHEAD  12 /* base_offset + batch_length */
#define KP_BATCH_MIN_LENGTH    (KP_BATCH_HDR_SIZE - KP_BATCH_LOG_OVERHEAD)
#define KP_BATCH_MAGIC         2
#define KP_BATCH_CRC_START     21 /* first byte covered by the CRC */

/* Byte offsets of the header fields (see the table above). */
#define KP_BATCH_OFF_BASE_OFFSET    0
#define KP_BATCH_OFF_LENGTH         8
#define KP_BATCH_OFF_LEADER_EPOCH   12
#define KP_BATCH_OFF_MAGIC          16
#define KP_BATCH_OFF_CRC            17
#define KP_BATCH_OFF_ATTRIBUTES     21
#define KP_BATCH_OFF_LAST_DELTA     23
#define KP_BATCH_OFF_BASE_TIMESTAMP 27
#define KP_BATCH_OFF_MAX_TIMESTAMP  35

#define KP_BATCH_ATTR_CODEC_MASK     0x07
#define KP_BATCH_ATTR_LOG_APPEND_TIME 0x08
#define KP_BATCH_ATTR_TRANSACTIONAL  0x10
#define KP_BATCH_ATTR_CONTROL        0x20

typedef struct kp_batch_hdr {
    int64_t base_offset;            /* offset of the first record */
    int32_t batch_length;           /* bytes after the length field */
    int32_t partition_leader_epoch; /* leader epoch at append */
    int8_t magic;                   /* always 2 once parsed */
    uint32_t crc;                   /* stored CRC-32C */
    int16_t attributes;             /* KP_BATCH_ATTR_* bits */
    int32_t last_offset_delta;      /* last offset - base_offset */
    int64_t base_timestamp;         /* first record's timestamp */
    int64_t max_timestamp;          /* largest timestamp in the batch */
    int64_t producer_id;            /* -1 if not idempotent */
    int16_t producer_epoch;         /* -1 if none */
    int32_t base_sequence;          /* -1 if none */
    int32_t records_count;          /* number of records */
} kp_batch_hdr;

/* Parses the 61-byte header at p (len bytes available; only the header must
 * be present). Checks magic and length fields, not the CRC. */
kp_err kp_batch_hdr_parse(const uint8_t *p, size_t len, kp_batch_hdr *out);

/* Bytes the whole batch occupies: batch_length + 12. */
int64_t kp_batch_total_size(const kp_batch_hdr *h);

/* Offset of the batch's last record. */
int64_t kp_batch_last_offset(const kp_batch_hdr *h);

/* CRC-32C of bytes 21 .. total of a whole batch in memory. */
uint32_t kp_batch_crc_compute(const uint8_t *batch, size_t total);

/* Parses the header and checks that len holds the whole batch and that its
 * CRC matches; fills out when non-NULL. */
kp_err kp_batch_check(const uint8_t *batch, size_t len, kp_batch_hdr *out);

/* In-place rewrites of a batch in memory (at least 61 bytes). */
void kp_batch_set_base_offset(uint8_t *batch, int64_t base_offset);
void kp_batch_set_leader_epoch(uint8_t *batch, int32_t epoch);
/* Sets the LogAppendTime attribute bit and max_timestamp; the caller then
 * calls kp_batch_crc_store. */
void kp_batch_set_log_append_time(uint8_t *batch, int64_t timestamp_ms);
/* Recomputes the CRC of a whole batch of total bytes and stores it. */
void kp_batch_crc_store(uint8_t *batch, size_t total);

/* Big-endian helpers shared by the batch and storage code. */
int64_t kp_be64_get(const uint8_t *p);
int32_t kp_be32_get(const uint8_t *p);
void kp_be64_put(uint8_t *p, int64_t v);
void kp_be32_put(uint8_t *p, int32_t v);

#endif
