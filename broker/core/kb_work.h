/*
 * kb_work: a small pool of helper threads for CPU-heavy work (decompressing
 * and validating produced batches), so the event loop never stalls on it.
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

kp_err kb_work_start(kb_broker *b, int threads);
void kb_work_stop(kb_broker *b);
kp_err kb_work_submit(kb_broker *b, kb_work_fn *fn, kb_work_fn *done, void *arg);

#endif
