/*
 * ks_compact: the log cleaner for compacted topics (cleanup.policy contains
 * "compact"): keep the latest record per key, drop tombstones once they are
 * old enough, in bounded steps that can run on a helper thread.
 *
 * Job: measure how dirty a log is; plan one cleaning on the log's owning
 * thread (references to the sealed segments below the first uncleanable
 * offset, a snapshot of their sizes); work on any thread: build a key ->
 * latest offset map over the dirty range [first dirty, first uncleanable)
 * with a fixed cap (what does not fit waits for the next round), then
 * rewrite each group of consecutive old segments into one new segment that
 * keeps only the records whose offset is the latest for their key; commit
 * on the owning thread: swap the new segments in, unless the log changed
 * under the job (truncation, or retention removed the segments).
 *
 * Rules (Kafka's log cleaner, in our words):
 *   - Only sealed segments are cleaned, and only those whose records are all
 *     older than min.compaction.lag.ms (the first segment holding a younger
 *     record, the active segment, the high watermark and the last stable
 *     offset bound the range: no record of an open transaction is cleaned,
 *     nor anything after it).
 *   - The data batches of aborted transactions are dropped and never enter
 *     the map, so an aborted record never supersedes a committed one. The
 *     caller names them (ks_compact_txns): storage does not track
 *     transactions. Their abort markers stay.
 *   - Offsets are kept: a rewritten batch keeps its base offset, its last
 *     offset delta, every kept record's offset delta (gaps are fine), its
 *     attributes, producer id/epoch, base sequence, leader epoch and, for
 *     LogAppendTime, its max timestamp; it is recompressed with its own
 *     codec. A batch whose records are all kept is copied byte for byte.
 *   - A batch left with no record is dropped (Kafka keeps the last batch of
 *     each producer for idempotence; we do not yet: a producer whose last
 *     batch is cleaned away restarts its sequence state on the next
 *     InitProducerId or broker restart).
 *   - Control batches and batches that cannot be decoded are kept as-is and
 *     never enter the map; records with a null key are always kept.
 *   - A tombstone (null value) that is the latest for its key is dropped
 *     once delete.retention.ms has passed since its segment was last
 *     modified (the last append to it; a cleaned segment inherits its
 *     group's time in memory, while after a restart the file time, the
 *     cleaning time, counts: tombstones then live up to one period longer).
 *
 * On-disk protocol for one group of old segments B = b0 < b1 < ... < bk,
 * replaced by one segment named B (suffixes appended to .log, .index and
 * .timeindex; the .log is always renamed last):
 *
 *   step  where      files
 *   ----- ---------- ------------------------------------------------------
 *   work  any thread <B>.*.cleaned written, fdatasync'ed
 *   1     commit     <B>.*.cleaned  -> <B>.*.swap
 *   2     commit     <bi>.*         -> <bi>.*.deleted, for every old bi
 *   3     commit     <B>.*.swap     -> <B>.*
 *   4     helper     <bi>.*.deleted unlinked (ks_retention_finish)
 *
 * Recovery at log open (ks_compact_recover_files), for any prefix of these
 * steps left by a crash: every *.cleaned and *.deleted file is removed, so
 * are index files with .swap; a <B>.log.swap (complete: it was fdatasync'ed
 * before step 1) ends at its last batch L: every plain segment with a base
 * in [B, L] is removed and the swap is renamed <B>.log, its indexes rebuilt.
 * This relies on the file system persisting renames of one directory in
 * order (ext4 and xfs journal them so); the directory is fsynced by the
 * log's next flush.
 *
 * Invariants:
 *   1. The active segment and records at or past the first uncleanable
 *      offset are never rewritten.
 *   2. For every key, the record at its latest offset below the job's end
 *      offset outside aborted transactions is kept (tombstones: until
 *      delete.retention.ms, see above); every kept record keeps its offset,
 *      key, value, headers and timestamp.
 *   3. A commit either swaps a group in whole or leaves the log unchanged
 *      for that group; readers holding an old segment keep reading it.
 *   4. The offset map holds at most map_entries keys; memory per job is the
 *      map plus one batch (and its decompressed records) plus one output
 *      buffer. The map is filled in whole records, so every round makes
 *      progress: the next round starts at the job's end offset.
 *   5. Each ks_compact_step reads at most about KS_COMPACT_STEP_BYTES of
 *      batches (one batch at least).
 *
 * Ownership: ks_compact_plan returns a job holding references to the old
 * segments, its own copy of the aborted transactions it needs, and, after
 * work, references to the new ones; ks_compact_commit moves the
 * new segments into the log and the replaced (or discarded) ones into
 * res->garbage, which the caller finishes with ks_retention_finish (any
 * thread: it unlinks and unreferences). ks_compact_job_free releases what
 * the job still holds, removing uncommitted .cleaned files.
 *
 * Threading: measure, plan and commit on the log's owning thread; step,
 * work and job_free on any one thread at a time (the job is not shared
 * while it works: hand it over with a join or another synchronising
 * operation); ks_compact_cancel from any thread at any time.
 *
 * Errors: ks_io errors (KP_ERR__IO, __NOSPC, __NOENT), KP_ERR__CORRUPT (a
 * batch in a segment failed its CRC or bounds: the log changed under the
 * job or is damaged), KP_ERR__NOMEM, KP_ERR__INVAL (config), KP_ERR__AGAIN
 * (commit of a cancelled or unfinished job: nothing was changed).
 */
