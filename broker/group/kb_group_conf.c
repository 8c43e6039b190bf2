#include "kb_group_conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_group.h"
#include "kb_keydef.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"

#define GCONF_FILE "runnel-group-configs.properties"

/* A group's explicitly set values. */
typedef struct gentry {
    char *group;
    kb_cfgset set;
} gentry;

struct kb_group_conf {
    char *dir;
    gentry *v; /* sorted by group id */
    size_t n, cap;
    char *loading; /* the group the file's next value lines belong to */
};

/* ---- the keys ------------------------------------------------------------ */

/* Sorted by name: each key's definition (kb_keydef.h; def NULL: from the
 * broker config), then the broker settings bounding it, named in the
 * messages; the consumer ones are this broker's, the others Kafka's
 * defaults. share.auto.offset.reset has a validator of its own. */
#define GI(n, d, lo) {n, KB_KT_INT, d, lo, INT32_MAX, NULL, 0, KB_KD_NO_FIELD}

static const struct gkey {
    kb_keydef def;
    const char *min_key, *max_key;
    int32_t min, max; /* for share.* and streams.* */
} gkeys[] = {
    {GI("consumer.heartbeat.interval.ms", NULL, 1), "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms", 0, 0},
    {GI("consumer.session.timeout.ms", NULL, 1), "group.consumer.min.session.timeout.ms",
     "group.consumer.max.session.timeout.ms", 0, 0},
    {{"share.auto.offset.reset", KB_KT_STRING, "latest", 0, 0, NULL, 0, KB_KD_NO_FIELD}, NULL,
     NULL, 0, 0},
    {GI("share.heartbeat.interval.ms", "5000", 1), "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms", 5000, 15000},
    {{"share.isolation.level", KB_KT_ENUM, "read_uncommitted", 0, 0,
      "read_committed|read_uncommitted", KB_KD_EXACT_CASE, KB_KD_NO_FIELD},
     NULL, NULL, 0, 0},
    {GI("share.record.lock.duration.ms", "30000", 1), "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms", 15000, 60000},
    {GI("share.session.timeout.ms", "45000", 1), "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms", 45000, 60000},
    {GI("streams.heartbeat.interval.ms", "5000", 1), "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms", 5000, 15000},
    {GI("streams.num.standby.replicas", "0", 0), NULL, "group.streams.max.standby.replicas", 0,
     2},
    {GI("streams.session.timeout.ms", "45000", 1), "group.streams.min.session.timeout.ms",
     "group.streams.max.session.timeout.ms", 45000, 60000},
};

#define N_GKEYS (sizeof(gkeys) / sizeof(gkeys[0]))

static const struct gkey *gkey_find(const char *name)
{
    for (size_t i = 0; i < N_GKEYS; i++)
        if (strcmp(gkeys[i].def.name, name) == 0)
            return &gkeys[i];
    return NULL;
}

const char *kb_group_conf_key_at(size_t i, int8_t *type)
{
    if (i >= N_GKEYS)
        return NULL;
    *type = kb_keydef_wire_type(&gkeys[i].def);
    return gkeys[i].def.name;
}

/* The bounds of an int key: the broker's for consumer.*, Kafka's defaults else. */
static void bounds(const kb_config *cfg, const struct gkey *k, int32_t *min, int32_t *max)
{
    *min = k->min;
    *max = k->max;
    if (strcmp(k->def.name, "consumer.heartbeat.interval.ms") == 0) {
        *min = cfg->group_consumer_min_heartbeat_interval_ms;
        *max = cfg->group_consumer_max_heartbeat_interval_ms;
    } else if (strcmp(k->def.name, "consumer.session.timeout.ms") == 0) {
        *min = cfg->group_consumer_min_session_timeout_ms;
        *max = cfg->group_consumer_max_session_timeout_ms;
    }
}

const char *kb_group_conf_default(const kb_config *cfg, const char *key, char *buf, size_t cap)
{
    const struct gkey *k = gkey_find(key);
    if (k == NULL)
        return NULL;
    if (k->def.def != NULL)
        return k->def.def;
    bool session = strcmp(key, "consumer.session.timeout.ms") == 0;
    snprintf(buf, cap, "%d",
             session ? cfg->group_consumer_session_timeout_ms
                     : cfg->group_consumer_heartbeat_interval_ms);
    return buf;
}

