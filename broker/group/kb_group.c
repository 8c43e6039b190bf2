#include "kb_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_consumer_group.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"
#include "kb_streams_group.h"
#include "kb_group_impl.h"
#include "kb_log.h"
#include "kb_map.h"

struct kb_groups {
    kb_group_env env;
    kb_map by_id; /* kb_group *, by group id */
};

static const char *const state_names[] = {
    [KB_GS_EMPTY] = "Empty",
    [KB_GS_PREPARING_REBALANCE] = "PreparingRebalance",
    [KB_GS_COMPLETING_REBALANCE] = "CompletingRebalance",
    [KB_GS_STABLE] = "Stable",
    [KB_GS_DEAD] = "Dead",
};

const char *kb_group_state_name(kb_group_state s)
{
    return state_names[s];
}

/* ---- small helpers ------------------------------------------------------ */

static bool null_or_empty(kp_str s)
{
    return s.len <= 0;
}

static int64_t wall(const kb_groups *gs)
{
    return gs->env.wall_ms != NULL ? gs->env.wall_ms(gs->env.ctx) : 0;
}

/* Kafka's classic-group transitions: each state and the states it may follow. */
static bool transition_allowed(kb_group_state from, kb_group_state to)
{
    switch (to) {
    case KB_GS_PREPARING_REBALANCE:
        return from == KB_GS_EMPTY || from == KB_GS_STABLE || from == KB_GS_COMPLETING_REBALANCE;
    case KB_GS_COMPLETING_REBALANCE:
    case KB_GS_EMPTY:
        return from == KB_GS_PREPARING_REBALANCE;
    case KB_GS_STABLE:
        return from == KB_GS_COMPLETING_REBALANCE;
    case KB_GS_DEAD:
        return true;
    }
    return false;
}

/* The one way a live group changes state; checks invariant 1 of kb_group.h
 * for the states a generation ends in. */