#ifndef KS_COMPACT_H
#define KS_COMPACT_H

#include <stdbool.h>
#include <stdint.h>

#include "ks_log.h"
#include "ks_retention.h"

#define KS_COMPACT_STEP_BYTES ((int64_t)8 << 20)
/* The cleaner's progress file in the log dir (Kafka's name and format). */
#define KS_CKPT_CLEANER "cleaner-offset-checkpoint"

typedef struct ks_compact_config {
    double min_cleanable_ratio;  /* min.cleanable.dirty.ratio */
    int64_t delete_retention_ms; /* delete.retention.ms */
    int64_t min_lag_ms;          /* min.compaction.lag.ms */
    int64_t max_lag_ms;          /* max.compaction.lag.ms */
    int64_t map_entries;         /* keys the offset map holds per round, >= 1 */
} ks_compact_config;

/* One aborted transaction of the partition: producer_id's data batches
 * with base offsets in [first_offset, last_offset] (the abort marker). */
typedef struct ks_compact_aborted {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset;
} ks_compact_aborted;

/* The partition's transactions as the cleaner must respect them. Passing
 * NULL for it means no transaction: the high watermark bounds the range. */
typedef struct ks_compact_txns {
    int64_t stable_offset;               /* last stable offset */
    const ks_compact_aborted *aborted;   /* borrowed for the call; any order */
    int32_t naborted;
} ks_compact_txns;

/* How dirty a log is now. */
typedef struct ks_compact_stats {
    int64_t first_dirty;       /* first offset not cleaned yet */
    int64_t first_uncleanable; /* end of the cleanable range */
    int64_t clean_bytes;       /* segments wholly below first_dirty */
    int64_t dirty_bytes;       /* segments in [first_dirty, first_uncleanable) */
    double ratio;              /* dirty / (clean + dirty), 0 when empty */
    bool forced;               /* max.compaction.lag.ms passed for dirty data */
    bool cleanable;            /* dirty_bytes > 0 and (forced or ratio > min) */
} ks_compact_stats;

/* What a commit did, for the caller to log and finish. */
typedef struct ks_compact_result {
    int32_t groups;             /* groups swapped in */
    int32_t groups_discarded;   /* groups dropped because the log changed */
    int32_t segments_before;    /* old segments replaced */
    int64_t bytes_before;       /* their bytes */
    int64_t bytes_after;        /* bytes of the new segments */
    int64_t records_read;       /* records looked at while rewriting */
    int64_t records_removed;    /* superseded records dropped */
    int64_t aborted_removed;    /* records of aborted transactions dropped */
    int64_t tombstones_removed; /* expired tombstones dropped */
    int64_t first_dirty;        /* the job's dirty range ... */
    int64_t end_offset;         /* ... and where the map stopped */
    ks_retention_job garbage;   /* segments to unlink: ks_retention_finish */
} ks_compact_result;

typedef struct ks_compact_job ks_compact_job;

/* Kafka's defaults (ratio 0.5, delete.retention.ms 1 day, no lags) and a
 * map of 1 Mi keys. */
void ks_compact_config_default(ks_compact_config *cfg);

/* Measures log (owning thread). May load sealed segments' indexes when
 * min_lag_ms > 0 (their largest timestamps). txns may be NULL. */
kp_err ks_compact_measure(ks_log *log, const ks_compact_config *cfg, const ks_compact_txns *txns,
                          int64_t now_ms, ks_compact_stats *st, kp_errctx *ctx);

/* Plans one cleaning of log at now_ms (owning thread); *out is NULL when
 * nothing is cleanable (the ratio is not checked: ks_compact_measure).
 * txns may be NULL; the job copies the aborted transactions it needs. */
kp_err ks_compact_plan(ks_log *log, const ks_compact_config *cfg, const ks_compact_txns *txns,
                       int64_t now_ms, ks_compact_job **out, kp_errctx *ctx);

/* One bounded step of work (invariant 5); *done once the job is complete.
 * After an error the job is failed: further steps return the same error. */
kp_err ks_compact_step(ks_compact_job *job, bool *done, kp_errctx *ctx);

/* Steps until done, failed or cancelled (KP_ERR__AGAIN). */
kp_err ks_compact_work(ks_compact_job *job, kp_errctx *ctx);

/* Asks a working job to stop at its next batch (any thread). */
void ks_compact_cancel(ks_compact_job *job);

/* Swaps the job's new segments into log (owning thread) and advances the
 * log's cleaner offset to the job's end offset. Fills res (its garbage
 * always, even on error). */
kp_err ks_compact_commit(ks_log *log, ks_compact_job *job, ks_compact_result *res,
                         kp_errctx *ctx);

void ks_compact_job_free(ks_compact_job *job);

/* Finishes or discards what a cleaning left in a partition directory (see
 * the recovery rules above); called by ks_log_open before loading. */
kp_err ks_compact_recover_files(const ks_io *io, const char *dir, kp_errctx *ctx);

#endif
