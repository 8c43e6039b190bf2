/*
 * kb_replica: one partition's replication state in cluster mode: whether
 * this broker leads it (and at which leader epoch), its replicas and the
 * ISR the controller committed (the metadata image), each follower's log
 * end offset as its fetches tell it and when it last caught up, the high
 * watermark that follows from them, and the acks=-1 produces waiting for
 * the high watermark to pass their batches; and the ISR change this leader
 * proposed to the controller (AlterPartition) until the image commits it.
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
 *   4. The ISR used for the minimum check (kb_replica.isr, nisr) is only
 *      ever the image's. While a proposed change is pending the high
 *      watermark counts the maximal ISR: the committed ISR and the proposed
 *      one together (a shrink holds the HW until committed, an expansion
 *      counts the newcomer at once), as Kafka's leader does.
 *   5. A pending or refused ("stale") proposal ends when the image brings a
 *      new partition epoch or leader epoch, or when this broker stops
 *      leading; at most one proposal per partition exists.
 * Ownership: the partition (kb_partition.repl) owns its kb_replica; the
 * caller owns each kb_hw_waiter, linked here until called or cancelled.
 * Threading: the loop's thread only.
 * Errors: KP_ERR__NOMEM from kb_replica_assign and kb_replica_isr_pending.
 */
#ifndef KB_REPLICA_H
#define KB_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_topics.h"
#include "ks_log.h"

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
    int64_t caught_up_ms; /* last time it had all the leader had (Kafka's
                             lastCaughtUpTimeMs); now when this broker became
                             leader with it in the ISR, 0 otherwise */
    int64_t last_fetch_ms;
    int64_t last_fetch_leader_leo; /* the leader's log end at that fetch */
} kb_replica_follower;

/* Told when a follower's fetch may let the ISR grow (kb_replica_isr_propose
 * decides); it must not call back into this partition's waiters. */
typedef void kb_replica_isr_fn(void *arg, kb_topic *t, int32_t p);

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
    int32_t partition_epoch;
    kb_replica_isr_fn *on_isr; /* NULL: nobody proposes ISR changes */
    void *on_isr_arg;
} kb_replica_assignment;

typedef struct kb_replica {
    int32_t node_id;
    int32_t leader; /* -1: none */
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t *isr; /* committed: the image's */
    int32_t nisr;
    int64_t epoch_start_offset; /* the log end when this broker began leading */
    int32_t *pending_isr; /* proposed to the controller, not committed yet */
    int32_t npending;
    bool pending;
    bool stale; /* the controller refused: nothing proposed until the image moves */
    int64_t hold_until_ms; /* no new proposal before (a retriable refusal) */
    kb_replica_isr_fn *on_isr;
    void *on_isr_arg;
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

/* The ISR this leader should ask for, from the committed one: a follower
 * whose log end is not the leader's and that has not caught up for lag_ms
 * leaves; one outside whose log end reached the high watermark and the
 * start of this leader's epoch joins when eligible(arg, id) says it may
 * (an unfenced broker). out (cap >= nfollowers + 1) gets the leader first.
 * Returns the count, or 0 when no change is due (or this broker does not
 * lead, or a proposal is pending or refused). */
typedef bool kb_replica_eligible_fn(void *arg, int32_t id);
int32_t kb_replica_isr_propose(const kb_replica *r, const ks_log *log, int64_t now_ms,
                               int64_t lag_ms, kb_replica_eligible_fn *eligible, void *arg,
                               int32_t *out, int32_t cap);
/* Records isr as proposed (pending); KP_ERR__NOMEM. */
kp_err kb_replica_isr_pending(kb_replica *r, const int32_t *isr, int32_t n);
/* Drops the pending proposal: stale keeps any new one back until the image
 * moves, else none before hold_until_ms. Recomputes nothing. */
void kb_replica_isr_drop(kb_replica *r, bool stale, int64_t hold_until_ms);

/* Links w until the high watermark reaches w->offset; false (nothing
 * linked, fn not called) when it is there already. */
bool kb_replica_wait_hw(kb_topic *t, int32_t p, kb_hw_waiter *w);
void kb_replica_wait_cancel(kb_topic *t, int32_t p, kb_hw_waiter *w);

#endif
