#include "kb_topics.h"

#include "kb_replica.h"

#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kb_file.h"
#include "kb_log.h"
#include "kb_map.h"
#include "kb_partition_dirs.h"
#include "kb_topic_conf.h"

#define REGISTRY_FILE "runnel-topics.properties"
#define META_FILE "meta.properties"

struct kb_topics {
    const kb_config *cfg;
    const char *dir; /* first log dir */
    char cluster_id[64];
    kb_topic **v;
    size_t n;
    size_t cap;
    kb_topic **busy; /* being created or deleted (invariant 4) */
    size_t nbusy;
    size_t capbusy;
    kb_map by_name; /* every filed topic, ready or busy, by its name with '.' as '_' */
    kb_map by_id;   /* the same, by topic id */
    const struct kb_dynconf *dyn; /* handed to every topic (kb_topics_set_dynconf) */
};

kp_err kb_topics_check_name(kp_str name, kb_msgbuf *msg)
{
    if (name.len <= 0) {
        kb_msgf(msg, "Topic name is illegal, it can't be empty");
        return KP_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if ((name.len == 1 && name.p[0] == '.') ||
        (name.len == 2 && name.p[0] == '.' && name.p[1] == '.')) {
        kb_msgf(msg, "Topic name cannot be \".\" or \"..\"");
        return KP_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if (name.len > KB_TOPIC_NAME_MAX) {
        kb_msgf(msg, "Topic name is illegal, it can't be longer than %d characters, topic name: %.*s",
             KB_TOPIC_NAME_MAX, 64, name.p);
        return KP_ERR_INVALID_TOPIC_EXCEPTION;
    }
    for (int32_t i = 0; i < name.len; i++) {
        char ch = name.p[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok) {
            kb_msgf(msg,
                 "Topic name \"%.*s\" is illegal, it contains a character other than ASCII "
                 "alphanumerics, '.', '_' and '-'",
                 name.len > 64 ? 64 : name.len, name.p);
            return KP_ERR_INVALID_TOPIC_EXCEPTION;
        }
    }
    return KP_ERR_NONE;
}

/* ---- lookup ------------------------------------------------------------- */

/* Names that differ only in '.' versus '_' hash alike (find_colliding). */
static bool name_hash(kp_str name, uint64_t *h)
{
    char norm[256];
    if (name.len < 0 || (size_t)name.len >= sizeof norm)
        return false; /* longer than any valid topic name: never filed */
    for (int32_t i = 0; i < name.len; i++)
        norm[i] = name.p[i] == '.' ? '_' : name.p[i];
    *h = kb_map_hash_bytes(norm, (size_t)name.len);
    return true;
}

static bool name_is(const void *entry, const void *key)
{
    return kp_cstr_is(((const kb_topic *)entry)->name, *(const kp_str *)key);
}

static bool id_is(const void *entry, const void *key)
{
    return memcmp(((const kb_topic *)entry)->id.b, ((const kp_uuid *)key)->b,
                  sizeof(((const kp_uuid *)key)->b)) == 0;
}

static uint64_t id_hash(const kp_uuid *id)
{
    return kb_map_hash_bytes(id->b, sizeof(id->b));
}

/* Any filed topic of that name, ready or busy. */
static kb_topic *find_filed(const kb_topics *ts, kp_str name)
{
    uint64_t h;
    return name_hash(name, &h) ? kb_map_find(&ts->by_name, h, &name, name_is) : NULL;
}

static kp_err index_add(kb_topics *ts, kb_topic *t)
{
    uint64_t h;
    (void)name_hash(kp_str_from(t->name), &h);
    if (kb_map_insert(&ts->by_name, h, t) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    if (kb_map_insert(&ts->by_id, id_hash(&t->id), t) != KP_ERR_NONE) {
        kb_map_remove_entry(&ts->by_name, h, t);
        return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static void index_remove(kb_topics *ts, const kb_topic *t)
{
    uint64_t h;
    (void)name_hash(kp_str_from(t->name), &h);
    kb_map_remove_entry(&ts->by_name, h, t);
    kb_map_remove_entry(&ts->by_id, id_hash(&t->id), t);
}

kb_topic *kb_topics_find(const kb_topics *ts, kp_str name)
{
    kb_topic *t = find_filed(ts, name);
    return t != NULL && t->state == KB_TOPIC_READY ? t : NULL;
}

kb_topic *kb_topics_find_id(const kb_topics *ts, const kp_uuid *id)
{
    kb_topic *t = kb_map_find(&ts->by_id, id_hash(id), id, id_is);
    return t != NULL && t->state == KB_TOPIC_READY ? t : NULL;
}

kb_topic *kb_topics_find_ref(const kb_topics *ts, bool by_id, kp_str name, const kp_uuid *id)
{
    return by_id ? kb_topics_find_id(ts, id) : kb_topics_find(ts, name);
}

size_t kb_topics_count(const kb_topics *ts)
{
    return ts->n;
}

kb_topic *kb_topics_at(const kb_topics *ts, size_t i)
{
    return i < ts->n ? ts->v[i] : NULL;
}

const char *kb_topics_cluster_id(const kb_topics *ts)
{
    return ts->cluster_id;
}

const char *kb_topic_config_get(const kb_topic *t, const char *key)
{
    for (size_t i = 0; i < t->nconfigs; i++)
        if (strcmp(t->configs[i].key, key) == 0)
            return t->configs[i].value;
    return NULL;
}

/* Kafka refuses names that differ only in '.' versus '_' (metric names clash). */
static bool collides(const void *entry, const void *key)
{
    const char *tn = ((const kb_topic *)entry)->name;
    kp_str name = *(const kp_str *)key;
    if ((int32_t)strlen(tn) != name.len)
        return false;
    for (int32_t k = 0; k < name.len; k++)
        if ((tn[k] == '.' ? '_' : tn[k]) != (name.p[k] == '.' ? '_' : name.p[k]))
            return false;
    return true;
}

static kb_topic *find_colliding(const kb_topics *ts, kp_str name)
{
    uint64_t h;
    return name_hash(name, &h) ? kb_map_find(&ts->by_name, h, &name, collides) : NULL;
}

kb_topic *kb_topics_busy(const kb_topics *ts, kp_str name)
{
    kb_topic *t = find_filed(ts, name);
    return t != NULL && t->state != KB_TOPIC_READY ? t : NULL;
}

kb_topic *const *kb_topics_busy_all(const kb_topics *ts, size_t *n)
{
    *n = ts->nbusy;
    return ts->busy;
}

const char *kb_topics_dir(const kb_topics *ts)
{
    return ts->dir;
}

/* ---- the registry file -------------------------------------------------- */


static void registry_emit(FILE *f, const kb_topic *t)
{
    static const char *const marks[] = {"", " pending", " deleting"};
    char hex[33];
    kb_uuid_hex(&t->id, hex);
    fprintf(f, "topic %s %s %d%s\n", t->name, hex, t->npartitions, marks[t->state]);
    for (size_t c = 0; c < t->nconfigs; c++) {
        fprintf(f, "config %s %s=", t->name, t->configs[c].key);
        kb_value_escape(f, t->configs[c].value);
        fputc('\n', f);
    }
}

static kp_err registry_save(kb_topics *ts)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (f == NULL)
        return KP_ERR__NOMEM;
    fprintf(f, "# runnel topic registry, version 1\n");
    for (size_t i = 0; i < ts->n; i++)
        registry_emit(f, ts->v[i]);
    for (size_t i = 0; i < ts->nbusy; i++)
        registry_emit(f, ts->busy[i]);
    if (fclose(f) != 0) {
        free(data);
        return KP_ERR__NOMEM;
    }
    kp_err e = kb_file_write_atomic(ts->dir, REGISTRY_FILE, data, len);
    free(data);
    return e;
}

static void topic_free(kb_topic *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nconfigs; i++) {
        free(t->configs[i].key);
        free(t->configs[i].value);
    }
    free(t->configs);
    for (int32_t p = 0; t->partitions != NULL && p < t->npartitions; p++)
        kb_replica_free(t->partitions[p].repl);
    free(t->partitions);
    free(t->name);
    free(t);
}

static kb_topic *topic_new(const char *name, size_t len, const kp_uuid *id, int32_t partitions)
{
    kb_topic *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->name = strndup(name, len);
    t->partitions = calloc((size_t)partitions, sizeof(*t->partitions));
    if (t->name == NULL || t->partitions == NULL) {
        topic_free(t);
        return NULL;
    }
    t->id = *id;
    t->npartitions = partitions;
    for (int32_t p = 0; p < partitions; p++)
        t->partitions[p].index = p;
    t->internal = t->name[0] == '_' && t->name[1] == '_';
    return t;
}

static int config_cmp(const void *a, const void *b)
{
    return strcmp(((const kb_topic_config *)a)->key, ((const kb_topic_config *)b)->key);
}

/* Sets key=value on t (replacing an existing value). */
static kp_err topic_set_config(kb_topic *t, const char *key, const char *value)
{
    kb_topic_settings_invalidate(t);
    for (size_t i = 0; i < t->nconfigs; i++) {
        if (strcmp(t->configs[i].key, key) == 0) {
            char *v = strdup(value);
            if (v == NULL)
                return KP_ERR__NOMEM;
            free(t->configs[i].value);
            t->configs[i].value = v;
            return KP_ERR_NONE;
        }
    }
    kb_topic_config *c = realloc(t->configs, (t->nconfigs + 1) * sizeof(*c));
    if (c == NULL)
        return KP_ERR__NOMEM;
    t->configs = c;
    c[t->nconfigs].key = strdup(key);
    c[t->nconfigs].value = strdup(value);
    if (c[t->nconfigs].key == NULL || c[t->nconfigs].value == NULL) {
        free(c[t->nconfigs].key);
        free(c[t->nconfigs].value);
        return KP_ERR__NOMEM;
    }
    t->nconfigs++;
    qsort(t->configs, t->nconfigs, sizeof(*t->configs), config_cmp);
    return KP_ERR_NONE;
}

static kp_err list_push(kb_topic ***v, size_t *n, size_t *cap, kb_topic *t)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        kb_topic **nv = realloc(*v, ncap * sizeof(*nv));
        if (nv == NULL)
            return KP_ERR__NOMEM;
        *v = nv;
        *cap = ncap;
    }
    (*v)[(*n)++] = t;
    return KP_ERR_NONE;
}

/* Removes t from v[0..n) keeping the order; false if absent. */
static bool list_remove(kb_topic **v, size_t *n, const kb_topic *t)
{
    size_t i = 0;
    while (i < *n && v[i] != t)
        i++;
    if (i == *n)
        return false;
    memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(v[0]));
    (*n)--;
    return true;
}

