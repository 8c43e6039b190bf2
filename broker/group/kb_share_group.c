/* KIP-932 share groups: membership and the simple assignor (kb_share_group.h). */
#include "kb_share_group.h"

#include <stdlib.h>
#include <string.h>

#define TOPIC_NAME_MAX 249

static const char *const state_names[] = {
    [KB_SGS_EMPTY] = "Empty",
    [KB_SGS_STABLE] = "Stable",
};

const char *kb_share_group_state_name(kb_share_group_state s)
{
    return state_names[s];
}

kb_share_group_state kb_share_group_state_of(const kb_share_group *sg)
{
    return sg->nmembers > 0 ? KB_SGS_STABLE : KB_SGS_EMPTY;
}

kb_share_group *kb_share_group_new(void)
{
    return calloc(1, sizeof(kb_share_group));
}

static void names_free(char **v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void member_free(kb_sg_member *m)
{
    free(m->member_id);
    free(m->rack_id);
    free(m->client_id);
    free(m->client_host);
    names_free(m->topics, m->ntopics);
    kb_cg_set_free(&m->assigned);
    kb_cg_set_free(&m->target);
    free(m);
}

void kb_share_group_free(kb_share_group *sg, void (*free_parts)(struct kb_share_parts *))
{
    if (sg == NULL)
        return;
    for (int32_t i = 0; i < sg->nmembers; i++)
        member_free(sg->members[i]);
    free(sg->members);
    if (free_parts != NULL && sg->parts != NULL)
        free_parts(sg->parts);
    free(sg);
}

kb_sg_member *kb_share_group_member_find(const kb_share_group *sg, kp_str member_id)
{
    for (int32_t i = 0; i < sg->nmembers; i++)
        if (kp_cstr_is(sg->members[i]->member_id, member_id))
            return sg->members[i];
    return NULL;
}

bool kb_share_group_subscribed_to(const kb_share_group *sg, kp_str topic)
{
    for (int32_t i = 0; i < sg->nmembers; i++)
        for (int32_t j = 0; j < sg->members[i]->ntopics; j++)
            if (kp_cstr_is(sg->members[i]->topics[j], topic))
                return true;
    return false;
}

static void member_remove(kb_share_group *sg, kb_sg_member *m)
{
    for (int32_t i = 0; i < sg->nmembers; i++) {
        if (sg->members[i] != m)
            continue;
        memmove(&sg->members[i], &sg->members[i + 1],
                (size_t)(sg->nmembers - i - 1) * sizeof(*sg->members));
        sg->nmembers--;
        break;
    }
    member_free(m);
}

static kp_err member_add(kb_share_group *sg, kp_str member_id, kb_sg_member **out)
{
    if (sg->nmembers == sg->members_cap) {
        int32_t cap = sg->members_cap > 0 ? sg->members_cap * 2 : 4;
        kb_sg_member **v = realloc(sg->members, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        sg->members = v;
        sg->members_cap = cap;
    }
    kb_sg_member *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->member_id = kp_str_cdup(member_id)) == NULL) {
        free(m);
        return KP_ERR__NOMEM;
    }
    sg->members[sg->nmembers++] = m;
    *out = m;
    return KP_ERR_NONE;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replaces m's subscription with names (sorted, unique); *changed when it
 * differs from what m had. */
static kp_err member_subscribe(kb_sg_member *m, const kp_str *names, int32_t n, bool *changed)
{
    char **v = calloc((size_t)n + 1, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++)
        if ((v[i] = kp_str_cdup(names[i])) == NULL) {
            names_free(v, i);
            return KP_ERR__NOMEM;
        }
    if (n > 1)
        qsort(v, (size_t)n, sizeof(*v), cmp_name);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(v[k - 1], v[i]) == 0)
            free(v[i]);
        else
            v[k++] = v[i];
    }
    bool same = k == m->ntopics;
    for (int32_t i = 0; same && i < k; i++)
        same = strcmp(v[i], m->topics[i]) == 0;
    if (same) {
        names_free(v, k);
        return KP_ERR_NONE;
    }
    names_free(m->topics, m->ntopics);
    m->topics = v;
    m->ntopics = k;
    *changed = true;
    return KP_ERR_NONE;
}

static bool member_subscribes(const kb_sg_member *m, const char *topic)
{
    return m->ntopics > 0 &&
           bsearch(&topic, m->topics, (size_t)m->ntopics, sizeof(char *), cmp_name) != NULL;
}

/* ---- the subscribed topics and the assignor ------------------------------ */

static int cmp_topic_id(const void *a, const void *b)
{
    return memcmp(&((const kb_cg_topic *)a)->id, &((const kb_cg_topic *)b)->id, sizeof(kp_uuid));
}

/* The existing topics any member subscribes to, sorted by id, unique (*out
 * malloc'ed; names borrowed from the registry during the call). */
