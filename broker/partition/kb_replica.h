/*
 * kb_replica: one partition's replication state in cluster mode: whether
 * this broker leads it (and at which leader epoch), its replicas and the
 * ISR the controller committed (the metadata image), each follower's log
 * end offset as its fetches tell it and when it last caught up, the high
 * watermark that follows from them, and the acks=-1 produces waiting for
 * the high watermark to pass their batches.
 *
 * Invariants:
 *   1. The leader's high watermark is the smallest log end offset over the
 *      ISR (its own included; a follower not heard from since this broker
 *      became leader counts as unknown and holds it), and never moves
 *      backwards. A follower's is min(the leader's, its own log end).
 *   2. A waiter is called exactly once: when the high watermark reaches its
 *      offset (err 0), when this broker stops leading the partition
 *      (NOT_LEADER_OR_FOLLOWER) or when the state is freed; never after
 *      kb_replica_wait_cancel.
 *   3. Outside cluster mode a partition has no kb_replica (NULL) and its
 *      log moves the high watermark itself.
 * Ownership: the partition (kb_partition.repl) owns its kb_replica; the
 * caller owns each kb_hw_waiter, linked here until called or cancelled.
 * Threading: the loop's thread only.
 * Errors: KP_ERR__NOMEM from kb_replica_assign.
 */
#ifndef KB_REPLICA_H
#define KB_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_topics.h"

typedef struct kb_hw_waiter kb_hw_waiter;
typedef void kb_hw_fn(kb_hw_waiter *w, int16_t err);

struct kb_hw_waiter {
    int64_t offset; /* called once the high watermark is at or past it */
    kb_hw_fn *fn;
    void *arg;
    kb_hw_waiter *next, *prev; /* owned by the list */
    bool linked;
};

typedef struct kb_replica_follower {
    int32_t id;
    int64_t leo;          /* -1: not heard from since this broker leads */
    int64_t caught_up_ms; /* last fetch at or past the leader's log end */
} kb_replica_follower;

/* What the image says of the partition. */
/* A partition's replicas and ISR as the controller committed them; an
 * empty list may come with a NULL pointer and a count of 0 or -1. */
typedef struct kb_replica_assignment {
    int32_t leader;
    int32_t leader_epoch;
    const int32_t *replicas;
    int32_t nreplicas;
    const int32_t *isr;
    int32_t nisr;
} kb_replica_assignment;

typedef struct kb_replica {
    int32_t node_id;
    int32_t leader; /* -1: none */
    int32_t leader_epoch;
    int32_t *isr;
    int32_t nisr;
    kb_replica_follower *followers; /* the replicas but this broker */
    int32_t nfollowers;
    kb_hw_waiter *waiters;
} kb_replica;

/* Applies the image's view of (t, p): creates the state on first use. */
kp_err kb_replica_assign(kb_broker *b, kb_topic *t, int32_t p, const kb_replica_assignment *a);
void kb_replica_free(kb_replica *r);

bool kb_replica_is_leader(const kb_replica *r);
bool kb_replica_in_set(const kb_replica *r, int32_t id);
/* A replica fetch from follower id at offset (its log end); true when it
 * moved the high watermark. */
bool kb_replica_follower_fetched(kb_broker *b, kb_topic *t, int32_t p, int32_t id,
                                 int64_t offset, int64_t now_ms);
/* Recomputes the leader's high watermark (after an append); true when it
 * moved. Without a kb_replica the high watermark is the log end. */
bool kb_replica_advance_hw(kb_broker *b, kb_topic *t, int32_t p);
/* The leader's epoch starts in its epoch cache at its log end (Kafka's
 * makeLeader), when this broker leads (t, p) and its log is open. */
void kb_replica_leader_epoch_start(kb_topic *t, int32_t p);
/* A follower takes the leader's high watermark, capped by its log end. */
void kb_replica_follow_hw(kb_topic *t, int32_t p, int64_t leader_hw);

/* Links w until the high watermark reaches w->offset; false (nothing
 * linked, fn not called) when it is there already. */
bool kb_replica_wait_hw(kb_topic *t, int32_t p, kb_hw_waiter *w);
void kb_replica_wait_cancel(kb_topic *t, int32_t p, kb_hw_waiter *w);

#endif
