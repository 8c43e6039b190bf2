/*
 * kb_alter_partition: the leader's side of ISR changes, as Kafka's
 * AlterPartitionManager and Partition.maybeShrinkIsr / maybeExpandIsr: every
 * replica.lag.time.max.ms / 2 each partition this broker leads is checked
 * for followers that lag (shrink), and a follower's fetch that reaches the
 * high watermark checks it for growth (expand, kb_replica's on_isr hook);
 * a change is proposed to the active controller with AlterPartition v3
 * (topic ids, each member's broker epoch, the leader epoch and the partition
 * epoch the image holds), and acted on only once the image commits it.
 *
 * Invariants:
 *   1. At most one proposal per partition (kb_replica's pending or stale
 *      state) and one AlterPartition request in flight; proposals made
 *      meanwhile wait and go out together in the next request, grouped by
 *      topic.
 *   2. A proposal adds only brokers the image shows registered, unfenced
 *      and not shutting down; nothing is proposed before this broker has
 *      a broker epoch (registered).
 *   3. The controller's answer per partition: NONE leaves the proposal
 *      pending until the image brings the new partition epoch (dropped at
 *      once when the image is there already); OPERATION_NOT_ATTEMPTED and
 *      INELIGIBLE_REPLICA drop it (a new one may follow after a backoff);
 *      INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
 *      NEW_LEADER_ELECTED and UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID
 *      drop it and wait for the image (stale: a leader the image replaced
 *      stops leading through kb_replica_assign). Anything else (a top-level
 *      error such as NOT_CONTROLLER, a lost connection, no answer within
 *      KB_ALTER_PARTITION_TIMEOUT_MS) sends it again after a backoff,
 *      unless the image moved meanwhile.
 * Ownership: kb_alter_partition_new borrows the broker, quorum and image
 * (the cluster's, which outlive it); it owns its controller connection.
 * Threading: the loop's thread only.
 */
#ifndef KB_ALTER_PARTITION_H
#define KB_ALTER_PARTITION_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_meta_image.h"
#include "kb_quorum.h"
#include "kb_topics.h"

#define KB_ALTER_PARTITION_TIMEOUT_MS 30000 /* request.timeout.ms */

typedef struct kb_alter_partition kb_alter_partition;

kb_alter_partition *kb_alter_partition_new(kb_broker *b, kb_quorum *q, const kb_meta_image *img);
void kb_alter_partition_free(kb_alter_partition *ap);

/* This broker's epoch from its registration; -1 while it has none. */
void kb_alter_partition_set_broker_epoch(kb_alter_partition *ap, int64_t epoch);

/* A kb_replica_isr_fn (arg: the kb_alter_partition): proposes the ISR
 * change (t, p) is due for, if any. */
void kb_alter_partition_check(void *ap, kb_topic *t, int32_t p);

/* Proposals not yet answered (queued or sent). */
int kb_alter_partition_pending(const kb_alter_partition *ap);

#endif
