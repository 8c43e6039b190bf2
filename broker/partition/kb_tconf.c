#include "kb_tconf.h"

#include "kb_dynconf.h"
#include "kb_keydef.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Kafka 4.1's topic configs (LogConfig), sorted by key, as key
 * definitions (kb_keydef.h): def is Kafka's default, used when no broker key
 * derives the value. Kafka 4.0 removed message.format.version,
 * message.downconversion.enable and message.timestamp.difference.max.ms:
 * they are unknown keys, as there. Choices are matched exactly, as Kafka's
 * ValidString and ValidList do. */
#define TL(n, d, lo)    {n, KB_KT_LONG, d, lo, INT64_MAX, NULL, 0, KB_KD_NO_FIELD}
#define TI(n, d, lo)    {n, KB_KT_INT, d, lo, INT32_MAX, NULL, 0, KB_KD_NO_FIELD}
#define TB(n, d)        {n, KB_KT_BOOL, d, 0, 1, NULL, 0, KB_KD_NO_FIELD}
#define TS(n, d)        {n, KB_KT_STRING, d, 0, 0, NULL, 0, KB_KD_NO_FIELD}
#define TD(n, d, lo, hi) {n, KB_KT_DOUBLE, d, lo, hi, NULL, 0, KB_KD_NO_FIELD}
#define TLS(n, d, ch)   {n, KB_KT_LIST, d, 0, 0, ch, KB_KD_EXACT_CASE, KB_KD_NO_FIELD}
#define TE(n, d, ch)    {n, KB_KT_ENUM, d, 0, 0, ch, KB_KD_EXACT_CASE, KB_KD_NO_FIELD}

static const kb_keydef topic_keys[] = {
    TLS("cleanup.policy", "delete", "compact|delete"),
    TI("compression.gzip.level", "-1", -1),
    TI("compression.lz4.level", "9", 1),
    TE("compression.type", "producer", "uncompressed|zstd|lz4|snappy|gzip|producer"),
    TI("compression.zstd.level", "3", -131072),
    TL("delete.retention.ms", "86400000", 0),
    TL("file.delete.delay.ms", "60000", 0),
    TL("flush.messages", "9223372036854775807", 1),
    TL("flush.ms", "9223372036854775807", 0),
    TLS("follower.replication.throttled.replicas", "", NULL),
    TI("index.interval.bytes", "4096", 0),
    TLS("leader.replication.throttled.replicas", "", NULL),
    TL("local.retention.bytes", "-2", -2),
    TL("local.retention.ms", "-2", -2),
    TL("max.compaction.lag.ms", "9223372036854775807", 1),
    TI("max.message.bytes", "1048588", 0),
    TL("message.timestamp.after.max.ms", "3600000", 0),
    TL("message.timestamp.before.max.ms", "9223372036854775807", 0),
    TE("message.timestamp.type", "CreateTime", "CreateTime|LogAppendTime"),
    TD("min.cleanable.dirty.ratio", "0.5", 0, 1),
    TL("min.compaction.lag.ms", "0", 0),
    TI("min.insync.replicas", "1", 1),
    TB("preallocate", "false"),
    TB("remote.log.copy.disable", "false"),
    TB("remote.log.delete.on.disable", "false"),
    TB("remote.storage.enable", "false"),
    TL("retention.bytes", "-1", -1),
    TL("retention.ms", "604800000", -1),
    TI("segment.bytes", "1073741824", 1048576), /* Kafka 4's minimum */
    TI("segment.index.bytes", "10485760", 4),
    TL("segment.jitter.ms", "0", 0),
    TL("segment.ms", "604800000", 1),
    TB("unclean.leader.election.enable", "false"),
};

#define N_TOPIC_KEYS (sizeof(topic_keys) / sizeof(topic_keys[0]))

kp_err kb_tconf_check(const char *key, const char *value, kb_msgbuf *msg)
{
    const kb_keydef *kd = kb_keydef_find(topic_keys, N_TOPIC_KEYS, key);
    if (kd == NULL) {
        kb_msgf(msg, "Unknown topic config name: %s", key);
        return KP_ERR_INVALID_CONFIG;
    }
    if (value == NULL) {
        kb_msgf(msg, "Null value not supported for topic configs: %s", key);
        return KP_ERR_INVALID_CONFIG;
    }
    return kb_keydef_check(kd, value, msg);
}

bool kb_tconf_is_list(const char *key)
{
    const kb_keydef *kd = kb_keydef_find(topic_keys, N_TOPIC_KEYS, key);
    return kd != NULL && kd->type == KB_KT_LIST;
}

const char *kb_tconf_default(const char *key)
{
    const kb_keydef *kd = kb_keydef_find(topic_keys, N_TOPIC_KEYS, key);
    return kd != NULL ? kd->def : NULL;
}

size_t kb_tconf_count(void)
{
    return N_TOPIC_KEYS;
}

const char *kb_tconf_key(size_t i)
{
    return topic_keys[i].name;
}

int8_t kb_tconf_type(size_t i)
{
    return kb_keydef_wire_type(&topic_keys[i]);
}

const char *kb_tconf_effective(const kb_config *cfg, const kb_topic *t, const char *key,
                               int8_t *source)
{
    const char *v = t != NULL ? kb_topic_config_get(t, key) : NULL;
    if (v != NULL) {
        *source = KB_CS_DYNAMIC_TOPIC;
        return v;
    }
    const kb_topic_default *td = kb_config_topic_default(cfg, key);
    if (t != NULL && t->dyn != NULL) {
        kb_dyn_level level;
        v = kb_dynconf_topic_default(t->dyn, key, &level);
        if (v != NULL) {
            *source = level == KB_DYN_NODE ? KB_CS_DYNAMIC_BROKER : KB_CS_DYNAMIC_DEFAULT_BROKER;
            return v;
        }
    }
    if (td != NULL && td->td_value != NULL) {
        *source = (td->td_source == KB_SRC_DEFAULT || td->td_source == KB_SRC_UNSET)
                      ? KB_CS_DEFAULT
                      : KB_CS_STATIC_BROKER;
        return td->td_value;
    }
    const kb_keydef *kd = kb_keydef_find(topic_keys, N_TOPIC_KEYS, key);
    if (kd != NULL)
        *source = KB_CS_DEFAULT;
    return kd != NULL ? kd->def : NULL;
}

int64_t kb_tconf_long(const kb_config *cfg, const kb_topic *t, const char *key, int64_t dflt)
{
    int8_t source;
    const char *v = kb_tconf_effective(cfg, t, key, &source);
    int64_t n;
    return v != NULL && kb_keydef_parse_integer(v, &n) ? n : dflt;
}