static kp_err subscribed(const kb_share_group *sg, const kb_share_group_env *env,
                         kb_cg_topic **out, int32_t *nout)
{
    size_t total = 0;
    for (int32_t i = 0; i < sg->nmembers; i++)
        total += (size_t)sg->members[i]->ntopics;
    kb_cg_topic *v = calloc(total + 1, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    size_t n = 0;
    for (int32_t i = 0; i < sg->nmembers; i++)
        for (int32_t j = 0; j < sg->members[i]->ntopics; j++)
            n += env->topic_by_name(env->ctx, sg->members[i]->topics[j], &v[n]);
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_topic_id);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || cmp_topic_id(&v[k - 1], &v[i]) != 0)
            v[k++] = v[i];
    *out = v;
    *nout = (int32_t)k;
    return KP_ERR_NONE;
}

static uint64_t sig_bytes(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t topics_signature(const kb_cg_topic *t, int32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < n; i++) {
        h = sig_bytes(h, t[i].name, strlen(t[i].name) + 1);
        h = sig_bytes(h, t[i].id.b, sizeof(t[i].id.b));
        h = sig_bytes(h, &t[i].npartitions, sizeof(t[i].npartitions));
    }
    return h;
}

/* One topic's slots over its eligible members (indexes into sg->members),
 * starting at member *rot: ceil(members / partitions) rounds of the
 * partitions, slot k to eligible member (rot + k) % n. */
static void assign_topic(const kb_cg_topic *t, const int32_t *elig, int32_t n, int32_t *rot,
                         kb_cg_tpvec *vecs)
{
    int32_t p = t->npartitions;
    if (n == 0 || p <= 0)
        return;
    int64_t rounds = ((int64_t)n + p - 1) / p;
    int64_t slots = rounds * p;
    for (int64_t k = 0; k < slots; k++) {
        int32_t mi = elig[(*rot + k) % n];
        kb_cg_tpvec_push(&vecs[mi], &t->id, (int32_t)(k % p));
    }
    *rot = (int32_t)((*rot + slots) % n);
}

static kp_err assign(kb_share_group *sg, const kb_cg_topic *topics, int32_t ntopics)
{
    kb_cg_tpvec *vecs = calloc((size_t)sg->nmembers + 1, sizeof(*vecs));
    int32_t *elig = calloc((size_t)sg->nmembers + 1, sizeof(*elig));
    kp_err e = vecs == NULL || elig == NULL ? KP_ERR__NOMEM : KP_ERR_NONE;
    int32_t rot = 0;
    for (int32_t t = 0; e == KP_ERR_NONE && t < ntopics; t++) {
        int32_t n = 0;
        for (int32_t i = 0; i < sg->nmembers; i++)
            if (member_subscribes(sg->members[i], topics[t].name))
                elig[n++] = i;
        if (rot >= n)
            rot = 0;
        assign_topic(&topics[t], elig, n, &rot, vecs);
    }
    for (int32_t i = 0; vecs != NULL && i < sg->nmembers; i++) {
        if (e != KP_ERR_NONE)
            kb_cg_set_free(&vecs[i].s);
        else if (!kb_cg_tpvec_seal(&vecs[i], &sg->members[i]->target))
            e = KP_ERR__NOMEM;
    }
    free(vecs);
    free(elig);
    return e;
}

/* Bumps the group epoch when the subscribed topics changed (or changed is
 * set), then recomputes the target assignment if the epoch moved. */
static kp_err update_group(kb_share_group *sg, const kb_share_group_env *env, bool changed)
{
    kb_cg_topic *topics;
    int32_t ntopics;
    kp_err e = subscribed(sg, env, &topics, &ntopics);
    if (e != KP_ERR_NONE)
        return e;
    uint64_t sig = topics_signature(topics, ntopics);
    if (changed || sig != sg->meta_sig) {
        sg->group_epoch++;
        sg->meta_sig = sig;
    }
    if (sg->group_epoch > sg->assignment_epoch) {
        e = assign(sg, topics, ntopics);
        if (e == KP_ERR_NONE)
            sg->assignment_epoch = sg->group_epoch;
    }
    free(topics);
    return e;
}

/* ---- heartbeats ---------------------------------------------------------- */

kp_err kb_share_group_check_request(const kp_share_group_heartbeat_req *rq, const char **message)
{
    *message = NULL;
    if (rq->group_id.len <= 0)
        *message = "GroupId can't be empty.";
    else if (rq->rack_id.len == 0)
        *message = "RackId can't be empty.";
    else if (rq->member_id.len <= 0)
        *message = "MemberId can't be empty.";
    else if (rq->member_epoch == 0 && rq->subscribed_topic_names.n <= 0)
        *message = "SubscribedTopicNames must be set in first request.";
    else if (rq->member_epoch < KB_SHARE_GROUP_LEAVE_EPOCH)
        *message = "MemberEpoch is invalid.";
    else if (rq->subscribed_topic_names.n > KB_SHARE_GROUP_MAX_TOPICS)
        *message = "Too many subscribed topics.";
    for (int32_t i = 0; *message == NULL && i < rq->subscribed_topic_names.n; i++)
        if (rq->subscribed_topic_names.v[i].len <= 0 ||
            rq->subscribed_topic_names.v[i].len > TOPIC_NAME_MAX)
            *message = "SubscribedTopicNames holds an invalid topic name.";
    return *message != NULL ? KP_ERR_INVALID_REQUEST : KP_ERR_NONE;
}

