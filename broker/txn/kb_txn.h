/*
 * kb_txn: the transaction coordinator's state machine: for each
 * transactional id its producer id and epoch, its transaction's state and
 * partitions, and Kafka's rules for moving between states.
 *
 * Job: answer InitProducerId (with a transactional id), AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn and the verification of transactional Produce
 * batches with Kafka's error codes; abort transactions that outlive their
 * timeout; rebuild everything from __transaction_state records. It does no
 * I/O itself: writing a state record, writing the markers and handing out
 * producer ids are the environment's callbacks (kb_txn_coord.h wires them to
 * the logs), so tests drive it with fakes.
 *
 * States (the TransactionStatus byte of the record, as Kafka numbers them):
 *   Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4,
 *   CompleteAbort 5, Dead 6, PrepareEpochFence 7 (never written here).
 *   Empty/Complete* --AddPartitions--> Ongoing --EndTxn--> Prepare* --markers
 *   written--> Complete*; Ongoing --InitProducerId or timeout--> epoch + 1,
 *   PrepareAbort --> CompleteAbort (the fenced producer's transaction).
 *
 * Invariants:
 *   1. Memory changes only after env.persist accepted the new state (the
 *      record is in the log): a failed write leaves the transaction as it
 *      was.
 *   2. Markers are written only in a Prepare* state; Complete* is written
 *      only after every marker was; a transaction left in Prepare* (a failed
 *      write, a restart) is completed by kb_txns_tick / kb_txns_load_done.
 *   3. A transaction's partitions are sorted by (topic, partition), unique,
 *      at most KB_TXN_MAX_PARTITIONS; at most KB_TXN_MAX_IDS transactional
 *      ids are held.
 *   4. Ongoing has start_ms >= 0; Empty and Complete* have no partitions.
 *
 * Ownership: the registry owns every kb_txn, its id and partitions; a
 * kb_txn pointer stays valid until the next call that may remove ids
 * (kb_txns_tick, kb_txns_load) or kb_txns_free. Partition arrays passed in
 * are borrowed for the call.
 * Threading: loop thread only.
 * Errors: Kafka codes: INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT,
 * INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (handlers map it per
 * version), INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS,
 * TRANSACTION_ABORTABLE (verification), COORDINATOR_NOT_AVAILABLE (a state
 * record could not be written); KP_ERR__NOMEM; KP_ERR__CORRUPT from the
 * record decoders.
 */
#ifndef KB_TXN_H
#define KB_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_msg.h"
#include "kp_types.h"

#define KB_TXN_MAX_IDS        100000
#define KB_TXN_MAX_PARTITIONS 100000
#define KB_TXN_KEY_VERSION    0
#define KB_TXN_VALUE_VERSION  1 /* flexible, with tagged fields (Kafka's TV1+) */

/* transaction.version: TV2 (KIP-890 part 2) bumps the producer epoch at
 * every transaction end and adds partitions implicitly (Produce v12+,
 * TxnOffsetCommit v5+); TV0/1 clients add them with AddPartitionsToTxn. */
#define KB_TXN_TV1 0
#define KB_TXN_TV2 2

typedef enum kb_txn_state {
    KB_TXN_EMPTY = 0,
    KB_TXN_ONGOING = 1,
    KB_TXN_PREPARE_COMMIT = 2,
    KB_TXN_PREPARE_ABORT = 3,
    KB_TXN_COMPLETE_COMMIT = 4,
    KB_TXN_COMPLETE_ABORT = 5,
    KB_TXN_DEAD = 6,
    KB_TXN_PREPARE_EPOCH_FENCE = 7,
} kb_txn_state;

typedef struct kb_txn_tp {
    const char *topic;
    int32_t partition;
} kb_txn_tp;

/* What a state record holds besides the id and the partitions. */
typedef struct kb_txn_meta {
    int64_t producer_id;
    int64_t last_producer_id;  /* before an id rotation, else -1 */
    int64_t next_producer_id;  /* TV2: the id a Prepare* hands over at its end, else -1 */
    int16_t producer_epoch;    /* -1 before the first InitProducerId completes */
    int16_t last_producer_epoch;
    int32_t timeout_ms;
    kb_txn_state state;
    int64_t start_ms;  /* wall clock; -1 when no transaction is open */
    int64_t update_ms; /* wall clock of the last change */
    int16_t client_tv; /* the transaction version the client last used */
} kb_txn_meta;

typedef struct kb_txn {
    char *id;
    kb_txn_meta m;
    kb_txn_tp *parts; /* topics owned (strdup) */
    int32_t nparts;
} kb_txn;

