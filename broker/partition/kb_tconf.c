#include "kb_tconf.h"

#include "kb_dynconf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum cfg_type {
    T_LONG,
    T_INT,
    T_BOOL,
    T_DOUBLE,
    T_STRING,
    T_LIST,
    T_POLICY,
    T_TSTYPE,
    T_COMP
} cfg_type;

/* Kafka 4.1's topic configs (LogConfig), sorted by key. dflt is Kafka's
 * default, used when no broker key derives it. Kafka 4.0 removed
 * message.format.version, message.downconversion.enable and
 * message.timestamp.difference.max.ms: they are unknown keys, as there. */
static const struct {
    const char *key;
    cfg_type type;
    int64_t min;
    const char *dflt;
} topic_keys[] = {
    {"cleanup.policy", T_POLICY, 0, "delete"},
    {"compression.gzip.level", T_INT, -1, "-1"},
    {"compression.lz4.level", T_INT, 1, "9"},
    {"compression.type", T_COMP, 0, "producer"},
    {"compression.zstd.level", T_INT, -131072, "3"},
    {"delete.retention.ms", T_LONG, 0, "86400000"},
    {"file.delete.delay.ms", T_LONG, 0, "60000"},
    {"flush.messages", T_LONG, 1, "9223372036854775807"},
    {"flush.ms", T_LONG, 0, "9223372036854775807"},
    {"follower.replication.throttled.replicas", T_LIST, 0, ""},
    {"index.interval.bytes", T_INT, 0, "4096"},
    {"leader.replication.throttled.replicas", T_LIST, 0, ""},
    {"local.retention.bytes", T_LONG, -2, "-2"},
    {"local.retention.ms", T_LONG, -2, "-2"},
    {"max.compaction.lag.ms", T_LONG, 1, "9223372036854775807"},
    {"max.message.bytes", T_INT, 0, "1048588"},
    {"message.timestamp.after.max.ms", T_LONG, 0, "3600000"},
    {"message.timestamp.before.max.ms", T_LONG, 0, "9223372036854775807"},
    {"message.timestamp.type", T_TSTYPE, 0, "CreateTime"},
    {"min.cleanable.dirty.ratio", T_DOUBLE, 0, "0.5"},
    {"min.compaction.lag.ms", T_LONG, 0, "0"},
    {"min.insync.replicas", T_INT, 1, "1"},
    {"preallocate", T_BOOL, 0, "false"},
    {"remote.log.copy.disable", T_BOOL, 0, "false"},
    {"remote.log.delete.on.disable", T_BOOL, 0, "false"},
    {"remote.storage.enable", T_BOOL, 0, "false"},
    {"retention.bytes", T_LONG, -1, "-1"},
    {"retention.ms", T_LONG, -1, "604800000"},
    {"segment.bytes", T_INT, 1048576, "1073741824"}, /* Kafka 4's minimum */
    {"segment.index.bytes", T_INT, 4, "10485760"},
    {"segment.jitter.ms", T_LONG, 0, "0"},
    {"segment.ms", T_LONG, 1, "604800000"},
    {"unclean.leader.election.enable", T_BOOL, 0, "false"},
};