static kp_err fail(kb_share_group_result *res, kp_err err, const char *msg)
{
    res->err = err;
    res->message = msg;
    return KP_ERR_NONE;
}

static kp_err leave(kb_share_group *sg, const kb_share_group_env *env, kp_str member_id,
                    kb_share_group_result *res)
{
    kb_sg_member *m = kb_share_group_member_find(sg, member_id);
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    member_remove(sg, m);
    res->epoch = KB_SHARE_GROUP_LEAVE_EPOCH;
    return update_group(sg, env, true);
}

static bool set_text(char **field, kp_str s)
{
    if (s.len < 0 || kp_cstr_is(*field, s))
        return true;
    char *c = kp_str_cdup(s);
    if (c == NULL)
        return false;
    free(*field);
    *field = c;
    return true;
}

/* The member of a join (new or rejoining at epoch 0) or of a heartbeat. */
static kp_err find_member(kb_share_group *sg, const kb_share_group_env *env,
                          const kp_share_group_heartbeat_req *rq, kb_sg_member **out,
                          kb_share_group_result *res)
{
    kb_sg_member *m = kb_share_group_member_find(sg, rq->member_id);
    *out = NULL;
    if (rq->member_epoch == 0 && m == NULL) {
        int32_t max = env->max_size < KB_SHARE_GROUP_MAX_MEMBERS ? env->max_size
                                                                 : KB_SHARE_GROUP_MAX_MEMBERS;
        if (sg->nmembers >= max)
            return fail(res, KP_ERR_GROUP_MAX_SIZE_REACHED,
                        "The share group has reached its maximum capacity.");
        return member_add(sg, rq->member_id, out);
    }
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    if (rq->member_epoch != 0 && rq->member_epoch != m->epoch)
        return fail(res, KP_ERR_FENCED_MEMBER_EPOCH,
                    "The share group member has a different epoch than the coordinator's.");
    *out = m;
    return KP_ERR_NONE;
}

kp_err kb_share_group_heartbeat(kb_share_group *sg, const kb_share_group_env *env,
                                const kp_share_group_heartbeat_req *rq,
                                const kb_share_group_client *cl, int64_t now,
                                kb_share_group_result *res)
{
    memset(res, 0, sizeof(*res));
    res->heartbeat_interval_ms = env->heartbeat_interval_ms;
    if (rq->member_epoch == KB_SHARE_GROUP_LEAVE_EPOCH)
        return leave(sg, env, rq->member_id, res);
    kb_sg_member *m;
    kp_err e = find_member(sg, env, rq, &m, res);
    if (e != KP_ERR_NONE || m == NULL)
        return e;
    bool changed = m->epoch == 0 && m->ntopics == 0; /* a new member */
    if (!set_text(&m->rack_id, rq->rack_id) || !set_text(&m->client_id, cl->client_id) ||
        !set_text(&m->client_host, cl->client_host))
        return KP_ERR__NOMEM;
    if (rq->subscribed_topic_names.n >= 0 &&
        (e = member_subscribe(m, rq->subscribed_topic_names.v, rq->subscribed_topic_names.n,
                              &changed)) != KP_ERR_NONE)
        return e;
    m->session_deadline = now + env->session_timeout_ms;
    if ((e = update_group(sg, env, changed)) != KP_ERR_NONE)
        return e;
    res->with_assignment = rq->member_epoch == 0 || !kb_cg_set_eq(&m->assigned, &m->target);
    if (res->with_assignment) {
        kb_cg_tpvec v = {0};
        for (int32_t i = 0; i < m->target.n; i++)
            kb_cg_tpvec_push(&v, &m->target.v[i].topic, m->target.v[i].partition);
        if (!kb_cg_tpvec_seal(&v, &m->assigned))
            return KP_ERR__NOMEM;
    }
    m->epoch = sg->assignment_epoch;
    res->epoch = m->epoch;
    res->assignment = &m->assigned;
    return KP_ERR_NONE;
}

void kb_share_group_tick(kb_share_group *sg, const kb_share_group_env *env, int64_t now)
{
    bool gone = false;
    for (int32_t i = sg->nmembers - 1; i >= 0; i--) {
        if (sg->members[i]->session_deadline <= now) {
            member_remove(sg, sg->members[i]);
            gone = true;
        }
    }
    if (gone)
        (void)update_group(sg, env, true); /* out of memory: the next heartbeat retries */
}

int64_t kb_share_group_next_deadline(const kb_share_group *sg)
{
    int64_t d = KB_SHARE_GROUP_NO_DEADLINE;
    for (int32_t i = 0; i < sg->nmembers; i++)
        if (sg->members[i]->session_deadline < d)
            d = sg->members[i]->session_deadline;
    return d;
}
