#include "kb_consumer_group.h"

#include <stdlib.h>
#include <string.h>

#include "kb_consumer_assign.h"

static const char *const state_names[] = {
    [KB_CGS_EMPTY] = "Empty",
    [KB_CGS_ASSIGNING] = "Assigning",
    [KB_CGS_RECONCILING] = "Reconciling",
    [KB_CGS_STABLE] = "Stable",
};

const char *kb_consumer_group_state_name(kb_consumer_group_state s)
{
    return state_names[s];
}

/* ---- members ------------------------------------------------------------ */

kb_consumer_group *kb_consumer_group_new(void)
{
    return calloc(1, sizeof(kb_consumer_group));
}

static void strv_free(char **v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void member_free(kb_cg_member *m)
{
    free(m->member_id);
    free(m->instance_id);
    free(m->rack_id);
    free(m->client_id);
    free(m->client_host);
    strv_free(m->topics, m->ntopics);
    if (m->regex != NULL)
        regfree(&m->re);
    free(m->regex);
    strv_free(m->rx_topics, m->nrx_topics);
    free(m->assignor);
    kb_cg_set_free(&m->assigned);
    kb_cg_set_free(&m->revoking);
    kb_cg_set_free(&m->target);
    free(m);
}

void kb_consumer_group_free(kb_consumer_group *cg)
{
    if (cg == NULL)
        return;
    for (int32_t i = 0; i < cg->nmembers; i++)
        member_free(cg->members[i]);
    free(cg->members);
    strv_free(cg->gone, cg->ngone);
    free(cg);
}

kb_cg_member *kb_consumer_group_member_find(const kb_consumer_group *cg, kp_str member_id)
{
    for (int32_t i = 0; i < cg->nmembers; i++)
        if (kp_cstr_is(cg->members[i]->member_id, member_id))
            return cg->members[i];
    return NULL;
}

static kb_cg_member *instance_find(const kb_consumer_group *cg, kp_str instance_id)
{
    if (instance_id.len < 0)
        return NULL;
    for (int32_t i = 0; i < cg->nmembers; i++)
        if (kp_cstr_is(cg->members[i]->instance_id, instance_id))
            return cg->members[i];
    return NULL;
}

/* Remembers a member id whose records need tombstones (kb_consumer_group_rec);
 * out of memory loses the tombstones only (the member expires again after
 * a restart). */
static void gone_add(kb_consumer_group *cg, const char *member_id)
{
    if (cg->ngone == cg->gone_cap) {
        int32_t cap = cg->gone_cap < 4 ? 4 : cg->gone_cap * 2;
        char **v = realloc(cg->gone, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return;
        cg->gone = v;
        cg->gone_cap = cap;
    }
    if ((cg->gone[cg->ngone] = strdup(member_id)) != NULL)
        cg->ngone++;
}

static void member_remove(kb_consumer_group *cg, kb_cg_member *m)
{
    gone_add(cg, m->member_id);
    for (int32_t i = 0; i < cg->nmembers; i++) {
        if (cg->members[i] == m) {
            memmove(&cg->members[i], &cg->members[i + 1],
                    (size_t)(cg->nmembers - i - 1) * sizeof(*cg->members));
            cg->nmembers--;
            break;
        }
    }
    member_free(m);
    cg->dirty = true;
}

static kp_err member_add(kb_consumer_group *cg, kp_str member_id, kb_cg_member **out)
{
    if (cg->nmembers == cg->members_cap) {
        int32_t cap = cg->members_cap < 4 ? 4 : cg->members_cap * 2;
        kb_cg_member **v = realloc(cg->members, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        cg->members = v;
        cg->members_cap = cap;
    }
    kb_cg_member *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->member_id = kp_str_cdup(member_id)) == NULL) {
        free(m);
        return KP_ERR__NOMEM;
    }
    m->revoke_deadline = KB_CONSUMER_GROUP_NO_DEADLINE;
    m->dirty = KB_CG_DIRTY_META | KB_CG_DIRTY_CURRENT;
    cg->members[cg->nmembers++] = m;
    cg->dirty = true;
    *out = m;
    return KP_ERR_NONE;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool strv_has(char *const *v, int32_t n, const char *name)
{
    return n > 0 && bsearch(&name, v, (size_t)n, sizeof(*v), cmp_strp) != NULL;
}

/* Sorts v and drops repeats (freeing them); returns the new count. */
static int32_t strv_unique(char **v, int32_t n)
{
    if (n > 1)
        qsort(v, (size_t)n, sizeof(*v), cmp_strp);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(v[k - 1], v[i]) == 0)
            free(v[i]);
        else
            v[k++] = v[i];
    }
    return k;
}