/* ---- checks -------------------------------------------------------------- */

kp_err kb_group_conf_check_name(kp_str group, kb_msgbuf *msg)
{
    if (group.len <= 0) {
        kb_msgf(msg, "Default group resources are not allowed.");
        return KP_ERR_INVALID_REQUEST;
    }
    if (group.len > KB_GROUP_ID_MAX) {
        kb_msgf(msg, "Group id longer than %d bytes", KB_GROUP_ID_MAX);
        return KP_ERR_INVALID_REQUEST;
    }
    if (memchr(group.p, '\0', (size_t)group.len) != NULL) {
        kb_msgf(msg, "Group id holds a NUL character");
        return KP_ERR_INVALID_REQUEST;
    }
    return KP_ERR_NONE;
}

/* Java's Integer.parseInt of the trimmed value. */
static bool parse_int(const char *v, int32_t *out)
{
    while (*v == ' ' || *v == '\t')
        v++;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end == v || *end != '\0' || errno != 0 || n < INT32_MIN || n > INT32_MAX)
        return false;
    *out = (int32_t)n;
    return true;
}

/* An ISO-8601 duration as Java's Duration.parse reads it, not negative:
 * P[nD][T[nH][nM][n[.n]S]] with at least one part. */
static bool duration_ok(const char *s)
{
    if (*s++ != 'P')
        return false;
    bool any = false, in_time = false;
    while (*s != '\0') {
        if (*s == 'T' && !in_time) {
            in_time = true;
            s++;
            continue;
        }
        const char *num = s;
        while ((*s >= '0' && *s <= '9') || (*s == '.' && in_time))
            s++;
        if (s == num || *s == '\0' || strchr(in_time ? "HMS" : "D", *s) == NULL)
            return false;
        any = true;
        s++;
    }
    return any;
}

/* The type and fixed-validator check of one value (ConfigDef.parse);
 * *n gets an INT key's value. */
static kp_err check_value(const struct gkey *k, const char *v, int32_t *n, kb_msgbuf *msg)
{
    if (strcmp(k->def.name, "share.auto.offset.reset") != 0) {
        kp_err e = kb_keydef_check(&k->def, v, msg);
        if (e == KP_ERR_NONE && k->def.type == KB_KT_INT)
            (void)parse_int(v, n);
        return e;
    }
    if (strcmp(v, "earliest") == 0 || strcmp(v, "latest") == 0 ||
        (strncmp(v, "by_duration:", 12) == 0 && duration_ok(v + 12)))
        return KP_ERR_NONE;
    kb_msgf(msg, "Invalid value %s for configuration %s: Invalid value `%s` for configuration "
            "%s. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.", v, k->def.name, v, k->def.name);
    return KP_ERR_INVALID_CONFIG;
}

kp_err kb_group_conf_check(const kb_config *cfg, const kb_cfgset *set, kb_msgbuf *msg)
{
    for (size_t i = 0; i < set->n; i++) {
        if (gkey_find(set->v[i].key) == NULL) {
            kb_msgf(msg, "Unknown group config name: %s", set->v[i].key);
            return KP_ERR_INVALID_CONFIG;
        }
    }
    int32_t values[N_GKEYS];
    for (size_t i = 0; i < N_GKEYS; i++) {
        const struct gkey *k = &gkeys[i];
        const char *v = kb_cfgset_get(set, k->def.name);
        kp_err e = v != NULL ? check_value(k, v, &values[i], msg) : KP_ERR_NONE;
        if (e != KP_ERR_NONE)
            return e;
        if (v == NULL && k->def.type == KB_KT_INT) {
            char buf[16];
            (void)parse_int(kb_group_conf_default(cfg, k->def.name, buf, sizeof(buf)), &values[i]);
        }
    }
    for (size_t i = 0; i < N_GKEYS; i++) {
        const struct gkey *k = &gkeys[i];
        int32_t min, max;
        if (k->def.type != KB_KT_INT)
            continue;
        bounds(cfg, k, &min, &max);
        if (k->min_key != NULL && values[i] < min) {
            kb_msgf(msg, "%s must be greater than or equal to %s", k->def.name, k->min_key);
            return KP_ERR_INVALID_CONFIG;
        }
        if (values[i] > max) {
            kb_msgf(msg, "%s must be less than or equal to %s", k->def.name, k->max_key);
            return KP_ERR_INVALID_CONFIG;
        }
    }
    return KP_ERR_NONE;
}

