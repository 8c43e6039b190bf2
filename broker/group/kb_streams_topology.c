#include "kb_streams_topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef kp_streams_group_heartbeat_req_subtopology rq_sub;
typedef kp_streams_group_heartbeat_req_topic_info rq_topic;

/* ---- checks ------------------------------------------------------------- */

static bool too_many(int32_t n, int32_t max)
{
    return n > max;
}

static const char *check_sizes(const rq_sub *s)
{
    if (s->subtopology_id.len <= 0)
        return "SubtopologyId can't be empty.";
    if (too_many(s->source_topics.n, KB_ST_MAX_TOPICS) ||
        too_many(s->source_topic_regex.n, KB_ST_MAX_TOPICS) ||
        too_many(s->repartition_sink_topics.n, KB_ST_MAX_TOPICS) ||
        too_many(s->repartition_source_topics.n, KB_ST_MAX_TOPICS) ||
        too_many(s->state_changelog_topics.n, KB_ST_MAX_TOPICS) ||
        too_many(s->copartition_groups.n, KB_ST_MAX_TOPICS))
        return "Subtopology has too many topics.";
    for (int32_t i = 0; i < s->repartition_source_topics.n; i++)
        if (too_many(s->repartition_source_topics.v[i].topic_configs.n, KB_ST_MAX_CONFIGS) ||
            s->repartition_source_topics.v[i].partitions > KB_ST_MAX_PARTITIONS)
            return "Repartition topic has too many configs or partitions.";
    for (int32_t i = 0; i < s->state_changelog_topics.n; i++)
        if (too_many(s->state_changelog_topics.v[i].topic_configs.n, KB_ST_MAX_CONFIGS))
            return "Changelog topic has too many configs.";
    return NULL;
}

static bool idx_ok(const int16_t *v, int32_t n, int32_t bound)
{
    for (int32_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= bound)
            return false;
    return true;
}

/* What Runnel refuses of a joining topology. Kafka 4.4.0 accepts the
 * same and then fails the heartbeat with UNKNOWN_SERVER_ERROR; a repartition
 * sink no subtopology reads is accepted as Kafka accepts it. */
static const char *check_semantics(const kp_streams_group_heartbeat_req_topology *rq)
{
    for (int32_t i = 0; i < rq->subtopologies.n; i++) {
        const rq_sub *s = &rq->subtopologies.v[i];
        for (int32_t j = 0; j < i; j++)
            if (kp_str_eq(s->subtopology_id, rq->subtopologies.v[j].subtopology_id))
                return "Duplicate subtopology id.";
        for (int32_t j = 0; j < s->copartition_groups.n; j++) {
            const kp_streams_group_heartbeat_req_copartition_group *c = &s->copartition_groups.v[j];
            if (!idx_ok(c->source_topics.v, c->source_topics.n, s->source_topics.n) ||
                !idx_ok(c->source_topic_regex.v, c->source_topic_regex.n,
                        s->source_topic_regex.n) ||
                !idx_ok(c->repartition_source_topics.v, c->repartition_source_topics.n,
                        s->repartition_source_topics.n))
                return "Copartition group refers to a topic index out of range.";
        }
    }
    return NULL;
}

kp_err kb_streams_topology_check(const kp_streams_group_heartbeat_req_topology *rq,
                                 const char **msg)
{
    *msg = NULL;
    if (rq->subtopologies.n > KB_ST_MAX_SUBTOPOLOGIES) {
        *msg = "Topology has too many subtopologies.";
        return KP_ERR_INVALID_REQUEST;
    }
    for (int32_t i = 0; i < rq->subtopologies.n; i++)
        if ((*msg = check_sizes(&rq->subtopologies.v[i])) != NULL)
            return KP_ERR_INVALID_REQUEST;
    *msg = check_semantics(rq);
    return *msg != NULL ? KP_ERR_STREAMS_INVALID_TOPOLOGY : KP_ERR_NONE;
}

/* ---- copying in --------------------------------------------------------- */