/* Replaces m's topic names with the request's; true when they changed. */
static kp_err member_set_topics(kb_cg_member *m, const kp_str *names, int32_t n, bool *changed)
{
    char **v = calloc((size_t)n + 1, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        if ((v[i] = kp_str_cdup(names[i])) == NULL) {
            strv_free(v, i);
            return KP_ERR__NOMEM;
        }
    }
    n = strv_unique(v, n);
    bool same = n == m->ntopics;
    for (int32_t i = 0; same && i < n; i++)
        same = strcmp(v[i], m->topics[i]) == 0;
    if (same) {
        strv_free(v, n);
        return KP_ERR_NONE;
    }
    strv_free(m->topics, m->ntopics);
    m->topics = v;
    m->ntopics = n;
    *changed = true;
    return KP_ERR_NONE;
}

/* Refuses what RE2 refuses and what would make regcomp/regexec costly:
 * back-references, and counted repetitions that would expand the pattern
 * (its length times the product of the counts, nested ones multiplying)
 * past KB_CONSUMER_GROUP_REGEX_EXPANSION. glibc's regcomp builds an automaton that
 * size: 250 alternatives repeated {1000} (513 bytes) took 0.5 s of the
 * loop and 570 MB; at the bound it takes milliseconds and a few MB. */
static bool regex_tame(kp_str s)
{
    int64_t product = 1;
    for (int32_t i = 0; i < s.len; i++) {
        if (s.p[i] == '\\' && i + 1 < s.len) {
            if (s.p[++i] >= '1' && s.p[i] <= '9')
                return false;
            continue;
        }
        if (s.p[i] != '{')
            continue;
        int64_t bound = 0;
        for (i++; i < s.len && s.p[i] != '}'; i++)
            if (s.p[i] >= '0' && s.p[i] <= '9')
                bound = bound * 10 + (s.p[i] - '0') > 1000 ? 1001 : bound * 10 + (s.p[i] - '0');
            else
                bound = 0; /* the count after the comma is the one that counts */
        product *= bound > 1 ? bound : 1;
        if (product * s.len > KB_CONSUMER_GROUP_REGEX_EXPANSION)
            return false;
    }
    return true;
}

kp_err kb_consumer_group_compile_regex(kp_str s, regex_t *re)
{
    if (s.len > KB_CONSUMER_GROUP_MAX_REGEX || !regex_tame(s))
        return KP_ERR_INVALID_REGULAR_EXPRESSION;
    char *full = malloc((size_t)s.len + 5);
    if (full == NULL)
        return KP_ERR__NOMEM;
    full[0] = '^';
    full[1] = '(';
    memcpy(full + 2, s.p, (size_t)s.len);
    memcpy(full + 2 + s.len, ")$", 3);
    int rc = REG_BADPAT; /* a NUL would cut the pattern short */
    if (memchr(s.p, '\0', (size_t)s.len) == NULL)
        rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
    free(full);
    return rc == 0 ? KP_ERR_NONE : KP_ERR_INVALID_REGULAR_EXPRESSION;
}

/* Sets m's regex ("" clears it, as Kafka does). */
static kp_err member_set_regex(kb_cg_member *m, kp_str s, bool *changed)
{
    if (s.len < 0 || kp_cstr_is(m->regex, s) || (s.len == 0 && m->regex == NULL))
        return KP_ERR_NONE;
    regex_t re;
    char *copy = NULL;
    if (s.len > 0) {
        kp_err e = kb_consumer_group_compile_regex(s, &re);
        if (e != KP_ERR_NONE)
            return e;
        if ((copy = kp_str_cdup(s)) == NULL) {
            regfree(&re);
            return KP_ERR__NOMEM;
        }
    }
    if (m->regex != NULL)
        regfree(&m->re);
    free(m->regex);
    m->regex = copy;
    if (copy != NULL)
        m->re = re;
    strv_free(m->rx_topics, m->nrx_topics);
    m->rx_topics = NULL;
    m->nrx_topics = 0;
    m->rx_pending = m->rx_fresh = copy != NULL;
    *changed = true;
    return KP_ERR_NONE;
}

bool kb_cg_member_subscribes(const kb_cg_member *m, const char *topic)
{
    return strv_has(m->topics, m->ntopics, topic) || strv_has(m->rx_topics, m->nrx_topics, topic);
}

bool kb_consumer_group_subscribed_to(const kb_consumer_group *cg, kp_str topic)
{
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *m = cg->members[i];
        for (int32_t j = 0; j < m->ntopics; j++)
            if (kp_cstr_is(m->topics[j], topic))
                return true;
        for (int32_t j = 0; j < m->nrx_topics; j++)
            if (kp_cstr_is(m->rx_topics[j], topic))
                return true;
    }
    return false;
}

/* ---- subscribed topic metadata ------------------------------------------ */

