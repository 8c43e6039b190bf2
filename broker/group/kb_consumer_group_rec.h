/*
 * kb_consumer_group_rec: a KIP-848 consumer group as Kafka keeps it in
 * __consumer_offsets: ConsumerGroupMetadata (3, the group epoch),
 * ConsumerGroupMemberMetadata (5), ConsumerGroupTargetAssignmentMetadata
 * (6, the assignment epoch), ConsumerGroupTargetAssignmentMember (7) and
 * ConsumerGroupCurrentMemberAssignment (8), key versions in parentheses,
 * every value at version 0, member states as Kafka numbers them (0 stable,
 * 1 unrevoked partitions, 2 unreleased partitions).
 *
 * Job: turn what changed in a group since its records were last written
 * (the members' KB_CG_DIRTY_* marks, removed members, the two epochs) into
 * records in Kafka's order; apply loaded records back to a group.
 *
 * Invariants:
 *   1. After kb_consumer_group_rec_written, replaying every record emitted so far
 *      (then kb_consumer_group_restored) rebuilds the group's members, epochs,
 *      targets and current assignments.
 *   2. A removed member's records are tombstoned (8, 7, 5).
 *
 * Ownership: emit takes the key and value writers (value NULL: tombstone)
 * and must fini them. Loaded records are borrowed during the call.
 *
 * Threading: loop thread only.
 *
 * Errors: KP_ERR__NOMEM; KP_ERR__CORRUPT for a record that does not parse.
 */
#ifndef KB_CONSUMER_GROUP_REC_H
#define KB_CONSUMER_GROUP_REC_H

#include "kb_consumer_group.h"
#include "kb_offsets.h"

typedef void kb_consumer_group_rec_emit(void *arg, kp_writer *key, kp_writer *value);

/* The records g's changes need; nothing is marked written. */
kp_err kb_consumer_group_rec_changes(const kb_consumer_group *cg, kp_str group, kb_consumer_group_rec_emit *emit,
                             void *arg);
/* Marks everything kb_consumer_group_rec_changes emitted as written. */
void kb_consumer_group_rec_written(kb_consumer_group *cg);
/* Tombstones for every member record and both metadata records. */
void kb_consumer_group_rec_delete(const kb_consumer_group *cg, kp_str group, kb_consumer_group_rec_emit *emit,
                          void *arg);
/* Applies one loaded record (key type KB_OFFSETS_KEY_CGROUP, cg_type 5-8,
 * or 3 with a value); value.len < 0 is a tombstone. */
kp_err kb_consumer_group_rec_load(kb_consumer_group *cg, const kb_offsets_key *k, kp_slice value, kp_arena *a);

#endif