static void strv_free(char **v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char **strv_dup(const kp_str *v, int32_t n, bool *nomem)
{
    char **out = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof(*out));
    if (out == NULL) {
        *nomem = true;
        return NULL;
    }
    for (int32_t i = 0; i < n; i++)
        if ((out[i] = kp_str_cdup(v[i])) == NULL)
            *nomem = true;
    return out;
}

static void topics_free(kb_st_topic *v, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        free(v[i].name);
        strv_free(v[i].configs, v[i].nconfigs * 2);
    }
    free(v);
}

static kb_st_topic *topics_dup(const rq_topic *v, int32_t n, bool *nomem)
{
    kb_st_topic *out = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof(*out));
    if (out == NULL) {
        *nomem = true;
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t nc = v[i].topic_configs.n > 0 ? v[i].topic_configs.n : 0;
        out[i].name = kp_str_cdup(v[i].name);
        out[i].partitions = v[i].partitions > 0 ? v[i].partitions : 0;
        out[i].replication_factor = v[i].replication_factor;
        out[i].configs = calloc((size_t)nc * 2 + 1, sizeof(char *));
        if (out[i].name == NULL || out[i].configs == NULL) {
            *nomem = true;
            continue;
        }
        out[i].nconfigs = nc;
        for (int32_t k = 0; k < nc; k++) {
            out[i].configs[2 * k] = kp_str_cdup(v[i].topic_configs.v[k].key);
            out[i].configs[2 * k + 1] = kp_str_cdup(v[i].topic_configs.v[k].value);
            *nomem |= out[i].configs[2 * k] == NULL || out[i].configs[2 * k + 1] == NULL;
        }
    }
    return out;
}

static void sub_free(kb_st_sub *s)
{
    free(s->id);
    strv_free(s->sources, s->nsources);
    strv_free(s->sinks, s->nsinks);
    topics_free(s->rsources, s->nrsources);
    topics_free(s->changelogs, s->nchangelogs);
}

static void status_clear(kb_streams_topology *t)
{
    for (int32_t i = 0; i < t->nstatus; i++)
        free(t->status[i].detail);
    t->nstatus = 0;
}

void kb_streams_topology_free(kb_streams_topology *t)
{
    if (t == NULL)
        return;
    for (int32_t i = 0; i < t->nsubs; i++)
        sub_free(&t->subs[i]);
    free(t->subs);
    status_clear(t);
    free(t);
}

static int cmp_sub(const void *a, const void *b)
{
    return strcmp(((const kb_st_sub *)a)->id, ((const kb_st_sub *)b)->id);
}

kp_err kb_streams_topology_new(const kp_streams_group_heartbeat_req_topology *rq,
                               kb_streams_topology **out)
{
    int32_t n = rq->subtopologies.n > 0 ? rq->subtopologies.n : 0;
    kb_streams_topology *t = calloc(1, sizeof(*t));
    if (t == NULL || (t->subs = calloc((size_t)n + 1, sizeof(*t->subs))) == NULL) {
        free(t);
        return KP_ERR__NOMEM;
    }
    t->epoch = rq->epoch;
    t->nsubs = n;
    bool nomem = false;
    for (int32_t i = 0; i < n; i++) {
        const rq_sub *r = &rq->subtopologies.v[i];
        kb_st_sub *s = &t->subs[i];
        s->id = kp_str_cdup(r->subtopology_id);
        nomem |= s->id == NULL;
        s->sources = strv_dup(r->source_topics.v, r->source_topics.n, &nomem);
        s->nsources = s->sources != NULL && r->source_topics.n > 0 ? r->source_topics.n : 0;
        s->sinks = strv_dup(r->repartition_sink_topics.v, r->repartition_sink_topics.n, &nomem);
        s->nsinks = s->sinks != NULL && r->repartition_sink_topics.n > 0
                        ? r->repartition_sink_topics.n : 0;
        s->rsources = topics_dup(r->repartition_source_topics.v, r->repartition_source_topics.n,
                                 &nomem);
        s->nrsources = s->rsources != NULL && r->repartition_source_topics.n > 0
                           ? r->repartition_source_topics.n : 0;
        s->changelogs = topics_dup(r->state_changelog_topics.v, r->state_changelog_topics.n,
                                   &nomem);
        s->nchangelogs = s->changelogs != NULL && r->state_changelog_topics.n > 0
                             ? r->state_changelog_topics.n : 0;
    }
    if (nomem || (n > 0 && t->subs[0].id == NULL)) {
        kb_streams_topology_free(t);
        return KP_ERR__NOMEM;
    }
    qsort(t->subs, (size_t)n, sizeof(*t->subs), cmp_sub);
    *out = t;
    return KP_ERR_NONE;
}