static bool strv_eq(char *const *a, int32_t na, char *const *b, int32_t nb)
{
    if (na != nb)
        return false;
    for (int32_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/* Re-reads which topics m's regex matches; *changed when that differs. */
static kp_err refresh_regex(kb_cg_member *m, const kb_consumer_group_env *env, bool *changed)
{
    m->rx_pending = m->rx_fresh = false;
    if (m->regex == NULL)
        return KP_ERR_NONE;
    int32_t n = 0, cap = 0;
    char **v = NULL;
    kb_cg_topic t;
    for (size_t i = 0; env->topic_at(env->ctx, i, &t); i++) {
        if (regexec(&m->re, t.name, 0, NULL, 0) != 0 || t.name[0] == '_')
            continue; /* internal topics (__consumer_offsets...) never match */
        if (n == cap) {
            cap = cap < 8 ? 8 : cap * 2;
            char **nv = realloc(v, (size_t)cap * sizeof(*nv));
            if (nv == NULL)
                goto nomem;
            v = nv;
        }
        if ((v[n] = strdup(t.name)) == NULL)
            goto nomem;
        n++;
    }
    n = strv_unique(v, n);
    *changed |= !strv_eq(m->rx_topics, m->nrx_topics, v, n);
    strv_free(m->rx_topics, m->nrx_topics);
    m->rx_topics = v;
    m->nrx_topics = n;
    return KP_ERR_NONE;
nomem:
    strv_free(v, n);
    return KP_ERR__NOMEM;
}

/* A regex that came with this heartbeat waits for the next event, unless
 * another member has the same one resolved (Kafka shares resolutions). */
static kp_err resolve_regex(kb_consumer_group *cg, kb_cg_member *m, const kb_consumer_group_env *env)
{
    if (!m->rx_fresh)
        return refresh_regex(m, env, &cg->dirty); /* a member's subscription changed */
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *o = cg->members[i];
        if (o == m || o->regex == NULL || o->rx_pending || strcmp(o->regex, m->regex) != 0)
            continue;
        char **v = calloc((size_t)o->nrx_topics + 1, sizeof(*v));
        for (int32_t k = 0; v != NULL && k < o->nrx_topics; k++) {
            if ((v[k] = strdup(o->rx_topics[k])) == NULL) {
                strv_free(v, k);
                v = NULL;
            }
        }
        if (v == NULL)
            return KP_ERR__NOMEM;
        strv_free(m->rx_topics, m->nrx_topics);
        m->rx_topics = v;
        m->nrx_topics = o->nrx_topics;
        m->rx_pending = m->rx_fresh = false;
        return KP_ERR_NONE;
    }
    return KP_ERR_NONE;
}

static int cmp_topic(const void *a, const void *b)
{
    return strcmp(((const kb_cg_topic *)a)->name, ((const kb_cg_topic *)b)->name);
}

/* The existing topics any member subscribes to, sorted by name (*out
 * malloc'ed; names borrowed from the registry during this call). */
static kp_err subscribed_topics(const kb_consumer_group *cg, const kb_consumer_group_env *env, kb_cg_topic **out,
                                int32_t *nout)
{
    size_t total = 0;
    for (int32_t i = 0; i < cg->nmembers; i++)
        total += (size_t)cg->members[i]->ntopics + (size_t)cg->members[i]->nrx_topics;
    kb_cg_topic *v = calloc(total + 1, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    size_t n = 0;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *m = cg->members[i];
        for (int32_t j = 0; j < m->ntopics + m->nrx_topics; j++) {
            const char *name = j < m->ntopics ? m->topics[j] : m->rx_topics[j - m->ntopics];
            if (env->topic_by_name(env->ctx, name, &v[n]))
                n++;
        }
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_topic);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || strcmp(v[k - 1].name, v[i].name) != 0)
            v[k++] = v[i];
    *out = v;
    *nout = (int32_t)k;
    return KP_ERR_NONE;
}

static uint64_t topics_sig(const kb_cg_topic *t, int32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < n; i++) {
        for (const char *p = t[i].name; *p != '\0'; p++)
            h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
        for (size_t j = 0; j < sizeof(t[i].id.b); j++)
            h = (h ^ t[i].id.b[j]) * 0x100000001b3ull;
        h = (h ^ (uint64_t)(uint32_t)t[i].npartitions) * 0x100000001b3ull;
        h = (h ^ 0xff) * 0x100000001b3ull;
    }
    return h;
}

const char *kb_consumer_group_assignor(const kb_consumer_group *cg, const kb_consumer_group_env *env)
{
    /* The assignor most members ask for (first asked on a tie). */
    const char *best = NULL;
    int32_t best_n = 0;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const char *a = cg->members[i]->assignor;
        int32_t k = 0;
        for (int32_t j = 0; a != NULL && j < cg->nmembers; j++)
            k += cg->members[j]->assignor != NULL && strcmp(cg->members[j]->assignor, a) == 0;
        if (k > best_n) {
            best = a;
            best_n = k;
        }
    }
    return best != NULL ? best : (env->nassignors > 0 ? env->assignors[0] : "uniform");
}

/* ---- group epoch and target assignment ---------------------------------- */

/* Bumps the group epoch when membership, subscriptions or the subscribed
 * topics changed, then recomputes the target assignment. */