static void set_state(kb_groups *gs, kb_group *g, kb_group_state s)
{
    KB_DCHECK(transition_allowed(g->state, s));
    KB_DCHECK(s != KB_GS_EMPTY || g->nmembers == 0);
    KB_DCHECK((s != KB_GS_COMPLETING_REBALANCE && s != KB_GS_STABLE) ||
              (g->nmembers > 0 && g->leader_id != NULL &&
               kb_group_member_find(g, kp_str_from(g->leader_id)) != NULL));
    g->prev_state = g->state;
    g->state = s;
    g->state_timestamp = wall(gs);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* ---- registry ----------------------------------------------------------- */

static bool group_is(const void *entry, const void *key)
{
    return kp_cstr_is(((const kb_group *)entry)->id, *(const kp_str *)key);
}

kb_groups *kb_groups_new(const kb_group_env *env)
{
    kb_groups *gs = calloc(1, sizeof(*gs));
    if (gs == NULL)
        return NULL;
    gs->env = *env;
    return gs;
}

const kb_group_env *kb_groups_env(const kb_groups *gs)
{
    return &gs->env;
}

kb_group *kb_groups_find(const kb_groups *gs, kp_str id)
{
    return kb_map_find(&gs->by_id, kb_map_hash_str(id), &id, group_is);
}

kp_err kb_groups_get(kb_groups *gs, kp_str id, kb_group **out)
{
    *out = kb_groups_find(gs, id);
    if (*out != NULL)
        return KP_ERR_NONE;
    kb_group *g = calloc(1, sizeof(*g));
    if (g == NULL || (g->id = kp_str_cdup(id)) == NULL) {
        free(g);
        return KP_ERR__NOMEM;
    }
    g->state = g->prev_state = KB_GS_EMPTY;
    g->join_deadline = g->sync_deadline = KB_GROUP_NO_DEADLINE;
    g->state_timestamp = wall(gs);
    kb_offset_map_init(&g->offsets);
    kb_timer_init(&g->timer, NULL, NULL);
    if (kb_map_insert(&gs->by_id, kb_map_hash_str(id), g) != KP_ERR_NONE) {
        free(g->id);
        free(g);
        return KP_ERR__NOMEM;
    }
    *out = g;
    return KP_ERR_NONE;
}

void kbg_member_free(kb_group_member *m)
{
    if (m == NULL)
        return;
    for (int32_t i = 0; i < m->nprotos; i++) {
        free(m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    free(m->member_id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free(m->assignment);
    free(m);
}

static void group_free(kb_group *g)
{
    for (int32_t i = 0; i < g->nmembers; i++)
        kbg_member_free(g->members[i]);
    for (int32_t i = 0; i < g->npending; i++)
        free(g->pending[i].member_id);
    free(g->members);
    free(g->pending);
    free(g->id);
    free(g->protocol_type);
    free(g->protocol_name);
    free(g->leader_id);
    kb_offset_map_fini(&g->offsets);
    kb_consumer_group_free(g->cg);
    kb_share_group_free(g->sg, kb_share_parts_free);
    kb_streams_group_free(g->stg);
    free(g);
}

void kb_groups_remove(kb_groups *gs, kb_group *g)
{
    kb_map_remove_entry(&gs->by_id, kb_map_hash_str(kp_str_from(g->id)), g);
    g->state = KB_GS_DEAD;
    group_free(g);
}

static void finish_join_err(kb_groups *gs, const kb_group *g, kb_group_member *m, kp_err err,
                            const char *member_id);
static void finish_sync(kb_groups *gs, const kb_group *g, kb_group_member *m, kp_err err);

void kb_groups_unload(kb_groups *gs, kb_group *g, kp_err err)
{
    for (int32_t i = 0; i < g->nmembers; i++) {
        kb_group_member *m = g->members[i];
        if (m->join_waiter != NULL)
            finish_join_err(gs, g, m, err, m->member_id);
        if (m->sync_waiter != NULL)
            finish_sync(gs, g, m, err);
    }
    kb_groups_remove(gs, g);
}

void kb_groups_free(kb_groups *gs)
{
    if (gs == NULL)
        return;
    size_t cursor = 0;
    for (kb_group *g; (g = kb_map_next(&gs->by_id, &cursor)) != NULL;)
        group_free(g);
    kb_map_fini(&gs->by_id);
    free(gs);
}

size_t kb_groups_count(const kb_groups *gs)
{
    return kb_map_count(&gs->by_id);
}

kb_group *kb_groups_next(const kb_groups *gs, size_t *cursor)
{
    return kb_map_next(&gs->by_id, cursor);
}

/* ---- members ------------------------------------------------------------ */

kb_group_member *kb_group_member_find(const kb_group *g, kp_str member_id)
{
    for (int32_t i = 0; i < g->nmembers; i++)
        if (kp_cstr_is(g->members[i]->member_id, member_id))
            return g->members[i];
    return NULL;
}

static kb_group_member *static_member(const kb_group *g, kp_str instance_id)
{
    if (instance_id.len < 0)
        return NULL;
    for (int32_t i = 0; i < g->nmembers; i++)
        if (g->members[i]->instance_id != NULL && kp_cstr_is(g->members[i]->instance_id, instance_id))
            return g->members[i];
    return NULL;
}

static int32_t pending_index(const kb_group *g, kp_str member_id)
{
    for (int32_t i = 0; i < g->npending; i++)
        if (kp_cstr_is(g->pending[i].member_id, member_id))
            return i;
    return -1;
}

static void pending_remove(kb_group *g, int32_t i)
{
    free(g->pending[i].member_id);
    g->pending[i] = g->pending[--g->npending];
}

static bool is_leader(const kb_group *g, const kb_group_member *m)
{
    return g->leader_id != NULL && strcmp(g->leader_id, m->member_id) == 0;
}

size_t kbg_member_bytes(const kb_group_member *m)
{
    size_t n = (size_t)m->assignment_len;
    for (int32_t i = 0; i < m->nprotos; i++)
        n += (size_t)m->protos[i].meta_len;
    return n;
}

static size_t protos_bytes(const kp_join_group_req *rq)
{
    size_t n = 0;
    for (int32_t i = 0; i < rq->protocols.n; i++)
        n += (size_t)(rq->protocols.v[i].metadata.len > 0 ? rq->protocols.v[i].metadata.len : 0);
    return n;
}

/* Replaces m's protocols with copies of the request's. */
static kp_err member_set_protos(kb_group *g, kb_group_member *m, const kp_join_group_req *rq)
{
    int32_t n = rq->protocols.n > 0 ? rq->protocols.n : 0;
    kb_group_proto *p = calloc((size_t)n + 1, sizeof(*p));
    if (p == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_slice md = rq->protocols.v[i].metadata;
        p[i].meta_len = md.len > 0 ? md.len : 0;
        p[i].name = kp_str_cdup(rq->protocols.v[i].name);
        p[i].meta = malloc((size_t)p[i].meta_len + 1);
        if (p[i].name == NULL || p[i].meta == NULL) {
            for (int32_t j = 0; j <= i; j++) {
                free(p[j].name);
                free(p[j].meta);
            }
            free(p);
            return KP_ERR__NOMEM;
        }
        if (p[i].meta_len > 0)
            memcpy(p[i].meta, md.p, (size_t)p[i].meta_len);
    }
    g->bytes -= kbg_member_bytes(m);
    for (int32_t i = 0; i < m->nprotos; i++) {
        free(m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    m->protos = p;
    m->nprotos = n;
    g->bytes += kbg_member_bytes(m);
    m->session_timeout_ms = rq->session_timeout_ms;
    /* v0 has no rebalance timeout: the session timeout serves. */
    m->rebalance_timeout_ms =
        rq->rebalance_timeout_ms > 0 ? rq->rebalance_timeout_ms : rq->session_timeout_ms;
    return KP_ERR_NONE;
}

kp_err kbg_member_set_assignment(kb_group *g, kb_group_member *m, kp_slice a)
{
    uint8_t *copy = NULL;
    int32_t len = a.len > 0 ? a.len : 0;
    if (len > 0) {
        copy = malloc((size_t)len);
        if (copy == NULL)
            return KP_ERR__NOMEM;
        memcpy(copy, a.p, (size_t)len);
    }
    g->bytes -= (size_t)m->assignment_len;
    free(m->assignment);
    m->assignment = copy;
    m->assignment_len = len;
    g->bytes += (size_t)len;
    return KP_ERR_NONE;
}

kp_slice kb_group_member_metadata(const kb_group_member *m, const char *protocol)
{
    for (int32_t i = 0; protocol != NULL && i < m->nprotos; i++)
        if (strcmp(m->protos[i].name, protocol) == 0)
            return (kp_slice){m->protos[i].meta, m->protos[i].meta_len};
    return (kp_slice){(const uint8_t *)"", 0};
}

static bool member_supports(const kb_group_member *m, const char *name)
{
    for (int32_t i = 0; i < m->nprotos; i++)
        if (strcmp(m->protos[i].name, name) == 0)
            return true;
    return false;
}

/* Same protocols, in the same order, with the same metadata. */
static bool member_matches(const kb_group_member *m, const kp_join_group_req *rq)
{
    if (m->nprotos != rq->protocols.n)
        return false;
    for (int32_t i = 0; i < m->nprotos; i++) {
        kp_slice md = rq->protocols.v[i].metadata;
        int32_t len = md.len > 0 ? md.len : 0;
        if (!kp_cstr_is(m->protos[i].name, rq->protocols.v[i].name) || m->protos[i].meta_len != len ||
            (len > 0 && memcmp(m->protos[i].meta, md.p, (size_t)len) != 0))
            return false;
    }
    return true;
}

/* ---- answers ------------------------------------------------------------ */

static void reply_join(kb_groups *gs, const kb_group *g, void *waiter, kp_err err,
                       const char *member_id)
{
    kb_group_join_result res = {.err = err, .member_id = member_id, .generation = -1};
    if (waiter != NULL)
        gs->env.join_done(waiter, g, &res, gs->env.ctx);
}

/* The current generation as a JoinGroup answer for m. */
static void join_result_for(const kb_group *g, const kb_group_member *m, kb_group_join_result *res)
{
    memset(res, 0, sizeof(*res));
    res->err = KP_ERR_NONE;
    res->member_id = m->member_id;
    res->generation = g->generation;
    res->protocol_type = g->protocol_type;
    res->protocol_name = g->protocol_name;
    res->leader = g->leader_id;
    res->with_members = is_leader(g, m);
}

/* Ends m's parked JoinGroup with res. */
static void finish_join(kb_groups *gs, const kb_group *g, kb_group_member *m,
                        const kb_group_join_result *res)
{
    void *w = m->join_waiter;
    m->awaiting_join = false;
    m->join_waiter = NULL;
    if (w != NULL)
        gs->env.join_done(w, g, res, gs->env.ctx);
}

static void finish_join_err(kb_groups *gs, const kb_group *g, kb_group_member *m, kp_err err,
                            const char *member_id)
{
    kb_group_join_result res = {.err = err, .member_id = member_id, .generation = -1};
    finish_join(gs, g, m, &res);
}

static void finish_sync(kb_groups *gs, const kb_group *g, kb_group_member *m, kp_err err)
{
    void *w = m->sync_waiter;
    m->awaiting_sync = false;
    m->sync_waiter = NULL;
    kp_slice a = {(const uint8_t *)"", 0};
    if (err == KP_ERR_NONE && m->assignment_len > 0)
        a = (kp_slice){m->assignment, m->assignment_len};
    if (w != NULL)
        gs->env.sync_done(w, g, err, a, gs->env.ctx);
}

/* Fails every parked SyncGroup and forgets the assignments. */
static void reset_assignments(kb_groups *gs, kb_group *g, kp_err err)
{
    for (int32_t i = 0; i < g->nmembers; i++) {
        kb_group_member *m = g->members[i];
        kbg_member_set_assignment(g, m, (kp_slice){NULL, 0});
        if (m->awaiting_sync)
            finish_sync(gs, g, m, err);
    }
}

/* ---- protocol selection ------------------------------------------------- */

static int32_t supporters(const kb_group *g, const char *name)
{
    int32_t n = 0;
    for (int32_t i = 0; i < g->nmembers; i++)
        n += member_supports(g->members[i], name) ? 1 : 0;
    return n;
}

static bool supports_protocols(const kb_group *g, const kp_join_group_req *rq)
{
    if (g->nmembers == 0)
        return !null_or_empty(rq->protocol_type) && rq->protocols.n > 0;
    if (!kp_cstr_is(g->protocol_type, rq->protocol_type))
        return false;
    for (int32_t i = 0; i < rq->protocols.n; i++) {
        char *name = kp_str_cdup(rq->protocols.v[i].name);
        bool all = name != NULL && supporters(g, name) == g->nmembers;
        free(name);
        if (all)
            return true;
    }
    return false;
}

/* Each member votes for its most preferred protocol every member supports;
 * the most votes wins (ties: the earliest candidate of the first member). */
static const char *select_protocol(const kb_group *g)
{
    const kb_group_member *first = g->members[0];
    const char *best = NULL;
    int32_t best_votes = -1;
    for (int32_t c = 0; c < first->nprotos; c++) {
        const char *cand = first->protos[c].name;
        if (supporters(g, cand) != g->nmembers)
            continue;
        int32_t votes = 0;
        for (int32_t i = 0; i < g->nmembers; i++) {
            const kb_group_member *m = g->members[i];
            for (int32_t k = 0; k < m->nprotos; k++) {
                if (supporters(g, m->protos[k].name) == g->nmembers) {
                    votes += strcmp(m->protos[k].name, cand) == 0 ? 1 : 0;
                    break;
                }
            }
        }
        if (votes > best_votes) {
            best = cand;
            best_votes = votes;
        }
    }
    return best;
}

kp_err kbg_set_owned(char **field, const char *v)
{
    char *copy = NULL;
    if (v != NULL && (copy = strdup(v)) == NULL)
        return KP_ERR__NOMEM;
    free(*field);
    *field = copy;
    return KP_ERR_NONE;
}

/* ---- the rebalance ------------------------------------------------------ */

static int32_t rebalance_timeout(const kb_group *g)
{
    int32_t t = 0;
    for (int32_t i = 0; i < g->nmembers; i++)
        if (g->members[i]->rebalance_timeout_ms > t)
            t = g->members[i]->rebalance_timeout_ms;
    return t;
}

static bool all_joined(const kb_group *g)
{
    for (int32_t i = 0; i < g->nmembers; i++)
        if (!g->members[i]->awaiting_join)
            return false;
    return g->npending == 0;
}

/* Removes m from the member list; answers whatever it had parked. */
static void member_detach(kb_groups *gs, kb_group *g, kb_group_member *m)
{
    if (m->awaiting_join)
        finish_join_err(gs, g, m, KP_ERR_UNKNOWN_MEMBER_ID, "");
    if (m->awaiting_sync)
        finish_sync(gs, g, m, KP_ERR_UNKNOWN_MEMBER_ID);
    int32_t i = 0;
    while (i < g->nmembers && g->members[i] != m)
        i++;
    if (i == g->nmembers)
        return;
    memmove(&g->members[i], &g->members[i + 1],
            (size_t)(g->nmembers - i - 1) * sizeof(*g->members));
    g->nmembers--;
    g->bytes -= kbg_member_bytes(m);
    if (is_leader(g, m))
        kbg_set_owned(&g->leader_id, g->nmembers > 0 ? g->members[0]->member_id : NULL);
    kbg_member_free(m);
}

static void complete_join(kb_groups *gs, kb_group *g, int64_t now);

static void maybe_complete_join(kb_groups *gs, kb_group *g, int64_t now)
{
    if (g->state == KB_GS_PREPARING_REBALANCE && all_joined(g) && !g->initial_rebalance)
        complete_join(gs, g, now);
}

static void prepare_rebalance(kb_groups *gs, kb_group *g, int64_t now)
{
    if (g->state == KB_GS_COMPLETING_REBALANCE)
        reset_assignments(gs, g, KP_ERR_REBALANCE_IN_PROGRESS);
    g->sync_deadline = KB_GROUP_NO_DEADLINE;
    bool initial = g->state == KB_GS_EMPTY;
    set_state(gs, g, KB_GS_PREPARING_REBALANCE);
    g->initial_rebalance = initial;
    if (initial) {
        int32_t delay = gs->env.initial_rebalance_delay_ms;
        int32_t left = rebalance_timeout(g) - delay;
        g->initial_delay_cur = delay;
        g->initial_delay_left = left > 0 ? left : 0;
        g->new_member_added = false;
        g->join_deadline = now + delay;
        return;
    }
    g->join_deadline = now + rebalance_timeout(g);
    maybe_complete_join(gs, g, now);
}

static void maybe_rebalance_or_complete(kb_groups *gs, kb_group *g, int64_t now)
{
    if (g->state == KB_GS_PREPARING_REBALANCE)
        maybe_complete_join(gs, g, now);
    else if (g->state != KB_GS_DEAD)
        prepare_rebalance(gs, g, now);
}

/* After a member left or expired: Kafka's removeMemberAndUpdateClassicGroup. */
static void remove_member(kb_groups *gs, kb_group *g, kb_group_member *m, int64_t now)
{
    member_detach(gs, g, m);
    if (g->state == KB_GS_STABLE || g->state == KB_GS_COMPLETING_REBALANCE)
        prepare_rebalance(gs, g, now);
    else if (g->state == KB_GS_PREPARING_REBALANCE)
        maybe_complete_join(gs, g, now);
}

/* The leader must be a member that rejoined; false if none did. */
static bool elect_joined_leader(kb_group *g)
{
    kb_group_member *leader = g->leader_id ? kb_group_member_find(g, kp_str_from(g->leader_id)) : NULL;
    if (leader == NULL)
        return false;
    if (leader->awaiting_join)
        return true;
    for (int32_t i = 0; i < g->nmembers; i++)
        if (g->members[i]->awaiting_join)
            return kbg_set_owned(&g->leader_id, g->members[i]->member_id) == KP_ERR_NONE;
    return false;
}

/* Moves to the next generation: COMPLETING_REBALANCE, or EMPTY. */
static void next_generation(kb_groups *gs, kb_group *g)
{
    g->generation++;
    g->initial_rebalance = false;
    g->join_deadline = KB_GROUP_NO_DEADLINE;
    if (g->nmembers > 0) {
        kbg_set_owned(&g->protocol_name, select_protocol(g));
        set_state(gs, g, KB_GS_COMPLETING_REBALANCE);
    } else {
        kbg_set_owned(&g->protocol_name, NULL);
        set_state(gs, g, KB_GS_EMPTY);
    }
    for (int32_t i = 0; i < g->nmembers; i++)
        g->members[i]->pending_sync = false;
}

static void complete_join(kb_groups *gs, kb_group *g, int64_t now)
{
    /* Dynamic members that did not rejoin leave; static ones stay. */
    for (int32_t i = g->nmembers - 1; i >= 0; i--)
        if (!g->members[i]->awaiting_join && g->members[i]->instance_id == NULL)
            member_detach(gs, g, g->members[i]);
    if (g->nmembers > 0 && !elect_joined_leader(g)) {
        /* Nobody rejoined: wait for the session timeouts to clear them. */
        g->join_deadline = now + rebalance_timeout(g);
        return;
    }
    next_generation(gs, g);
    if (g->state == KB_GS_EMPTY) {
        if (gs->env.store != NULL)
            gs->env.store(g, gs->env.ctx);
        return;
    }
    for (int32_t i = 0; i < g->nmembers; i++) {
        kb_group_member *m = g->members[i];
        kb_group_join_result res;
        join_result_for(g, m, &res);
        finish_join(gs, g, m, &res);
        m->session_deadline = now + m->session_timeout_ms;
        m->is_new = false;
        m->pending_sync = true;
    }
    g->sync_deadline = now + rebalance_timeout(g);
}

/* ---- JoinGroup ---------------------------------------------------------- */

/* Kafka's acceptJoiningMember: the group-size limit. */
static bool accept_joining(const kb_groups *gs, const kb_group *g, kp_str member_id)
{
    const kb_group_member *m = kb_group_member_find(g, member_id);
    int32_t awaiting = 0;
    switch (g->state) {
    case KB_GS_EMPTY:
    case KB_GS_DEAD:
        return true;
    case KB_GS_PREPARING_REBALANCE:
        for (int32_t i = 0; i < g->nmembers; i++)
            awaiting += g->members[i]->awaiting_join ? 1 : 0;
        return (m != NULL && m->awaiting_join) || awaiting < gs->env.max_size;
    default:
        return m != NULL || g->nmembers < gs->env.max_size;
    }
}

/* Parks m's JoinGroup (answering a previous one still parked). */
static void park_join(kb_groups *gs, kb_group *g, kb_group_member *m, void *waiter, int16_t v)
{
    if (m->awaiting_join && m->join_waiter != NULL)
        finish_join_err(gs, g, m, KP_ERR_REBALANCE_IN_PROGRESS, m->member_id);
    m->awaiting_join = true;
    m->join_waiter = waiter;
    m->join_version = v;
}

/* Creates a member and appends it (the first becomes leader and sets the
 * protocol type). */
kp_err kbg_add_member_quiet(kb_group *g, const kp_join_group_req *rq,
                               const kb_group_client *cl, const char *member_id, int64_t now)
{
    if (g->nmembers == g->members_cap) {
        int32_t cap = g->members_cap ? g->members_cap * 2 : 4;
        kb_group_member **v = realloc(g->members, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        g->members = v;
        g->members_cap = cap;
    }
    kb_group_member *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return KP_ERR__NOMEM;
    m->member_id = strdup(member_id);
    m->instance_id = kp_str_cdup(rq->group_instance_id);
    m->client_id = kp_str_cdup(cl->client_id.len >= 0 ? cl->client_id : KP_STR_LIT(""));
    m->client_host = kp_str_cdup(cl->client_host.len >= 0 ? cl->client_host : KP_STR_LIT(""));
    if (m->member_id == NULL || (rq->group_instance_id.len >= 0 && m->instance_id == NULL) ||
        m->client_id == NULL || m->client_host == NULL || member_set_protos(g, m, rq) != KP_ERR_NONE)
        goto nomem;
    if (g->nmembers == 0) {
        char *type = kp_str_cdup(rq->protocol_type);
        if (type == NULL)
            goto nomem;
        free(g->protocol_type);
        g->protocol_type = type;
    }
    if (g->leader_id == NULL && kbg_set_owned(&g->leader_id, m->member_id) != KP_ERR_NONE)
        goto nomem;
    g->members[g->nmembers++] = m;
    m->session_deadline = now + m->session_timeout_ms;
    return KP_ERR_NONE;
nomem:
    g->bytes -= kbg_member_bytes(m);
    kbg_member_free(m);
    return KP_ERR__NOMEM;
}

static kp_err add_member(kb_groups *gs, kb_group *g, const kp_join_group_req *rq,
                         const kb_group_client *cl, const char *member_id, void *waiter,
                         int64_t now)
{
    kp_err e = kbg_add_member_quiet(g, rq, cl, member_id, now);
    if (e != KP_ERR_NONE)
        return e;
    kb_group_member *m = g->members[g->nmembers - 1];
    m->is_new = true;
    park_join(gs, g, m, waiter, cl->version);
    if (g->state == KB_GS_PREPARING_REBALANCE && g->generation == 0)
        g->new_member_added = true;
    maybe_rebalance_or_complete(gs, g, now);
    return KP_ERR_NONE;
}

/* A known member rejoins with (possibly new) protocols: rebalance. */
static kp_err update_member(kb_groups *gs, kb_group *g, kb_group_member *m,
                            const kp_join_group_req *rq, const kb_group_client *cl, void *waiter,
                            int64_t now)
{
    kp_err e = member_set_protos(g, m, rq);
    if (e != KP_ERR_NONE)
        return e;
    m->session_deadline = now + m->session_timeout_ms;
    park_join(gs, g, m, waiter, cl->version);
    maybe_rebalance_or_complete(gs, g, now);
    return KP_ERR_NONE;
}

static kp_err new_member_id(kb_groups *gs, kp_str prefix, char **out)
{
    char uuid[37];
    gs->env.uuid(uuid, gs->env.ctx);
    int32_t plen = prefix.len > 0 ? prefix.len : 0;
    *out = malloc((size_t)plen + 1 + sizeof(uuid));
    if (*out == NULL)
        return KP_ERR__NOMEM;
    memcpy(*out, plen > 0 ? prefix.p : "", (size_t)plen);
    (*out)[plen] = '-';
    memcpy(*out + plen + 1, uuid, sizeof(uuid));
    return KP_ERR_NONE;
}

/* A static member comes back under a new member id: fence the old id, keep
 * the assignment, and rebalance only if the protocol would change. */
static kp_err replace_static(kb_groups *gs, kb_group *g, kb_group_member *m, char *new_id,
                             const kp_join_group_req *rq, const kb_group_client *cl,
                             void *waiter, int64_t now)
{
    if (m->awaiting_join)
        finish_join_err(gs, g, m, KP_ERR_FENCED_INSTANCE_ID, m->member_id);
    if (m->awaiting_sync)
        finish_sync(gs, g, m, KP_ERR_FENCED_INSTANCE_ID);
    bool leader = is_leader(g, m);
    free(m->member_id);
    m->member_id = new_id;
    if (leader && kbg_set_owned(&g->leader_id, new_id) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    if (g->state != KB_GS_STABLE)
        return update_member(gs, g, m, rq, cl, waiter, now);
    kp_err e = member_set_protos(g, m, rq);
    if (e != KP_ERR_NONE)
        return e;
    const char *sel = select_protocol(g);
    if (sel == NULL || g->protocol_name == NULL || strcmp(sel, g->protocol_name) != 0)
        return update_member(gs, g, m, rq, cl, waiter, now);
    m->session_deadline = now + m->session_timeout_ms;
    if (gs->env.store != NULL)
        gs->env.store(g, gs->env.ctx);
    kb_group_join_result res;
    join_result_for(g, m, &res);
    res.skip_assignment = res.with_members;
    gs->env.join_done(waiter, g, &res, gs->env.ctx);
    return KP_ERR_NONE;
}

static kp_err join_new(kb_groups *gs, kb_group *g, const kp_join_group_req *rq,
                       const kb_group_client *cl, void *waiter, int64_t now)
{
    if (g->state == KB_GS_DEAD)
        return reply_join(gs, g, waiter, KP_ERR_COORDINATOR_NOT_AVAILABLE, ""), KP_ERR_NONE;
    if (!supports_protocols(g, rq))
        return reply_join(gs, g, waiter, KP_ERR_INCONSISTENT_GROUP_PROTOCOL, ""), KP_ERR_NONE;
    bool is_static = rq->group_instance_id.len >= 0;
    char *id;
    if (new_member_id(gs, is_static ? rq->group_instance_id : cl->client_id, &id) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_group_member *old = static_member(g, rq->group_instance_id);
    if (old != NULL)
        return replace_static(gs, g, old, id, rq, cl, waiter, now);
    if (!is_static && cl->version >= 4) {
        /* KIP-394: hand out the id; the member comes back with it. */
        if (g->npending == g->pending_cap) {
            int32_t cap = g->pending_cap ? g->pending_cap * 2 : 4;
            kb_group_pending *v = realloc(g->pending, (size_t)cap * sizeof(*v));
            if (v == NULL) {
                free(id);
                return KP_ERR__NOMEM;
            }
            g->pending = v;
            g->pending_cap = cap;
        }
        g->pending[g->npending++] = (kb_group_pending){id, now + rq->session_timeout_ms};
        reply_join(gs, g, waiter, KP_ERR_MEMBER_ID_REQUIRED, id);
        return KP_ERR_NONE;
    }
    kp_err e = add_member(gs, g, rq, cl, id, waiter, now);
    free(id);
    return e;
}

/* Kafka's validateExistingMember. */
static kp_err check_member(const kb_group *g, kp_str member_id, kp_str instance_id)
{
    if (instance_id.len < 0)
        return kb_group_member_find(g, member_id) != NULL ? KP_ERR_NONE : KP_ERR_UNKNOWN_MEMBER_ID;
    const kb_group_member *m = static_member(g, instance_id);
    if (m == NULL)
        return KP_ERR_UNKNOWN_MEMBER_ID;
    return kp_cstr_is(m->member_id, member_id) ? KP_ERR_NONE : KP_ERR_FENCED_INSTANCE_ID;
}

static kp_err join_existing(kb_groups *gs, kb_group *g, const kp_join_group_req *rq,
                            const kb_group_client *cl, void *waiter, int64_t now)
{
    char id[KB_GROUP_ID_MAX + 1];
    snprintf(id, sizeof(id), "%.*s", rq->member_id.len, rq->member_id.p);
    if (g->state == KB_GS_DEAD)
        return reply_join(gs, g, waiter, KP_ERR_COORDINATOR_NOT_AVAILABLE, id), KP_ERR_NONE;
    if (!supports_protocols(g, rq))
        return reply_join(gs, g, waiter, KP_ERR_INCONSISTENT_GROUP_PROTOCOL, id), KP_ERR_NONE;
    int32_t p = pending_index(g, rq->member_id);
    if (p >= 0) {
        pending_remove(g, p);
        return add_member(gs, g, rq, cl, id, waiter, now);
    }
    kp_err err = check_member(g, rq->member_id, rq->group_instance_id);
    if (err != KP_ERR_NONE)
        return reply_join(gs, g, waiter, err, id), KP_ERR_NONE;
    kb_group_member *m = kb_group_member_find(g, rq->member_id);
    bool same = member_matches(m, rq);
    switch (g->state) {
    case KB_GS_PREPARING_REBALANCE:
        return update_member(gs, g, m, rq, cl, waiter, now);
    case KB_GS_COMPLETING_REBALANCE:
    case KB_GS_STABLE:
        if (!same || (g->state == KB_GS_STABLE && is_leader(g, m)))
            return update_member(gs, g, m, rq, cl, waiter, now);
        kb_group_join_result res;
        join_result_for(g, m, &res);
        m->session_deadline = now + m->session_timeout_ms;
        gs->env.join_done(waiter, g, &res, gs->env.ctx);
        return KP_ERR_NONE;
    default:
        return reply_join(gs, g, waiter, KP_ERR_UNKNOWN_MEMBER_ID, id), KP_ERR_NONE;
    }
}

kp_err kb_group_join(kb_groups *gs, const kp_join_group_req *rq, const kb_group_client *cl,
                     void *waiter, int64_t now)
{
    const kb_group_env *env = &gs->env;
    kb_group *g = kb_groups_find(gs, rq->group_id);
    bool unknown = rq->member_id.len <= 0;
    if (rq->session_timeout_ms < env->min_session_timeout_ms ||
        rq->session_timeout_ms > env->max_session_timeout_ms)
        return reply_join(gs, g, waiter, KP_ERR_INVALID_SESSION_TIMEOUT, ""), KP_ERR_NONE;
    if (rq->member_id.len > KB_GROUP_ID_MAX || rq->group_instance_id.len > KB_GROUP_ID_MAX ||
        rq->protocols.n > KB_GROUP_MAX_PROTOCOLS || protos_bytes(rq) > KB_GROUP_MAX_MEMBER_BYTES)
        return reply_join(gs, g, waiter, KP_ERR_INVALID_REQUEST, ""), KP_ERR_NONE;
    if (g == NULL && !unknown)
        return reply_join(gs, g, waiter, KP_ERR_UNKNOWN_MEMBER_ID, ""), KP_ERR_NONE;
    if (g == NULL && kb_groups_get(gs, rq->group_id, &g) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    if (!accept_joining(gs, g, rq->member_id) ||
        g->bytes + protos_bytes(rq) > KB_GROUP_MAX_BYTES)
        return reply_join(gs, g, waiter, KP_ERR_GROUP_MAX_SIZE_REACHED, ""), KP_ERR_NONE;
    return unknown ? join_new(gs, g, rq, cl, waiter, now)
                   : join_existing(gs, g, rq, cl, waiter, now);
}

/* ---- SyncGroup, Heartbeat, LeaveGroup, commits -------------------------- */

static bool inconsistent(kp_str asked, const char *current)
{
    return asked.len >= 0 && current != NULL && !kp_cstr_is(current, asked);
}

static void reply_sync(kb_groups *gs, const kb_group *g, void *waiter, kp_err err)
{
    gs->env.sync_done(waiter, g, err, (kp_slice){(const uint8_t *)"", 0}, gs->env.ctx);
}

/* The leader's assignments: bounded, then stored, then handed out. */
static kp_err leader_sync(kb_groups *gs, kb_group *g, const kp_sync_group_req *rq, int64_t now)
{
    size_t total = 0;
    for (int32_t i = 0; i < rq->assignments.n; i++) {
        int32_t len = rq->assignments.v[i].assignment.len;
        if (len > KB_GROUP_MAX_MEMBER_BYTES)
            return KP_ERR_INVALID_REQUEST;
        total += len > 0 ? (size_t)len : 0;
    }
    if (g->bytes + total > KB_GROUP_MAX_BYTES)
        return KP_ERR_GROUP_MAX_SIZE_REACHED;
    for (int32_t i = 0; i < g->nmembers; i++) {
        kb_group_member *m = g->members[i];
        kp_slice a = {NULL, 0};
        for (int32_t k = 0; k < rq->assignments.n; k++) {
            if (kp_cstr_is(m->member_id, rq->assignments.v[k].member_id)) {
                a = rq->assignments.v[k].assignment;
                break;
            }
        }
        if (kbg_member_set_assignment(g, m, a) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    kp_err err = gs->env.store != NULL ? gs->env.store(g, gs->env.ctx) : KP_ERR_NONE;
    if (err != KP_ERR_NONE) {
        reset_assignments(gs, g, err);
        maybe_rebalance_or_complete(gs, g, now);
        return KP_ERR_NONE;
    }
    set_state(gs, g, KB_GS_STABLE);
    for (int32_t i = 0; i < g->nmembers; i++)
        if (g->members[i]->awaiting_sync)
            finish_sync(gs, g, g->members[i], KP_ERR_NONE);
    return KP_ERR_NONE;
}

/* The checks SyncGroup and Heartbeat share: a live group, a member, the
 * current generation. */
static kp_err member_check(const kb_group *g, kp_str member_id, kp_str instance_id,
                           int32_t generation)
{
    if (g == NULL)
        return KP_ERR_UNKNOWN_MEMBER_ID;
    if (g->state == KB_GS_DEAD)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    kp_err err = check_member(g, member_id, instance_id);
    if (err != KP_ERR_NONE)
        return err;
    return generation != g->generation ? KP_ERR_ILLEGAL_GENERATION : KP_ERR_NONE;
}

static kp_err sync_check(const kb_group *g, const kp_sync_group_req *rq)
{
    kp_err err = member_check(g, rq->member_id, rq->group_instance_id, rq->generation_id);
    if (err != KP_ERR_NONE)
        return err;
    if (inconsistent(rq->protocol_type, g->protocol_type) ||
        inconsistent(rq->protocol_name, g->protocol_name))
        return KP_ERR_INCONSISTENT_GROUP_PROTOCOL;
    if (g->state == KB_GS_EMPTY)
        return KP_ERR_UNKNOWN_MEMBER_ID;
    if (g->state == KB_GS_PREPARING_REBALANCE)
        return KP_ERR_REBALANCE_IN_PROGRESS;
    return KP_ERR_NONE;
}

kp_err kb_group_sync(kb_groups *gs, const kp_sync_group_req *rq, void *waiter, int64_t now)
{
    kb_group *g = kb_groups_find(gs, rq->group_id);
    kp_err err = sync_check(g, rq);
    if (err != KP_ERR_NONE)
        return reply_sync(gs, g, waiter, err), KP_ERR_NONE;
    kb_group_member *m = kb_group_member_find(g, rq->member_id);
    m->pending_sync = false;
    m->session_deadline = now + m->session_timeout_ms;
    if (g->state == KB_GS_STABLE) {
        m->sync_waiter = waiter;
        m->awaiting_sync = true;
        finish_sync(gs, g, m, KP_ERR_NONE);
        return KP_ERR_NONE;
    }
    if (m->awaiting_sync && m->sync_waiter != NULL)
        finish_sync(gs, g, m, KP_ERR_REBALANCE_IN_PROGRESS);
    m->awaiting_sync = true;
    m->sync_waiter = waiter;
    if (!is_leader(g, m))
        return KP_ERR_NONE;
    err = leader_sync(gs, g, rq, now);
    if (err == KP_ERR__NOMEM)
        return err;
    if (err != KP_ERR_NONE)
        finish_sync(gs, g, m, err);
    return KP_ERR_NONE;
}

kp_err kb_group_heartbeat(kb_groups *gs, const kp_heartbeat_req *rq, int64_t now)
{
    kb_group *g = kb_groups_find(gs, rq->group_id);
    kp_err err = member_check(g, rq->member_id, rq->group_instance_id, rq->generation_id);
    if (err != KP_ERR_NONE)
        return err;
    if (g->state == KB_GS_EMPTY)
        return KP_ERR_UNKNOWN_MEMBER_ID;
    kb_group_member *m = kb_group_member_find(g, rq->member_id);
    m->session_deadline = now + m->session_timeout_ms;
    return g->state == KB_GS_PREPARING_REBALANCE ? KP_ERR_REBALANCE_IN_PROGRESS : KP_ERR_NONE;
}

kp_err kb_group_leave(kb_groups *gs, kb_group *g, kp_str member_id, kp_str instance_id,
                      int64_t now)
{
    kb_group_member *m;
    if (instance_id.len < 0) {
        int32_t p = pending_index(g, member_id);
        if (p >= 0) {
            pending_remove(g, p);
            maybe_complete_join(gs, g, now);
            return KP_ERR_NONE;
        }
        m = kb_group_member_find(g, member_id);
        if (m == NULL)
            return KP_ERR_UNKNOWN_MEMBER_ID;
    } else {
        m = static_member(g, instance_id);
        if (m == NULL)
            return KP_ERR_UNKNOWN_MEMBER_ID;
        if (member_id.len > 0 && !kp_cstr_is(m->member_id, member_id))
            return KP_ERR_FENCED_INSTANCE_ID;
    }
    remove_member(gs, g, m, now);
    return KP_ERR_NONE;
}

kp_err kb_group_check_commit(const kb_group *g, kp_str member_id, kp_str instance_id,
                             int32_t generation)
{
    if (g->state == KB_GS_DEAD)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    if (generation < 0 && g->state == KB_GS_EMPTY)
        return KP_ERR_NONE;
    if (generation >= 0 || member_id.len > 0 || instance_id.len >= 0) {
        kp_err err = check_member(g, member_id, instance_id);
        if (err != KP_ERR_NONE)
            return err;
        if (generation != g->generation)
            return KP_ERR_ILLEGAL_GENERATION;
    } else if (g->state != KB_GS_EMPTY) {
        return KP_ERR_UNKNOWN_MEMBER_ID;
    }
    return g->state == KB_GS_COMPLETING_REBALANCE ? KP_ERR_REBALANCE_IN_PROGRESS : KP_ERR_NONE;
}

/* ---- time --------------------------------------------------------------- */

static bool session_live(const kb_group_member *m)
{
    return m->awaiting_join || m->awaiting_sync;
}

/* The initial rebalance waits in steps while new members keep coming. */
static void join_deadline_passed(kb_groups *gs, kb_group *g, int64_t now)
{
    if (g->initial_rebalance && g->new_member_added && g->initial_delay_left > 0) {
        int32_t cur = g->initial_delay_cur;
        int32_t delay = gs->env.initial_rebalance_delay_ms;
        g->new_member_added = false;
        g->initial_delay_cur = delay < g->initial_delay_left ? delay : g->initial_delay_left;
        g->initial_delay_left = g->initial_delay_left > cur ? g->initial_delay_left - cur : 0;
        g->join_deadline = now + g->initial_delay_cur;
        return;
    }
    complete_join(gs, g, now);
}

static void expire_pending_sync(kb_groups *gs, kb_group *g, int64_t now)
{
    g->sync_deadline = KB_GROUP_NO_DEADLINE;
    if (g->state != KB_GS_COMPLETING_REBALANCE && g->state != KB_GS_STABLE)
        return;
    for (bool again = true; again;) {
        again = false;
        for (int32_t i = 0; i < g->nmembers && !again; i++) {
            if (g->members[i]->pending_sync) {
                g->members[i]->pending_sync = false;
                remove_member(gs, g, g->members[i], now);
                again = true;
            }
        }
    }
}

void kb_group_tick(kb_groups *gs, kb_group *g, int64_t now)
{
    for (int32_t i = g->npending - 1; i >= 0; i--) {
        if (g->pending[i].deadline <= now) {
            pending_remove(g, i);
            maybe_complete_join(gs, g, now);
        }
    }
    for (bool again = true; again;) {
        again = false;
        for (int32_t i = 0; i < g->nmembers && !again; i++) {
            kb_group_member *m = g->members[i];
            if (!session_live(m) && m->session_deadline <= now) {
                remove_member(gs, g, m, now);
                again = true;
            }
        }
    }
    if (g->state == KB_GS_PREPARING_REBALANCE && g->join_deadline <= now)
        join_deadline_passed(gs, g, now);
    if (g->sync_deadline <= now)
        expire_pending_sync(gs, g, now);
}

int64_t kb_group_next_deadline(const kb_group *g)
{
    int64_t d = g->sync_deadline;
    if (g->state == KB_GS_PREPARING_REBALANCE)
        d = min64(d, g->join_deadline);
    for (int32_t i = 0; i < g->npending; i++)
        d = min64(d, g->pending[i].deadline);
    for (int32_t i = 0; i < g->nmembers; i++)
        if (!session_live(g->members[i]))
            d = min64(d, g->members[i]->session_deadline);
    return d;
}

void kb_group_forget_waiter(kb_group *g, void *waiter)
{
    for (int32_t i = 0; i < g->nmembers; i++) {
        kb_group_member *m = g->members[i];
        if (m->join_waiter == waiter)
            m->join_waiter = NULL; /* still counts as joined, as in Kafka */
        if (m->sync_waiter == waiter) {
            m->sync_waiter = NULL;
            m->awaiting_sync = false;
        }
    }
}
