/*
 * kb_meta_records: the bodies of __cluster_metadata records decoded into
 * plain structs, at the versions Apache Kafka 4.4.0 writes
 * (../shared/kafka-protocol-4.4/metadata/ JSON files, every one flexible), and
 * the KRaft control records (LeaderChange, SnapshotHeader/Footer,
 * KRaftVersion, Voters) checked with the generated codecs.
 *
 * Invariants:
 *   1. A record of a type this file does not name, or of a version above
 *      the one named for its type, is refused (KP_ERR__INVAL), never
 *      skipped: the caller stops the broker on it.
 *   2. Every length and count is checked against the bytes left before
 *      anything is allocated; trailing bytes after the tagged fields are
 *      refused (KP_ERR__MALFORMED).
 *   3. Unknown tagged fields are ignored (Kafka's rule for tags).
 * Ownership: strings and bytes borrow from the record's value; arrays live
 * in the caller's arena. Nothing outlives the record unless copied.
 * Threading: pure; any thread.
 * Errors: KP_ERR__INVAL (unknown type or version), KP_ERR__UNDERFLOW /
 * KP_ERR__MALFORMED (a short or bad body), KP_ERR__NOMEM.
 */
#ifndef KB_META_RECORDS_H
#define KB_META_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_meta_batches.h"
#include "kp_types.h"

enum kb_mrec_type {
    KB_MREC_REGISTER_BROKER = 0,
    KB_MREC_UNREGISTER_BROKER = 1,
    KB_MREC_TOPIC = 2,
    KB_MREC_PARTITION = 3,
    KB_MREC_CONFIG = 4,
    KB_MREC_PARTITION_CHANGE = 5,
    KB_MREC_FENCE_BROKER = 7,
    KB_MREC_UNFENCE_BROKER = 8,
    KB_MREC_REMOVE_TOPIC = 9,
    KB_MREC_DELEGATION_TOKEN = 10,
    KB_MREC_USER_SCRAM_CREDENTIAL = 11,
    KB_MREC_FEATURE_LEVEL = 12,
    KB_MREC_CLIENT_QUOTA = 14,
    KB_MREC_PRODUCER_IDS = 15,
    KB_MREC_BROKER_REGISTRATION_CHANGE = 17,
    KB_MREC_ACCESS_CONTROL_ENTRY = 18,
    KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY = 19,
    KB_MREC_NO_OP = 20,
    KB_MREC_ZK_MIGRATION_STATE = 21,
    KB_MREC_REMOVE_USER_SCRAM_CREDENTIAL = 22,
    KB_MREC_BEGIN_TRANSACTION = 23,
    KB_MREC_END_TRANSACTION = 24,
    KB_MREC_ABORT_TRANSACTION = 25,
    KB_MREC_REMOVE_DELEGATION_TOKEN = 26,
    KB_MREC_REGISTER_CONTROLLER = 27,
    KB_MREC_CLEAR_ELR = 28,
    KB_MREC_UNREGISTER_CONTROLLER = 29,
};

/* KRaft control record types (the record key's second int16). */
enum kb_ctrl_type {
    KB_CTRL_LEADER_CHANGE = 2,
    KB_CTRL_SNAPSHOT_HEADER = 3,
    KB_CTRL_SNAPSHOT_FOOTER = 4,
    KB_CTRL_KRAFT_VERSION = 5,
    KB_CTRL_VOTERS = 6,
};

/* An int32 or uuid array; n == -1 is null (absent). */
typedef struct kb_i32s {
    int32_t n;
    int32_t *v;
} kb_i32s;

typedef struct kb_uuids {
    int32_t n;
    kp_uuid *v;
} kb_uuids;

typedef struct kb_mrec_endpoint {
    kp_str name;
    kp_str host;
    uint16_t port;
    int16_t security_protocol;
} kb_mrec_endpoint;