static kp_err update_group(kb_consumer_group *cg, const kb_consumer_group_env *env, int64_t now)
{
    if (!cg->dirty && now < cg->meta_deadline && cg->assignment_epoch == cg->group_epoch)
        return KP_ERR_NONE;
    bool pending = false;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        kb_cg_member *m = cg->members[i];
        if (resolve_regex(cg, m, env) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
        pending |= m->rx_pending;
        m->rx_fresh = false; /* resolved by the next event */
    }
    kb_cg_topic *topics;
    int32_t nt;
    if (subscribed_topics(cg, env, &topics, &nt) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    uint64_t sig = topics_sig(topics, nt);
    if (cg->dirty || sig != cg->meta_sig) {
        cg->group_epoch++;
        cg->meta_sig = sig;
    }
    cg->dirty = false;
    /* A regex left to resolve makes the next event look again. */
    cg->meta_deadline = pending ? now : now + KB_CONSUMER_GROUP_REFRESH_MS;
    kp_err err = KP_ERR_NONE;
    if (cg->group_epoch > cg->assignment_epoch) {
        const char *a = kb_consumer_group_assignor(cg, env);
        if (strcmp(a, "range") == 0)
            err = kb_consumer_assign_range(cg->members, cg->nmembers, topics, nt);
        else
            err = kb_consumer_assign_uniform(cg->members, cg->nmembers, topics, nt);
        if (err == KP_ERR_NONE)
            cg->assignment_epoch = cg->group_epoch;
    }
    free(topics);
    return err;
}

/* ---- reconciliation ----------------------------------------------------- */

static bool owned_by_other(const kb_consumer_group *cg, const kb_cg_member *m, const kb_cg_tp *tp)
{
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *o = cg->members[i];
        if (o != m && (kb_cg_set_has(&o->assigned, &tp->topic, tp->partition) ||
                       kb_cg_set_has(&o->revoking, &tp->topic, tp->partition)))
            return true;
    }
    return false;
}

/* Kafka's CurrentAssignmentBuilder.computeNextAssignment: keep what stays,
 * revoke what goes (epoch held), then take what is free. */
static kp_err next_assignment(kb_consumer_group *cg, kb_cg_member *m, const kb_cg_set *owned, int64_t now)
{
    kb_cg_tpvec keep = {0}, revoke = {0}, add = {0};
    bool unreleased = false;
    for (int32_t i = 0; i < m->assigned.n; i++) {
        const kb_cg_tp *tp = &m->assigned.v[i];
        kb_cg_tpvec_push(kb_cg_set_has(&m->target, &tp->topic, tp->partition) ? &keep : &revoke,
                   &tp->topic, tp->partition);
    }
    bool must_revoke = revoke.s.n > 0 && (owned == NULL || kb_cg_set_meets(owned, &revoke.s));
    for (int32_t i = 0; !must_revoke && i < m->target.n; i++) {
        const kb_cg_tp *tp = &m->target.v[i];
        if (kb_cg_set_has(&m->assigned, &tp->topic, tp->partition))
            continue;
        if (owned_by_other(cg, m, tp))
            unreleased = true;
        else
            kb_cg_tpvec_push(&add, &tp->topic, tp->partition);
    }
    for (int32_t i = 0; i < add.s.n; i++)
        kb_cg_tpvec_push(&keep, &add.s.v[i].topic, add.s.v[i].partition);
    kb_cg_set_free(&add.s);
    bool ok = kb_cg_tpvec_seal(&keep, &m->assigned) && !add.nomem;
    if (!must_revoke)
        kb_cg_set_free(&revoke.s);
    ok = kb_cg_tpvec_seal(&revoke, &m->revoking) && ok;
    if (!ok)
        return KP_ERR__NOMEM;
    if (must_revoke) {
        m->prev_epoch = m->epoch; /* as Kafka records it while revoking */
        m->state = KB_CMS_UNREVOKED;
        if (m->revoke_deadline == KB_CONSUMER_GROUP_NO_DEADLINE)
            m->revoke_deadline = now + m->rebalance_timeout_ms;
        return KP_ERR_NONE;
    }
    m->revoke_deadline = KB_CONSUMER_GROUP_NO_DEADLINE;
    if (m->epoch != cg->assignment_epoch) {
        m->prev_epoch = m->epoch;
        m->epoch = cg->assignment_epoch;
    }
    m->state = unreleased ? KB_CMS_UNRELEASED : KB_CMS_STABLE;
    return KP_ERR_NONE;
}

static kp_err reconcile_step(kb_consumer_group *cg, kb_cg_member *m, const kb_cg_set *owned,
                             int64_t now)
{
    switch (m->state) {
    case KB_CMS_STABLE:
        if (m->epoch == cg->assignment_epoch)
            return KP_ERR_NONE;
        return next_assignment(cg, m, owned, now);
    case KB_CMS_UNRELEASED:
        return next_assignment(cg, m, owned, now);
    case KB_CMS_UNREVOKED:
        if (owned == NULL || kb_cg_set_meets(owned, &m->revoking))
            return KP_ERR_NONE;
        kb_cg_set_free(&m->revoking);
        return next_assignment(cg, m, owned, now);
    }
    return KP_ERR_NONE;
}

