#include "kb_topics.h"

#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kb_tconf.h"

#define REGISTRY_FILE "runnel-topics.properties"
#define META_FILE "meta.properties"

struct kb_topics {
    const kb_config *cfg;
    const char *dir; /* first log dir */
    char cluster_id[64];
    kb_topic **v;
    size_t n;
    size_t cap;
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

kb_topic *kb_topics_find(const kb_topics *ts, kp_str name)
{
    if (name.len < 0)
        return NULL;
    for (size_t i = 0; i < ts->n; i++) {
        const char *tn = ts->v[i]->name;
        if (strncmp(tn, name.p, (size_t)name.len) == 0 && tn[name.len] == '\0')
            return ts->v[i];
    }
    return NULL;
}

kb_topic *kb_topics_find_id(const kb_topics *ts, const kp_uuid *id)
{
    for (size_t i = 0; i < ts->n; i++)
        if (memcmp(ts->v[i]->id.b, id->b, sizeof(id->b)) == 0)
            return ts->v[i];
    return NULL;
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
static kb_topic *find_colliding(const kb_topics *ts, kp_str name)
{
    for (size_t i = 0; i < ts->n; i++) {
        const char *tn = ts->v[i]->name;
        if ((int32_t)strlen(tn) != name.len)
            continue;
        bool same = true;
        for (int32_t k = 0; k < name.len && same; k++) {
            char a = tn[k] == '.' ? '_' : tn[k];
            char b = name.p[k] == '.' ? '_' : name.p[k];
            same = a == b;
        }
        if (same)
            return ts->v[i];
    }
    return NULL;
}

/* ---- the registry file -------------------------------------------------- */


static kp_err registry_save(kb_topics *ts)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (f == NULL)
        return KP_ERR__NOMEM;
    fprintf(f, "# runnel topic registry, version 1\n");
    for (size_t i = 0; i < ts->n; i++) {
        const kb_topic *t = ts->v[i];
        char hex[33];
        kb_uuid_hex(&t->id, hex);
        fprintf(f, "topic %s %s %d\n", t->name, hex, t->npartitions);
        for (size_t c = 0; c < t->nconfigs; c++) {
            fprintf(f, "config %s %s=", t->name, t->configs[c].key);
            kb_value_escape(f, t->configs[c].value);
            fputc('\n', f);
        }
    }
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

static kp_err registry_append(kb_topics *ts, kb_topic *t)
{
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 16;
        kb_topic **v = realloc(ts->v, cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        ts->v = v;
        ts->cap = cap;
    }
    t->dyn = ts->dyn;
    ts->v[ts->n++] = t;
    return KP_ERR_NONE;
}

static kp_err registry_parse_line(kb_topics *ts, char *line)
{
    char name[KB_TOPIC_NAME_MAX + 1], hex[40];
    int partitions;
    if (strncmp(line, "topic ", 6) == 0) {
        if (sscanf(line, "topic %249s %39s %d", name, hex, &partitions) != 3 || partitions < 1 ||
            partitions > KB_TOPIC_MAX_PARTITIONS)
            return KP_ERR__CORRUPT;
        kp_uuid id;
        if (!kb_uuid_parse_hex(hex, &id))
            return KP_ERR__CORRUPT;
        kb_topic *t = topic_new(name, strlen(name), &id, partitions);
        if (t == NULL)
            return KP_ERR__NOMEM;
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

/* ---- partition directories ---------------------------------------------- */

static kp_err partition_dir_create(const kb_topics *ts, const kb_topic *t, int32_t p)
{
    char path[4096], id[23], body[128];
    snprintf(path, sizeof(path), "%s/%s-%d", ts->dir, t->name, p);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return errno == ENOSPC ? KP_ERR__NOSPC : KP_ERR__IO;
    kb_uuid_format(&t->id, id);
    int len = snprintf(body, sizeof(body), "version: 0\ntopic_id: %s\n", id);
    return kb_file_write_atomic(path, "partition.metadata", body, (size_t)len);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void partition_dir_remove(const kb_topics *ts, const kb_topic *t, int32_t p)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%d", ts->dir, t->name, p);
    (void)nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- create, delete, grow ----------------------------------------------- */

/* One broker holds at most runnel.max.partitions partitions, so no request
 * can make it allocate (or mkdir) without bound. */
static kp_err check_broker_capacity(const kb_topics *ts, int32_t adding, kb_msgbuf *msg)
{
    int64_t total = adding;
    for (size_t i = 0; i < ts->n; i++)
        total += ts->v[i]->npartitions;
    if (total <= ts->cfg->max_partitions)
        return KP_ERR_NONE;
    kb_msgf(msg, "Adding %d partitions would exceed this broker's limit of %d partitions "
                 "(runnel.max.partitions).", adding, ts->cfg->max_partitions);
    return KP_ERR_INVALID_PARTITIONS;
}

kp_err kb_topics_create(kb_topics *ts, kp_str name, int32_t partitions,
                        const kb_topic_config *configs, size_t nconfigs, bool validate_only,
                        kb_topic **out, kb_msgbuf *msg)
{
    kp_err e = kb_topics_check_name(name, msg);
    if (e != KP_ERR_NONE)
        return e;
    if (kb_topics_find(ts, name) != NULL) {
        kb_msgf(msg, "Topic '%.*s' already exists.", name.len, name.p);
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
        e = kb_tconf_check(configs[i].key, configs[i].value, msg);
        if (e != KP_ERR_NONE)
            return e;
    }
    if (validate_only)
        return KP_ERR_NONE;

    kp_uuid id;
    do
        kb_uuid_random(&id);
    while (kb_topics_find_id(ts, &id) != NULL);
    kb_topic *t = topic_new(name.p, (size_t)name.len, &id, partitions);
    if (t == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < nconfigs && e == KP_ERR_NONE; i++)
        e = topic_set_config(t, configs[i].key, configs[i].value);
    for (int32_t p = 0; p < partitions && e == KP_ERR_NONE; p++)
        e = partition_dir_create(ts, t, p);
    if (e == KP_ERR_NONE)
        e = registry_append(ts, t);
    if (e == KP_ERR_NONE && (e = registry_save(ts)) != KP_ERR_NONE)
        ts->n--;
    if (e != KP_ERR_NONE) {
        for (int32_t p = 0; p < partitions; p++)
            partition_dir_remove(ts, t, p);
        topic_free(t);
        kb_msgf(msg, "Could not create topic in %s: %s", ts->dir, kp_err_name(e));
        return e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
    }
    if (out != NULL)
        *out = t;
    return KP_ERR_NONE;
}

kp_err kb_topics_delete(kb_topics *ts, kb_topic *t, kb_msgbuf *msg)
{
    size_t i = 0;
    while (i < ts->n && ts->v[i] != t)
        i++;
    if (i == ts->n) {
        kb_msgf(msg, "This server does not host this topic.");
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    memmove(&ts->v[i], &ts->v[i + 1], (ts->n - i - 1) * sizeof(ts->v[0]));
    ts->n--;
    kp_err e = registry_save(ts);
    if (e != KP_ERR_NONE) {
        memmove(&ts->v[i + 1], &ts->v[i], (ts->n - i) * sizeof(ts->v[0]));
        ts->v[i] = t;
        ts->n++;
        kb_msgf(msg, "Could not update the topic registry in %s", ts->dir);
        return KP_ERR_KAFKA_STORAGE_ERROR;
    }
    for (int32_t p = 0; p < t->npartitions; p++)
        partition_dir_remove(ts, t, p);
    topic_free(t);
    return KP_ERR_NONE;
}

kp_err kb_topics_add_partitions(kb_topics *ts, kb_topic *t, int32_t total, bool validate_only,
                                kb_msgbuf *msg)
{
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
    kp_err e = check_broker_capacity(ts, total - t->npartitions, msg);
    if (e != KP_ERR_NONE)
        return e;
    if (validate_only)
        return KP_ERR_NONE;
    kb_partition *ps = realloc(t->partitions, (size_t)total * sizeof(*ps));
    if (ps == NULL)
        return KP_ERR__NOMEM;
    t->partitions = ps;
    int32_t old = t->npartitions;
    for (int32_t p = old; p < total && e == KP_ERR_NONE; p++) {
        ps[p] = (kb_partition){.index = p, .leader_epoch = 0};
        e = partition_dir_create(ts, t, p);
    }
    t->npartitions = total;
    if (e == KP_ERR_NONE)
        e = registry_save(ts);
    if (e != KP_ERR_NONE) {
        t->npartitions = old;
        kb_msgf(msg, "Could not add partitions in %s", ts->dir);
        return KP_ERR_KAFKA_STORAGE_ERROR;
    }
    return KP_ERR_NONE;
}

void kb_topics_set_dynconf(kb_topics *ts, const struct kb_dynconf *dyn)
{
    ts->dyn = dyn;
    for (size_t i = 0; i < ts->n; i++) {
        ts->v[i]->dyn = dyn;
        kb_topic_settings_invalidate(ts->v[i]);
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

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
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
        if (make_dirs(d) != 0 || access(d, W_OK) != 0) {
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
    free(ts->v);
    free(ts);
}
