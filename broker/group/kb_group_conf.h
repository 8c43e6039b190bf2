/*
 * kb_group_conf: group configs (KIP-848's dynamic configs on a GROUP resource,
 * DescribeConfigs / AlterConfigs / IncrementalAlterConfigs resource type 32).
 *
 * Job: know Kafka 4.1's group config keys, their types, defaults and bounds;
 * check a group's whole set of values as Kafka's GroupConfig.validate does
 * (with its error texts); hold the explicitly set values per group id and
 * persist them; and give the consumer group protocol a group's effective
 * session timeout and heartbeat interval. The share.* and streams.* keys are
 * kept and checked (against Kafka's default bounds) but Runnel serves no
 * share or streams groups, so they change nothing else.
 *
 * On disk (first entry of log.dirs): runnel-group-configs.properties, a
 * `group <id>` line, then one `<key>=<value>` line per value of that group;
 * ids and values %-escaped (%25, %0A, %0D); written to a temp file,
 * fsynced, renamed, like the other admin files.
 *
 * Invariants:
 *   1. Only known keys with values that passed kb_group_conf_check() are stored;
 *      a group with no value left is forgotten.
 *   2. At most KB_GROUP_CONF_MAX_GROUPS groups hold values, each id non-empty,
 *      at most KB_GROUP_ID_MAX bytes, without NUL (refused as INVALID_REQUEST;
 *      Kafka takes any string).
 *   3. Values outlive the group itself (Kafka keeps them across DeleteGroups).
 *   4. The file is written before kb_group_conf_replace() returns success.
 *
 * Ownership: kb_group_conf_open() allocates, kb_group_conf_close() frees. Sets and
 * strings returned stay valid until the next kb_group_conf_replace().
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM, KP_ERR_KAFKA_STORAGE_ERROR (cannot write the file),
 * KP_ERR_INVALID_CONFIG / KP_ERR_INVALID_REQUEST with Kafka's message.
 */
#ifndef KB_GROUP_CONF_H
#define KB_GROUP_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config_edit.h"
#include "kb_config.h"

#define KB_GROUP_CONF_MAX_GROUPS 100000

typedef struct kb_group_conf kb_group_conf;

kp_err kb_group_conf_open(const char *dir, kb_group_conf **out);
void kb_group_conf_close(kb_group_conf *gc);

/* The i-th known key (sorted) and its KB_CT_* type; NULL past the last. */
const char *kb_group_conf_key_at(size_t i, int8_t *type);
/* A key's default on this broker (consumer.* from the broker's group.consumer.*
 * settings), formatted into buf. */
const char *kb_group_conf_default(const kb_config *cfg, const char *key, char *buf, size_t cap);

/* INVALID_REQUEST for a group resource name Kafka refuses (empty) or we
 * cannot keep (too long), with the message. */
kp_err kb_group_conf_check_name(kp_str group, kb_msgbuf *msg);
/* Checks the set a group would end with: every key known, every value of
 * its type and within its bounds, unset keys taking their defaults. */
kp_err kb_group_conf_check(const kb_config *cfg, const kb_cfgset *set, kb_msgbuf *msg);

/* The i-th group (by id) that has values set, NULL past the last; valid
 * until the next kb_group_conf_replace. */
const char *kb_group_conf_group_at(const kb_group_conf *gc, size_t i);
/* The values set on group, or NULL when none. */
const kb_cfgset *kb_group_conf_get(const kb_group_conf *gc, kp_str group);
/* Replaces group's values with *set (taken: left empty on success),
 * persisting; an empty set forgets the group. */
kp_err kb_group_conf_replace(kb_group_conf *gc, kp_str group, kb_cfgset *set, kb_msgbuf *msg);

/* A group config's value (an int32 key, or any key as text), dflt when the
 * group does not set it. */
int32_t kb_group_conf_int(const kb_group_conf *gc, kp_str group, const char *key, int32_t dflt);
const char *kb_group_conf_str(const kb_group_conf *gc, kp_str group, const char *key,
                              const char *dflt);

/* The consumer group protocol's settings for group: its consumer.* values,
 * else the broker's. */
int32_t kb_group_conf_session_timeout_ms(const kb_group_conf *gc, const kb_config *cfg, kp_str group);
int32_t kb_group_conf_heartbeat_interval_ms(const kb_group_conf *gc, const kb_config *cfg, kp_str group);

#endif