static bool parse_long(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool value_ok(cfg_type t, int64_t min, const char *v, const char **expected)
{
    int64_t n;
    switch (t) {
    case T_LONG:
    case T_INT:
        *expected = "an integer in range";
        return parse_long(v, &n) && n >= min && (t == T_LONG || n <= INT32_MAX);
    case T_BOOL:
        *expected = "true or false";
        return strcasecmp(v, "true") == 0 || strcasecmp(v, "false") == 0;
    case T_DOUBLE: {
        char *end;
        *expected = "a number between 0 and 1";
        double d = strtod(v, &end);
        return end != v && *end == '\0' && d >= 0 && d <= 1;
    }
    case T_POLICY:
        *expected = "a list of delete, compact";
        return strcmp(v, "delete") == 0 || strcmp(v, "compact") == 0 ||
               strcmp(v, "compact,delete") == 0 || strcmp(v, "delete,compact") == 0 ||
               strcmp(v, "") == 0;
    case T_TSTYPE:
        *expected = "CreateTime or LogAppendTime";
        return strcmp(v, "CreateTime") == 0 || strcmp(v, "LogAppendTime") == 0;
    case T_COMP:
        *expected = "one of uncompressed, zstd, lz4, snappy, gzip, producer";
        return strcmp(v, "uncompressed") == 0 || strcmp(v, "zstd") == 0 ||
               strcmp(v, "lz4") == 0 || strcmp(v, "snappy") == 0 || strcmp(v, "gzip") == 0 ||
               strcmp(v, "producer") == 0;
    case T_STRING:
    case T_LIST:
        *expected = "a string";
        return true;
    }
    return false;
}

kp_err kb_tconf_check(const char *key, const char *value, kb_msgbuf *msg)
{
    for (size_t i = 0; i < sizeof(topic_keys) / sizeof(topic_keys[0]); i++) {
        if (strcmp(topic_keys[i].key, key) != 0)
            continue;
        const char *expected = "";
        if (value == NULL) {
            kb_msgf(msg, "Null value not supported for topic configs: %s", key);
            return KP_ERR_INVALID_CONFIG;
        }
        if (!value_ok(topic_keys[i].type, topic_keys[i].min, value, &expected)) {
            int64_t n;
            bool integer = topic_keys[i].type == T_INT || topic_keys[i].type == T_LONG;
            if (integer && parse_long(value, &n) && n < topic_keys[i].min)
                kb_msgf(msg, "Invalid value %s for configuration %s: Value must be at least %lld",
                        value, key, (long long)topic_keys[i].min);
            else
                kb_msgf(msg, "Invalid value %s for configuration %s: expected %s", value, key,
                        expected);
            return KP_ERR_INVALID_CONFIG;
        }
        return KP_ERR_NONE;
    }
    kb_msgf(msg, "Unknown topic config name: %s", key);
    return KP_ERR_INVALID_CONFIG;
}

bool kb_tconf_is_list(const char *key)
{
    return strcmp(key, "cleanup.policy") == 0 ||
           strcmp(key, "follower.replication.throttled.replicas") == 0 ||
           strcmp(key, "leader.replication.throttled.replicas") == 0;
}

const char *kb_tconf_default(const char *key)
{
    for (size_t i = 0; i < kb_tconf_count(); i++)
        if (strcmp(topic_keys[i].key, key) == 0)
            return topic_keys[i].dflt;
    return NULL;
}

size_t kb_tconf_count(void)
{
    return sizeof(topic_keys) / sizeof(topic_keys[0]);
}

const char *kb_tconf_key(size_t i)
{
    return topic_keys[i].key;
}

int8_t kb_tconf_type(size_t i)
{
    static const int8_t wire[] = {
        [T_LONG] = KB_CT_LONG,     [T_INT] = KB_CT_INT,    [T_BOOL] = KB_CT_BOOLEAN,
        [T_DOUBLE] = KB_CT_DOUBLE, [T_STRING] = KB_CT_STRING, [T_LIST] = KB_CT_LIST,
        [T_POLICY] = KB_CT_LIST,   [T_TSTYPE] = KB_CT_STRING, [T_COMP] = KB_CT_STRING,
    };
    return wire[topic_keys[i].type];
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
    for (size_t i = 0; i < kb_tconf_count(); i++) {
        if (strcmp(topic_keys[i].key, key) == 0) {
            *source = KB_CS_DEFAULT;
            return topic_keys[i].dflt;
        }
    }
    return NULL;
}

int64_t kb_tconf_long(const kb_config *cfg, const kb_topic *t, const char *key, int64_t dflt)
{
    int8_t source;
    const char *v = kb_tconf_effective(cfg, t, key, &source);
    int64_t n;
    return v != NULL && parse_long(v, &n) ? n : dflt;
}
