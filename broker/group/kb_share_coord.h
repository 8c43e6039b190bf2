/*
 * kb_share_coord: the share coordinator of this broker: the state of every
 * share-partition (kb_share_partition.h) kept in __share_group_state, in
 * Kafka 4.4's ShareSnapshot and ShareUpdate records (kb_share_state_rec.h),
 * so a share group's delivery state survives a restart.
 *
 * Job: after each event on a share group, write what its share-partitions
 * changed (kb_share_coord_flush): per changed share-partition one record,
 * on the partition of __share_group_state its key hashes to: a
 * ShareSnapshot (the whole persisted window) for a new or reset
 * share-partition and after every
 * share.coordinator.snapshot.update.records.per.snapshot updates, else a
 * ShareUpdate carrying only the changed offsets (and the start offset when
 * it moved); a tombstone when a share-partition's state is deleted; and at
 * start-up replay the topic (snapshot, then the updates after it) into
 * share groups, before the listeners open.
 *
 * Invariants:
 *   1. Only AVAILABLE (with its delivery count), ACKNOWLEDGED and ARCHIVED
 *      are persisted; an ACQUIRED record is written as it was before the
 *      acquisition, so a restart delivers it again.
 *   2. A share-partition's records are appended before the request that
 *      changed it is answered (the flush runs in kb_group_coord_touch); a
 *      failed write leaves the change marked and is retried at the next
 *      event.
 *   3. __share_group_state exists once any state was written, with
 *      share.coordinator.state.topic.num.partitions partitions,
 *      cleanup.policy=delete and retention.ms=-1, as Kafka makes it.
 *
 * Ownership: no state of its own; the share-partitions belong to their
 * groups (kb_group_coord).
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM; storage errors from the appends; start-up returns
 * KP_ERR__IO with a message when __share_group_state cannot be read.
 */
#ifndef KB_SHARE_COORD_H
#define KB_SHARE_COORD_H

#include <stddef.h>

#include "kb_context.h"
#include "kb_group.h"
#include "kb_share_partition.h"
#include "kb_topics.h"

/* Replays __share_group_state into the group registry (after
 * kb_group_coord_start). */
kp_err kb_share_coord_load(kb_broker *b, char *err, size_t errlen);

/* __share_group_state, created on first use. */
kp_err kb_share_coord_state_topic(kb_broker *b, kb_topic **out);

/* Writes what g's share-partitions changed since the last flush. */
void kb_share_coord_flush(kb_broker *b, kb_group *g);
/* Writes sp's tombstone, then forgets sp. */
kp_err kb_share_coord_delete(kb_broker *b, kb_group *g, kb_share_part *sp);
/* The same for each of g's share-partitions of topic (NULL: all). */
kp_err kb_share_coord_delete_topic(kb_broker *b, kb_group *g, const kp_uuid *topic);

/* ---- the persister's operations (InitializeShareGroupState and the rest,
 * served to CLUSTER_ACTION principals as Kafka's share coordinator serves
 * them). Each returns the Kafka error for the share-partition; a group id
 * held by a group of another type gives INVALID_GROUP_ID. ---- */

/* The share-partition's state, NULL when it has none. */
kb_share_part *kb_share_coord_find(kb_broker *b, kp_str group, const kp_uuid *topic,
                                   int32_t partition);
/* A new state at start (the window emptied) and state_epoch, written as
 * a ShareSnapshot; FENCED_STATE_EPOCH below the recorded epoch. */
kp_err kb_share_coord_initialize(kb_broker *b, kp_str group, const kp_uuid *topic,
                                 int32_t partition, int32_t state_epoch, int64_t start);
/* The batches (and start, when >= 0) applied and written as a
 * ShareUpdate (a ShareSnapshot for a new state); FENCED_STATE_EPOCH,
 * INVALID_REQUEST for a bad batch. */
kp_err kb_share_coord_write(kb_broker *b, kp_str group, const kp_uuid *topic, int32_t partition,
                            int32_t state_epoch, int64_t start, const kb_share_state_batch *bs,
                            int32_t n);
/* The tombstone, when there is a state. */
kp_err kb_share_coord_remove(kb_broker *b, kp_str group, const kp_uuid *topic, int32_t partition);

#endif
