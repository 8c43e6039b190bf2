/*
 * kb_topic_settings: a topic's effective configuration as typed values, for
 * the produce, fetch and log paths.
 *
 * Job: resolve every topic key those paths read (the topic's own setting,
 * else the dynamic or static broker key it derives from, else Kafka's
 * default: kb_topic_conf.h) once, into one struct, so no request resolves a
 * config string.
 *
 * Invariants:
 *   1. A topic's settings are recomputed from its configs after any change
 *      that can alter them: its own configs (AlterConfigs, creation) and the
 *      dynamic broker defaults (both call kb_topic_settings_invalidate, via
 *      kb_partition_log_config_changed); kb_topic_settings_of() then recomputes on
 *      first use.
 *   2. log.retention_ms and log.retention_bytes are -1 unless cleanup.policy
 *      lists delete (a compact-only topic keeps everything but the cleaner's
 *      work).
 *
 * Ownership: the settings live inside their kb_topic.
 * Threading: loop thread only (the cache is filled on first use); a helper
 * thread gets a copy.
 * Errors: none; an unparsable value falls back to the default, as the
 * checks at AlterConfigs keep such values out.
 */
#ifndef KB_TOPIC_SETTINGS_H
#define KB_TOPIC_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_config.h"
#include "ks_compact.h"
#include "ks_log.h"

typedef struct kb_topic_settings {
    ks_log_config log;         /* segment, index, retention, flush, timestamp type */
    ks_compact_config compact; /* map_entries left to the cleaner */
    bool cleanup_delete;       /* cleanup.policy lists delete */
    bool cleanup_compact;      /* cleanup.policy lists compact */
    int32_t max_message_bytes;
    int64_t timestamp_before_max_ms;
    int64_t timestamp_after_max_ms;
    int32_t min_insync_replicas; /* acks=-1 needs an ISR this large (cluster mode) */
    int codec; /* compression.type: -1 producer, else 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd */
} kb_topic_settings;

struct kb_topic;

/* The topic's settings, computed now if a change invalidated them. */
const kb_topic_settings *kb_topic_settings_of(const kb_config *cfg, struct kb_topic *t);
void kb_topic_settings_invalidate(struct kb_topic *t);
/* Resolves every setting of t (NULL: the broker's defaults for a topic). */
void kb_topic_settings_compute(const kb_config *cfg, const struct kb_topic *t,
                               kb_topic_settings *out);

#endif
