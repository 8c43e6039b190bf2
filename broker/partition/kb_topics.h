/*
 * kb_topics: the topic registry: names, topic ids, partition counts and
 * topic-level configs, persisted in the first log dir.
 *
 * Job: create, find, alter and delete topics with Kafka's rules and error
 * codes, and keep the registry on disk so topics survive a restart.
 *
 * On disk (first entry of log.dirs):
 *   meta.properties          Kafka's format: cluster.id, node.id, version=1
 *   runnel-topics.properties one `topic <name> <id hex> <partitions> [pending|deleting]`
 *                            line per topic, each followed by `config <name>
 *                            <key>=<value>` lines (values %-escaped); replaced
 *                            atomically. `pending`: its partition directories
 *                            are being made; `deleting`: being removed
 *                            (kb_partition_dirs.h finishes either at start)
 *   <topic>-<n>/             one directory per partition, with Kafka's
 *                            partition.metadata (version, topic_id)
 *
 * Invariants:
 *   1. Topic names are unique, valid by Kafka's rules, and no two differ
 *      only by '.' versus '_'.
 *   2. Topic ids are unique, non-zero, and never change for a topic.
 *   3. The registry file is written (temp, fsync, rename, dir fsync) before a
 *      create, alter or delete is acknowledged.
 *   4. A topic being created or deleted (state != KB_TOPIC_READY, "busy")
 *      is invisible to find, find_id, count and at, but holds its name: no
 *      other topic of that name (or a colliding one) can be created meanwhile.
 *
 * Ownership: the registry owns every kb_topic; a kb_topic pointer stays
 * valid until that topic is deleted or the registry closed.
 * Threading: loop thread only.
 * Errors: Kafka codes (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
 * INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
 * UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR) with a message.
 */
#ifndef KB_TOPICS_H
#define KB_TOPICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kb_config_edit.h"
#include "kb_config.h"
#include "kb_file.h"
#include "kb_msgbuf.h"
#include "kb_topic_settings.h"
#include "kb_uuid.h"
#include "kp_types.h"

#define KB_TOPIC_NAME_MAX 249
#define KB_TOPIC_MAX_PARTITIONS 100000

struct ks_log;
struct kb_producer_state;
struct kb_partition_log_load;

typedef struct kb_partition {
    int32_t index;
    int32_t leader_epoch;
    struct ks_log *log;         /* set by kb_partition_log once open (online); NULL until then */
    struct kb_producer_state *pids;   /* idempotent producers; set with log */
    struct kb_partition_log_load *load;  /* kb_partition_log's job while the log opens on a helper thread */
    struct kb_replica *repl;    /* cluster mode: leader, ISR, followers (kb_replica.h); else NULL */
} kb_partition;

typedef enum kb_topic_state {
    KB_TOPIC_READY = 0, /* its partitions exist on disk: visible */
    KB_TOPIC_CREATING,  /* registry says pending: directories being made */
    KB_TOPIC_DELETING,  /* registry says deleting: directories being removed */
} kb_topic_state;

typedef struct kb_topic {
    char *name;
    kb_topic_state state;
    kp_uuid id;
    int32_t npartitions;
    kb_partition *partitions;
    size_t nconfigs;
    kb_topic_config *configs; /* explicitly set keys only, sorted by key */
    bool internal;            /* __consumer_offsets, __transaction_state */
    const struct kb_dynconf *dyn; /* dynamic broker defaults (the registry's; may be NULL) */
    kb_topic_settings settings;   /* effective values, typed (kb_topic_settings.h) */
    bool settings_valid;          /* false until computed and after a config change */
    struct kb_partition_dirs_job *growing; /* a partition increase in flight, or NULL */
} kb_topic;

typedef struct kb_topics kb_topics;

kp_err kb_topics_open(const kb_config *cfg, kb_topics **out, char *err, size_t errlen);
void kb_topics_close(kb_topics *ts);

/* The cluster id (22 characters, base64url) from meta.properties. */
const char *kb_topics_cluster_id(const kb_topics *ts);

kb_topic *kb_topics_find(const kb_topics *ts, kp_str name);
kb_topic *kb_topics_find_id(const kb_topics *ts, const kp_uuid *id);
/* The topic a request names: by id in the versions that carry topic ids
 * (Fetch v13+, Produce v13+, OffsetCommit/OffsetFetch v10+, TxnOffsetCommit
 * v6+), else by name. One hash lookup either way; NULL when unknown. */
