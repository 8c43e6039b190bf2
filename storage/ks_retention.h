/*
 * ks_retention: delete whole old segments by time, by size and below the
 * log start offset, in bounded steps.
 *
 * Job: decide which of a log's oldest segments are past retention.ms (by
 * their largest timestamp, or file time when they hold none), beyond
 * retention.bytes, or wholly below the log start offset (DeleteRecords);
 * detach at most a bounded number per step on the owning thread, and remove
 * their files later on any thread.
 *
 * Invariants:
 *   1. The active segment is never deleted.
 *   2. Deleted segments are always a prefix of the log (the oldest ones).
 *   3. A step detaches at most max_segments segments; no step loops over
 *      files, so the event loop stays responsive.
 *   4. A detached segment's files are unlinked by ks_retention_finish, but
 *      its descriptor lives until the last reader releases it.
 *
 * Ownership: ks_retention_job owns references to the detached segments
 * until ks_retention_finish (which also frees the job's array).
 * Threading: ks_retention_plan on the log's owning thread (it takes the
 * clock as a parameter, so tests pass a fake one); ks_retention_finish on
 * any thread, typically a helper.
 * Errors: ks_io errors from unlink (the segments are released anyway),
 * KP_ERR__NOMEM.
 */
#ifndef KS_RETENTION_H
#define KS_RETENTION_H

#include <stdint.h>

#include "ks_log.h"

typedef struct ks_retention_job {
    ks_segment **segs; /* detached segments, references owned */
    int32_t n;
    int64_t bytes;     /* bytes they held */
} ks_retention_job;

/* How many of the oldest segments are deletable now (at most max). */
kp_err ks_retention_eligible(ks_log *log, int64_t now_ms, int32_t max, int32_t *count,
                             kp_errctx *ctx);

/* A hold on retention for a reader that has not read everything yet (the
 * broker's retention guard): keep_from is the first offset it still needs. */
typedef struct ks_retention_hold {
    int64_t keep_from; /* segments wholly below it (or the log start) may go */
    int64_t max_ms;    /* a held segment goes once past retention.ms + max_ms; -1 never */
    int64_t max_bytes; /* held segments go, oldest first, while they hold more; -1 no bound */
} ks_retention_hold;

/* Of the count oldest segments that are deletable now, how many may go
 * under the hold (a prefix: the first segment the hold keeps stops it). */
kp_err ks_retention_apply_hold(ks_log *log, int64_t now_ms, int32_t count,
                               const ks_retention_hold *h, int32_t *allowed, kp_errctx *ctx);

/* Detaches up to max deletable segments from the log into job. */
kp_err ks_retention_plan(ks_log *log, int64_t now_ms, int32_t max, ks_retention_job *job,
                         kp_errctx *ctx);

/* Unlinks the detached segments' files and drops the references. */
kp_err ks_retention_finish(ks_retention_job *job, kp_errctx *ctx);

#endif
