/*
 * kb_topic_conf: topic-level configuration: which keys exist, how their values
 * are checked, and each key's effective value for a topic.
 *
 * Job: one place that knows the topic config keys (cleanup.policy,
 * retention.ms, ...), Kafka's ConfigType of each, and how a value is
 * resolved: the topic's own setting, else the broker key it derives from
 * (log.retention.ms, ...), else Kafka's default.
 *
 * Invariants:
 *   1. The key table is sorted by key; kb_topic_conf_key(i) walks it in order.
 *   2. kb_topic_conf_effective() returns a value for every key in the table.
 *
 * Ownership: returned strings are owned by the topic or the config and stay
 * valid while both do.
 * Threading: loop thread only (reads the registry).
 * Errors: kb_topic_conf_check() returns INVALID_CONFIG with Kafka's message.
 */
#ifndef KB_TOPIC_CONF_H
#define KB_TOPIC_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_topics.h"

/* Kafka's DescribeConfigs ConfigSource values. */
enum kb_config_source_wire {
    KB_CS_DYNAMIC_TOPIC = 1,
    KB_CS_DYNAMIC_BROKER = 2,
    KB_CS_DYNAMIC_DEFAULT_BROKER = 3,
    KB_CS_STATIC_BROKER = 4,
    KB_CS_DEFAULT = 5,
    KB_CS_DYNAMIC_GROUP = 8,
};

/* Kafka's ConfigType values. */
enum kb_config_type_wire {
    KB_CT_BOOLEAN = 1,
    KB_CT_STRING = 2,
    KB_CT_INT = 3,
    KB_CT_LONG = 5,
    KB_CT_DOUBLE = 6,
    KB_CT_LIST = 7,
};

kp_err kb_topic_conf_check(const char *key, const char *value, kb_msgbuf *msg);

/* True for keys whose value is a comma-separated list (APPEND/SUBTRACT). */
bool kb_topic_conf_is_list(const char *key);
/* Kafka's own default of a topic key (not the broker's), NULL if unknown. */
const char *kb_topic_conf_default(const char *key);

size_t kb_topic_conf_count(void);
const char *kb_topic_conf_key(size_t i);
int8_t kb_topic_conf_type(size_t i);

/* The effective value of key for t (t may be NULL for the broker default);
 * *source gets a KB_CS_* value. NULL for an unknown key. */
const char *kb_topic_conf_effective(const kb_config *cfg, const kb_topic *t, const char *key,
                               int8_t *source);

/* The effective value parsed as an integer, or dflt when unset/unparsable. */
int64_t kb_topic_conf_long(const kb_config *cfg, const kb_topic *t, const char *key, int64_t dflt);

#endif
