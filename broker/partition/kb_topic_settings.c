#include "kb_topic_settings.h"

#include <stdlib.h>
#include <string.h>

#include "kb_topic_conf.h"
#include "kb_topics.h"

static const char *value_of(const kb_config *cfg, const kb_topic *t, const char *key)
{
    int8_t source;
    return kb_topic_conf_effective(cfg, t, key, &source);
}

static int codec_of(const char *name)
{
    static const char *const names[] = {"uncompressed", "gzip", "snappy", "lz4", "zstd"};
    for (int i = 0; name != NULL && i < 5; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

static void log_settings(const kb_config *cfg, const kb_topic *t, ks_log_config *lc)
{
    ks_log_config_default(lc);
    lc->segment_bytes = kb_topic_conf_long(cfg, t, "segment.bytes", lc->segment_bytes);
    lc->segment_ms = kb_topic_conf_long(cfg, t, "segment.ms", lc->segment_ms);
    lc->index_interval_bytes =
        (int32_t)kb_topic_conf_long(cfg, t, "index.interval.bytes", lc->index_interval_bytes);
    lc->segment_index_bytes =
        (int32_t)kb_topic_conf_long(cfg, t, "segment.index.bytes", lc->segment_index_bytes);
    lc->retention_ms = kb_topic_conf_long(cfg, t, "retention.ms", lc->retention_ms);
    lc->retention_bytes = kb_topic_conf_long(cfg, t, "retention.bytes", lc->retention_bytes);
    lc->flush_messages = kb_topic_conf_long(cfg, t, "flush.messages", lc->flush_messages);
    lc->flush_ms = kb_topic_conf_long(cfg, t, "flush.ms", lc->flush_ms);
    const char *tt = value_of(cfg, t, "message.timestamp.type");
    lc->message_timestamp_type = tt != NULL && strcmp(tt, "LogAppendTime") == 0
                                     ? KS_TS_LOG_APPEND_TIME
                                     : KS_TS_CREATE_TIME;
}

static void compact_settings(const kb_config *cfg, const kb_topic *t, ks_compact_config *cc)
{
    ks_compact_config_default(cc);
    const char *ratio = value_of(cfg, t, "min.cleanable.dirty.ratio");
    cc->min_cleanable_ratio =
        ratio != NULL ? strtod(ratio, NULL) : cfg->log_cleaner_min_cleanable_ratio;
    cc->delete_retention_ms =
        kb_topic_conf_long(cfg, t, "delete.retention.ms", cfg->log_cleaner_delete_retention_ms);
    cc->min_lag_ms =
        kb_topic_conf_long(cfg, t, "min.compaction.lag.ms", cfg->log_cleaner_min_compaction_lag_ms);
    cc->max_lag_ms =
        kb_topic_conf_long(cfg, t, "max.compaction.lag.ms", cfg->log_cleaner_max_compaction_lag_ms);
}

void kb_topic_settings_compute(const kb_config *cfg, const kb_topic *t, kb_topic_settings *out)
{
    memset(out, 0, sizeof(*out));
    const char *policy = value_of(cfg, t, "cleanup.policy");
    out->cleanup_delete = policy != NULL && strstr(policy, "delete") != NULL;
    out->cleanup_compact = policy != NULL && strstr(policy, "compact") != NULL;
    log_settings(cfg, t, &out->log);
    if (!out->cleanup_delete)
        out->log.retention_ms = out->log.retention_bytes = -1;
    compact_settings(cfg, t, &out->compact);
    out->max_message_bytes = (int32_t)kb_topic_conf_long(cfg, t, "max.message.bytes", 1048588);
    out->timestamp_before_max_ms =
        kb_topic_conf_long(cfg, t, "message.timestamp.before.max.ms", INT64_MAX);
    out->timestamp_after_max_ms = kb_topic_conf_long(cfg, t, "message.timestamp.after.max.ms", INT64_MAX);
    out->codec = codec_of(value_of(cfg, t, "compression.type"));
    out->min_insync_replicas =
        (int32_t)kb_topic_conf_long(cfg, t, "min.insync.replicas", cfg->min_insync_replicas);
}

const kb_topic_settings *kb_topic_settings_of(const kb_config *cfg, kb_topic *t)
{
    if (!t->settings_valid) {
        kb_topic_settings_compute(cfg, t, &t->settings);
        t->settings_valid = true;
    }
    return &t->settings;
}

void kb_topic_settings_invalidate(kb_topic *t)
{
    t->settings_valid = false;
}