/* Reconciles m, marking its current assignment record stale on a change. */
static kp_err reconcile(kb_consumer_group *cg, kb_cg_member *m, const kb_cg_set *owned, int64_t now)
{
    int32_t epoch = m->epoch, prev = m->prev_epoch, na = m->assigned.n, nr = m->revoking.n;
    kb_cg_member_state state = m->state;
    kp_err e = reconcile_step(cg, m, owned, now);
    if (epoch != m->epoch || prev != m->prev_epoch || state != m->state || na != m->assigned.n ||
        nr != m->revoking.n)
        m->dirty |= KB_CG_DIRTY_CURRENT;
    return e;
}

/* ---- heartbeat ---------------------------------------------------------- */

static kp_err fail(kb_consumer_group_result *res, kp_err err, const char *msg)
{
    res->err = err;
    res->message = msg;
    return KP_ERR_NONE;
}

static bool assignor_known(const kb_consumer_group_env *env, kp_str name)
{
    for (int32_t i = 0; i < env->nassignors; i++)
        if (kp_cstr_is(env->assignors[i], name))
            return true;
    return false;
}

/* Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid. */
static const char *invalid_request(const kp_consumer_group_heartbeat_req *rq, int16_t version)
{
    bool join = rq->member_epoch == 0;
    if (rq->member_epoch < KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH)
        return "MemberEpoch is invalid.";
    if ((version >= 1 || rq->member_epoch != 0) && rq->member_id.len <= 0)
        return "MemberId can't be empty.";
    if (rq->instance_id.len == 0)
        return "InstanceId can't be empty.";
    if (rq->rack_id.len == 0)
        return "RackId can't be empty.";
    if (rq->member_epoch == KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH && rq->instance_id.len < 0)
        return "InstanceId can't be null.";
    if (join && rq->rebalance_timeout_ms == -1)
        return "RebalanceTimeoutMs must be provided in first request.";
    if (join && rq->topic_partitions.n != 0)
        return "TopicPartitions must be empty when (re-)joining.";
    if (join && rq->subscribed_topic_names.n < 0 && rq->subscribed_topic_regex.len < 0)
        return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.";
    if (rq->subscribed_topic_names.n > KB_CONSUMER_GROUP_MAX_TOPICS)
        return "SubscribedTopicNames has too many topics.";
    for (int32_t i = 0; i < rq->subscribed_topic_names.n; i++)
        if (rq->subscribed_topic_names.v[i].len > KB_CONSUMER_GROUP_TOPIC_NAME_MAX)
            return "SubscribedTopicNames has a name no topic can have.";
    return NULL;
}

/* The request's owned partitions as a set (NULL when not sent). */
static kp_err owned_set(const kp_consumer_group_heartbeat_req *rq, kb_cg_set *out, bool *present)
{
    *present = rq->topic_partitions.n >= 0;
    int64_t total = 0;
    for (int32_t i = 0; i < rq->topic_partitions.n; i++)
        total += rq->topic_partitions.v[i].partitions.n > 0 ? rq->topic_partitions.v[i].partitions.n
                                                            : 0;
    if (total > KB_CONSUMER_GROUP_MAX_OWNED)
        return KP_ERR_INVALID_REQUEST;
    kb_cg_tpvec t = {0};
    for (int32_t i = 0; i < rq->topic_partitions.n; i++)
        for (int32_t j = 0; j < rq->topic_partitions.v[i].partitions.n; j++)
            kb_cg_tpvec_push(&t, &rq->topic_partitions.v[i].topic_id,
                       rq->topic_partitions.v[i].partitions.v[j]);
    return kb_cg_tpvec_seal(&t, out) ? KP_ERR_NONE : KP_ERR__NOMEM;
}

/* Epoch -1 (leave) or -2 (static member's temporary leave). */
static kp_err leave(kb_consumer_group *cg, const kb_consumer_group_env *env,
                    const kp_consumer_group_heartbeat_req *rq, int64_t now, kb_consumer_group_result *res)
{
    kb_cg_member *m = rq->instance_id.len > 0 ? instance_find(cg, rq->instance_id)
                                               : kb_consumer_group_member_find(cg, rq->member_id);
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    if (!kp_cstr_is(m->member_id, rq->member_id))
        return fail(res, KP_ERR_FENCED_INSTANCE_ID, NULL);
    res->member_id = m->member_id;
    res->epoch = rq->member_epoch;
    if (rq->member_epoch == KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH) {
        m->prev_epoch = m->epoch;
        m->epoch = KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH;
        m->dirty |= KB_CG_DIRTY_CURRENT;
        m->session_deadline = now + env->session_timeout_ms; /* until a replacement joins */
        return KP_ERR_NONE;
    }
    member_remove(cg, m);
    res->member_id = NULL; /* freed: the handler echoes the request's */
    return KP_ERR_NONE;
}

/* A static member joining: itself again, or replacing one that left with
 * epoch -2 (it inherits the assignment). */
