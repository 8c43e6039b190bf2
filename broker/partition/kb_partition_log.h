/*
 * kb_partition_log: the broker's partition logs: opening them from the topic
 * registry, appending, durability for acks=-1, the flush policy, retention
 * and checkpoints.
 *
 * Job: connect kb_topics (what partitions exist) to storage's ks_log (the
 * bytes), with each topic's effective configuration, and run the periodic
 * log work on the event loop: flush policy ticks, retention steps (time and
 * size retention only when cleanup.policy lists delete), the log cleaner
 * for compacted topics (every log.cleaner.backoff.ms the dirtiest log above
 * its min.cleanable.dirty.ratio, or past max.compaction.lag.ms, gets one
 * ks_compact job), offset checkpoints (recovery point, log start, cleaner). At a clean stop every log is flushed and closed, the
 * checkpoints written and the clean-shutdown marker left.
 *
 * Invariants:
 *   1. A partition's ks_log is opened at most once, with the recovery point
 *      and log start offset from the checkpoints: every partition on disk
 *      at start-up on a helper thread (kb_partition_load; loading, then online on
 *      the loop, which owns the log from then on), internal topics' and new
 *      ones on first use. Periodic work (flush, retention, cleaner,
 *      checkpoints) visits every online log: once loaded, every partition.
 *   2. A durability callback fires exactly once: after an fdatasync that
 *      covers the offset (runnel.flush.acks.all=fsync), or at once
 *      (page-cache), or with an error.
 *   3. A log is never closed while a flush for it is in flight.
 *   4. At most one cleaning runs; a log is never closed or deleted while it
 *      is being cleaned (the cleaning is cancelled and joined first), and a
 *      cleaning commits only on the loop.
 *
 * Ownership: kb_partition_log owns every open ks_log (reachable through
 * kb_partition.log), the load jobs (kb_partition.load) and their helper
 * threads, the flush thread, the cleaner's helper thread and the unlink
 * threads.
 * Threading: loop thread only (a load job's kb_partition_load_run touches only the
 * job, which the loop takes back through kb_work; the flush thread is
 * inside ks_flush; a cleaning's work runs on a pthread that touches only
 * its job, polled for completion on the tick and joined there; unlinks
 * likewise).
 * Errors: storage's codes (KP_ERR__IO, __NOSPC, __CORRUPT, ...); callers map
 * them to the wire with kp_err_to_wire().
 */
#ifndef KB_PARTITION_LOG_H
#define KB_PARTITION_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_logscan.h"
#include "kb_topics.h"
#include "ks_log.h"

kp_err kb_partition_log_start(kb_broker *b, char *err, size_t errlen);
void kb_partition_log_stop(kb_broker *b);

/* The partition's log once online. A partition on disk at start-up is
 * loading until a helper thread opened it: NOT_LEADER_OR_FOLLOWER (what
 * Kafka answers for a partition not yet online; clients retry). One created
 * since start-up, or an internal one, is opened here on first use. */
kp_err kb_partition_log_get(kb_broker *b, kb_topic *t, int32_t partition, ks_log **out);

/* Whether the partition's log is still being opened (kb_partition_log_get would
 * answer NOT_LEADER_OR_FOLLOWER). */
bool kb_partition_log_loading(const kb_topic *t, int32_t partition);

/* Called once on the loop when every log loading at start-up is online
 * (the transaction coordinator then writes the markers it deferred). */
typedef void kb_loaded_hook(void *arg);
void kb_partition_log_set_loaded_hook(kb_broker *b, kb_loaded_hook *hook, void *arg);

/* Finds a topic's partition log by name: KP_ERR_NONE or the wire error
 * (UNKNOWN_TOPIC_OR_PARTITION, a storage error). */
int16_t kb_partition_log_lookup(kb_broker *b, kp_str topic, int32_t partition, kb_topic **t,
                       ks_log **log);

/* A client's leader epoch against ours: NONE, or FENCED_LEADER_EPOCH /
 * UNKNOWN_LEADER_EPOCH (client_epoch -1 means unchecked). */
int16_t kb_partition_log_check_epoch(int32_t client_epoch, int32_t ours);

