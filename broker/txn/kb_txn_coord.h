/*
 * kb_txn_coord: the transaction coordinator of this broker: the kb_txn state
 * machine wired to the event loop and the logs, its persistence in
 * __transaction_state, the transaction markers, and the producer id
 * allocator.
 *
 * Job: write each state change of a transactional id as a record (Kafka's
 * TransactionLogKey/Value, partition = Java hashCode of the id modulo
 * transaction.state.log.num.partitions) before acting on it; write commit
 * and abort markers (control batches) straight to every partition of an
 * ending transaction, telling each partition's transaction index
 * (kb_partition_txn.h) and, for __consumer_offsets, the group coordinator; abort
 * timed-out transactions every
 * transaction.abort.timed.out.transaction.cleanup.interval.ms; rebuild the
 * state from __transaction_state at start-up (in cluster mode: a
 * partition's ids when this broker becomes its leader, dropped when it
 * stops being it, kb_txn_coord_parts; markers only once the Prepare*
 * record is replicated); hand out producer ids from
 * blocks reserved durably in the log dir.
 *
 * Invariants:
 *   1. A marker is appended only after the Prepare* record that announces
 *      it (kb_txn.h invariant 2); a partition's kb_partition_txn learns of a marker
 *      only after the marker is in its log.
 *   2. __transaction_state exists once any transactional id was written, with
 *      transaction.state.log.num.partitions partitions, compacted.
 *   3. A producer id is never handed out twice, across restarts.
 *
 * Ownership: the broker owns the coordinator (b->txn_coord); kb_txn_coord_stop
 * frees it.
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM; storage errors (the coordinator answers
 * COORDINATOR_NOT_AVAILABLE); start-up returns KP_ERR__IO with a message
 * when __transaction_state cannot be read.
 */
#ifndef KB_TXN_COORD_H
#define KB_TXN_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_topics.h"
#include "kb_txn.h"
#include "ks_log.h"

#define KB_TXN_COORD_STATE_TOPIC "__transaction_state"

kp_err kb_txn_coord_start(kb_broker *b, char *err, size_t errlen);
void kb_txn_coord_stop(kb_broker *b);

kb_txns *kb_txn_coord_txns(kb_broker *b);

/* Cluster mode: the partitions of __transaction_state this broker leads,
 * as the image moves them (kb_coord_load.h: a partition's transactional ids
 * load, in bounded steps, when it is elected here, and what they left in
 * Prepare* completes; they and their marker jobs are dropped when it
 * leaves); NULL on a single node, where every id is loaded at start-up. */
struct kb_coord_parts *kb_txn_coord_parts(kb_broker *b);

/* The next producer id (idempotent and transactional producers alike). */
kp_err kb_txn_coord_next_pid(kb_broker *b, int64_t *pid);

/* __transaction_state, created on first use. */
kp_err kb_txn_coord_state_topic(kb_broker *b, kb_topic **out);

/* Verifies a transactional batch for partition (t, partition) before it is
 * appended: the wire error Kafka 4 answers to a Produce of this version
 * (NONE when the producer's ongoing transaction holds the partition; from
 * Produce v12, transactions v2, the partition is added to it). The
 * transactional id may be null (then the producer id finds it). */
int16_t kb_txn_coord_verify(kb_broker *b, kp_str txn_id, int64_t pid, int16_t epoch,
                         const kb_topic *t, int32_t partition, int16_t produce_version);

/* After a transactional batch of pid was appended at base_offset (the
 * partition's transaction index opens the producer's transaction). */
void kb_txn_coord_appended(kb_broker *b, kb_topic *t, int32_t partition, int64_t pid,
                        int64_t base_offset);

/* WriteTxnMarkers: writes the commit or abort marker of (pid, epoch) to
 * partition p of t (kafka-transactions abort ends a hanging transaction
 * so); the wire error: NOT_LEADER_OR_FOLLOWER and the like from the log,
 * INVALID_PRODUCER_EPOCH for an epoch below the producer's,
 * TRANSACTION_COORDINATOR_FENCED for a coordinator epoch below its last
 * marker's. p must be a partition of t. */
int16_t kb_txn_coord_write_marker(kb_broker *b, kb_topic *t, int32_t p, int64_t pid,
                                  int16_t epoch, bool commit, int32_t coordinator_epoch);

/* The partition's last stable offset (its high watermark when no
 * transaction is open); log must be the partition's open log. */
int64_t kb_txn_coord_lso(kb_broker *b, kb_topic *t, int32_t partition, ks_log *log);

#endif