typedef struct kb_txn_env {
    /* Writes the record of id with meta m and partitions parts[0..n). */
    kp_err (*persist)(void *ctx, const char *id, const kb_txn_meta *m, const kb_txn_tp *parts,
                      int32_t n);
    /* Writes id's tombstone (the id expired). */
    kp_err (*tombstone)(void *ctx, const char *id);
    /* Writes a commit or abort marker on every partition of t. */
    kp_err (*markers)(void *ctx, const kb_txn *t, bool commit);
    kp_err (*new_pid)(void *ctx, int64_t *pid);
    int64_t (*wall_ms)(void *ctx);
    void *ctx;
    int32_t max_timeout_ms;    /* transaction.max.timeout.ms */
    int64_t id_expiration_ms;  /* transactional.id.expiration.ms */
} kb_txn_env;

typedef struct kb_txns kb_txns;

kb_txns *kb_txns_new(const kb_txn_env *env);
void kb_txns_free(kb_txns *ts);
kb_txn *kb_txns_find(const kb_txns *ts, kp_str id);
/* The transaction whose current producer id is pid (a linear scan). */
kb_txn *kb_txns_find_pid(const kb_txns *ts, int64_t pid);
size_t kb_txns_count(const kb_txns *ts);
/* Forgets t (its coordinator moved to another broker); nothing is written. */
void kb_txns_remove(kb_txns *ts, kb_txn *t);
/* Iterates: start with *cursor = 0; NULL after the last. */
kb_txn *kb_txns_next(const kb_txns *ts, size_t *cursor);

const char *kb_txn_state_name(kb_txn_state s);

/* InitProducerId with a transactional id. pid/epoch are the request's
 * (both -1 when absent, KIP-360 otherwise). On success *out_pid and
 * *out_epoch are what the producer uses now. */
kp_err kb_txn_init_producer(kb_txns *ts, kp_str id, int32_t timeout_ms, int64_t pid,
                            int16_t epoch, int64_t *out_pid, int16_t *out_epoch);
/* AddPartitionsToTxn / AddOffsetsToTxn: tps need not be sorted or unique. */
kp_err kb_txn_add_partitions(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch,
                             const kb_txn_tp *tps, int32_t n);
/* The same at transaction version tv: KB_TXN_TV2 for the implicit adds of
 * Produce v12+ and TxnOffsetCommit v5+ (the transaction then ends with an
 * epoch bump). */
kp_err kb_txn_add_partitions_tv(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch,
                                const kb_txn_tp *tps, int32_t n, int16_t tv);
/* Checks the producer only (pid, epoch, state), as the first step of
 * verification; then kb_txn_has_partition says whether tp was added. */
kp_err kb_txn_check_producer(const kb_txn *t, int64_t pid, int16_t epoch);
bool kb_txn_has_partition(const kb_txn *t, const char *topic, int32_t partition);
/* EndTxn from the client: commit or abort (transaction version 1). */
kp_err kb_txn_end(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch, bool commit);
/* EndTxn at transaction version tv (KB_TXN_TV2 from EndTxn v5): on success
 * *out_pid and *out_epoch are what the producer uses next. Under TV2 every
 * end bumps the epoch (the markers carry the bumped one); an exhausted
 * epoch hands over a new producer id at epoch 0; an abort with nothing
 * added still bumps; a retry (the epoch one below the bumped one) gets the
 * same answer again. */
kp_err kb_txn_end_tv(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch, bool commit, int16_t tv,
                     int64_t *out_pid, int16_t *out_epoch);

/* Periodic work at wall time now: aborts (with an epoch bump) every
 * Ongoing transaction past start + timeout, completes Prepare* ones, and
 * removes ids idle past id_expiration_ms. Returns transactions aborted. */
int32_t kb_txns_tick(kb_txns *ts);

/* ---- __transaction_state records ---------------------------------------- */

/* Applies one record read back at start-up (value NULL: tombstone); a is
 * scratch space. */
kp_err kb_txns_load(kb_txns *ts, kp_str id, const kp_transaction_log_value *value, kp_arena *a);
/* After loading: completes every transaction left in Prepare*. */
void kb_txns_load_done(kb_txns *ts);

void kb_txn_write_key(kp_writer *w, const char *id);
void kb_txn_write_value(kp_writer *w, const kb_txn_meta *m, const kb_txn_tp *parts, int32_t n,
                        kp_arena *a);
/* Decoders: strings borrow from the input and a. */
kp_err kb_txn_read_key(kp_slice key, kp_arena *a, kp_str *id);
kp_err kb_txn_read_value(kp_slice value, kp_arena *a, kp_transaction_log_value *out);

#endif
