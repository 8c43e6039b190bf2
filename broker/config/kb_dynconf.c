#include "kb_dynconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_config.h"
#include "kb_file.h"
#include "kb_keydef.h"

#define DYN_FILE "runnel-broker-configs.properties"

struct kb_dynconf {
    char *dir;
    kb_cfgset sets[2];  /* indexed by kb_dyn_level */
    kb_cfgset topic[2]; /* the topic-key defaults they imply, per level */
};

static const char *get_in(const kb_cfgset sets[2], const char *key,
                                     kb_dyn_level *level);
static kp_err rebuild_topic_defaults(kb_dynconf *d);

/* Which keys are dynamic is the broker key table's to say (KB_KD_DYNAMIC,
 * KB_KD_PER_BROKER in kb_config.c): Kafka's dynamic broker keys that mean
 * something on one node, with the three replication throttles of its broker
 * quota configs (moot on one node, but kafka-reassign-partitions sets and
 * clears them). Listener and SSL keys are per-broker in Kafka; Runnel cannot
 * rebind or reload them at run time, so they stay read-only. */
bool kb_dynconf_key_dynamic(const char *key)
{
    return (kb_config_key_flags(key) & KB_KD_DYNAMIC) != 0;
}

bool kb_dynconf_key_per_broker(const char *key)
{
    return (kb_config_key_flags(key) & KB_KD_PER_BROKER) != 0;
}

/* ---- the file ------------------------------------------------------------ */

static const char *const level_names[2] = {"node", "cluster"};

static kp_err load_line(void *arg, char *line)
{
    kb_dynconf *d = arg;
    char *sp = strchr(line, ' ');
    char *eq = sp != NULL ? strchr(sp + 1, '=') : NULL;
    if (line[0] == '#' || line[0] == '\0')
        return KP_ERR_NONE;
    if (eq == NULL)
        return KP_ERR__CORRUPT;
    *sp = '\0';
    *eq = '\0';
    kb_value_unescape(eq + 1);
    for (int l = 0; l < 2; l++)
        if (strcmp(line, level_names[l]) == 0 && kb_dynconf_key_dynamic(sp + 1))
            return kb_cfgset_put(&d->sets[l], sp + 1, eq + 1);
    return KP_ERR_NONE; /* a key no longer dynamic: dropped */
}

static void emit(void *arg, FILE *f)
{
    const kb_dynconf *d = arg;
    fprintf(f, "# runnel dynamic broker configs, version 1\n");
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < d->sets[l].n; i++) {
            fprintf(f, "%s %s=", level_names[l], d->sets[l].v[i].key);
            kb_value_escape(f, d->sets[l].v[i].value);
            fputc('\n', f);
        }
    }
}

static kp_err save(kb_dynconf *d)
{
    kp_err e = kb_file_write_stream(d->dir, DYN_FILE, emit, d);
    return e == KP_ERR_NONE || e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
}

kp_err kb_dynconf_open(const char *dir, kb_dynconf **out)
{
    kb_dynconf *d = calloc(1, sizeof(*d));
    if (d == NULL || (d->dir = strdup(dir)) == NULL) {
        free(d);
        return KP_ERR__NOMEM;
    }
    kp_err e = kb_file_read_lines(d->dir, DYN_FILE, load_line, d);
    if (e == KP_ERR_NONE)
        e = rebuild_topic_defaults(d);
    if (e != KP_ERR_NONE) {
        kb_dynconf_close(d);
        return e;
    }
    *out = d;
    return KP_ERR_NONE;
}

void kb_dynconf_close(kb_dynconf *d)
{
    if (d == NULL)
        return;
    kb_cfgset_fini(&d->sets[0]);
    kb_cfgset_fini(&d->sets[1]);
    kb_cfgset_fini(&d->topic[0]);
    kb_cfgset_fini(&d->topic[1]);
    free(d->dir);
    free(d);
}

const kb_cfgset *kb_dynconf_set(const kb_dynconf *d, kb_dyn_level level)
{
    return &d->sets[level];
}

kp_err kb_dynconf_replace(kb_dynconf *d, kb_dyn_level level, kb_cfgset *s)
{
    kb_cfgset old = d->sets[level];
    d->sets[level] = *s;
    kp_err e = save(d);
    if (e != KP_ERR_NONE) {
        d->sets[level] = old; /* the caller keeps (and frees) *s */
        return e;
    }
    kb_cfgset_fini(&old);
    *s = (kb_cfgset){0, NULL};
    return rebuild_topic_defaults(d);
}

const char *kb_dynconf_get(const kb_dynconf *d, const char *key, kb_dyn_level *level)
{
    return get_in(d->sets, key, level);
}