kb_topic *kb_topics_find_ref(const kb_topics *ts, bool by_id, kp_str name, const kp_uuid *id);
size_t kb_topics_count(const kb_topics *ts);
/* The i-th topic, in creation order; stable until a create or delete. */
kb_topic *kb_topics_at(const kb_topics *ts, size_t i);

/* Kafka's topic name rule (Topic.validate). */
kp_err kb_topics_check_name(kp_str name, kb_msgbuf *msg);

/* Creates a topic (or only validates it), its partition directories made
 * here on the calling thread (for the few partitions of an auto-create).
 * partitions >= 1. */
kp_err kb_topics_create(kb_topics *ts, kp_str name, int32_t partitions,
                        const kb_topic_config *configs, size_t nconfigs, bool validate_only,
                        kb_topic **out, kb_msgbuf *msg);
/* An internal topic (__consumer_offsets, __transaction_state): found, or
 * created here with its configs and logged (its few partitions are made on
 * the calling thread, like an auto-create). */
kp_err kb_topics_internal(kb_topics *ts, kp_str name, int32_t partitions,
                          const kb_topic_config *configs, size_t nconfigs, kb_topic **out);
/* As kb_topics_create, but records the topic pending (KB_TOPIC_CREATING) and
 * leaves its directories to kb_partition_dirs_create; *out is NULL when validate_only. */
kp_err kb_topics_begin_create(kb_topics *ts, kp_str name, int32_t partitions,
                              const kb_topic_config *configs, size_t nconfigs,
                              bool validate_only, kb_topic **out, kb_msgbuf *msg);
/* As kb_topics_begin_create with the topic id the cluster's controller
 * chose (cluster mode: kb_cluster_act); TOPIC_ALREADY_EXISTS when a topic
 * holds that name or id. */
kp_err kb_topics_begin_create_id(kb_topics *ts, kp_str name, const kp_uuid *id,
                                 int32_t partitions, const kb_topic_config *configs,
                                 size_t nconfigs, kb_topic **out, kb_msgbuf *msg);
/* A pending topic's directories exist (ok: it becomes visible, persisted) or
 * could not be made (it is dropped and freed). When ok but the registry
 * cannot be written, t stays pending (KP_ERR__IO or __NOMEM): the caller
 * removes its directories, then ends it with ok false. */
kp_err kb_topics_end_create(kb_topics *ts, kb_topic *t, bool ok);
/* Records a visible topic deleting (KB_TOPIC_DELETING), hiding it; its
 * directories are left to kb_partition_dirs_delete. UNKNOWN_TOPIC_OR_PARTITION or
 * KAFKA_STORAGE_ERROR (t unchanged). */
kp_err kb_topics_begin_delete(kb_topics *ts, kb_topic *t, kb_msgbuf *msg);
/* A deleting topic's directories are gone: forgets and frees it. */
kp_err kb_topics_end_delete(kb_topics *ts, kb_topic *t);
/* The busy topic of that name (being created or deleted), or NULL. */
kb_topic *kb_topics_busy(const kb_topics *ts, kp_str name);
/* Every busy topic (*n of them); valid until the next create or delete. */
kb_topic *const *kb_topics_busy_all(const kb_topics *ts, size_t *n);
/* The directory holding the registry and the partition directories. */
const char *kb_topics_dir(const kb_topics *ts);
/* Checks a growth of t to total partitions with Kafka's errors and texts
 * (REASSIGNMENT_IN_PROGRESS while another is in flight); changes nothing. */
kp_err kb_topics_check_add_partitions(const kb_topics *ts, const kb_topic *t, int32_t total,
                                      kb_msgbuf *msg);
/* t's directories for partitions [npartitions, total) exist
 * (kb_partition_dirs_grow): t has total partitions, persisted. On an error
 * (KP_ERR__NOMEM, __IO) t is unchanged. */
kp_err kb_topics_end_add_partitions(kb_topics *ts, kb_topic *t, int32_t total);

/* Points every topic, present and future, at the dynamic broker configs
 * (kb_dynconf.h) so kb_topic_conf resolves their defaults through them. */
void kb_topics_set_dynconf(kb_topics *ts, const struct kb_dynconf *dyn);

/* Replaces every explicitly set config of t with configs[0..n) (keys unique;
 * copied), persisting the registry before returning; on failure t keeps its
 * old configs. Values are not checked here (kb_topic_conf_check does that). */
kp_err kb_topics_set_configs(kb_topics *ts, kb_topic *t, const kb_topic_config *configs,
                             size_t n, kb_msgbuf *msg);

/* An explicitly set topic config, or NULL. */
const char *kb_topic_config_get(const kb_topic *t, const char *key);

#endif