int32_t kb_streams_topology_find(const kb_streams_topology *t, kp_str id)
{
    for (int32_t i = 0; t != NULL && i < t->nsubs; i++)
        if (kp_cstr_is(t->subs[i].id, id))
            return i;
    return -1;
}

bool kb_streams_topology_reads(const kb_streams_topology *t, kp_str topic)
{
    for (int32_t i = 0; i < t->nsubs; i++) {
        for (int32_t j = 0; j < t->subs[i].nsources; j++)
            if (kp_cstr_is(t->subs[i].sources[j], topic))
                return true;
        for (int32_t j = 0; j < t->subs[i].nrsources; j++)
            if (kp_cstr_is(t->subs[i].rsources[j].name, topic))
                return true;
    }
    return false;
}

/* ---- configuring -------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t sig_topic(uint64_t h, const kb_consumer_group_env *env, const char *name)
{
    kb_cg_topic t;
    h = fnv(h, name, strlen(name) + 1);
    if (!env->topic_by_name(env->ctx, name, &t))
        return fnv(h, "-", 1);
    h = fnv(h, t.id.b, sizeof(t.id.b));
    return fnv(h, &t.npartitions, sizeof(t.npartitions));
}

uint64_t kb_streams_topology_sig(const kb_streams_topology *t, const kb_consumer_group_env *env)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; t != NULL && i < t->nsubs; i++) {
        const kb_st_sub *s = &t->subs[i];
        for (int32_t j = 0; j < s->nsources; j++)
            h = sig_topic(h, env, s->sources[j]);
        for (int32_t j = 0; j < s->nrsources; j++)
            h = sig_topic(h, env, s->rsources[j].name);
        for (int32_t j = 0; j < s->nchangelogs; j++)
            h = sig_topic(h, env, s->changelogs[j].name);
    }
    return h;
}

static int32_t partitions_of(const kb_consumer_group_env *env, const char *name)
{
    kb_cg_topic t;
    return env->topic_by_name(env->ctx, name, &t) ? t.npartitions : 0;
}

/* The partition count repartition topic name should have: its own, or the
 * largest count among the subtopologies writing to it (0: unknown yet). */
static int32_t wanted_repartition(const kb_streams_topology *t, const kb_st_topic *rt,
                                  const int32_t *counts)
{
    if (rt->partitions > 0)
        return rt->partitions;
    int32_t best = 0;
    for (int32_t i = 0; i < t->nsubs; i++)
        for (int32_t j = 0; j < t->subs[i].nsinks; j++)
            if (strcmp(t->subs[i].sinks[j], rt->name) == 0 && counts[i] > best)
                best = counts[i];
    return best;
}

/* Task counts to a fixed point: a subtopology's count is the largest of its
 * source topics' and repartition topics' counts. */
static void resolve_counts(const kb_streams_topology *t, const kb_consumer_group_env *env,
                           int32_t *counts)
{
    for (int32_t i = 0; i < t->nsubs; i++) {
        counts[i] = 0;
        for (int32_t j = 0; j < t->subs[i].nsources; j++) {
            int32_t p = partitions_of(env, t->subs[i].sources[j]);
            counts[i] = p > counts[i] ? p : counts[i];
        }
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t i = 0; i < t->nsubs; i++) {
            for (int32_t j = 0; j < t->subs[i].nrsources; j++) {
                int32_t p = wanted_repartition(t, &t->subs[i].rsources[j], counts);
                if (p > counts[i]) {
                    counts[i] = p;
                    changed = true;
                }
            }
        }
    }
}

