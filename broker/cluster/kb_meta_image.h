/*
 * kb_meta_image: the cluster's metadata as the records of
 * __cluster_metadata build it, applied one by one in offset order: brokers
 * (epoch, incarnation, endpoints per listener, rack, fenced, in controlled
 * shutdown), topics by id and by name with their partitions (replicas,
 * ISR, ELR, leader, leader epoch, partition epoch, directories), finalized
 * feature levels, topic and broker configs, the producer-id block high
 * water, SCRAM users, ACLs and client quotas. A pure state machine: the
 * layer acting on it (kb_cluster_act) hears about changes through a
 * listener.
 *
 * Invariants:
 *   1. A record that does not decode, of an unknown type, or of a version
 *      above the one kb_meta_records knows, changes nothing and fails the
 *      apply (the caller stops the broker; never a silent skip).
 *   2. A partition record for a topic id the image does not hold is refused
 *      as KP_ERR__CORRUPT (the controller always writes TopicRecord first).
 *   3. Topic names and ids are unique; the maps and the array agree.
 *   4. The listener hears a partition after it changed and a topic before
 *      it is freed.
 * Ownership: the image owns everything it holds (copies of the records'
 * strings); pointers it returns stay valid until the next apply.
 * Threading: one thread (the loop's).
 * Errors: see kb_meta_image_apply.
 */
#ifndef KB_META_IMAGE_H
#define KB_META_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_map.h"
#include "kb_meta_batches.h"
#include "kb_meta_records.h"

typedef struct kb_mi_endpoint {
    char *listener;
    char *host;
    uint16_t port;
    int16_t security_protocol;
} kb_mi_endpoint;

typedef struct kb_mi_broker {
    int32_t id;
    int64_t epoch;
    kp_uuid incarnation;
    int n_endpoints;
    kb_mi_endpoint *endpoints;
    char *rack; /* NULL: none */
    bool fenced;
    bool in_controlled_shutdown;
} kb_mi_broker;

typedef struct kb_mi_ints {
    int32_t n;
    int32_t *v;
} kb_mi_ints;

#define KB_MI_RECOVERED 0  /* LeaderRecoveryState */
#define KB_MI_RECOVERING 1

typedef struct kb_mi_partition {
    kb_mi_ints replicas, isr, elr, last_known_elr;
    int32_t n_dirs;
    kp_uuid *dirs;
    int32_t leader;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int8_t leader_recovery_state; /* KB_MI_RECOVERED, or KB_MI_RECOVERING after an unclean
                                   * election until the leader's AlterPartition */
    bool present; /* a PartitionRecord was applied */
} kb_mi_partition;

typedef struct kb_mi_config {
    char *name;
    char *value;
} kb_mi_config;

typedef struct kb_mi_configs {
    int n, cap;
    kb_mi_config *v;
} kb_mi_configs;

typedef struct kb_mi_topic {
    kp_uuid id;
    char *name;
    int32_t n_parts; /* partitions 0..n_parts-1, some maybe !present */
    kb_mi_partition *parts;
    kb_mi_configs configs;
} kb_mi_topic;

typedef struct kb_mi_feature {
    char *name;
    int16_t level;
} kb_mi_feature;

typedef struct kb_mi_resource_configs { /* a broker's (name "" the default) */
    char *resource;
    kb_mi_configs configs;
} kb_mi_resource_configs;

typedef struct kb_mi_scram {
    char *user;
    int8_t mechanism;
    uint8_t *salt, *stored_key, *server_key;
    int32_t salt_len, stored_key_len, server_key_len;
    int32_t iterations;
} kb_mi_scram;

typedef struct kb_mi_acl {
    kp_uuid id;
    int8_t resource_type, pattern_type, operation, permission_type;
    char *resource_name, *principal, *host;
} kb_mi_acl;

typedef struct kb_mi_quota {
    char *entity; /* "type=name,..." with "<default>" for a null name */
    char *key;
    double value;
} kb_mi_quota;

typedef enum kb_mi_event_kind {
    KB_MI_PARTITION,     /* created or changed: topic, partition */
    KB_MI_TOPIC_REMOVED, /* topic, about to be freed */
    KB_MI_TOPIC_CONFIG,  /* topic, its configs changed */
} kb_mi_event_kind;

typedef void kb_mi_listener(void *arg, kb_mi_event_kind kind, const kb_mi_topic *t,
                            int32_t partition);

#define KB_MI_ARRAY(T) struct { int n, cap; T *v; }

typedef struct kb_meta_image {
    KB_MI_ARRAY(kb_mi_broker) brokers;
    KB_MI_ARRAY(kb_mi_topic *) topics;
    kb_map topics_by_id;
    kb_map topics_by_name;
    KB_MI_ARRAY(kb_mi_feature) features;
    KB_MI_ARRAY(kb_mi_resource_configs) broker_configs;
    KB_MI_ARRAY(kb_mi_scram) scram;
    KB_MI_ARRAY(kb_mi_acl) acls;
    KB_MI_ARRAY(kb_mi_quota) quotas;
    int64_t next_producer_id; /* the high water of the blocks handed out */
    int32_t delegation_tokens;
    int64_t applied_offset; /* the last record applied, -1 none */
    int64_t records;
    kb_mi_listener *listener;
    void *listener_arg;
} kb_meta_image;

void kb_meta_image_init(kb_meta_image *img);
void kb_meta_image_fini(kb_meta_image *img);
void kb_meta_image_set_listener(kb_meta_image *img, kb_mi_listener *fn, void *arg);

/* Applies one record. KP_ERR__INVAL: an unknown type or a newer version;
 * KP_ERR__MALFORMED / KP_ERR__UNDERFLOW: a body that does not decode;
 * KP_ERR__CORRUPT: a record naming a topic the image lacks; KP_ERR__NOMEM.
 * On error the image is as it was. */
kp_err kb_meta_image_apply(kb_meta_image *img, const kb_meta_record *rec);

const kb_mi_broker *kb_meta_image_broker(const kb_meta_image *img, int32_t id);
const kb_mi_topic *kb_meta_image_topic_by_id(const kb_meta_image *img, kp_uuid id);
const kb_mi_topic *kb_meta_image_topic(const kb_meta_image *img, kp_str name);
/* The finalized level of a feature, or 0 when none was recorded. */
int16_t kb_meta_image_feature(const kb_meta_image *img, const char *name);
/* A topic's config value, or NULL. */
const char *kb_mi_config_get(const kb_mi_configs *c, const char *name);
/* A broker's dynamic config ("" the cluster default), or NULL. */
const char *kb_meta_image_broker_config(const kb_meta_image *img, const char *broker,
                                        const char *name);

#endif
