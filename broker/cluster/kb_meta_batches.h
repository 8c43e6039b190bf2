/*
 * kb_meta_batches: the record batches of a __cluster_metadata Fetch
 * response, checked and taken apart into the records handed to the
 * metadata hook (kb_cluster_set_apply), control records included.
 *
 * Invariants:
 *   1. Only whole batches with a valid CRC are read; a trailing partial
 *      batch (the response's byte limit cut it) is left for the next Fetch.
 *   2. Batches ending before pos->next_offset are skipped (already seen);
 *      pos advances past every batch read, and pos->last_epoch is the last
 *      batch's partition leader epoch.
 *   3. Compressed batches are inflated to at most KB_META_MAX_BATCH bytes.
 * Ownership: records passed to the callback borrow from the input (or a
 * buffer freed after the batch); copy what must outlive the call.
 * Threading: pure; any thread.
 * Errors: KP_ERR__CORRUPT for a bad CRC, header or record, with nothing of
 * that batch delivered; KP_ERR__NOMEM.
 */
#ifndef KB_META_BATCHES_H
#define KB_META_BATCHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_types.h"

#define KB_META_MAX_BATCH (16 * 1024 * 1024)

typedef struct kb_meta_record {
    int64_t offset;
    int32_t epoch;   /* the batch's partition leader epoch */
    bool control;    /* a KRaft control record (LeaderChange, Voters, ...) */
    int16_t type;    /* the record's apiKey (metadata) or control type, -1 unknown */
    int16_t version; /* its version, -1 unknown */
    kp_slice key;
    kp_slice value;
} kb_meta_record;

typedef void kb_meta_record_fn(void *arg, const kb_meta_record *rec);

typedef struct kb_meta_pos {
    int64_t next_offset;
    int32_t last_epoch;
} kb_meta_pos;

/* Reads the batches in p[0..len); returns the number of records delivered
 * in *nrecords. */
kp_err kb_meta_batches_read(const uint8_t *p, size_t len, kb_meta_pos *pos,
                            kb_meta_record_fn *fn, void *arg, int64_t *nrecords);

#endif