/* A status whose detail reads "<what> <names> <tail>" (Kafka's wording). */
static kp_err add_status(kb_streams_topology *t, int8_t code, const char *what, const char *names,
                         const char *tail)
{
    if (t->nstatus >= KB_ST_MAX_STATUS)
        return KP_ERR_NONE;
    size_t len = strlen(what) + strlen(names) + strlen(tail) + 4;
    char *d = malloc(len);
    if (d == NULL)
        return KP_ERR__NOMEM;
    snprintf(d, len, "%s %s %s", what, names, tail);
    t->status[t->nstatus].code = code;
    t->status[t->nstatus++].detail = d;
    return KP_ERR_NONE;
}

/* A growing ", "-separated list of names (bounded: the detail is a hint). */
typedef struct namelist {
    char buf[1024];
    size_t len;
    int32_t n;
} namelist;

static void namelist_add(namelist *l, const char *name)
{
    if (l->len < sizeof(l->buf) - 1)
        l->len += (size_t)snprintf(l->buf + l->len, sizeof(l->buf) - l->len, "%s%s",
                                   l->n > 0 ? ", " : "", name);
    if (l->len >= sizeof(l->buf))
        l->len = sizeof(l->buf) - 1;
    l->n++;
}

/* Creates or checks one internal topic of want partitions. */
static void internal_topic(const kb_st_topic *it, int32_t want, const kb_consumer_group_env *env,
                           kb_st_create_fn create, void *cctx, namelist *missing,
                           namelist *wrong)
{
    int32_t have = partitions_of(env, it->name);
    if (have > 0) {
        if (have != want)
            namelist_add(wrong, it->name);
        return;
    }
    if (want <= 0 || create == NULL ||
        create(cctx, it->name, want, it->configs, it->nconfigs) != KP_ERR_NONE ||
        partitions_of(env, it->name) <= 0)
        namelist_add(missing, it->name);
}

kp_err kb_streams_topology_configure(kb_streams_topology *t, const kb_consumer_group_env *env,
                                     kb_st_create_fn create, void *cctx)
{
    status_clear(t);
    int32_t *counts = calloc((size_t)t->nsubs + 1, sizeof(*counts));
    if (counts == NULL)
        return KP_ERR__NOMEM;
    namelist absent = {0}, missing = {0}, wrong = {0};
    for (int32_t i = 0; i < t->nsubs; i++)
        for (int32_t j = 0; j < t->subs[i].nsources; j++)
            if (partitions_of(env, t->subs[i].sources[j]) <= 0)
                namelist_add(&absent, t->subs[i].sources[j]);
    resolve_counts(t, env, counts);
    for (int32_t i = 0; absent.n == 0 && i < t->nsubs; i++) {
        const kb_st_sub *s = &t->subs[i];
        for (int32_t j = 0; j < s->nrsources; j++)
            internal_topic(&s->rsources[j], wanted_repartition(t, &s->rsources[j], counts), env,
                           create, cctx, &missing, &wrong);
        for (int32_t j = 0; j < s->nchangelogs; j++)
            internal_topic(&s->changelogs[j], counts[i], env, create, cctx, &missing, &wrong);
    }
    kp_err e = KP_ERR_NONE;
    if (absent.n > 0)
        e = add_status(t, KB_ST_MISSING_SOURCE_TOPICS, "Source topics", absent.buf,
                       "are missing.");
    if (e == KP_ERR_NONE && missing.n > 0)
        e = add_status(t, KB_ST_MISSING_INTERNAL_TOPICS, "Internal topics", missing.buf,
                       "are missing.");
    if (e == KP_ERR_NONE && wrong.n > 0)
        e = add_status(t, KB_ST_INCORRECTLY_PARTITIONED_TOPICS, "Internal topics", wrong.buf,
                       "have the wrong number of partitions.");
    bool ok = t->nstatus == 0;
    for (int32_t i = 0; i < t->nsubs; i++)
        t->subs[i].ntasks = ok ? counts[i] : 0;
    free(counts);
    return e;
}