static const char *get_in(const kb_cfgset sets[2], const char *key,
                                     kb_dyn_level *level)
{
    for (int l = 0; l < 2; l++) {
        const char *v = kb_cfgset_get(&sets[l], key);
        if (v != NULL) {
            *level = (kb_dyn_level)l;
            return v;
        }
    }
    return NULL;
}

/* Topic keys and the broker keys that set their defaults, finer units first
 * (Kafka's topic config synonyms). */
static const struct synonym {
    const char *topic_key;
    const char *broker_key;
    int64_t scale;
} synonyms[] = {
    {"cleanup.policy", "log.cleanup.policy", 1},
    {"compression.gzip.level", "compression.gzip.level", 1},
    {"compression.lz4.level", "compression.lz4.level", 1},
    {"compression.type", "compression.type", 1},
    {"compression.zstd.level", "compression.zstd.level", 1},
    {"delete.retention.ms", "log.cleaner.delete.retention.ms", 1},
    {"file.delete.delay.ms", "log.segment.delete.delay.ms", 1},
    {"flush.messages", "log.flush.interval.messages", 1},
    {"flush.ms", "log.flush.interval.ms", 1},
    {"index.interval.bytes", "log.index.interval.bytes", 1},
    {"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", 1},
    {"max.message.bytes", "message.max.bytes", 1},
    {"message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", 1},
    {"message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", 1},
    {"message.timestamp.type", "log.message.timestamp.type", 1},
    {"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", 1},
    {"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", 1},
    {"min.insync.replicas", "min.insync.replicas", 1},
    {"preallocate", "log.preallocate", 1},
    {"retention.bytes", "log.retention.bytes", 1},
    {"retention.ms", "log.retention.ms", 1},
    {"retention.ms", "log.retention.minutes", 60000},
    {"retention.ms", "log.retention.hours", 3600000},
    {"segment.bytes", "log.segment.bytes", 1},
    {"segment.index.bytes", "log.index.size.max.bytes", 1},
    {"segment.jitter.ms", "log.roll.jitter.ms", 1},
    {"segment.jitter.ms", "log.roll.jitter.hours", 3600000},
    {"segment.ms", "log.roll.ms", 1},
    {"segment.ms", "log.roll.hours", 3600000},
    {"unclean.leader.election.enable", "unclean.leader.election.enable", 1},
};

#define N_SYNONYMS (sizeof(synonyms) / sizeof(synonyms[0]))

/* The topic default a level's set gives topic_key (scaled), in buf. */
static const char *level_topic_value(const kb_cfgset *s, const char *topic_key, char *buf,
                                     size_t cap)
{
    for (size_t i = 0; i < N_SYNONYMS; i++) {
        const struct synonym *sy = &synonyms[i];
        const char *v;
        if (strcmp(sy->topic_key, topic_key) != 0 || (v = kb_cfgset_get(s, sy->broker_key)) == NULL)
            continue;
        if (sy->scale == 1)
            return v;
        long long n = strtoll(v, NULL, 10);
        snprintf(buf, cap, "%lld", n < 0 ? -1 : n * (long long)sy->scale);
        return buf;
    }
    return NULL;
}

/* Recomputes the cache of topic defaults, after a load or a replace. */
static kp_err rebuild_topic_defaults(kb_dynconf *d)
{
    kb_cfgset_fini(&d->topic[0]);
    kb_cfgset_fini(&d->topic[1]);
    for (size_t i = 0; i < N_SYNONYMS; i++) {
        for (int l = 0; l < 2; l++) {
            char buf[32];
            const char *v = level_topic_value(&d->sets[l], synonyms[i].topic_key, buf, sizeof(buf));
            if (v != NULL && kb_cfgset_get(&d->topic[l], synonyms[i].topic_key) == NULL &&
                kb_cfgset_put(&d->topic[l], synonyms[i].topic_key, v) != KP_ERR_NONE)
                return KP_ERR__NOMEM;
        }
    }
    return KP_ERR_NONE;
}

const char *kb_dynconf_topic_default(const kb_dynconf *d, const char *topic_key,
                                     kb_dyn_level *level)
{
    return get_in(d->topic, topic_key, level);
}

const char *kb_dynconf_synonym(const char *topic_key, size_t i, int64_t *scale)
{
    for (size_t k = 0; k < N_SYNONYMS; k++) {
        if (strcmp(synonyms[k].topic_key, topic_key) != 0 || i-- > 0)
            continue;
        *scale = synonyms[k].scale;
        return synonyms[k].broker_key;
    }
    return NULL;
}