typedef struct kb_mrec_register_broker {
    int32_t broker_id;
    kp_uuid incarnation_id;
    int64_t broker_epoch;
    int32_t n_endpoints;
    kb_mrec_endpoint *endpoints;
    kp_str rack;
    bool fenced;
    bool in_controlled_shutdown;
    kb_uuids log_dirs;
} kb_mrec_register_broker;

typedef struct kb_mrec_broker_change { /* also Fence/Unfence/Unregister */
    int32_t broker_id;
    int64_t broker_epoch;
    int8_t fenced;                 /* a change: 0 none, 1 fence, -1 unfence */
    int8_t in_controlled_shutdown; /* a change: 0 none, 1 entering */
} kb_mrec_broker_change;

typedef struct kb_mrec_partition { /* PartitionRecord and PartitionChangeRecord */
    int32_t partition_id;
    kp_uuid topic_id;
    kb_i32s replicas, isr, removing, adding, elr, last_known_elr;
    kb_uuids directories;
    int32_t leader; /* a change: -2 unchanged */
    int8_t leader_recovery_state;
    int32_t leader_epoch;    /* PartitionRecord only */
    int32_t partition_epoch; /* PartitionRecord only */
} kb_mrec_partition;

typedef struct kb_mrec_config {
    int8_t resource_type;
    kp_str resource_name;
    kp_str name;
    kp_str value; /* null: the config is removed */
} kb_mrec_config;

typedef struct kb_mrec_quota_entity {
    kp_str type;
    kp_str name; /* null: the default entity */
} kb_mrec_quota_entity;

typedef struct kb_mrec_quota {
    int32_t n_entity;
    kb_mrec_quota_entity *entity;
    kp_str key;
    double value;
    bool remove;
} kb_mrec_quota;

typedef struct kb_mrec_acl {
    kp_uuid id;
    int8_t resource_type;
    kp_str resource_name;
    int8_t pattern_type;
    kp_str principal;
    kp_str host;
    int8_t operation;
    int8_t permission_type;
} kb_mrec_acl;

typedef struct kb_mrec_scram {
    kp_str name;
    int8_t mechanism;
    kp_slice salt, stored_key, server_key;
    int32_t iterations;
} kb_mrec_scram;

typedef struct kb_mrec_token {
    kp_str owner, requester;
    int64_t issue_ms, max_ms, expiration_ms;
    kp_str token_id;
} kb_mrec_token;

/* One decoded record: type says which member holds it. */
typedef struct kb_mrec {
    int16_t type;
    int16_t version;
    union {
        kb_mrec_register_broker reg;
        kb_mrec_broker_change broker;
        struct {
            kp_str name;
            kp_uuid id;
        } topic;              /* TopicRecord; RemoveTopic uses id only */
        kb_mrec_partition part;
        kb_mrec_config config;
        struct {
            kp_str name;
            int16_t level;
        } feature;
        kb_mrec_quota quota;
        struct {
            int32_t broker_id;
            int64_t broker_epoch;
            int64_t next_producer_id;
        } pids;
        kb_mrec_acl acl;      /* RemoveAccessControlEntry uses id only */
        kb_mrec_scram scram;  /* RemoveUserScramCredential: name, mechanism */
        kb_mrec_token token;  /* RemoveDelegationToken: token_id only */
        kp_str clear_elr_topic; /* empty: every topic */
    } u;
} kb_mrec;

/* The newest version of a metadata record type Runnel decodes, or -1 for a
 * type it does not know. */
int16_t kb_mrec_max_version(int type);
/* The record's name ("PartitionChangeRecord"), or "unknown". */
const char *kb_mrec_name(int type);
/* A control record's name, or "unknown". */
const char *kb_ctrl_name(int type);

/* Decodes a metadata record (not a control one): rec's value with its
 * frame header. */
kp_err kb_mrec_decode(const kb_meta_record *rec, kp_arena *a, kb_mrec *out);
/* Checks a control record: a known type, key version 0, a body of a known
 * version that decodes. *version receives the body's version. */
kp_err kb_ctrl_check(const kb_meta_record *rec, kp_arena *a, int16_t *version);

#endif
