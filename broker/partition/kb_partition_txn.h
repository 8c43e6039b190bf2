/*
 * kb_partition_txn: the transactions of one partition, as its log shows them: which
 * producers have a transaction open here (and from which offset), and which
 * transactions ended aborted, for read_committed fetches.
 *
 * Job: compute the last stable offset (LSO: the first offset of the oldest
 * open transaction, else the high watermark) and list the aborted
 * transactions a read_committed fetch of an offset range must report; learn
 * both from appends (transactional data batches, commit and abort markers)
 * and, after a restart, from a scan of the log (kb_partition_txn_replay).
 *
 * Invariants:
 *   1. A producer has at most one open transaction per partition; its first
 *      offset is the base offset of its first transactional batch since its
 *      last marker.
 *   2. Aborted entries are kept in marker order (last_offset strictly
 *      increasing); first_offset <= last_offset.
 *   3. At most KB_PARTITION_TXN_ABORTED_MAX aborted entries are kept: past it the
 *      oldest quarter is dropped (entries below the log start offset go
 *      first, through kb_partition_txn_prune). Open transactions are bounded by the
 *      producers the transaction coordinator admits.
 *
 * Ownership: kb_producer_state owns the partition's kb_partition_txn (kb_producer_state_txns).
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM; KP_ERR__CORRUPT from kb_partition_txn_control_type for a
 * control batch whose record does not parse.
 */
#ifndef KB_PARTITION_TXN_H
#define KB_PARTITION_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_batch.h"
#include "kp_err.h"

#define KB_PARTITION_TXN_ABORTED_MAX 65536

/* Control record types (the int16 after the key's version). */
#define KB_CONTROL_ABORT  0
#define KB_CONTROL_COMMIT 1

typedef struct kb_partition_txn kb_partition_txn;

typedef struct kb_aborted_txn {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset; /* the abort marker's offset */
} kb_aborted_txn;

kb_partition_txn *kb_partition_txn_new(void);
void kb_partition_txn_free(kb_partition_txn *x);

/* A transactional data batch of producer_id starting at base_offset was
 * appended (opens the producer's transaction here if none is open). */
kp_err kb_partition_txn_on_data(kb_partition_txn *x, int64_t producer_id, int64_t base_offset);
/* A commit or abort marker of producer_id was appended at offset; a marker
 * for a producer with nothing open changes nothing. */
kp_err kb_partition_txn_on_marker(kb_partition_txn *x, int64_t producer_id, bool commit, int64_t offset);

/* Whether producer_id has a transaction open here (and its first offset). */
bool kb_partition_txn_open(const kb_partition_txn *x, int64_t producer_id, int64_t *first_offset);
int32_t kb_partition_txn_open_count(const kb_partition_txn *x);
/* The last stable offset, given the high watermark. */
int64_t kb_partition_txn_lso(const kb_partition_txn *x, int64_t high_watermark);

/* Aborted transactions overlapping [from, upto): last_offset >= from and
 * first_offset < upto, oldest first; writes at most max into out and
 * returns how many it wrote. */
int32_t kb_partition_txn_aborted(const kb_partition_txn *x, int64_t from, int64_t upto, kb_aborted_txn *out,
                        int32_t max);
int32_t kb_partition_txn_aborted_count(const kb_partition_txn *x);
/* Forgets aborted transactions wholly below log_start. */
void kb_partition_txn_prune(kb_partition_txn *x, int64_t log_start);

/* The type of the marker in an uncompressed control batch (whole batch
 * bytes): KB_CONTROL_ABORT or KB_CONTROL_COMMIT in *type. */
kp_err kb_partition_txn_control_type(const uint8_t *batch, size_t len, int16_t *type);
/* The same, and the coordinator epoch the marker's value carries (-1 when
 * its value is too short to hold one). */
kp_err kb_partition_txn_marker(const uint8_t *batch, size_t len, int16_t *type, int32_t *coordinator_epoch);

/* Replays one batch found by a log scan: h, and for a control batch its
 * whole bytes (batch, len; NULL for others). */
kp_err kb_partition_txn_replay(kb_partition_txn *x, const kp_batch_hdr *h, const uint8_t *batch, size_t len);

#endif