/* Files t with the visible topics, or the busy ones if it is not ready,
 * and in the index. */
static kp_err registry_append(kb_topics *ts, kb_topic *t)
{
    t->dyn = ts->dyn;
    if (index_add(ts, t) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kp_err e = t->state != KB_TOPIC_READY ? list_push(&ts->busy, &ts->nbusy, &ts->capbusy, t)
                                          : list_push(&ts->v, &ts->n, &ts->cap, t);
    if (e != KP_ERR_NONE)
        index_remove(ts, t);
    return e;
}

/* Frees a topic that leaves the registry (or never entered it). */
static void topic_drop(kb_topics *ts, kb_topic *t)
{
    index_remove(ts, t);
    topic_free(t);
}

/* A registry line's optional state mark. */
static bool parse_state(const char *mark, kb_topic_state *out)
{
    if (mark[0] == '\0')
        *out = KB_TOPIC_READY;
    else if (strcmp(mark, "pending") == 0)
        *out = KB_TOPIC_CREATING;
    else if (strcmp(mark, "deleting") == 0)
        *out = KB_TOPIC_DELETING;
    else
        return false;
    return true;
}

static kp_err registry_parse_line(kb_topics *ts, char *line)
{
    char name[KB_TOPIC_NAME_MAX + 1], hex[40], mark[16] = "";
    int partitions;
    if (strncmp(line, "topic ", 6) == 0) {
        int got = sscanf(line, "topic %249s %39s %d %15s", name, hex, &partitions, mark);
        kb_topic_state state;
        if (got < 3 || partitions < 1 || partitions > KB_TOPIC_MAX_PARTITIONS ||
            !parse_state(mark, &state))
            return KP_ERR__CORRUPT;
        kp_uuid id;
        if (!kb_uuid_parse_hex(hex, &id))
            return KP_ERR__CORRUPT;
        kb_topic *t = topic_new(name, strlen(name), &id, partitions);
        if (t == NULL)
            return KP_ERR__NOMEM;
        t->state = state;
        kp_err e = registry_append(ts, t);
        if (e != KP_ERR_NONE)
            topic_free(t);
        return e;
    }
    if (strncmp(line, "config ", 7) == 0) {
        char *sp = strchr(line + 7, ' ');
        char *eq = sp ? strchr(sp + 1, '=') : NULL;
        if (sp == NULL || eq == NULL)
            return KP_ERR__CORRUPT;
        *sp = '\0';
        *eq = '\0';
        kb_topic *t = kb_topics_find(ts, kp_str_from(line + 7));
        if (t == NULL)
            t = kb_topics_busy(ts, kp_str_from(line + 7));
        if (t == NULL)
            return KP_ERR__CORRUPT;
        kb_value_unescape(eq + 1);
        return topic_set_config(t, sp + 1, eq + 1);
    }
    return line[0] == '#' || line[0] == '\0' ? KP_ERR_NONE : KP_ERR__CORRUPT;
}

static kp_err registry_load(kb_topics *ts, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", ts->dir, REGISTRY_FILE);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? KP_ERR_NONE : KP_ERR__IO;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    kp_err e = KP_ERR_NONE;
    while (e == KP_ERR_NONE && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = '\0';
        e = registry_parse_line(ts, line);
    }
    free(line);
    fclose(f);
    if (e != KP_ERR_NONE)
        snprintf(err, errlen, "log.dirs=%s: %s line %d is not valid", ts->dir, REGISTRY_FILE,
                 lineno);
    return e;
}

/* ---- create, delete, grow ----------------------------------------------- */

/* One broker holds at most runnel.max.partitions partitions, so no request
 * can make it allocate (or mkdir) without bound. */
static kp_err check_broker_capacity(const kb_topics *ts, int32_t adding, kb_msgbuf *msg)
{
    int64_t total = adding;
    for (size_t i = 0; i < ts->n; i++)
        total += ts->v[i]->npartitions;
    for (size_t i = 0; i < ts->nbusy; i++)
        total += ts->busy[i]->npartitions;
    if (total <= ts->cfg->max_partitions)
        return KP_ERR_NONE;
    kb_msgf(msg, "Adding %d partitions would exceed this broker's limit of %d partitions "
                 "(runnel.max.partitions).", adding, ts->cfg->max_partitions);
    return KP_ERR_INVALID_PARTITIONS;
}

/* Validates a new topic and builds it (not yet filed) with id, or a fresh
 * one when id is NULL; *out NULL when validate_only. */
static kp_err create_prepare(kb_topics *ts, kp_str name, int32_t partitions,
                             const kb_topic_config *configs, size_t nconfigs, bool validate_only,
                             const kp_uuid *given_id, kb_topic **out, kb_msgbuf *msg)
{
    *out = NULL;
    kp_err e = kb_topics_check_name(name, msg);
    if (e != KP_ERR_NONE)
        return e;
    kb_topic *busy = kb_topics_busy(ts, name);
    if (kb_topics_find(ts, name) != NULL || busy != NULL) {
        kb_msgf(msg, busy != NULL && busy->state == KB_TOPIC_DELETING
                         ? "Topic '%.*s' is marked for deletion."
                         : "Topic '%.*s' already exists.", name.len, name.p);
        return KP_ERR_TOPIC_ALREADY_EXISTS;
    }
    kb_topic *other = find_colliding(ts, name);
    if (other != NULL) {
        kb_msgf(msg, "Topic '%.*s' collides with existing topic: %s", name.len, name.p,
             other->name);
        return KP_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if (partitions < 1 || partitions > KB_TOPIC_MAX_PARTITIONS) {
        kb_msgf(msg, "Number of partitions must be larger than 0 and at most %d.",
             KB_TOPIC_MAX_PARTITIONS);
        return KP_ERR_INVALID_PARTITIONS;
    }
    if ((e = check_broker_capacity(ts, partitions, msg)) != KP_ERR_NONE)
        return e;
    for (size_t i = 0; i < nconfigs; i++) {
        e = kb_topic_conf_check(configs[i].key, configs[i].value, msg);
        if (e != KP_ERR_NONE)
            return e;
    }
    if (validate_only)
        return KP_ERR_NONE;

    kp_uuid id;
    if (given_id != NULL) {
        id = *given_id;
        if (kb_map_find(&ts->by_id, id_hash(&id), &id, id_is) != NULL) {
            kb_msgf(msg, "Topic id of '%.*s' is already in use.", name.len, name.p);
            return KP_ERR_TOPIC_ALREADY_EXISTS;
        }
    } else {
        do
            kb_uuid_random(&id);
        while (kb_map_find(&ts->by_id, id_hash(&id), &id, id_is) != NULL);
    }
    kb_topic *t = topic_new(name.p, (size_t)name.len, &id, partitions);
    if (t == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < nconfigs && e == KP_ERR_NONE; i++)
        e = topic_set_config(t, configs[i].key, configs[i].value);
    if (e != KP_ERR_NONE) {
        topic_free(t);
        return e;
    }
    *out = t;
    return KP_ERR_NONE;
}

/* Files a prepared topic and persists the registry; on failure t is freed. */
static kp_err create_file(kb_topics *ts, kb_topic *t, kb_msgbuf *msg)
{
    kp_err e = registry_append(ts, t);
    if (e == KP_ERR_NONE && (e = registry_save(ts)) != KP_ERR_NONE) {
        if (t->state == KB_TOPIC_READY)
            ts->n--;
        else
            ts->nbusy--;
    }
    if (e != KP_ERR_NONE) {
        kb_msgf(msg, "Could not create topic in %s: %s", ts->dir, kp_err_name(e));
        topic_drop(ts, t);
        return e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
    }
    return KP_ERR_NONE;
}

kp_err kb_topics_create(kb_topics *ts, kp_str name, int32_t partitions,
                        const kb_topic_config *configs, size_t nconfigs, bool validate_only,
                        kb_topic **out, kb_msgbuf *msg)
{
    kb_topic *t;
    kp_err e = create_prepare(ts, name, partitions, configs, nconfigs, validate_only, NULL, &t,
                              msg);
    if (e != KP_ERR_NONE || t == NULL)
        return e;
    e = kb_partition_dirs_make(ts->dir, t->name, &t->id, 0, partitions);
    if (e != KP_ERR_NONE) {
        (void)kb_partition_dirs_remove(ts->dir, t->name, 0, partitions);
        kb_msgf(msg, "Could not create topic in %s: %s", ts->dir, kp_err_name(e));
        topic_free(t);
        return KP_ERR_KAFKA_STORAGE_ERROR;
    }
    char *tname = strdup(t->name);
    if ((e = create_file(ts, t, msg)) != KP_ERR_NONE) {
        if (tname != NULL)
            (void)kb_partition_dirs_remove(ts->dir, tname, 0, partitions);
        t = NULL;
    }
    free(tname);
    if (out != NULL)
        *out = t;
    return e;
}

static kp_err begin_create(kb_topics *ts, kp_str name, int32_t partitions,
                           const kb_topic_config *configs, size_t nconfigs, bool validate_only,
                           const kp_uuid *id, kb_topic **out, kb_msgbuf *msg)
{
    kb_topic *t;
    *out = NULL;
    kp_err e = create_prepare(ts, name, partitions, configs, nconfigs, validate_only, id, &t, msg);
    if (e != KP_ERR_NONE || t == NULL)
        return e;
    t->state = KB_TOPIC_CREATING;
    if ((e = create_file(ts, t, msg)) == KP_ERR_NONE)
        *out = t;
    return e;
}

kp_err kb_topics_begin_create(kb_topics *ts, kp_str name, int32_t partitions,
                              const kb_topic_config *configs, size_t nconfigs,
                              bool validate_only, kb_topic **out, kb_msgbuf *msg)
{
    return begin_create(ts, name, partitions, configs, nconfigs, validate_only, NULL, out, msg);
}

kp_err kb_topics_begin_create_id(kb_topics *ts, kp_str name, const kp_uuid *id,
                                 int32_t partitions, const kb_topic_config *configs,
                                 size_t nconfigs, kb_topic **out, kb_msgbuf *msg)
{
    return begin_create(ts, name, partitions, configs, nconfigs, false, id, out, msg);
}

kp_err kb_topics_end_create(kb_topics *ts, kb_topic *t, bool ok)
{
    KB_ASSERT(t->state == KB_TOPIC_CREATING);
    if (ok) {
        kp_err e = list_push(&ts->v, &ts->n, &ts->cap, t);
        if (e != KP_ERR_NONE)
            return e;
        bool filed = list_remove(ts->busy, &ts->nbusy, t);
        KB_ASSERT(filed);
        t->state = KB_TOPIC_READY;
        if (registry_save(ts) == KP_ERR_NONE)
            return KP_ERR_NONE;
        /* Still pending on disk: back to busy, for the caller to roll back. */
        ts->n--;
        t->state = KB_TOPIC_CREATING;
        ts->busy[ts->nbusy++] = t; /* its slot was just freed */
        return KP_ERR__IO;
    }
    bool filed = list_remove(ts->busy, &ts->nbusy, t);
    KB_ASSERT(filed);
    /* A failed create leaves the registry as if it never began. */
    if (registry_save(ts) != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"cannot save the topic registry\" dir=%s",
               ts->dir);
    topic_drop(ts, t);
    return KP_ERR_NONE;
}

kp_err kb_topics_begin_delete(kb_topics *ts, kb_topic *t, kb_msgbuf *msg)
{
    size_t i = 0;
    while (i < ts->n && ts->v[i] != t)
        i++;
    if (i == ts->n) {
        kb_msgf(msg, "This server does not host this topic.");
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    kp_err e = list_push(&ts->busy, &ts->nbusy, &ts->capbusy, t);
    if (e != KP_ERR_NONE)
        return e;
    memmove(&ts->v[i], &ts->v[i + 1], (ts->n - i - 1) * sizeof(ts->v[0]));
    ts->n--;
    t->state = KB_TOPIC_DELETING;
    if (registry_save(ts) != KP_ERR_NONE) {
        ts->nbusy--;
        t->state = KB_TOPIC_READY;
        memmove(&ts->v[i + 1], &ts->v[i], (ts->n - i) * sizeof(ts->v[0]));
        ts->v[i] = t;
        ts->n++;
        kb_msgf(msg, "Could not update the topic registry in %s", ts->dir);
        return KP_ERR_KAFKA_STORAGE_ERROR;
    }
    return KP_ERR_NONE;
}

kp_err kb_topics_end_delete(kb_topics *ts, kb_topic *t)
{
    bool filed = list_remove(ts->busy, &ts->nbusy, t);
    KB_ASSERT(t->state == KB_TOPIC_DELETING && filed);
    topic_drop(ts, t);
    /* Unsaved, the topic stays 'deleting' on disk and a restart finishes it. */
    return registry_save(ts);
}

kp_err kb_topics_internal(kb_topics *ts, kp_str name, int32_t partitions,
                          const kb_topic_config *configs, size_t nconfigs, kb_topic **out)
{
    *out = kb_topics_find(ts, name);
    if (*out != NULL)
        return KP_ERR_NONE;
    kb_msgbuf msg = {{0}};
    kp_err e = kb_topics_create(ts, name, partitions, configs, nconfigs, false, out, &msg);
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"cannot create %.*s\" error=%s %s", name.len,
               name.p, kp_err_name(e), msg.text);
    else
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"created %.*s\" partitions=%d", name.len, name.p,
               (*out)->npartitions);
    return e;
}

kp_err kb_topics_check_add_partitions(const kb_topics *ts, const kb_topic *t, int32_t total,
                                      kb_msgbuf *msg)
{
    if (t->growing != NULL) {
        kb_msgf(msg, "A partition increase of topic %s is in progress.", t->name);
        return KP_ERR_REASSIGNMENT_IN_PROGRESS;
    }
    if (total < t->npartitions) {
        kb_msgf(msg, "The topic %s currently has %d partition(s); %d would not be an increase.",
                t->name, t->npartitions, total);
        return KP_ERR_INVALID_PARTITIONS;
    }
    if (total == t->npartitions) {
        kb_msgf(msg, "Topic already has %d partition(s).", t->npartitions);
        return KP_ERR_INVALID_PARTITIONS;
    }
    if (total > KB_TOPIC_MAX_PARTITIONS) {
        kb_msgf(msg, "Number of partitions must be at most %d.", KB_TOPIC_MAX_PARTITIONS);
        return KP_ERR_INVALID_PARTITIONS;
    }
    return check_broker_capacity(ts, total - t->npartitions, msg);
}

kp_err kb_topics_end_add_partitions(kb_topics *ts, kb_topic *t, int32_t total)
{
    KB_ASSERT(total > t->npartitions && t->state == KB_TOPIC_READY);
    kb_partition *ps = realloc(t->partitions, (size_t)total * sizeof(*ps));
    if (ps == NULL)
        return KP_ERR__NOMEM;
    t->partitions = ps;
    int32_t old = t->npartitions;
    for (int32_t p = old; p < total; p++)
        ps[p] = (kb_partition){.index = p, .leader_epoch = 0};
    t->npartitions = total;
    kp_err e = registry_save(ts);
    if (e != KP_ERR_NONE)
        t->npartitions = old;
    return e;
}

void kb_topics_set_dynconf(kb_topics *ts, const struct kb_dynconf *dyn)
{
    ts->dyn = dyn;
    for (size_t i = 0; i < ts->n; i++) {
        ts->v[i]->dyn = dyn;
        kb_topic_settings_invalidate(ts->v[i]);
    }
    for (size_t i = 0; i < ts->nbusy; i++) {
        ts->busy[i]->dyn = dyn;
        kb_topic_settings_invalidate(ts->busy[i]);
    }
}

static void configs_free(kb_topic_config *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].value);
    }
    free(v);
}

