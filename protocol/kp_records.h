/*
 * kp_records: the records inside a v2 record batch: iterate them, and
 * build a whole uncompressed batch from records.
 *
 * Record layout (varints are zig-zag, as in the batch format):
 *   length varint, attributes int8, timestamp_delta varlong, offset_delta
 *   varint, key_length varint (-1 = null), key, value_length varint (-1 =
 *   null), value, header_count varint, then per header: key_length varint,
 *   key, value_length varint (-1 = null), value.
 *
 * Invariants:
 *   1. The iterator never reads outside the records buffer; a record whose
 *      length varint disagrees with its fields is KP_ERR__CORRUPT.
 *   2. A built batch passes kp_batch_check() (magic 2, lengths, CRC-32C);
 *      its offset deltas are 0..count-1 (or, with add_record_at, the
 *      strictly increasing deltas given; last_offset_delta is the last one)
 *      and base_timestamp is the first record's timestamp.
 *
 * Ownership: records and headers returned by the iterator borrow from the
 * buffer given to kp_records_iter_init(). A builder owns its buffer until
 * kp_batch_builder_finish() hands it to the caller (who free()s it).
 * Threading: no shared state.
 * Errors: KP_ERR__CORRUPT for malformed records, KP_ERR__NOMEM; the
 * builder keeps a sticky error in w.err (KP_ERR__MALFORMED for a record over
 * 2 GiB) and then finishes with NULL.
 */
#ifndef KP_RECORDS_H
#define KP_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_types.h"

typedef struct kp_record_header {
    kp_slice key; /* a header key is never null */
    kp_slice value;
} kp_record_header;

typedef struct kp_record {
    int8_t attributes;
    int64_t timestamp_delta;
    int32_t offset_delta;
    kp_slice key;   /* len -1: null */
    kp_slice value; /* len -1: null */
    int32_t header_count;
    kp_reader headers; /* positioned at the first header */
} kp_record;

typedef struct kp_record_iter {
    kp_reader r;
    int32_t left;
} kp_record_iter;

/* Iterates count records in the bytes after a batch header (uncompressed). */
void kp_records_iter_init(kp_record_iter *it, const uint8_t *records, size_t len, int32_t count);
/* Next record: KP_ERR_NONE with *out filled, KP_ERR__NOENT at the end (and
 * then the records must have used every byte), or KP_ERR__CORRUPT. */
kp_err kp_records_next(kp_record_iter *it, kp_record *out);
/* Next header of rec: KP_ERR_NONE, KP_ERR__NOENT after the last, KP_ERR__CORRUPT. */
kp_err kp_record_header_next(kp_record *rec, kp_record_header *out);

typedef struct kp_batch_builder {
    kp_writer w;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int32_t count;
    int32_t last_delta; /* offset delta of the last record added */
    bool started;
} kp_batch_builder;

/* Starts a batch. attributes: KP_BATCH_ATTR_* (codec bits are ignored: the
 * codec is chosen by kp_batch_builder_finish_codec). */
void kp_batch_builder_init(kp_batch_builder *b, int64_t base_offset, int16_t attributes,
                           int64_t producer_id, int16_t producer_epoch, int32_t base_sequence);
void kp_batch_builder_add(kp_batch_builder *b, int64_t timestamp, kp_slice key, kp_slice value,
                          const kp_record_header *headers, int32_t header_count);
/* Appends rec, as returned by kp_records_next (its headers not yet walked),
 * keeping key, value and headers byte for byte; timestamp is absolute. */
void kp_batch_builder_add_record(kp_batch_builder *b, int64_t timestamp, const kp_record *rec);
/* Same, at an explicit offset delta (strictly above the previous record's;
 * else the sticky error KP_ERR__MALFORMED): the log cleaner keeps offsets. */
void kp_batch_builder_add_record_at(kp_batch_builder *b, int32_t offset_delta, int64_t timestamp,
                                    const kp_record *rec);
/* Completes the header and CRC; returns the batch (caller frees) or NULL
 * (no records, out of memory, or a batch over 2 GiB). */
uint8_t *kp_batch_builder_finish(kp_batch_builder *b, size_t *len);
/* Same, with the records section compressed by codec (a kp_codec; NONE is
 * kp_batch_builder_finish) at level (KP_COMPRESS_LEVEL_DEFAULT or a codec
 * level) and the attribute codec bits set. *out is malloc()ed. Errors:
 * KP_ERR__INVAL (no records), KP_ERR__NOMEM, kp_compress's errors. */
kp_err kp_batch_builder_finish_codec(kp_batch_builder *b, int codec, int32_t level,
                                     uint8_t **out, size_t *len);
void kp_batch_builder_fini(kp_batch_builder *b);

#endif