/* The I/O interface the logs use (for readers such as kb_log_scan). */
const ks_io *kb_partition_log_io(const kb_broker *b);

/* Appends whole validated v2 batches; the buffer is rewritten in place. On
 * return the bytes are in the page cache and readable, but parked readers
 * have not been told: the caller first records what the batch means (its
 * producer's sequence, an open transaction, a marker), then calls
 * kb_partition_log_appended(), so no fetch sees the bytes before that state (a
 * read_committed fetch would read past a transaction not yet known open). */
kp_err kb_partition_log_append(kb_broker *b, kb_topic *t, int32_t partition, uint8_t *batches, size_t len,
                      ks_append_result *res);
/* A coordinator's record (key, value; value.len -1: a tombstone) appended
 * as one uncompressed batch of its own at timestamp ts, then
 * kb_partition_log_appended. */
kp_err kb_partition_log_append_record(kb_broker *b, kb_topic *t, int32_t partition, int64_t ts,
                                      kp_slice key, kp_slice value);
/* A coordinator's start-up replay: every partition of t in order, each
 * batch through cb (kb_log_scan_batches, batches above max_batch passed
 * as NULL); on a failure *failed is the partition that failed. */
kp_err kb_partition_log_replay(kb_broker *b, kb_topic *t, size_t max_batch,
                               kb_scan_batch_cb *cb, void *arg, int32_t *failed);
/* The same for coordinators that read only data records: each record of
 * an uncompressed, non-control batch goes to cb; a record cb refuses (any
 * error but KP_ERR__NOMEM, which stops the replay) is counted skipped, and
 * so is every record of a batch that cannot be read as records. */
typedef struct kb_replay_counts {
    int64_t records;
    int64_t skipped;
} kb_replay_counts;
kp_err kb_partition_log_replay_records(kb_broker *b, kb_topic *t, size_t max_batch,
                                       kb_record_cb *cb, void *arg, kb_replay_counts *counts,
                                       int32_t *failed);
/* One batch of such a replay, for a coordinator that loads one partition at
 * a time (kb_coord_load): a kb_scan_batch_cb whose arg is a kb_record_replay. */
typedef struct kb_record_replay {
    kb_record_cb *cb;
    void *arg;
    kb_replay_counts counts;
} kb_record_replay;
kp_err kb_partition_log_replay_batch(void *replay, const kp_batch_hdr *h, const uint8_t *batch,
                                     size_t len);
/* A follower's append of the leader's batches as they are (ks_log_append_replica);
 * the producers' state is rebuilt from them. */
kp_err kb_partition_log_append_replica(kb_broker *b, kb_topic *t, int32_t partition,
                                      const uint8_t *batches, size_t len, ks_append_result *res);
/* A follower's log diverged from its leader's: removes every offset >=
 * offset (segments, indexes, leader epochs, HW clamp) and rebuilds the
 * producers' state from what is left. */
kp_err kb_partition_log_truncate(kb_broker *b, kb_topic *t, int32_t partition, int64_t offset);
/* Moves the high watermark (kb_replica.h), then wakes the readers parked
 * on (t, partition) after an append (the hook). */
void kb_partition_log_appended(kb_broker *b, kb_topic *t, int32_t partition);

typedef void kb_durable_cb(void *arg, kp_err err);
/* Calls cb once the log is durable below offset, per the acks=-1 policy. */
kp_err kb_partition_log_when_durable(kb_broker *b, ks_log *log, int64_t offset, kb_durable_cb *cb,
                            void *arg);

/* Closes and deletes a topic's partition logs (before the registry forgets it). */
void kb_partition_log_drop_topic(kb_broker *b, kb_topic *t);

/* Re-applies a topic's effective configuration to its open logs. */
void kb_partition_log_config_changed(kb_broker *b, kb_topic *t);

/* Called by kb_partition_log_appended (long-poll fetches wake on it). */
typedef void kb_append_hook(void *arg, kb_topic *t, int32_t partition);
void kb_partition_log_set_append_hook(kb_broker *b, kb_append_hook *hook, void *arg);

#endif