kp_err kb_topics_set_configs(kb_topics *ts, kb_topic *t, const kb_topic_config *configs,
                             size_t n, kb_msgbuf *msg)
{
    kb_topic_config *nv = calloc(n + 1, sizeof(*nv));
    if (nv == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++) {
        nv[i].key = strdup(configs[i].key);
        nv[i].value = strdup(configs[i].value);
        if (nv[i].key == NULL || nv[i].value == NULL) {
            configs_free(nv, i + 1);
            return KP_ERR__NOMEM;
        }
    }
    qsort(nv, n, sizeof(*nv), config_cmp);
    kb_topic_config *old = t->configs;
    size_t nold = t->nconfigs;
    t->configs = nv;
    t->nconfigs = n;
    if (registry_save(ts) != KP_ERR_NONE) {
        t->configs = old;
        t->nconfigs = nold;
        configs_free(nv, n);
        kb_msgf(msg, "Could not save the topic registry in %s", ts->dir);
        return KP_ERR_KAFKA_STORAGE_ERROR;
    }
    configs_free(old, nold);
    kb_topic_settings_invalidate(t);
    return KP_ERR_NONE;
}

/* ---- open and close ----------------------------------------------------- */

/* Reads or writes meta.properties (Kafka's format), fixing the cluster id. */
static kp_err meta_load_or_create(kb_topics *ts, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", ts->dir, META_FILE);
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof(line), f) != NULL) {
            if (strncmp(line, "cluster.id=", 11) == 0) {
                snprintf(ts->cluster_id, sizeof(ts->cluster_id), "%.63s", line + 11);
                ts->cluster_id[strcspn(ts->cluster_id, "\r\n")] = '\0';
            }
        }
        fclose(f);
        if (ts->cluster_id[0] != '\0')
            return KP_ERR_NONE;
    }
    if (ts->cfg->cluster_id != NULL && ts->cfg->cluster_id[0] != '\0') {
        snprintf(ts->cluster_id, sizeof(ts->cluster_id), "%.63s", ts->cfg->cluster_id);
    } else {
        kp_uuid u;
        kb_uuid_random(&u);
        kb_uuid_format(&u, ts->cluster_id);
    }
    kp_uuid dir_id;
    kb_uuid_random(&dir_id);
    char dir_id_s[23], body[512];
    kb_uuid_format(&dir_id, dir_id_s);
    int len = snprintf(body, sizeof(body),
                       "#\n#Written by runnel\ncluster.id=%s\ndirectory.id=%s\nnode.id=%d\n"
                       "version=1\n",
                       ts->cluster_id, dir_id_s, ts->cfg->node_id);
    if (kb_file_write_atomic(ts->dir, META_FILE, body, (size_t)len) != KP_ERR_NONE) {
        snprintf(err, errlen, "config: log.dirs=%s: cannot write %s: %s", ts->dir, META_FILE,
                 strerror(errno));
        return KP_ERR__IO;
    }
    return KP_ERR_NONE;
}

