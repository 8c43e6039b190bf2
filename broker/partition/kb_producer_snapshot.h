/*
 * kb_producer_snapshot: producer-state snapshots of one partition, in Kafka's
 * <20-digit offset>.snapshot files beside its segments.
 *
 * Job: save the partition's idempotent-producer state (kb_producer_state.h) as
 * it stands at an offset, at a segment roll (the new segment's base
 * offset) and at a clean stop (the log end); on open, load the newest
 * usable snapshot and replay only the batches from its offset to the log
 * end, instead of every batch from the log start.
 *
 * File <20-digit offset>.snapshot: Kafka's ProducerSnapshot v1, big-endian
 *   offset size  meaning
 *   0      2     version, 1
 *   2      4     CRC-32C of every byte from offset 6 to the end
 *   6      4     entry count n (the file is exactly 10 + 46 n bytes)
 *   10     46 n  entries, each:
 *                  +0 8 producer id      +8  2 epoch
 *                  +10 4 last sequence   +14 8 last offset
 *                  +22 4 offset delta (last - first offset of the last batch)
 *                  +26 8 timestamp       +34 4 coordinator epoch (-1: none)
 *                  +38 8 current transaction's first offset (-1: none)
 * File <20-digit offset>.aborted (Runnel only: Kafka keeps aborted
 * transactions in .txnindex files, Runnel in memory, kb_partition_txn.h), written
 * beside a snapshot only while some are known; none means none:
 *   0 2 version, 0 | 2 4 CRC-32C as above | 6 4 count n |
 *   10 24 n entries: producer id, first offset, last (marker) offset, int64s
 * A directory Kafka wrote may hold aborted transactions in .txnindex files
 * that Runnel does not read: there a snapshot without a companion is not
 * used (the open scans the whole log, as before snapshots).
 *
 * Like Kafka's, a snapshot keeps one batch per producer (its last). Kafka
 * ends every open, clean or not, knowing only that batch (after a recovery
 * it snapshots the recovered state and reloads it), so kb_producer_snapshot_restore
 * trims a replayed state the same way: after a restart a retry of the last
 * batch is a duplicate and of an older one OUT_OF_ORDER_SEQUENCE_NUMBER
 * (integration/test_producer_snapshot.py asserts both on both brokers).
 *
 * Invariants:
 *   1. A snapshot at offset X describes exactly the batches below X: it is
 *      written only when every batch below X has been recorded in the
 *      state and none at or above X has.
 *   2. A snapshot is used only when log start <= X <= log end; files above
 *      the log end (a truncated tail) are deleted at open, before any
 *      append could reach their offset again.
 *   3. Every length, the version and the CRC are checked before anything
 *      is applied: a bad (or unreadable) file is deleted and the next older
 *      one tried; with none left the state is rebuilt from the log start,
 *      like Kafka.
 *   4. Files are written atomically (temp, fdatasync, rename, dir fsync);
 *      the companion goes first, so a .snapshot is never newer than it.
 *   5. At most KB_PRODUCER_SNAPSHOT_KEEP snapshots stay; older ones, and those below
 *      the log start, are deleted whenever one is written, and those below
 *      the log start when retention deletes segments.
 *   6. The hooks write an offset's snapshot once: by invariant 2 a file
 *      already there holds the state at that offset (an idle partition's
 *      clean stop costs no fsync).
 *
 * Ownership: the caller owns the state and the log; buffers returned by
 * the encoders and decoders are malloc'ed and the caller frees them.
 * Threading: any one thread per log at a time (the thread that opens or
 *   appends to it); blocks on disk I/O, except kb_producer_snapshot_save_at_roll, whose
 *   writing and pruning run on the flush thread (only files, never the state).
 * Errors: KP_ERR__CORRUPT (a bad file), KP_ERR__NOENT (no such file),
 *   KP_ERR__NOMEM, storage's I/O codes.
 */
#ifndef KB_PRODUCER_SNAPSHOT_H
#define KB_PRODUCER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "kb_producer_state.h"
#include "kb_partition_txn.h"
#include "ks_flush.h"
#include "ks_log.h"

