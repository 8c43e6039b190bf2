/*
 * kb_pload: opening one partition's log: the step of a partition's life
 * cycle between "on disk" and "online", run on a helper thread at start-up.
 *
 * Job: open and recover the log (ks_log_open: indexes, a torn tail after an
 * unclean stop), then restore the partition's producer state
 * (kb_pidstate: idempotent producers and open transactions) from its
 * newest .snapshot and the batches past it (kb_pidsnap_restore). This is
 * the one place producer state is rebuilt from the disk.
 *
 * Invariants:
 *   1. kb_pload_run touches nothing but *ld and the partition's files: no
 *      broker state (its only log lines are kb_pidsnap's, and KB_LOG may
 *      be called from any thread), so any thread may run it.
 *   2. After kb_pload_run, either err is KP_ERR_NONE and log and pids are
 *      both set, or err says what failed and neither is.
 *
 * Ownership: the caller owns ld and, after a successful run, its log and
 * pids, until it adopts them (takes the pointers) or kb_pload_discard
 * frees them. ld->topic is the caller's (it outlives the run).
 * Threading: kb_pload_run on any thread, one at a time per ld; the result
 * is handed back to the loop by the caller (kb_work's queue).
 * Errors: storage's codes from the open or the scan, KP_ERR__NOMEM.
 */
#ifndef KB_PLOAD_H
#define KB_PLOAD_H

#include <stdint.h>

#include "kb_pidsnap.h"
#include "kb_pidstate.h"
#include "ks_log.h"
#include "ks_recover.h"

typedef struct kb_pload {
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
    kb_pidstate *pids;
    ks_recover_report rep;
    kb_pidsnap_report snap; /* the snapshot used, the batches replayed */
    kp_err err;
    const char *failed; /* the step that failed: "open log", "rebuild producer state" */
    kp_errctx ctx;
    int64_t took_ms;    /* wall time of the run */
} kb_pload;

void kb_pload_run(kb_pload *ld);
/* Frees a run's log (closed unflushed: nothing was appended) and pids. */
void kb_pload_discard(kb_pload *ld);

#endif
