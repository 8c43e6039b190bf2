/*
 * kb_producer_state: idempotent-producer state of one partition: for each
 * producer id, its epoch and the sequence ranges of its last five batches.
 *
 * Job: decide, before an append, whether a batch from an idempotent
 * producer is new (append it), a retried duplicate (answer with the offsets
 * it got the first time, append nothing), out of order, or from a fenced
 * epoch; record appended batches; rebuild the state from the log after a
 * restart.
 *
 * Invariants:
 *   1. For each producer, the cached batches are the last (at most) five it
 *      appended in its current epoch, in log order.
 *   2. A batch whose (first, last) sequence equals a cached one is a
 *      duplicate; otherwise its first sequence must follow the last cached
 *      one (wrapping at INT32_MAX), or be 0 for a new producer or epoch.
 *
 * Ownership: the partition owns its kb_producer_state (kb_partition.pids), which
 * owns the partition's transaction index (kb_partition_txn.h; kb_producer_state_txns).
 * Threading: loop thread only.
 * Errors: KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, KP_ERR_INVALID_PRODUCER_EPOCH,
 * KP_ERR_DUPLICATE_SEQUENCE_NUMBER (a duplicate: answer success with the
 * cached offsets), KP_ERR__NOMEM, storage errors from the rebuild scan.
 */
#ifndef KB_PRODUCER_STATE_H
#define KB_PRODUCER_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "kp_err.h"
#include "ks_log.h"

#define KB_PID_CACHED_BATCHES 5

typedef struct kb_producer_state kb_producer_state;
struct kb_partition_txn;

typedef struct kb_pid_batch {
    int32_t first_seq;
    int32_t last_seq;
    int64_t first_offset;
    int64_t last_offset;
    int64_t max_timestamp; /* as stored: the append time under LogAppendTime */
} kb_pid_batch;

/* What DescribeProducers reports of one producer. */
typedef struct kb_pid_info {
    int64_t producer_id;
    int16_t epoch;
    int32_t last_seq;          /* of its last batch */
    int64_t last_timestamp;    /* its last batch's or transaction marker's, -1 if none */
    int32_t coordinator_epoch; /* of its last transaction marker, -1 if none */
} kb_pid_info;

kb_producer_state *kb_producer_state_new(void);
void kb_producer_state_free(kb_producer_state *ps);

/* Checks a batch before append; on a duplicate fills *dup. */
kp_err kb_producer_state_check(const kb_producer_state *ps, int64_t producer_id, int16_t epoch,
                         int32_t first_seq, int32_t last_seq, kb_pid_batch *dup);

/* Records an appended batch (epoch changes reset the producer's cache). */
kp_err kb_producer_state_record(kb_producer_state *ps, int64_t producer_id, int16_t epoch,
                          const kb_pid_batch *batch);

/* Records an appended transaction marker of a tracked producer: its
 * timestamp and coordinator epoch become the producer's last, as in Kafka. */
void kb_producer_state_on_marker(kb_producer_state *ps, int64_t producer_id, int64_t timestamp,
                           int32_t coordinator_epoch);

/* The partition's open and aborted transactions (kb_partition_txn.h), owned here. */
struct kb_partition_txn *kb_producer_state_txns(kb_producer_state *ps);

/* Replays every idempotent batch of the log, and every transactional batch
 * and marker into the transaction index (after open). */
kp_err kb_producer_state_rebuild(kb_producer_state *ps, const ks_io *io, ks_log *log);
/* The same from the batch holding offset from (a producer snapshot's offset,
 * kb_producer_snapshot.h) to the log end; *batches (optional) gets how many batch
 * headers were read. */
kp_err kb_producer_state_rebuild_from(kb_producer_state *ps, const ks_io *io, ks_log *log, int64_t from,
                                int64_t *batches);

/* Forgets every cached batch but each producer's last: what a restart
 * leaves Kafka knowing (it reloads its state from a snapshot, which keeps
 * one batch per producer; see kb_producer_snapshot.h). */
void kb_producer_state_keep_last(kb_producer_state *ps);

/* Producers tracked (for tests and DescribeProducers). */
int32_t kb_producer_state_count(const kb_producer_state *ps);
/* The i-th tracked producer (0 <= i < count); false when it has no batch
 * cached (its epoch changed since). */
bool kb_producer_state_at(const kb_producer_state *ps, int32_t i, kb_pid_info *out);
/* The i-th tracked producer's last cached batch; false when it has none. */
bool kb_producer_state_last_batch(const kb_producer_state *ps, int32_t i, kb_pid_batch *out);

#endif