#define KB_PRODUCER_SNAPSHOT_VERSION 1
#define KB_PRODUCER_SNAPSHOT_HDR_SIZE 10    /* version, crc, entry count */
#define KB_PRODUCER_SNAPSHOT_ENTRY_SIZE 46
#define KB_PRODUCER_SNAPSHOT_ABORTED_SIZE 24
#define KB_PRODUCER_SNAPSHOT_KEEP 3
#define KB_PRODUCER_SNAPSHOT_FILE_MAX (64 * 1024 * 1024)
#define KB_PRODUCER_SNAPSHOT_NAME_MAX 40    /* "<20 digits>.snapshot" and NUL, with room */

/* One producer, as Kafka's ProducerSnapshot entry holds it. */
typedef struct kb_producer_snapshot_entry {
    int64_t producer_id;
    int16_t epoch;
    int32_t last_seq;
    int64_t last_offset;       /* of its last batch; -1 for none */
    int32_t offset_delta;      /* last offset - first offset of that batch */
    int64_t timestamp;         /* its last batch's or marker's */
    int32_t coordinator_epoch; /* of its last marker, -1 for none */
    int64_t txn_first_offset;  /* its open transaction's first offset, -1 for none */
} kb_producer_snapshot_entry;

/* What kb_producer_snapshot_restore did, for the log line and tests. */
typedef struct kb_producer_snapshot_report {
    int64_t snapshot_offset; /* the snapshot loaded, -1 when none */
    int64_t batches_scanned; /* batch headers replayed after it */
    int32_t producers;       /* producers the snapshot held */
    int32_t deleted;         /* bad or stray files removed */
} kb_producer_snapshot_report;

/* ---- encoding (no I/O) --------------------------------------------------- */

uint8_t *kb_producer_snapshot_encode(const kb_producer_snapshot_entry *v, int32_t n, size_t *len);
/* Checks version, CRC and that the count fills the buffer exactly. */
kp_err kb_producer_snapshot_decode(const uint8_t *buf, size_t len, kb_producer_snapshot_entry **out, int32_t *n);
uint8_t *kb_producer_snapshot_encode_aborted(const kb_aborted_txn *v, int32_t n, size_t *len);
kp_err kb_producer_snapshot_decode_aborted(const uint8_t *buf, size_t len, kb_aborted_txn **out,
                                 int32_t *n);

/* The state's producers as entries (*out NULL when n is 0). */
kp_err kb_producer_snapshot_collect(kb_producer_state *ps, kb_producer_snapshot_entry **out, int32_t *n);
/* Loads entries into an empty state: each producer's last batch, its last
 * timestamp and coordinator epoch, and its open transaction. */
kp_err kb_producer_snapshot_apply(kb_producer_state *ps, const kb_producer_snapshot_entry *v, int32_t n);

/* ---- files --------------------------------------------------------------- */

void kb_producer_snapshot_name(int64_t offset, char out[KB_PRODUCER_SNAPSHOT_NAME_MAX]);
/* Reads and decodes dir/<offset>.snapshot. */
kp_err kb_producer_snapshot_read(const ks_io *io, const char *dir, int64_t offset, kb_producer_snapshot_entry **out,
                       int32_t *n, kp_errctx *ctx);
/* Writes the state as the snapshot at offset in the log's directory, then
 * prunes (invariant 5). */
kp_err kb_producer_snapshot_write(const ks_io *io, ks_log *log, kb_producer_state *ps, int64_t offset,
                        kp_errctx *ctx);
/* Retention's part (invariant 5): drops the snapshots below the log start
 * (never usable again) and their companions. */
void kb_producer_snapshot_prune(const ks_io *io, ks_log *log);
/* kb_producer_snapshot_write for the clean-stop hook: a failure is logged and
 * changes nothing else (the next open scans further back). */
void kb_producer_snapshot_save(const ks_io *io, ks_log *log, kb_producer_state *ps, int64_t offset);
/* The roll hook: the state at offset is encoded now, on the caller's thread,
 * and written (then pruned) on f's thread in order with the log's flushes
 * (ks_flush_submit_task), so a roll never waits for an fsync; failures are
 * logged as above. The log stays open until the write is done (ks_flush.h). */
void kb_producer_snapshot_save_at_roll(const ks_io *io, ks_flush *f, ks_log *log,
                                       kb_producer_state *ps, int64_t offset);
/* The open path: rebuilds an empty state from the newest usable snapshot
 * and the batches after it (or from every batch), keeps each producer's
 * last batch only (see above), and logs what it did. */
kp_err kb_producer_snapshot_restore(const ks_io *io, ks_log *log, kb_producer_state *ps, kb_producer_snapshot_report *rep);

#endif
