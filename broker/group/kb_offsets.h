/*
 * kb_offsets: committed offsets of one group, and the records of
 * __consumer_offsets in Apache Kafka's own formats.
 *
 * Job: keep a group's committed offsets in a hash map keyed by (topic,
 * partition); encode the key and value bytes Kafka writes for offset commits
 * and group metadata (so Kafka's OffsetsMessageFormatter and Burrow read our
 * topic), decode them again when the coordinator rebuilds its state, and map
 * a group id to its partition as Kafka does.
 *
 * Record formats (../shared/kafka-protocol/records; every key and value is an
 * int16 version followed by the struct encoded at that version):
 *
 *   key version  key struct          value struct, version written
 *   -----------  ------------------  ---------------------------------------
 *   0 or 1       OffsetCommitKey     OffsetCommitValue v3 (v1 when an expire
 *                (we write 1)        timestamp is set); null value: deleted
 *   2            GroupMetadataKey    GroupMetadataValue v3; null: deleted
 *   3            ConsumerGroupMetadataKey  ConsumerGroupMetadataValue v0 (the
 *                group epoch of a KIP-848 group); null: deleted
 *   5            ConsumerGroupMemberMetadataKey           ...MemberMetadataValue v0
 *   6            ConsumerGroupTargetAssignmentMetadataKey ...MetadataValue v0
 *   7            ConsumerGroupTargetAssignmentMemberKey   ...MemberValue v0
 *   8            ConsumerGroupCurrentMemberAssignmentKey  ...AssignmentValue v0
 *                (5-8: kb_consumer_group_rec reads and writes the values)
 *   4, 9 and up  the other consumer/share group records: skipped
 *
 * Invariants:
 *   1. A map holds at most one entry per (topic, partition); its load factor
 *      stays at or below 1/2, so lookups terminate.
 *   2. Every string in an entry is owned by the map and NUL-terminated.
 *   3. Decoding never reads outside the given bytes; an unknown or malformed
 *      record is reported, never trusted.
 *
 * Ownership: the map owns its entries; pointers returned by get/next stay
 * valid until the next put/del/fini on that map. Decoded records borrow
 * from the input bytes and the caller's arena.
 *
 * Threading: no shared state; the loop thread uses it.
 *
 * Errors: KP_ERR__NOMEM; KP_ERR__CORRUPT for a record that does not parse;
 * KP_ERR__NOENT for a key type this module does not handle.
 */
#ifndef KB_OFFSETS_H
#define KB_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_map.h"
#include "kp_msg.h"
#include "kp_types.h"

/* Versions Kafka 4 writes. */
#define KB_OFFSETS_COMMIT_KEY_VERSION     1
#define KB_OFFSETS_GROUP_KEY_VERSION      2
#define KB_OFFSETS_COMMIT_VALUE_VERSION   3
#define KB_OFFSETS_COMMIT_VALUE_EXPIRE_V  1
#define KB_OFFSETS_GROUP_VALUE_VERSION    3
#define KB_OFFSETS_CGROUP_KEY_VERSION     3
#define KB_OFFSETS_CG_MEMBER_KEY          5
#define KB_OFFSETS_CG_TARGET_EPOCH_KEY    6
#define KB_OFFSETS_CG_TARGET_KEY          7
#define KB_OFFSETS_CG_CURRENT_KEY         8

/* Kafka's offset.metadata.max.bytes default. */
#define KB_OFFSETS_METADATA_MAX 4096

typedef struct kb_offset {
    char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch; /* -1 when unknown */
    char *metadata;       /* never NULL: metadata_len bytes (NULs allowed), then a NUL */
    int32_t metadata_len; /* 0 when none */
    int64_t commit_ts;    /* wall clock ms */
    int64_t expire_ts;    /* wall clock ms, -1 when none (v1 records only) */
} kb_offset;

typedef struct kb_offset_map {
    kb_map entries; /* kb_offset * (owned), by (topic, partition) */
} kb_offset_map;

/* The committed metadata of o as the wire carries it (borrowed from o). */
kp_str kb_offset_metadata(const kb_offset *o);
/* A malloc()ed copy of o's metadata, NUL-terminated; NULL when out of memory. */
char *kb_offset_metadata_dup(const kb_offset *o);

void kb_offset_map_init(kb_offset_map *m);
static inline size_t kb_offset_map_count(const kb_offset_map *m)
{
    return kb_map_count(&m->entries);
}
void kb_offset_map_fini(kb_offset_map *m);
const kb_offset *kb_offset_map_get(const kb_offset_map *m, kp_str topic, int32_t partition);
/* Inserts or replaces the entry of (o->topic, o->partition); copies every
 * string of o. */
kp_err kb_offset_map_put(kb_offset_map *m, const kb_offset *o);
/* Removes the entry; false when there was none. */
bool kb_offset_map_del(kb_offset_map *m, kp_str topic, int32_t partition);
/* Iterates: start with *cursor = 0; NULL after the last entry. Deleting the
 * entry just returned is allowed while iterating (kb_map.h). */
const kb_offset *kb_offset_map_next(const kb_offset_map *m, size_t *cursor);

/* The partition of __consumer_offsets holding group_id: Java's
 * String.hashCode over its UTF-16 units, Utils.abs, modulo partitions. */
int32_t kb_offsets_partition_for(kp_str group_id, int32_t partitions);
/* A coordinator record's leading int16 (key type or value version); r then
 * reads the rest. False when s holds less than two bytes. */
bool kb_offsets_read_version(kp_slice s, kp_reader *r, int16_t *version);

/* ---- record bytes (each writer appends version + struct to w) ---------- */

void kb_offsets_write_commit_key(kp_writer *w, kp_str group, kp_str topic, int32_t partition);
void kb_offsets_write_commit_value(kp_writer *w, const kb_offset *o);
void kb_offsets_write_group_key(kp_writer *w, kp_str group);
void kb_offsets_write_group_value(kp_writer *w, const kp_group_metadata_value *v);
void kb_offsets_write_cgroup_key(kp_writer *w, kp_str group);
/* A KIP-848 group record key: type 3 or 6 (group only), 5, 7 or 8. */
void kb_offsets_write_cg_key(kp_writer *w, int16_t type, kp_str group, kp_str member);
void kb_offsets_write_cgroup_value(kp_writer *w, int32_t epoch);

typedef enum kb_offsets_key_type {
    KB_OFFSETS_KEY_COMMIT,
    KB_OFFSETS_KEY_GROUP,
    KB_OFFSETS_KEY_CGROUP,
} kb_offsets_key_type;

typedef struct kb_offsets_key {
    kb_offsets_key_type type;
    kp_str group;
    kp_str topic;      /* commit keys only */
    int32_t partition; /* commit keys only */
    int16_t cg_type;   /* KB_OFFSETS_KEY_CGROUP: the key version (3, 5-8) */
    kp_str member;     /* KB_OFFSETS_KEY_CGROUP types 5, 7, 8 */
} kb_offsets_key;

/* Decodes a record key; KP_ERR__NOENT for record types we skip. */
kp_err kb_offsets_read_key(kp_slice key, kp_arena *a, kb_offsets_key *out);
/* Decodes an OffsetCommitValue (v0-v4) into o (strings borrowed: topic is
 * left NULL and metadata points into the arena). */
kp_err kb_offsets_read_commit_value(kp_slice value, kp_arena *a, kb_offset *o);
kp_err kb_offsets_read_group_value(kp_slice value, kp_arena *a, kp_group_metadata_value *out);
kp_err kb_offsets_read_cgroup_value(kp_slice value, kp_arena *a, int32_t *epoch);

#endif
