/*
 * kb_work: a small pool of helper threads for work that would stall the
 * event loop: CPU-heavy work (decompressing and validating produced batches,
 * the broker's pool, b->work) and blocking I/O (opening and recovering the
 * partition logs at start-up, a pool of its own in kb_partition_log).
 *
 * Job: run fn(arg) on a helper thread, then done(arg) back on the loop
 * thread, reported through an eventfd the loop polls. Also blocking disk
 * work in bounded steps (partition directories, kb_partition_dirs).
 *
 * Invariants:
 *   1. done(arg) runs exactly once per submitted job, on the loop thread,
 *      after fn(arg) returned; at stop, queued jobs still run both.
 *   2. fn never touches broker state: it works only on what arg owns.
 *
 * Ownership: the caller owns arg until done(arg) returns.
 * Threading: kb_work_submit / start / stop on the loop thread only.
 * Errors: KP_ERR__NOMEM, KP_ERR__IO (thread or eventfd creation),
 * KP_ERR__CLOSED from kb_work_submit once kb_work_stop began (a done()
 * that queues a next step learns so and stops).
 */
#ifndef KB_WORK_H
#define KB_WORK_H

#include "kb_context.h"

typedef void kb_work_fn(void *arg);

/* A pool of threads (>= 1) whose done callbacks run on loop. */
kp_err kb_work_new(kb_loop *loop, int threads, kb_work **out);
/* Joins the threads after the queued jobs ran (fn and done both). */
void kb_work_free(kb_work *w, kb_loop *loop);
kp_err kb_work_post(kb_work *w, kb_work_fn *fn, kb_work_fn *done, void *arg);

/* The broker's pool (b->work). */
kp_err kb_work_start(kb_broker *b, int threads);
void kb_work_stop(kb_broker *b);
kp_err kb_work_submit(kb_broker *b, kb_work_fn *fn, kb_work_fn *done, void *arg);

#endif