kp_err kb_topics_open(const kb_config *cfg, kb_topics **out, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->log_dirs.n == 0) {
        snprintf(err, errlen, "config: log.dirs is empty: expected at least one directory");
        return KP_ERR__INVAL;
    }
    for (size_t i = 0; i < cfg->log_dirs.n; i++) {
        const char *d = cfg->log_dirs.v[i];
        if (kb_file_mkdirs(d) != 0 || access(d, W_OK) != 0) {
            snprintf(err, errlen,
                     "config: log.dirs=%s: expected a writable directory: %s; make it "
                     "writable for this user or choose another (--override log.dirs=DIR)",
                     d, strerror(errno));
            return KP_ERR__IO;
        }
    }
    kb_topics *ts = calloc(1, sizeof(*ts));
    if (ts == NULL)
        return KP_ERR__NOMEM;
    ts->cfg = cfg;
    ts->dir = cfg->log_dirs.v[0];
    kp_err e = meta_load_or_create(ts, err, errlen);
    if (e == KP_ERR_NONE)
        e = registry_load(ts, err, errlen);
    if (e != KP_ERR_NONE) {
        kb_topics_close(ts);
        return e;
    }
    *out = ts;
    return KP_ERR_NONE;
}

void kb_topics_close(kb_topics *ts)
{
    if (ts == NULL)
        return;
    for (size_t i = 0; i < ts->n; i++)
        topic_free(ts->v[i]);
    for (size_t i = 0; i < ts->nbusy; i++)
        topic_free(ts->busy[i]); /* still pending or deleting on disk */
    free(ts->v);
    free(ts->busy);
    kb_map_fini(&ts->by_name);
    kb_map_fini(&ts->by_id);
    free(ts);
}
