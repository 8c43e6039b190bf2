/*
 * kb_share_state_rec: the records of __share_group_state in Kafka 4.4's
 * formats: ShareSnapshot (key type 0) and ShareUpdate (key type 1), each
 * keyed by (group id, topic id, partition); a tombstone is a ShareSnapshot
 * key with a null value, as Kafka's share coordinator writes it.
 *
 * Layout (big-endian, Kafka's coordinator-record framing):
 *   key:   int16 type (0 snapshot, 1 update) | string group | uuid topic |
 *          int32 partition                       (key version 0, not flexible)
 *   value: int16 version 0 | ShareSnapshotValue or ShareUpdateValue v0
 *          (flexible: compact arrays, tagged field 0 DeliveryCompleteCount)
 *
 * Job: encode and decode those records between bytes and
 * kb_share_state_value; say which partition of the topic a key lives on
 * (Kafka: abs(hashCode("group:topicId:partition")) % partitions).
 *
 * Invariants: a decoded value's batches have first <= last; a value
 * decodes only at version 0; a key only at types 0 and 1.
 *
 * Ownership: decoded strings and batches live in the caller's arena (or
 * borrow the input bytes); writers belong to the caller.
 *
 * Threading: pure functions, any thread.
 *
 * Errors: KP_ERR__CORRUPT for bytes that are not such a record;
 * KP_ERR__NOENT for a key of another record type.
 */
#ifndef KB_SHARE_STATE_REC_H
#define KB_SHARE_STATE_REC_H

#include <stdint.h>

#include "kb_share_partition.h"
#include "kp_types.h"

#define KB_SHARE_STATE_TOPIC "__share_group_state"

typedef enum kb_share_state_type {
    KB_SHARE_STATE_SNAPSHOT = 0,
    KB_SHARE_STATE_UPDATE = 1,
} kb_share_state_type;

typedef struct kb_share_state_key {
    kb_share_state_type type;
    kp_str group;
    kp_uuid topic;
    int32_t partition;
} kb_share_state_key;

typedef struct kb_share_state_value {
    int32_t snapshot_epoch;
    int32_t state_epoch;             /* snapshot only */
    int32_t leader_epoch;
    int64_t start;                   /* update: -1 when the start did not move */
    int32_t delivery_complete_count; /* -1: not known */
    int64_t create_ts;               /* snapshot only */
    int64_t write_ts;                /* snapshot only */
    kb_share_state_batch *batches;
    int32_t nbatches;
} kb_share_state_value;

void kb_share_state_write_key(kp_writer *w, kb_share_state_type type, kp_str group,
                              const kp_uuid *topic, int32_t partition);
/* The value of a record of type (the arena holds the wire structs). */
void kb_share_state_write_value(kp_writer *w, kb_share_state_type type,
                                const kb_share_state_value *v, kp_arena *a);
kp_err kb_share_state_read_key(kp_slice key, kp_arena *a, kb_share_state_key *out);
kp_err kb_share_state_read_value(kb_share_state_type type, kp_slice value, kp_arena *a,
                                 kb_share_state_value *out);

/* The partition of __share_group_state that holds the key's records. */
int32_t kb_share_state_partition_for(kp_str group, const kp_uuid *topic, int32_t partition,
                                     int32_t partitions);

#endif
