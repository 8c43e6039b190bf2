/*
 * kb_partition_load: opening one partition's log: the step of a partition's life
 * cycle between "on disk" and "online", run on a helper thread at start-up.
 *
 * Job: open and recover the log (ks_log_open: indexes, a torn tail after an
 * unclean stop), then restore the partition's producer state
 * (kb_producer_state: idempotent producers and open transactions) from its
 * newest .snapshot and the batches past it (kb_producer_snapshot_restore). This is
 * the one place producer state is rebuilt from the disk.
 *
 * Invariants:
 *   1. kb_partition_load_run touches nothing but *ld and the partition's files: no
 *      broker state (its only log lines are kb_producer_snapshot's, and KB_LOG may
 *      be called from any thread), so any thread may run it.
 *   2. After kb_partition_load_run, either err is KP_ERR_NONE and log and pids are
 *      both set, or err says what failed and neither is.
 *
 * Ownership: the caller owns ld and, after a successful run, its log and
 * pids, until it adopts them (takes the pointers) or kb_partition_load_discard
 * frees them. ld->topic is the caller's (it outlives the run).
 * Threading: kb_partition_load_run on any thread, one at a time per ld; the result
 * is handed back to the loop by the caller (kb_work's queue).
 * Errors: storage's codes from the open or the scan, KP_ERR__NOMEM.
 */
#ifndef KB_PARTITION_LOAD_H
#define KB_PARTITION_LOAD_H

#include <stdint.h>

#include "kb_producer_snapshot.h"
#include "kb_producer_state.h"
#include "ks_log.h"
#include "ks_recover.h"

typedef struct kb_partition_load {
    /* in */
    const ks_io *io;
    const char *dir;
    const char *topic;
    int32_t partition;
    ks_log_config lc;
    ks_log_open_args args;
    int64_t cleaner_offset; /* from the cleaner checkpoint, -1 if none */
    /* out */
    ks_log *log;
    kb_producer_state *pids;
    ks_recover_report rep;
    kb_producer_snapshot_report snap; /* the snapshot used, the batches replayed */
    kp_err err;
    const char *failed; /* the step that failed: "open log", "rebuild producer state" */
    kp_errctx ctx;
    int64_t took_ms;    /* wall time of the run */
} kb_partition_load;

void kb_partition_load_run(kb_partition_load *ld);
/* Frees a run's log (closed unflushed: nothing was appended) and pids. */
void kb_partition_load_discard(kb_partition_load *ld);

#endif
