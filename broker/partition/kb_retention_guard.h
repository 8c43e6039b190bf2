/*
 * kb_retention_guard: retention that knows who has not read yet
 * (runnel.retention.guard=off|warn|hold).
 *
 * Job: before retention deletes a partition's oldest segments, ask the
 * readers' hook (registered by group/, which sits above this room: the
 * committed offsets of every group for that partition) whether a group has
 * not read records those segments hold. warn: delete, and log one line per
 * such group naming the group, topic, partition and how many records it
 * loses, counting them. hold: keep the segments the slowest group still
 * needs while they are at most runnel.retention.guard.max.ms past the
 * topic's retention.ms and hold at most runnel.retention.guard.max.bytes;
 * past a bound they go (with the warning). off: Kafka's retention, the hook
 * is not asked.
 *
 * Invariants:
 *   1. The guard only ever lowers how many segments a step deletes; what is
 *      wholly below every group's committed offset (or the log start, as
 *      DeleteRecords set it) is deleted as without the guard.
 *   2. Without a hook, or with off, the answer is retention's own.
 *   3. The counters only grow.
 *
 * Ownership: kb_partition_log owns the guard (kb_partition_log_guard); the
 * hook's group names are borrowed for the duration of one call.
 * Threading: loop thread only.
 * Errors: storage's codes from reading segment metadata (the guard then
 * lets retention delete nothing this step).
 */
#ifndef KB_RETENTION_GUARD_H
#define KB_RETENTION_GUARD_H

#include <stdint.h>

#include "kb_config.h"
#include "kb_context.h"
#include "ks_log.h"

typedef struct kb_retention_guard kb_retention_guard;

/* Called once for each group with a committed offset for the partition. */
typedef void kb_guard_reader_cb(void *cb_arg, const char *group, int64_t committed);
/* The readers' hook: calls cb for each reader of (topic, partition). */
typedef void kb_guard_readers_fn(void *arg, const char *topic, int32_t partition,
                                 kb_guard_reader_cb *cb, void *cb_arg);

typedef struct kb_retention_guard_stats {
    uint64_t warnings;     /* lines logged: a group lost records it had not read */
    uint64_t records_lost; /* records those groups lost, summed */
    uint64_t holds;        /* retention steps that kept segments back (hold) */
} kb_retention_guard_stats;

kb_retention_guard *kb_retention_guard_new(const kb_config *cfg);
void kb_retention_guard_free(kb_retention_guard *g);

/* The guard of b's partition logs (NULL before kb_partition_log_start). */
kb_retention_guard *kb_partition_log_guard(kb_broker *b);

void kb_retention_guard_set_readers(kb_retention_guard *g, kb_guard_readers_fn *fn, void *arg);

/* How many of the log's oldest segments a retention step may delete now,
 * at most max; logs and counts the groups that lose unread records. */
int32_t kb_retention_guard_limit(kb_retention_guard *g, ks_log *log, int64_t now_ms, int32_t max);

void kb_retention_guard_stats_get(const kb_retention_guard *g, kb_retention_guard_stats *out);

#endif