static kp_err join_static(kb_consumer_group *cg, const kp_consumer_group_heartbeat_req *rq,
                          kb_cg_member **out, kb_consumer_group_result *res)
{
    kb_cg_member *m = instance_find(cg, rq->instance_id);
    *out = m;
    if (m == NULL || kp_cstr_is(m->member_id, rq->member_id))
        return KP_ERR_NONE;
    if (m->epoch != KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH)
        return fail(res, KP_ERR_UNRELEASED_INSTANCE_ID, NULL);
    char *id = kp_str_cdup(rq->member_id);
    if (id == NULL)
        return KP_ERR__NOMEM;
    gone_add(cg, m->member_id);
    free(m->member_id);
    m->member_id = id;
    m->dirty = KB_CG_DIRTY_META | KB_CG_DIRTY_TARGET | KB_CG_DIRTY_CURRENT;
    m->epoch = m->prev_epoch = 0;
    m->state = KB_CMS_STABLE;
    return KP_ERR_NONE;
}

static kp_err join(kb_consumer_group *cg, const kb_consumer_group_env *env,
                   const kp_consumer_group_heartbeat_req *rq, kb_cg_member **out,
                   kb_consumer_group_result *res)
{
    kp_err e = rq->instance_id.len > 0 ? join_static(cg, rq, out, res) : KP_ERR_NONE;
    if (e != KP_ERR_NONE || res->err != KP_ERR_NONE || *out != NULL)
        return e;
    *out = rq->member_id.len > 0 ? kb_consumer_group_member_find(cg, rq->member_id) : NULL;
    if (*out != NULL)
        return KP_ERR_NONE;
    int32_t cap = env->max_size < KB_CONSUMER_GROUP_MAX_MEMBERS ? env->max_size : KB_CONSUMER_GROUP_MAX_MEMBERS;
    if (cg->nmembers >= cap)
        return fail(res, KP_ERR_GROUP_MAX_SIZE_REACHED, "The group has reached its maximum size.");
    char fresh[37];
    kp_str id = rq->member_id;
    if (id.len <= 0) {
        env->member_id(fresh, env->ctx);
        id = kp_str_from(fresh);
    }
    bool nomem = false;
    if (member_add(cg, id, out) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_cg_set_str(&(*out)->instance_id, rq->instance_id, &nomem);
    return nomem ? KP_ERR__NOMEM : KP_ERR_NONE;
}

/* Kafka's throwIfMemberEpochIsInvalid. */
static kp_err check_epoch(const kb_cg_member *m, int32_t epoch, const kb_cg_set *owned,
                          bool has_owned)
{
    return kb_cg_epoch_fenced(m->epoch, m->prev_epoch, epoch, owned, has_owned, &m->assigned)
               ? KP_ERR_FENCED_MEMBER_EPOCH
               : KP_ERR_NONE;
}

static kp_err find_member(kb_consumer_group *cg, const kp_consumer_group_heartbeat_req *rq,
                          const kb_cg_set *owned, bool has_owned, kb_cg_member **out,
                          kb_consumer_group_result *res)
{
    kb_cg_member *m = kb_consumer_group_member_find(cg, rq->member_id);
    *out = m;
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    if (rq->instance_id.len > 0 && !kp_cstr_is(m->instance_id, rq->instance_id))
        return fail(res, KP_ERR_FENCED_INSTANCE_ID, NULL);
    kp_err e = check_epoch(m, rq->member_epoch, owned, has_owned);
    return e != KP_ERR_NONE ? fail(res, e, NULL) : KP_ERR_NONE;
}

/* Applies the subscription fields the request carries. */
static kp_err update_member(kb_consumer_group *cg, kb_cg_member *m,
                            const kp_consumer_group_heartbeat_req *rq, const kb_consumer_group_client *cl,
                            kb_consumer_group_result *res)
{
    bool changed = false, nomem = false;
    kp_err e = KP_ERR_NONE;
    if (rq->subscribed_topic_names.n >= 0)
        e = member_set_topics(m, rq->subscribed_topic_names.v, rq->subscribed_topic_names.n,
                              &changed);
    if (e == KP_ERR_NONE)
        e = member_set_regex(m, rq->subscribed_topic_regex, &changed);
    if (e == KP_ERR_INVALID_REGULAR_EXPRESSION)
        return fail(res, e, "SubscribedTopicRegex is not a valid regular expression.");
    if (e != KP_ERR_NONE)
        return e;
    if (rq->server_assignor.len >= 0)
        changed |= kb_cg_set_str(&m->assignor, rq->server_assignor, &nomem);
    bool other = kb_cg_set_str(&m->rack_id, rq->rack_id, &nomem);
    other |= kb_cg_set_str(&m->client_id, cl->client_id, &nomem);
    other |= kb_cg_set_str(&m->client_host, cl->client_host, &nomem);
    if (rq->rebalance_timeout_ms >= 0 && m->rebalance_timeout_ms != rq->rebalance_timeout_ms) {
        m->rebalance_timeout_ms = rq->rebalance_timeout_ms;
        other = true;
    }
    if (changed)
        cg->dirty = true;
    if (changed || other)
        m->dirty |= KB_CG_DIRTY_META;
    return nomem ? KP_ERR__NOMEM : KP_ERR_NONE;
}

static kp_err heartbeat_member(kb_consumer_group *cg, const kb_consumer_group_env *env,
                               const kp_consumer_group_heartbeat_req *rq,
                               const kb_consumer_group_client *cl, const kb_cg_set *owned, bool has_owned,
                               int64_t now, kb_consumer_group_result *res)
{
    kb_cg_member *m = NULL;
    kp_err e = rq->member_epoch == 0 ? join(cg, env, rq, &m, res)
                                     : find_member(cg, rq, owned, has_owned, &m, res);
    if (e != KP_ERR_NONE || res->err != KP_ERR_NONE)
        return e;
    bool fresh = m->ntopics == 0 && m->regex == NULL && m->epoch == 0;
    if ((e = update_member(cg, m, rq, cl, res)) != KP_ERR_NONE || res->err != KP_ERR_NONE) {
        if (fresh && m->ntopics == 0 && m->regex == NULL)
            member_remove(cg, m);
        return e;
    }
    m->session_deadline = now + env->session_timeout_ms;
    kb_cg_set before = {0};
    kb_cg_tpvec copy = {0};
    for (int32_t i = 0; i < m->assigned.n; i++)
        kb_cg_tpvec_push(&copy, &m->assigned.v[i].topic, m->assigned.v[i].partition);
    if (!kb_cg_tpvec_seal(&copy, &before))
        return KP_ERR__NOMEM;
    if ((e = update_group(cg, env, now)) == KP_ERR_NONE)
        e = reconcile(cg, m, has_owned ? owned : NULL, now);
    bool full = rq->rebalance_timeout_ms != -1 &&
                (rq->subscribed_topic_names.n >= 0 || rq->subscribed_topic_regex.len >= 0) &&
                has_owned;
    res->with_assignment = rq->member_epoch == 0 || full || !kb_cg_set_eq(&before, &m->assigned);
    kb_cg_set_free(&before);
    res->member_id = m->member_id;
    res->epoch = m->epoch;
    res->assignment = &m->assigned;
    return e;
}

kp_err kb_consumer_group_check_request(const kb_consumer_group_env *env,
                               const kp_consumer_group_heartbeat_req *rq, int16_t version,
                               const char **message)
{
    *message = invalid_request(rq, version);
    if (*message != NULL)
        return KP_ERR_INVALID_REQUEST;
    if (rq->server_assignor.len >= 0 && !assignor_known(env, rq->server_assignor)) {
        *message = "ServerAssignor is not supported.";
        return KP_ERR_UNSUPPORTED_ASSIGNOR;
    }
    regex_t re;
    kp_err e = rq->subscribed_topic_regex.len > 0
                   ? kb_consumer_group_compile_regex(rq->subscribed_topic_regex, &re)
                   : KP_ERR_NONE;
    if (e == KP_ERR_INVALID_REGULAR_EXPRESSION) {
        *message = "SubscribedTopicRegex is not a valid regular expression.";
        return e;
    }
    if (e == KP_ERR_NONE && rq->subscribed_topic_regex.len > 0)
        regfree(&re);
    return e;
}

kp_err kb_consumer_group_heartbeat(kb_consumer_group *cg, const kb_consumer_group_env *env,
                           const kp_consumer_group_heartbeat_req *rq, const kb_consumer_group_client *cl,
                           int64_t now, kb_consumer_group_result *res)
{
    memset(res, 0, sizeof(*res));
    res->heartbeat_interval_ms = env->heartbeat_interval_ms;
    const char *msg;
    kp_err bad = kb_consumer_group_check_request(env, rq, cl->version, &msg);
    if (bad == KP_ERR__NOMEM)
        return bad;
    if (bad != KP_ERR_NONE)
        return fail(res, bad, msg);
    if (rq->member_epoch < 0) {
        kp_err e = leave(cg, env, rq, now, res);
        return e == KP_ERR_NONE && res->err == KP_ERR_NONE ? update_group(cg, env, now) : e;
    }
    kb_cg_set owned = {0};
    bool has_owned;
    kp_err e = owned_set(rq, &owned, &has_owned);
    if (e == KP_ERR_INVALID_REQUEST)
        return fail(res, e, "TopicPartitions has too many partitions.");
    if (e == KP_ERR_NONE)
        e = heartbeat_member(cg, env, rq, cl, &owned, has_owned, now, res);
    kb_cg_set_free(&owned);
    return e;
}

/* ---- time --------------------------------------------------------------- */

void kb_consumer_group_tick(kb_consumer_group *cg, const kb_consumer_group_env *env, int64_t now)
{
    bool removed = false;
    for (int32_t i = 0; i < cg->nmembers;) {
        kb_cg_member *m = cg->members[i];
        if (m->session_deadline <= now || m->revoke_deadline <= now) {
            member_remove(cg, m);
            removed = true;
        } else {
            i++;
        }
    }
    if (removed)
        (void)update_group(cg, env, now);
}

int64_t kb_consumer_group_next_deadline(const kb_consumer_group *cg)
{
    int64_t d = KB_CONSUMER_GROUP_NO_DEADLINE;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *m = cg->members[i];
        if (m->session_deadline < d)
            d = m->session_deadline;
        if (m->revoke_deadline < d)
            d = m->revoke_deadline;
    }
    return d;
}

