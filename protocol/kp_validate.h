/*
 * kp_validate: the checks a leader makes on produced record batches before
 * appending them, answering with the error code Kafka would use.
 *
 * Job: walk every batch in a Produce partition's records: sizes and lengths
 * consistent with the bytes received, magic 2, CRC-32C, attributes a
 * producer may set, record count and offset deltas, every record decodable
 * (decompressing when needed, capped), keys on compacted topics, timestamps
 * against message.timestamp.{before,after}.max.ms, max.message.bytes; and
 * report what the broker needs next (producer id/epoch/sequence, record
 * count, max timestamp, codec).
 *
 * Invariants:
 *   1. KP_ERR_NONE means: the buffer is one or more whole v2 batches back to
 *      back (exactly one when opts->single_batch), each with base offset 0
 *      and a valid CRC, count = last_offset_delta + 1 = the records present,
 *      offset deltas 0..n-1, every record decodable.
 *   2. Memory used is bounded by opts->max_decompressed per batch (plus the
 *      codec state kp_compress.h describes); nothing is kept.
 *
 * Checks, in Kafka's order (ProduceRequest.validateRecords, then
 * UnifiedLog.analyzeAndValidateRecords, then LogValidator), and the code:
 *   no whole batch in the buffer (empty, or the first one cut short)  INVALID_RECORD
 *   batch_length < 14, or magic byte outside 0..2                     CORRUPT_MESSAGE
 *   magic 0 or 1                                                      INVALID_RECORD
 *   zstd when !allow_zstd                                UNSUPPORTED_COMPRESSION_TYPE
 *   a second whole batch when single_batch                            INVALID_RECORD
 *   bytes after the last whole batch (Kafka silently drops them)      CORRUPT_MESSAGE
 *   base offset != 0                                                  INVALID_RECORD
 *   batch bytes > max_message_bytes                                 MESSAGE_TOO_LARGE
 *   batch shorter than its 61-byte header, or CRC-32C mismatch        CORRUPT_MESSAGE
 *   codec id 5-7 (Kafka: IllegalArgumentException, unmapped)     UNKNOWN_SERVER_ERROR
 *   last_offset_delta < 0, count <= 0 (an empty batch), or
 *   count != last_offset_delta + 1                                    INVALID_RECORD
 *   control bit set                                                   INVALID_RECORD
 *   producer id >= 0 with base sequence < 0                           INVALID_RECORD
 *   compressed records that do not decompress (Kafka: KafkaException,
 *   unmapped)                                                    UNKNOWN_SERVER_ERROR
 *   decompressed size over max_decompressed (our cap; Kafka has none) MESSAGE_TOO_LARGE
 *   a record that does not parse, fewer records than count, or bytes
 *   left after count records                                          INVALID_RECORD
 * and per record, collected over the whole batch as Kafka's LogValidator
 * does: every failing record is listed in res->record_errors (one fault per
 * record, the first that applies, in this order), and the answer is
 * INVALID_TIMESTAMP if any record has a timestamp fault, else INVALID_RECORD:
 *   offset delta != its index (Kafka rewrites; we refuse)             INVALID_RECORD
 *   keyless record on a compacted topic                               INVALID_RECORD
 *   CreateTime topic, timestamp != -1 and outside
 *   [now - before_max, now + after_max]                             INVALID_TIMESTAMP
 *   LogAppendTime attribute set by the producer (unless the
 *   CreateTime check above applied and passed, as in Kafka)         INVALID_TIMESTAMP
 * Under LogAppendTime, a record's timestamp is the batch max timestamp.
 * At most KP_VALIDATE_MAX_RECORD_ERRORS faults are listed (Kafka lists all);
 * res->record_error_count counts every one.
 *
 * Ownership: reads the caller's buffer. res->record_errors is malloc()ed,
 * owned by res, and freed by kp_validate_result_fini(), which every caller
 * of kp_validate_batches() calls once done with res (whatever the result).
 * Threading: pure; any thread.
 * Errors: the wire codes above, with res->msg carrying Kafka-like detail;
 * KP_ERR__NOMEM when decompression or the fault list cannot allocate. The
 * transactional bit is left to the caller (it needs the request's
 * transactional id).
 */
#ifndef KP_VALIDATE_H
#define KP_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

