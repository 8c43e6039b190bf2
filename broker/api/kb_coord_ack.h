/*
 * kb_coord_ack: a coordinator's write answered as Kafka's coordinators
 * answer it in a cluster: the records go to the internal partition with
 * acks=-1 semantics, so the client hears "done" only once the ISR has them.
 *
 * Job: before a write, refuse it when the partition's committed ISR is
 * below min.insync.replicas; after it, park the request until the high
 * watermark passes the log end (the records just appended), at most the
 * caller's timeout (offsets.commit.timeout.ms for commits, the
 * transaction coordinator's request.timeout.ms for its records); errors become the coordinator's answers as
 * Kafka 4's group coordinator maps them: NOT_ENOUGH_REPLICAS,
 * NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT answer
 * COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER answers NOT_COORDINATOR
 * (Kafka's transaction coordinator maps its log appends the same way).
 *
 * Invariants:
 *   1. Outside cluster mode (no kb_replica) nothing waits: the caller
 *      answers at once, as a single node always did.
 *   2. A parked request is finished exactly once: by the high watermark,
 *      by the timeout, or not at all when its connection closed (on_cancel
 *      drops the wait).
 * Ownership: the wait state is the module's, freed before the request is
 * finished or when it is cancelled.
 * Threading: the loop's thread only.
 * Errors: as above; KP_ERR__NOMEM answers COORDINATOR_NOT_AVAILABLE.
 */
#ifndef KB_COORD_ACK_H
#define KB_COORD_ACK_H

#include <stdint.h>

#include "kb_req.h"
#include "kb_topics.h"

/* Fills the coordinator's error into the request's response (every entry
 * still without one). */
typedef void kb_coord_ack_fail_fn(kb_req *req, int16_t err);

/* COORDINATOR_NOT_AVAILABLE when partition p of t has a committed ISR below
 * its min.insync.replicas (Kafka refuses the append), else NONE. */
int16_t kb_coord_ack_check(kb_req *req, kb_topic *t, int32_t p);

/* After an append to partition p of t: KB_PARKED when the request waits for
 * the high watermark (fail is called with the error, if any, before it is
 * finished), NONE when it can be answered now. */
kp_err kb_coord_ack_wait(kb_req *req, kb_topic *t, int32_t p, int32_t timeout_ms,
                         kb_coord_ack_fail_fn *fail);
/* The same for a transaction coordinator's record of transactional id
 * (its partition of __transaction_state), timeout request.timeout.ms. */
kp_err kb_coord_ack_txn(kb_req *req, kp_str id, kb_coord_ack_fail_fn *fail);

#endif
