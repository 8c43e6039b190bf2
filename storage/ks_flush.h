/*
 * ks_flush: group commit on a helper thread.
 *
 * Job: take flush requests from the event loop (one per acks=-1 produce, or
 * per flush-policy tick), and on a helper thread fdatasync every segment
 * they cover, once per round however many requests wait on it; report each
 * request's outcome through a queue the loop drains when an eventfd becomes
 * readable. Also the log.flush.interval.messages / .ms policy, and tasks:
 * other file work of one log (a producer snapshot at a segment roll) run on
 * the same thread, in order with the log's flushes.
 *
 * Invariants:
 *   1. A completion with err == KP_ERR_NONE means every byte of the log
 *      below its offset was fdatasync'ed after the request was submitted.
 *   2. One fdatasync per dirty segment per round serves every request
 *      queued before the round started (group commit).
 *   3. A failed fdatasync is reported as failure to its request and to
 *      every later request on that segment; it is never retried into a
 *      success (the log is poisoned, see ks_log.h invariant 5).
 *   4. Completions are applied to their log (recovery point, poisoning)
 *      inside ks_flush_drain, on the loop thread, before being returned.
 *   5. A task runs exactly once, after the syncs of its round, also when
 *      the flusher is being freed; it counts as pending on its log like a
 *      flush, and its completion carries cookie 0 and err KP_ERR_NONE.
 *
 * Ownership: ks_flush_new/ks_flush_free. A submitted request holds segment
 * references, not the log: the log must stay open until its completion was
 * drained (ks_log_flush_pending(log) == 0).
 * Threading: ks_flush_submit, ks_flush_drain and ks_flush_free on the loop
 * thread; the helper thread only syncs files.
 * Errors: KP_ERR__IO (thread or eventfd creation, poisoned log),
 * KP_ERR__NOMEM; completions carry KP_ERR__IO / KP_ERR__NOSPC.
 */
#ifndef KS_FLUSH_H
#define KS_FLUSH_H

#include <stddef.h>
#include <stdint.h>

#include "ks_log.h"

typedef struct ks_flush ks_flush;

typedef struct ks_flush_done {
    uint64_t cookie; /* the caller's tag from ks_flush_submit */
    ks_log *log;     /* the log the request was for */
    int64_t offset;  /* durable below this offset when err == NONE */
    kp_err err;      /* KP_ERR_NONE, or why it is not durable */
    kp_errctx errctx;
} ks_flush_done;

/* Starts the helper thread. */
kp_err ks_flush_new(ks_flush **out, kp_errctx *ctx);
/* Finishes queued work, stops the thread, applies and drops completions. */
void ks_flush_free(ks_flush *f, int64_t now_ms);

/* Readable when completions wait; the loop polls it (level-triggered). */
int ks_flush_eventfd(const ks_flush *f);

/* Queues a flush of everything log holds now. */
kp_err ks_flush_submit(ks_flush *f, ks_log *log, uint64_t cookie, kp_errctx *ctx);

/* Runs fn(arg) on the flush thread (invariant 5). fn owns arg and must
 * not touch the log's in-memory state (the loop owns it), only its files. */
typedef void ks_flush_task_fn(void *arg);
kp_err ks_flush_submit_task(ks_flush *f, ks_log *log, ks_flush_task_fn *fn, void *arg,
                            kp_errctx *ctx);

/* Applies and returns up to max completions; the eventfd stays readable
 * while more remain. */
size_t ks_flush_drain(ks_flush *f, int64_t now_ms, ks_flush_done *out, size_t max);

/* Rounds and fdatasync calls made so far (for tests and metrics). */
void ks_flush_stats(ks_flush *f, uint64_t *rounds, uint64_t *syncs);

/* flush.messages / flush.ms: true when the log should be flushed now. */
bool ks_flush_policy_due(const ks_log *log, int64_t now_ms);
/* When the time-based policy next falls due, INT64_MAX for never. */
int64_t ks_flush_policy_deadline(const ks_log *log);

#endif