typedef struct kp_validate_opts {
    bool single_batch;          /* Produce v3+: exactly one batch */
    bool compacted;             /* cleanup.policy contains compact */
    bool allow_zstd;            /* Produce v7+ */
    bool log_append_time;       /* message.timestamp.type=LogAppendTime: skip ts checks */
    int32_t max_message_bytes;  /* max.message.bytes: per batch */
    int64_t now_ms;
    int64_t timestamp_before_max_ms; /* message.timestamp.before.max.ms */
    int64_t timestamp_after_max_ms;  /* message.timestamp.after.max.ms */
    size_t max_decompressed;    /* per batch cap on decompressed records */
} kp_validate_opts;

/* The most per-record faults one validation lists; a Produce response then
 * carries at most this many record errors per partition. */
#define KP_VALIDATE_MAX_RECORD_ERRORS 65536

/* Why one record was refused. */
typedef enum kp_record_fault {
    KP_RECORD_FAULT_OFFSET_DELTA,   /* offset delta is not its index */
    KP_RECORD_FAULT_NO_KEY,         /* keyless record on a compacted topic */
    KP_RECORD_FAULT_TIMESTAMP,      /* CreateTime timestamp out of range */
    KP_RECORD_FAULT_LOG_APPEND_TIME /* the producer set LogAppendTime */
} kp_record_fault;

/* One refused record, with what its message needs. */
typedef struct kp_record_error {
    int64_t timestamp;     /* as Kafka reads it (see above) */
    int32_t index;         /* position in its batch: the wire's batch_index */
    int32_t key_len;       /* -1 for a null key */
    int32_t value_len;     /* -1 for a null value */
    kp_record_fault fault;
} kp_record_error;

typedef struct kp_validate_result {
    int32_t batches;
    int64_t records;           /* records in all batches */
    int64_t max_timestamp;     /* largest record timestamp, -1 if none */
    int16_t attributes;        /* of the first batch */
    int64_t producer_id;       /* of the first batch */
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t last_offset_delta; /* of the first batch */
    kp_record_error *record_errors; /* the listed faults, in record order; owned */
    int32_t record_errors_listed;   /* entries in record_errors */
    int32_t record_error_count;     /* every faulty record, listed or not */
    bool timestamp_fault;           /* some record has a timestamp fault */
    char msg[160];
} kp_validate_result;

/* Validates len bytes of batches at p into *res (which it initializes). */
kp_err kp_validate_batches(const uint8_t *p, size_t len, const kp_validate_opts *opts,
                           kp_validate_result *res);

/* Frees what *res owns; it may then be reused. */
void kp_validate_result_fini(kp_validate_result *res);

/*
 * Kafka's text for one refused record of partition topic-partition, as
 * LogValidator words it, into buf (always terminated). opts gives the
 * timestamp bounds named in the text.
 */
void kp_record_error_text(const kp_record_error *e, const kp_validate_opts *opts,
                          const char *topic, int32_t partition, char *buf, size_t cap);

/*
 * Kafka's partition-level error message for a validation that listed record
 * errors: for INVALID_TIMESTAMP a fixed sentence, else the count and the first
 * three records' texts. Into buf (always terminated, cut short if cap is).
 */
void kp_record_errors_summary(const kp_validate_result *res, const kp_validate_opts *opts,
                              const char *topic, int32_t partition, char *buf, size_t cap);

/*
 * Rewrites every batch into one batch compressed with codec (KP_CODEC_NONE
 * for uncompressed), for topics whose compression.type names a codec. The
 * input must have passed kp_validate_batches. *out is malloc()ed. The new
 * batch keeps the first batch's base offset, producer id, epoch, base
 * sequence and transactional bit, every record's timestamp, key, value and
 * headers; offset deltas become 0..n-1 and the CRC is recomputed. The
 * LogAppendTime bit is not carried: the caller stamps it after.
 * Errors: KP_ERR__CORRUPT (input not whole valid batches), KP_ERR__INVAL
 * (no batch), KP_ERR__NOMEM, kp_decompress/kp_compress errors.
 */
kp_err kp_recompress_batches(const uint8_t *p, size_t len, int codec, int32_t level,
                             size_t max_decompressed, uint8_t **out, size_t *out_len);

#endif