kb_consumer_group_state kb_consumer_group_state_of(const kb_consumer_group *cg)
{
    if (cg->nmembers == 0)
        return KB_CGS_EMPTY;
    if (cg->group_epoch > cg->assignment_epoch)
        return KB_CGS_ASSIGNING;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *m = cg->members[i];
        if (m->state != KB_CMS_STABLE ||
            (m->epoch != cg->assignment_epoch && m->epoch != KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH))
            return KB_CGS_RECONCILING;
    }
    return KB_CGS_STABLE;
}

/* ---- restoring ---------------------------------------------------------- */

kp_err kb_consumer_group_restore_member(kb_consumer_group *cg, kp_str member_id,
                                const kp_consumer_group_member_metadata_value *v)
{
    kb_cg_member *m = kb_consumer_group_member_find(cg, member_id);
    if (m == NULL && (cg->nmembers >= KB_CONSUMER_GROUP_MAX_MEMBERS || member_id.len <= 0 ||
                      v->subscribed_topic_names.n > KB_CONSUMER_GROUP_MAX_TOPICS))
        return KP_ERR__CORRUPT;
    if (m == NULL && member_add(cg, member_id, &m) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    bool changed = false, nomem = false;
    kp_err e = member_set_topics(m, v->subscribed_topic_names.v,
                                 v->subscribed_topic_names.n > 0 ? v->subscribed_topic_names.n : 0,
                                 &changed);
    if (e == KP_ERR_NONE)
        e = member_set_regex(m, v->subscribed_topic_regex, &changed);
    if (e == KP_ERR_INVALID_REGULAR_EXPRESSION)
        e = KP_ERR_NONE; /* not ours to judge again: it matches nothing */
    kb_cg_set_str(&m->instance_id, v->instance_id, &nomem);
    kb_cg_set_str(&m->rack_id, v->rack_id, &nomem);
    kb_cg_set_str(&m->client_id, v->client_id, &nomem);
    kb_cg_set_str(&m->client_host, v->client_host, &nomem);
    kb_cg_set_str(&m->assignor, v->server_assignor, &nomem);
    m->rebalance_timeout_ms = v->rebalance_timeout_ms;
    return e != KP_ERR_NONE ? e : nomem ? KP_ERR__NOMEM : KP_ERR_NONE;
}

void kb_consumer_group_restore_remove(kb_consumer_group *cg, kp_str member_id)
{
    kb_cg_member *m = kb_consumer_group_member_find(cg, member_id);
    if (m != NULL)
        member_remove(cg, m);
}

kp_err kb_consumer_group_restored(kb_consumer_group *cg, const kb_consumer_group_env *env, int64_t now)
{
    for (int32_t i = 0; i < cg->nmembers; i++) {
        kb_cg_member *m = cg->members[i];
        m->session_deadline = now + env->session_timeout_ms;
        m->revoke_deadline = m->state == KB_CMS_UNREVOKED ? now + m->rebalance_timeout_ms
                                                           : KB_CONSUMER_GROUP_NO_DEADLINE;
        m->dirty = 0;
        bool changed = false; /* the group comes back at its stored epoch regardless */
        if (refresh_regex(m, env, &changed) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    strv_free(cg->gone, cg->ngone);
    cg->gone = NULL;
    cg->ngone = cg->gone_cap = 0;
    kb_cg_topic *topics;
    int32_t nt;
    if (subscribed_topics(cg, env, &topics, &nt) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    cg->meta_sig = topics_sig(topics, nt);
    free(topics);
    cg->dirty = false;
    cg->meta_deadline = now + KB_CONSUMER_GROUP_REFRESH_MS;
    cg->stored_epoch = cg->group_epoch;
    cg->stored_assignment_epoch = cg->assignment_epoch;
    return KP_ERR_NONE;
}

/* ---- offsets ------------------------------------------------------------ */

kp_err kb_consumer_group_check_commit(const kb_consumer_group *cg, kp_str member_id, int32_t epoch,
                              int16_t version, bool transactional)
{
    if (epoch < 0 && cg->nmembers == 0)
        return KP_ERR_NONE;
    const kb_cg_member *m = kb_consumer_group_member_find(cg, member_id);
    if (m != NULL && !transactional && version < 9)
        return KP_ERR_UNSUPPORTED_VERSION;
    return kb_cg_offsets_epoch(m != NULL ? &m->epoch : NULL, epoch);
}

kp_err kb_consumer_group_check_fetch(const kb_consumer_group *cg, kp_str member_id, int32_t epoch)
{
    if (member_id.len < 0 && epoch < 0)
        return KP_ERR_NONE;
    const kb_cg_member *m = kb_consumer_group_member_find(cg, member_id);
    return kb_cg_offsets_epoch(m != NULL ? &m->epoch : NULL, epoch);
}