/* ---- the groups' values ------------------------------------------------- */

/* The index of group, or where it would go (*found false). */
static size_t find(const kb_group_conf *gc, kp_str group, bool *found)
{
    size_t lo = 0, hi = gc->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t len = strlen(gc->v[mid].group);
        size_t common = len < (size_t)group.len ? len : (size_t)group.len;
        int c = memcmp(gc->v[mid].group, group.p, common);
        if (c == 0)
            c = len < (size_t)group.len ? -1 : len > (size_t)group.len;
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

const char *kb_group_conf_group_at(const kb_group_conf *gc, size_t i)
{
    return gc != NULL && i < gc->n ? gc->v[i].group : NULL;
}

const kb_cfgset *kb_group_conf_get(const kb_group_conf *gc, kp_str group)
{
    bool found;
    size_t i = group.len > 0 ? find(gc, group, &found) : 0;
    return group.len > 0 && found ? &gc->v[i].set : NULL;
}

/* Puts set in for group (taken), inserting or dropping the entry. */
static kp_err store(kb_group_conf *gc, kp_str group, kb_cfgset *set)
{
    bool found;
    size_t i = find(gc, group, &found);
    if (found) {
        kb_cfgset_fini(&gc->v[i].set);
        gc->v[i].set = *set;
        if (set->n == 0) {
            free(gc->v[i].group);
            memmove(&gc->v[i], &gc->v[i + 1], (gc->n - i - 1) * sizeof(gc->v[0]));
            gc->n--;
        }
        *set = (kb_cfgset){0, NULL};
        return KP_ERR_NONE;
    }
    if (set->n == 0)
        return KP_ERR_NONE;
    if (gc->n == gc->cap) {
        size_t cap = gc->cap == 0 ? 16 : gc->cap * 2;
        gentry *v = realloc(gc->v, cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        gc->v = v;
        gc->cap = cap;
    }
    char *id = strndup(group.p, (size_t)group.len);
    if (id == NULL)
        return KP_ERR__NOMEM;
    memmove(&gc->v[i + 1], &gc->v[i], (gc->n - i) * sizeof(gc->v[0]));
    gc->v[i] = (gentry){id, *set};
    gc->n++;
    *set = (kb_cfgset){0, NULL};
    return KP_ERR_NONE;
}

static void emit(void *arg, FILE *f)
{
    const kb_group_conf *gc = arg;
    fprintf(f, "# runnel group configs, version 1\n");
    for (size_t i = 0; i < gc->n; i++) {
        fputs("group ", f);
        kb_value_escape(f, gc->v[i].group);
        fputc('\n', f);
        for (size_t k = 0; k < gc->v[i].set.n; k++) {
            fprintf(f, "%s=", gc->v[i].set.v[k].key);
            kb_value_escape(f, gc->v[i].set.v[k].value);
            fputc('\n', f);
        }
    }
}

kp_err kb_group_conf_replace(kb_group_conf *gc, kp_str group, kb_cfgset *set, kb_msgbuf *msg)
{
    bool found;
    (void)find(gc, group, &found);
    if (!found && set->n > 0 && gc->n >= KB_GROUP_CONF_MAX_GROUPS) {
        kb_msgf(msg, "Configs are set on %d groups already, the most this broker keeps",
                KB_GROUP_CONF_MAX_GROUPS);
        return KP_ERR_INVALID_REQUEST;
    }
    const kb_cfgset *cur = kb_group_conf_get(gc, group);
    kb_cfgset old = {0, NULL};
    kp_err e = cur != NULL ? kb_cfgset_copy(&old, cur->v, cur->n) : KP_ERR_NONE;
    if (e == KP_ERR_NONE)
        e = store(gc, group, set);
    if (e != KP_ERR_NONE) {
        kb_cfgset_fini(&old);
        return e;
    }
    e = kb_file_write_stream(gc->dir, GCONF_FILE, emit, gc);
    if (e != KP_ERR_NONE) {
        kp_err back = store(gc, group, &old); /* the caller's set was taken */
        kb_cfgset_fini(&old);
        if (back != KP_ERR_NONE)
            return back;
        kb_msgf(msg, "Cannot write %s", GCONF_FILE);
        return e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
    }
    kb_cfgset_fini(&old);
    return KP_ERR_NONE;
}

/* ---- loading ------------------------------------------------------------- */

static kp_err load_line(void *arg, char *line)
{
    kb_group_conf *gc = arg;
    if (line[0] == '#' || line[0] == '\0')
        return KP_ERR_NONE;
    if (strncmp(line, "group ", 6) == 0) {
        kb_value_unescape(line + 6);
        free(gc->loading);
        gc->loading = strdup(line + 6);
        return gc->loading != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    char *eq = strchr(line, '=');
    if (eq == NULL || gc->loading == NULL)
        return KP_ERR__CORRUPT;
    *eq = '\0';
    kb_value_unescape(eq + 1);
    if (gkey_find(line) == NULL)
        return KP_ERR_NONE; /* a key this version no longer knows: dropped */
    kp_str group = kp_str_from(gc->loading);
    if (group.len <= 0 || group.len > KB_GROUP_ID_MAX)
        return KP_ERR__CORRUPT;
    const kb_cfgset *cur = kb_group_conf_get(gc, group);
    kb_cfgset set = {0, NULL};
    kp_err e = cur != NULL ? kb_cfgset_copy(&set, cur->v, cur->n) : KP_ERR_NONE;
    if (e == KP_ERR_NONE)
        e = kb_cfgset_put(&set, line, eq + 1);
    if (e == KP_ERR_NONE)
        e = store(gc, group, &set);
    kb_cfgset_fini(&set);
    return e;
}

kp_err kb_group_conf_open(const char *dir, kb_group_conf **out)
{
    kb_group_conf *gc = calloc(1, sizeof(*gc));
    if (gc == NULL || (gc->dir = strdup(dir)) == NULL) {
        free(gc);
        return KP_ERR__NOMEM;
    }
    kp_err e = kb_file_read_lines(gc->dir, GCONF_FILE, load_line, gc);
    free(gc->loading);
    gc->loading = NULL;
    if (e != KP_ERR_NONE) {
        kb_group_conf_close(gc);
        return e;
    }
    *out = gc;
    return KP_ERR_NONE;
}

void kb_group_conf_close(kb_group_conf *gc)
{
    if (gc == NULL)
        return;
    for (size_t i = 0; i < gc->n; i++) {
        free(gc->v[i].group);
        kb_cfgset_fini(&gc->v[i].set);
    }
    free(gc->v);
    free(gc->loading);
    free(gc->dir);
    free(gc);
}

/* ---- effective values ----------------------------------------------------- */

static int32_t group_int(const kb_group_conf *gc, kp_str group, const char *key, int32_t dflt)
{
    const kb_cfgset *set = gc != NULL ? kb_group_conf_get(gc, group) : NULL;
    const char *v = set != NULL ? kb_cfgset_get(set, key) : NULL;
    int32_t n;
    return v != NULL && parse_int(v, &n) ? n : dflt;
}

int32_t kb_group_conf_int(const kb_group_conf *gc, kp_str group, const char *key, int32_t dflt)
{
    return group_int(gc, group, key, dflt);
}

const char *kb_group_conf_str(const kb_group_conf *gc, kp_str group, const char *key,
                              const char *dflt)
{
    const kb_cfgset *set = gc != NULL ? kb_group_conf_get(gc, group) : NULL;
    const char *v = set != NULL ? kb_cfgset_get(set, key) : NULL;
    return v != NULL ? v : dflt;
}

int32_t kb_group_conf_session_timeout_ms(const kb_group_conf *gc, const kb_config *cfg, kp_str group)
{
    return group_int(gc, group, "consumer.session.timeout.ms",
                     cfg->group_consumer_session_timeout_ms);
}

int32_t kb_group_conf_heartbeat_interval_ms(const kb_group_conf *gc, const kb_config *cfg, kp_str group)
{
    return group_int(gc, group, "consumer.heartbeat.interval.ms",
                     cfg->group_consumer_heartbeat_interval_ms);
}
