/*
 * kb_dynconf: dynamic broker configs: the small mutable overlay that
 * AlterConfigs / IncrementalAlterConfigs on a BROKER resource write, above
 * the frozen kb_config.
 *
 * Job: know which broker keys Kafka lets an admin change at run time
 * (the broker key table's KB_KD_DYNAMIC keys, kb_config.c), hold the
 * per-broker ("<node id>") and cluster-default ("") values, persist them,
 * and resolve a topic key's broker-level default through them (so a
 * dynamic log.retention.ms reaches every topic without its own value).
 *
 * On disk (first entry of log.dirs): runnel-broker-configs.properties, one
 * `node <key>=<value>` or `cluster <key>=<value>` line per value, values
 * %-escaped (%25, %0A); written to a temp file, fsynced, renamed.
 *
 * Invariants:
 *   1. Only keys for which kb_dynconf_key_dynamic() is true are stored.
 *   2. Precedence: per-broker over cluster default over the static config;
 *      among synonyms (log.retention.ms / .minutes / .hours) the finer unit
 *      wins at the same level, as in Kafka.
 *   3. The file is written before kb_dynconf_replace() returns success.
 *
 * Ownership: kb_dynconf_open() allocates; kb_dynconf_close() frees. Strings
 * returned stay valid until the next kb_dynconf_replace().
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM, KP_ERR_KAFKA_STORAGE_ERROR (cannot write the file).
 */
#ifndef KB_DYNCONF_H
#define KB_DYNCONF_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_config_edit.h"

typedef struct kb_dynconf kb_dynconf;

/* Which set an edit targets: the resource "<node id>" or "". */
typedef enum kb_dyn_level {
    KB_DYN_NODE = 0,
    KB_DYN_CLUSTER = 1,
} kb_dyn_level;

kp_err kb_dynconf_open(const char *dir, kb_dynconf **out);
void kb_dynconf_close(kb_dynconf *d);

/* True for a key Kafka updates dynamically. */
bool kb_dynconf_key_dynamic(const char *key);
/* True for a dynamic key Kafka takes only per broker, not as a cluster default. */
bool kb_dynconf_key_per_broker(const char *key);

/* The set stored at level (read-only view). */
const kb_cfgset *kb_dynconf_set(const kb_dynconf *d, kb_dyn_level level);
/* Replaces the set at level with *s (taken: *s is left empty), persisting. */
kp_err kb_dynconf_replace(kb_dynconf *d, kb_dyn_level level, kb_cfgset *s);

/* The dynamic value of broker key, or NULL; *level says where it came from. */
const char *kb_dynconf_get(const kb_dynconf *d, const char *key, kb_dyn_level *level);

/*
 * The dynamic broker-level default of a topic key (retention.ms from
 * log.retention.ms, else .minutes or .hours scaled to ms), or NULL if no
 * synonym is set dynamically; *level says where it came from.
 */
const char *kb_dynconf_topic_default(const kb_dynconf *d, const char *topic_key,
                                     kb_dyn_level *level);

/* The broker keys that set topic_key's default, i-th in precedence order
 * (NULL past the end); *scale is the factor to the topic key's unit. */
const char *kb_dynconf_synonym(const char *topic_key, size_t i, int64_t *scale);

#endif
