#include "kb_quota.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUOTA_FILE "runnel-quotas.properties"
/* Meters kept at most; idle ones are dropped first (client ids are peer input). */
#define MAX_METERS 4096

/* ---- rate meters ------------------------------------------------------------ */

void kb_rate_init(kb_rate *r, int64_t window_ms, int32_t samples, int64_t now_ms)
{
    memset(r, 0, sizeof(*r));
    r->window_ms = window_ms > 0 ? window_ms : 1000;
    r->samples = samples < 2 ? 2 : samples > KB_RATE_MAX_SAMPLES ? KB_RATE_MAX_SAMPLES : samples;
    for (int32_t i = 0; i < r->samples; i++)
        r->start_ms[i] = INT64_MIN / 2;
    r->start_ms[0] = now_ms;
}

/* Forgets windows that ended before the oldest one still counted. */
static void purge(kb_rate *r, int64_t now_ms)
{
    int64_t horizon = (int64_t)r->samples * r->window_ms;
    for (int32_t i = 0; i < r->samples; i++) {
        if (now_ms - r->start_ms[i] >= horizon) {
            r->start_ms[i] = INT64_MIN / 2;
            r->total[i] = 0;
        }
    }
}

void kb_rate_record(kb_rate *r, double value, int64_t now_ms)
{
    purge(r, now_ms);
    if (now_ms - r->start_ms[r->current] >= r->window_ms) {
        r->current = (r->current + 1) % r->samples;
        r->start_ms[r->current] = now_ms;
        r->total[r->current] = 0;
    }
    r->total[r->current] += value;
}

double kb_rate_measure(kb_rate *r, int64_t now_ms)
{
    purge(r, now_ms);
    double sum = 0;
    int64_t oldest = now_ms;
    for (int32_t i = 0; i < r->samples; i++) {
        if (r->start_ms[i] == INT64_MIN / 2)
            continue;
        sum += r->total[i];
        if (r->start_ms[i] < oldest)
            oldest = r->start_ms[i];
    }
    int64_t elapsed = now_ms - oldest;
    int64_t min_elapsed = (int64_t)(r->samples - 1) * r->window_ms;
    if (elapsed < min_elapsed)
        elapsed = min_elapsed;
    return sum * 1000.0 / (double)elapsed;
}

static int64_t elapsed_ms(const kb_rate *r, int64_t now_ms)
{
    int64_t oldest = now_ms;
    for (int32_t i = 0; i < r->samples; i++)
        if (r->start_ms[i] != INT64_MIN / 2 && r->start_ms[i] < oldest)
            oldest = r->start_ms[i];
    int64_t min_elapsed = (int64_t)(r->samples - 1) * r->window_ms;
    return now_ms - oldest < min_elapsed ? min_elapsed : now_ms - oldest;
}

int64_t kb_rate_throttle_ms(kb_rate *r, double quota, int64_t now_ms)
{
    double rate = kb_rate_measure(r, now_ms);
    if (quota <= 0 || rate <= quota)
        return 0;
    double t = (rate - quota) / quota * (double)elapsed_ms(r, now_ms);
    double cap = (double)r->samples * (double)r->window_ms;
    return (int64_t)(t > cap ? cap : t);
}

/* ---- the store ----------------------------------------------------------------- */

typedef struct meter {
    char *key; /* kind, user tag, client tag */
    kb_rate rate;
    int64_t last_ms;
} meter;

struct kb_quotas {
    char *dir;
    int64_t window_ms;
    int32_t samples;
    size_t n;
    kb_quota_entry *v;
    size_t nmeters;
    meter *meters;
};

size_t kb_quotas_count(const kb_quotas *q)
{
    return q->n;
}

const kb_quota_entry *kb_quotas_at(const kb_quotas *q, size_t i)
{
    return &q->v[i];
}

static void entry_fini(kb_quota_entry *e)
{
    for (size_t i = 0; i < e->nentity; i++) {
        free(e->entity[i].type);
        free(e->entity[i].name);
    }
    for (size_t i = 0; i < e->nvalues; i++)
        free(e->values[i].key);
    free(e->entity);
    free(e->values);
    memset(e, 0, sizeof(*e));
}

static bool entity_eq(const kb_quota_entity *a, const kb_quota_entity *b)
{
    return strcmp(a->type, b->type) == 0 &&
           (a->name == NULL ? b->name == NULL : b->name != NULL && strcmp(a->name, b->name) == 0);
}

static kb_quota_entry *find_entry(const kb_quotas *q, const kb_quota_entity *ent, size_t n)
{
    for (size_t i = 0; i < q->n; i++) {
        if (q->v[i].nentity != n)
            continue;
        size_t k = 0;
        while (k < n && entity_eq(&q->v[i].entity[k], &ent[k]))
            k++;
        if (k == n)
            return &q->v[i];
    }
    return NULL;
}

static kb_quota_entry *add_entry(kb_quotas *q, const kb_quota_entity *ent, size_t n)
{
    kb_quota_entry *v = realloc(q->v, (q->n + 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    q->v = v;
    kb_quota_entry *e = &v[q->n];
    memset(e, 0, sizeof(*e));
    if ((e->entity = calloc(n + 1, sizeof(*e->entity))) == NULL)
        return NULL;
    for (; e->nentity < n; e->nentity++) {
        kb_quota_entity *d = &e->entity[e->nentity];
        d->type = strdup(ent[e->nentity].type);
        d->name = ent[e->nentity].name != NULL ? strdup(ent[e->nentity].name) : NULL;
        if (d->type == NULL || (ent[e->nentity].name != NULL && d->name == NULL)) {
            e->nentity++;
            entry_fini(e);
            return NULL;
        }
    }
    q->n++;
    return e;
}

static kp_err set_value(kb_quota_entry *e, const char *key, double value, bool remove)
{
    for (size_t i = 0; i < e->nvalues; i++) {
        if (strcmp(e->values[i].key, key) != 0)
            continue;
        if (!remove) {
            e->values[i].value = value;
            return KP_ERR_NONE;
        }
        free(e->values[i].key);
        e->values[i] = e->values[--e->nvalues];
        return KP_ERR_NONE;
    }
    if (remove)
        return KP_ERR_NONE;
    kb_quota_value *v = realloc(e->values, (e->nvalues + 1) * sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    e->values = v;
    if ((v[e->nvalues].key = strdup(key)) == NULL)
        return KP_ERR__NOMEM;
    v[e->nvalues++].value = value;
    return KP_ERR_NONE;
}

/* Drops entries left without values. */
static void compact_entries(kb_quotas *q)
{
    size_t o = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (q->v[i].nvalues == 0)
            entry_fini(&q->v[i]);
        else
            q->v[o++] = q->v[i];
    }
    q->n = o;
}

/* ---- checks (Kafka's ClientQuotaControlManager rules) ----------------------------- */

static bool key_allowed(const char *type, const char *key)
{
    static const char *const user_keys[] = {"producer_byte_rate", "consumer_byte_rate",
                                            "request_percentage", "controller_mutation_rate"};
    if (strcmp(type, "ip") == 0)
        return strcmp(key, "connection_creation_rate") == 0;
    for (size_t i = 0; i < 4; i++)
        if (strcmp(key, user_keys[i]) == 0)
            return true;
    return false;
}

static kp_err check_entity(const kb_quota_entity *entity, size_t n, kb_msgbuf *msg)
{
    if (n == 0) {
        kb_msgf(msg, "Invalid empty client quota entity");
        return KP_ERR_INVALID_REQUEST;
    }
    for (size_t i = 0; i < n; i++) {
        const char *t = entity[i].type;
        if (strcmp(t, "user") != 0 && strcmp(t, "client-id") != 0 && strcmp(t, "ip") != 0) {
            kb_msgf(msg, "Unhandled client quota entity type: %s", t);
            return KP_ERR_INVALID_REQUEST;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(entity[k].type, t) == 0) {
                kb_msgf(msg, "Duplicate %s entity type in client quota entity", t);
                return KP_ERR_INVALID_REQUEST;
            }
        unsigned char addr[16];
        if (strcmp(t, "ip") == 0 && n > 1) {
            kb_msgf(msg, "Invalid quota entity combination, IP entity should not be combined "
                         "with User or ClientId");
            return KP_ERR_INVALID_REQUEST;
        }
        if (strcmp(t, "ip") == 0 && entity[i].name != NULL &&
            inet_pton(AF_INET, entity[i].name, addr) != 1 &&
            inet_pton(AF_INET6, entity[i].name, addr) != 1) {
            kb_msgf(msg, "%s is not a valid IP or resolvable host.", entity[i].name);
            return KP_ERR_INVALID_REQUEST;
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_quotas_check(const kb_quota_entity *entity, size_t nentity, const kb_quota_op *ops,
                       size_t nops, kb_msgbuf *msg)
{
    kp_err e = check_entity(entity, nentity, msg);
    for (size_t i = 0; e == KP_ERR_NONE && i < nops; i++) {
        const kb_quota_op *o = &ops[i];
        if (!key_allowed(entity[0].type, o->key)) {
            kb_msgf(msg, "Invalid configuration key %s", o->key);
            return KP_ERR_INVALID_REQUEST;
        }
        bool whole = strcmp(o->key, "producer_byte_rate") == 0 ||
                     strcmp(o->key, "consumer_byte_rate") == 0 ||
                     strcmp(o->key, "connection_creation_rate") == 0;
        if (!o->remove && (!isfinite(o->value) || o->value <= 0 ||
                           (whole && o->value != floor(o->value)))) {
            kb_msgf(msg, "Invalid value %g for configuration key %s", o->value, o->key);
            return KP_ERR_INVALID_REQUEST;
        }
    }
    return e;
}

/* ---- persistence ----------------------------------------------------------------------- */

/* %-escapes everything but [A-Za-z0-9._-] so a name is one token. */
static void put_token(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '.' || c == '_' || c == '-')
            fputc(c, f);
        else
            fprintf(f, "%%%02x", c);
    }
}

static void emit(void *arg, FILE *f)
{
    const kb_quotas *q = arg;
    fprintf(f, "# runnel client quotas, version 1\n");
    for (size_t i = 0; i < q->n; i++) {
        const kb_quota_entry *e = &q->v[i];
        fprintf(f, "quota");
        for (size_t k = 0; k < e->nentity; k++) {
            fprintf(f, " e:%s", e->entity[k].type);
            if (e->entity[k].name != NULL) {
                fputc('=', f);
                put_token(f, e->entity[k].name);
            }
        }
        for (size_t k = 0; k < e->nvalues; k++)
            fprintf(f, " v:%s=%.17g", e->values[k].key, e->values[k].value);
        fputc('\n', f);
    }
}

static kp_err save(kb_quotas *q)
{
    kp_err e = kb_file_write_stream(q->dir, QUOTA_FILE, emit, q);
    return e == KP_ERR_NONE || e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
}

static kp_err load_line(void *arg, char *line)
{
    kb_quotas *q = arg;
    if (strncmp(line, "quota", 5) != 0)
        return line[0] == '#' || line[0] == '\0' ? KP_ERR_NONE : KP_ERR__CORRUPT;
    kb_quota_entity ent[3];
    size_t n = 0;
    kb_quota_op ops[8];
    size_t nops = 0;
    char *save_ptr = NULL;
    for (char *tok = strtok_r(line + 5, " ", &save_ptr); tok != NULL;
         tok = strtok_r(NULL, " ", &save_ptr)) {
        char *eq = strchr(tok, '=');
        if (eq != NULL)
            *eq++ = '\0';
        if (strncmp(tok, "e:", 2) == 0 && n < 3) {
            if (eq != NULL)
                kb_value_unescape(eq);
            ent[n++] = (kb_quota_entity){tok + 2, eq};
        } else if (strncmp(tok, "v:", 2) == 0 && eq != NULL && nops < 8) {
            ops[nops++] = (kb_quota_op){tok + 2, strtod(eq, NULL), false};
        }
    }
    kb_msgbuf msg;
    if (kb_quotas_check(ent, n, ops, nops, &msg) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    kb_quota_entry *e = add_entry(q, ent, n);
    for (size_t i = 0; e != NULL && i < nops; i++)
        if (set_value(e, ops[i].key, ops[i].value, false) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    return e != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static kp_err load(kb_quotas *q)
{
    kp_err e = kb_file_read_lines(q->dir, QUOTA_FILE, load_line, q);
    compact_entries(q);
    return e;
}

static int64_t raw_long(const kb_config *cfg, const char *key, int64_t dflt)
{
    const char *v = cfg != NULL ? kb_config_get_raw(cfg, key) : NULL;
    char *end;
    long long n = v != NULL ? strtoll(v, &end, 10) : 0;
    return v != NULL && end != v && *end == '\0' && n > 0 ? n : dflt;
}

kp_err kb_quotas_open(const char *dir, const kb_config *cfg, kb_quotas **out)
{
    kb_quotas *q = calloc(1, sizeof(*q));
    if (q == NULL || (q->dir = strdup(dir)) == NULL) {
        free(q);
        return KP_ERR__NOMEM;
    }
    q->window_ms = raw_long(cfg, "quota.window.size.seconds", 1) * 1000;
    q->samples = (int32_t)raw_long(cfg, "quota.window.num", 11);
    kp_err e = load(q);
    if (e != KP_ERR_NONE) {
        kb_quotas_close(q);
        return e;
    }
    *out = q;
    return KP_ERR_NONE;
}

void kb_quotas_close(kb_quotas *q)
{
    if (q == NULL)
        return;
    for (size_t i = 0; i < q->n; i++)
        entry_fini(&q->v[i]);
    for (size_t i = 0; i < q->nmeters; i++)
        free(q->meters[i].key);
    free(q->meters);
    free(q->v);
    free(q->dir);
    free(q);
}

kp_err kb_quotas_alter(kb_quotas *q, const kb_quota_entity *entity, size_t nentity,
                       const kb_quota_op *ops, size_t nops)
{
    kb_quota_entry *e = find_entry(q, entity, nentity);
    if (e == NULL && (e = add_entry(q, entity, nentity)) == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < nops; i++)
        if (set_value(e, ops[i].key, ops[i].value, ops[i].remove) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    compact_entries(q);
    return save(q);
}

/* ---- enforcement --------------------------------------------------------------------- */

/* The value of key on the entry for exactly (user, client) where each is
 * absent (skip), the default (NULL name) or a name. */
static bool lookup(const kb_quotas *q, const char *key, int user_mode, const char *user,
                   int client_mode, const char *client, double *value)
{
    kb_quota_entity ent[2];
    size_t n = 0;
    /* modes: 0 absent, 1 default, 2 named; entities sorted by type */
    if (client_mode != 0)
        ent[n++] = (kb_quota_entity){(char *)(uintptr_t)"client-id",
                                     client_mode == 2 ? (char *)(uintptr_t)client : NULL};
    if (user_mode != 0)
        ent[n++] = (kb_quota_entity){(char *)(uintptr_t)"user",
                                     user_mode == 2 ? (char *)(uintptr_t)user : NULL};
    const kb_quota_entry *e = find_entry(q, ent, n);
    for (size_t i = 0; e != NULL && i < e->nvalues; i++) {
        if (strcmp(e->values[i].key, key) == 0) {
            *value = e->values[i].value;
            return true;
        }
    }
    return false;
}

/* Kafka's precedence: user+client, user+default client, user, default
 * user+client, default user+default client, default user, client, default
 * client. Fills the metric tags the matched quota meters by. */
static bool resolve(const kb_quotas *q, const char *key, const char *user, const char *client,
                    double *quota, bool *by_user, bool *by_client)
{
    static const int order[8][2] = {{2, 2}, {2, 1}, {2, 0}, {1, 2}, {1, 1}, {1, 0}, {0, 2}, {0, 1}};
    for (int i = 0; i < 8; i++) {
        if (lookup(q, key, order[i][0], user, order[i][1], client, quota)) {
            *by_user = order[i][0] != 0;
            *by_client = order[i][1] != 0;
            return true;
        }
    }
    return false;
}

static void drop_idle_meters(kb_quotas *q, int64_t now_ms)
{
    size_t o = 0;
    int64_t idle = (int64_t)q->samples * q->window_ms;
    for (size_t i = 0; i < q->nmeters; i++) {
        if (now_ms - q->meters[i].last_ms > idle)
            free(q->meters[i].key);
        else
            q->meters[o++] = q->meters[i];
    }
    q->nmeters = o;
}

static kb_rate *meter_for(kb_quotas *q, const char *key, int64_t now_ms)
{
    for (size_t i = 0; i < q->nmeters; i++) {
        if (strcmp(q->meters[i].key, key) == 0) {
            q->meters[i].last_ms = now_ms;
            return &q->meters[i].rate;
        }
    }
    if (q->nmeters >= MAX_METERS)
        drop_idle_meters(q, now_ms);
    if (q->nmeters >= MAX_METERS)
        return NULL;
    meter *m = realloc(q->meters, (q->nmeters + 1) * sizeof(*m));
    if (m == NULL)
        return NULL;
    q->meters = m;
    if ((m[q->nmeters].key = strdup(key)) == NULL)
        return NULL;
    m[q->nmeters].last_ms = now_ms;
    kb_rate_init(&m[q->nmeters].rate, q->window_ms, q->samples, now_ms);
    return &m[q->nmeters++].rate;
}

int64_t kb_quotas_window_bytes(const kb_quotas *q, kb_quota_kind kind, const char *user,
                               const char *client_id)
{
    const char *key = kind == KB_QUOTA_PRODUCE ? "producer_byte_rate" : "consumer_byte_rate";
    double quota;
    bool by_user, by_client;
    if (q == NULL || q->n == 0 || !resolve(q, key, user, client_id, &quota, &by_user, &by_client))
        return INT64_MAX;
    double bytes = quota * (double)(q->samples - 1) * (double)q->window_ms / 1000.0;
    return bytes >= (double)INT64_MAX ? INT64_MAX : bytes < 1 ? 1 : (int64_t)bytes;
}

int64_t kb_quotas_record(kb_quotas *q, kb_quota_kind kind, const char *user,
                         const char *client_id, int64_t bytes, int64_t now_ms)
{
    const char *key = kind == KB_QUOTA_PRODUCE ? "producer_byte_rate" : "consumer_byte_rate";
    double quota;
    bool by_user, by_client;
    if (q == NULL || q->n == 0 || !resolve(q, key, user, client_id, &quota, &by_user, &by_client))
        return 0;
    char mkey[512];
    snprintf(mkey, sizeof(mkey), "%d\n%s\n%s", (int)kind, by_user ? user : "",
             by_client ? client_id : "");
    kb_rate *r = meter_for(q, mkey, now_ms);
    if (r == NULL)
        return 0;
    kb_rate_record(r, (double)bytes, now_ms);
    return kb_rate_throttle_ms(r, quota, now_ms);
}
