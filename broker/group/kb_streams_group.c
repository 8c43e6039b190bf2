#include "kb_streams_group.h"

#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {
    [KB_STGS_EMPTY] = "Empty",
    [KB_STGS_NOT_READY] = "NotReady",
    [KB_STGS_ASSIGNING] = "Assigning",
    [KB_STGS_RECONCILING] = "Reconciling",
    [KB_STGS_STABLE] = "Stable",
};

const char *kb_streams_group_state_name(kb_streams_group_state s)
{
    return state_names[s];
}

kp_uuid kb_st_task_id(int32_t sub)
{
    kp_uuid id = {{0}};
    for (int i = 0; i < 4; i++)
        id.b[i] = (uint8_t)((uint32_t)sub >> (24 - 8 * i));
    return id;
}

int32_t kb_st_task_sub(const kb_cg_tp *tp)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | tp->topic.b[i];
    return (int32_t)v;
}

/* ---- members ------------------------------------------------------------ */

kb_streams_group *kb_streams_group_new(void)
{
    return calloc(1, sizeof(kb_streams_group));
}

static void member_free(kb_st_member *m)
{
    free(m->member_id);
    free(m->instance_id);
    free(m->rack_id);
    free(m->client_id);
    free(m->client_host);
    free(m->process_id);
    free(m->endpoint_host);
    kb_cg_set_free(&m->active);
    kb_cg_set_free(&m->revoking);
    kb_cg_set_free(&m->standby);
    kb_cg_set_free(&m->target_active);
    kb_cg_set_free(&m->target_standby);
    free(m);
}

void kb_streams_group_free(kb_streams_group *sg)
{
    if (sg == NULL)
        return;
    for (int32_t i = 0; i < sg->nmembers; i++)
        member_free(sg->members[i]);
    free(sg->members);
    kb_streams_topology_free(sg->topology);
    free(sg);
}

kb_st_member *kb_streams_group_member_find(const kb_streams_group *sg, kp_str member_id)
{
    for (int32_t i = 0; i < sg->nmembers; i++)
        if (kp_cstr_is(sg->members[i]->member_id, member_id))
            return sg->members[i];
    return NULL;
}

static kb_st_member *instance_find(const kb_streams_group *sg, kp_str instance_id)
{
    for (int32_t i = 0; instance_id.len > 0 && i < sg->nmembers; i++)
        if (kp_cstr_is(sg->members[i]->instance_id, instance_id))
            return sg->members[i];
    return NULL;
}

static void member_remove(kb_streams_group *sg, kb_st_member *m)
{
    for (int32_t i = 0; i < sg->nmembers; i++) {
        if (sg->members[i] == m) {
            memmove(&sg->members[i], &sg->members[i + 1],
                    (size_t)(sg->nmembers - i - 1) * sizeof(*sg->members));
            sg->nmembers--;
            break;
        }
    }
    member_free(m);
    sg->dirty = true;
}

static kp_err member_add(kb_streams_group *sg, kp_str member_id, kb_st_member **out)
{
    if (sg->nmembers == sg->members_cap) {
        int32_t cap = sg->members_cap < 4 ? 4 : sg->members_cap * 2;
        kb_st_member **v = realloc(sg->members, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        sg->members = v;
        sg->members_cap = cap;
    }
    kb_st_member *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->member_id = kp_str_cdup(member_id)) == NULL) {
        free(m);
        return KP_ERR__NOMEM;
    }
    m->revoke_deadline = KB_STREAMS_GROUP_NO_DEADLINE;
    sg->members[sg->nmembers++] = m;
    sg->dirty = true;
    *out = m;
    return KP_ERR_NONE;
}

/* ---- group epoch and target assignment ---------------------------------- */

static bool missing_internal(const kb_streams_topology *t)
{
    for (int32_t i = 0; t != NULL && i < t->nstatus; i++)
        if (t->status[i].code == KB_ST_MISSING_INTERNAL_TOPICS)
            return true;
    return false;
}

static kp_err update_group(kb_streams_group *sg, const kb_streams_group_env *env, int64_t now)
{
    if (!sg->dirty && now < sg->meta_deadline && sg->assignment_epoch == sg->group_epoch)
        return KP_ERR_NONE;
    uint64_t sig = kb_streams_topology_sig(sg->topology, env->topics);
    sg->meta_deadline = now + KB_CONSUMER_GROUP_REFRESH_MS;
    bool changed = sg->dirty || sig != sg->meta_sig;
    /* Internal topics the timer could not make are tried again by a
     * heartbeat, which may create them. */
    bool retry = env->create_topic != NULL && missing_internal(sg->topology);
    if ((changed || retry) && sg->topology != NULL) {
        kp_err e = kb_streams_topology_configure(sg->topology, env->topics, env->create_topic,
                                                 env->create_ctx);
        if (e != KP_ERR_NONE)
            return e;
        /* Creating internal topics changes what the signature reads. */
        uint64_t after = kb_streams_topology_sig(sg->topology, env->topics);
        changed |= after != sg->meta_sig;
        sig = after;
    }
    if (changed)
        sg->group_epoch++;
    sg->meta_sig = sig;
    sg->dirty = false;
    if (sg->group_epoch == sg->assignment_epoch)
        return KP_ERR_NONE;
    if (!sg->delay_started && env->initial_delay_ms > 0) {
        sg->delay_started = true;
        sg->delay_until = now + env->initial_delay_ms;
    }
    if (sg->delay_until > now) { /* empty targets meanwhile */
        for (int32_t i = 0; i < sg->nmembers; i++) {
            kb_cg_set_free(&sg->members[i]->target_active);
            kb_cg_set_free(&sg->members[i]->target_standby);
        }
        sg->assignment_epoch = sg->group_epoch;
        return KP_ERR_NONE;
    }
    kp_err e = kb_streams_assign(sg->members, sg->nmembers, sg->topology, env->num_standby);
    if (e == KP_ERR_NONE)
        sg->assignment_epoch = sg->group_epoch;
    return e;
}

/* ---- reconciliation ----------------------------------------------------- */

static bool active_elsewhere(const kb_streams_group *sg, const kb_st_member *m, const kb_cg_tp *tp)
{
    for (int32_t i = 0; i < sg->nmembers; i++) {
        const kb_st_member *o = sg->members[i];
        if (o != m && (kb_cg_set_has(&o->active, &tp->topic, tp->partition) ||
                       kb_cg_set_has(&o->revoking, &tp->topic, tp->partition)))
            return true;
    }
    return false;
}

static bool set_copy(const kb_cg_set *from, kb_cg_set *to)
{
    kb_cg_tpvec v = {0};
    for (int32_t i = 0; i < from->n; i++)
        kb_cg_tpvec_push(&v, &from->v[i].topic, from->v[i].partition);
    return kb_cg_tpvec_seal(&v, to);
}

/* KIP-1071's CurrentAssignmentBuilder: keep what stays, revoke what goes
 * (epoch held), then take the active tasks no one else holds. */
static kp_err next_assignment(kb_streams_group *sg, kb_st_member *m, const kb_cg_set *owned,
                              int64_t now)
{
    kb_cg_tpvec keep = {0}, revoke = {0};
    for (int32_t i = 0; i < m->active.n; i++) {
        const kb_cg_tp *tp = &m->active.v[i];
        kb_cg_tpvec_push(kb_cg_set_has(&m->target_active, &tp->topic, tp->partition) ? &keep
                                                                                     : &revoke,
                         &tp->topic, tp->partition);
    }
    bool must_revoke = revoke.s.n > 0 && (owned == NULL || kb_cg_set_meets(owned, &revoke.s));
    bool unreleased = false;
    for (int32_t i = 0; !must_revoke && i < m->target_active.n; i++) {
        const kb_cg_tp *tp = &m->target_active.v[i];
        if (kb_cg_set_has(&m->active, &tp->topic, tp->partition))
            continue;
        if (active_elsewhere(sg, m, tp))
            unreleased = true;
        else
            kb_cg_tpvec_push(&keep, &tp->topic, tp->partition);
    }
    if (!must_revoke)
        kb_cg_set_free(&revoke.s);
    bool ok = kb_cg_tpvec_seal(&keep, &m->active);
    ok = kb_cg_tpvec_seal(&revoke, &m->revoking) && ok;
    ok = set_copy(&m->target_standby, &m->standby) && ok;
    if (!ok)
        return KP_ERR__NOMEM;
    if (must_revoke) {
        m->state = KB_CMS_UNREVOKED;
        if (m->revoke_deadline == KB_STREAMS_GROUP_NO_DEADLINE)
            m->revoke_deadline = now + m->rebalance_timeout_ms;
        return KP_ERR_NONE;
    }
    m->revoke_deadline = KB_STREAMS_GROUP_NO_DEADLINE;
    if (m->epoch != sg->assignment_epoch) {
        m->prev_epoch = m->epoch;
        m->epoch = sg->assignment_epoch;
    }
    m->state = unreleased ? KB_CMS_UNRELEASED : KB_CMS_STABLE;
    return KP_ERR_NONE;
}

static kp_err reconcile(kb_streams_group *sg, kb_st_member *m, const kb_cg_set *owned, int64_t now)
{
    switch (m->state) {
    case KB_CMS_STABLE:
        return m->epoch == sg->assignment_epoch ? KP_ERR_NONE : next_assignment(sg, m, owned, now);
    case KB_CMS_UNRELEASED:
        return next_assignment(sg, m, owned, now);
    case KB_CMS_UNREVOKED:
        if (owned == NULL || kb_cg_set_meets(owned, &m->revoking))
            return KP_ERR_NONE;
        kb_cg_set_free(&m->revoking);
        return next_assignment(sg, m, owned, now);
    }
    return KP_ERR_NONE;
}

/* ---- heartbeat ---------------------------------------------------------- */

static kp_err fail(kb_streams_group_result *res, kp_err err, const char *msg)
{
    res->err = err;
    res->message = msg;
    return KP_ERR_NONE;
}

/* Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid, in its order (a
 * joining member's task lists must be present and empty). */
static const char *invalid_request(const kp_streams_group_heartbeat_req *rq)
{
    if (rq->member_id.len <= 0)
        return "MemberId can't be empty.";
    if (rq->instance_id.len == 0)
        return "InstanceId can't be empty.";
    if (rq->rack_id.len == 0)
        return "RackId can't be empty.";
    if (rq->member_epoch == 0) {
        if (rq->rebalance_timeout_ms == -1)
            return "RebalanceTimeoutMs must be provided in first request.";
        if (rq->active_tasks.n != 0)
            return "ActiveTasks must be empty when (re-)joining.";
        if (rq->standby_tasks.n != 0)
            return "StandbyTasks must be empty when (re-)joining.";
        if (rq->warmup_tasks.n != 0)
            return "WarmupTasks must be empty when (re-)joining.";
        if (rq->topology == NULL)
            return "Topology must be non-null when (re-)joining.";
    } else if (rq->member_epoch == KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH) {
        if (rq->instance_id.len < 0)
            return "InstanceId can't be null.";
    } else if (rq->member_epoch < KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH) {
        return "MemberEpoch is invalid.";
    }
    bool any = rq->active_tasks.n >= 0 || rq->standby_tasks.n >= 0 || rq->warmup_tasks.n >= 0;
    if (any && (rq->active_tasks.n < 0 || rq->standby_tasks.n < 0 || rq->warmup_tasks.n < 0))
        return "If one task-type is non-null, all must be non-null.";
    return NULL;
}

kp_err kb_streams_group_check_request(const kp_streams_group_heartbeat_req *rq,
                                      const char **message)
{
    *message = invalid_request(rq);
    if (*message != NULL)
        return KP_ERR_INVALID_REQUEST;
    return rq->topology != NULL ? kb_streams_topology_check(rq->topology, message) : KP_ERR_NONE;
}

/* The request's active tasks as a set (present false when not sent). */
static kp_err owned_set(const kb_streams_group *sg, const kp_streams_group_heartbeat_req *rq,
                        kb_cg_set *out, bool *present)
{
    *present = rq->active_tasks.n >= 0;
    int64_t total = 0;
    for (int32_t i = 0; i < rq->active_tasks.n; i++)
        total += rq->active_tasks.v[i].partitions.n > 0 ? rq->active_tasks.v[i].partitions.n : 0;
    if (total > KB_STREAMS_GROUP_MAX_TASKS)
        return KP_ERR_INVALID_REQUEST;
    kb_cg_tpvec t = {0};
    for (int32_t i = 0; i < rq->active_tasks.n; i++) {
        int32_t sub = kb_streams_topology_find(sg->topology, rq->active_tasks.v[i].subtopology_id);
        kp_uuid id = kb_st_task_id(sub);
        for (int32_t j = 0; sub >= 0 && j < rq->active_tasks.v[i].partitions.n; j++)
            kb_cg_tpvec_push(&t, &id, rq->active_tasks.v[i].partitions.v[j]);
    }
    return kb_cg_tpvec_seal(&t, out) ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static kp_err leave(kb_streams_group *sg, const kp_streams_group_heartbeat_req *rq, int64_t now,
                    const kb_streams_group_env *env, kb_streams_group_result *res)
{
    kb_st_member *m = rq->instance_id.len > 0 ? instance_find(sg, rq->instance_id)
                                              : kb_streams_group_member_find(sg, rq->member_id);
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    if (!kp_cstr_is(m->member_id, rq->member_id))
        return fail(res, KP_ERR_FENCED_INSTANCE_ID, NULL);
    res->epoch = rq->member_epoch;
    if (rq->member_epoch == KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH) {
        m->prev_epoch = m->epoch;
        m->epoch = KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH;
        m->session_deadline = now + env->session_timeout_ms;
        res->member_id = m->member_id;
        return KP_ERR_NONE;
    }
    member_remove(sg, m);
    return KP_ERR_NONE;
}

/* A joining member: itself again, a static member's replacement, or new. */
static kp_err join(kb_streams_group *sg, const kb_streams_group_env *env,
                   const kp_streams_group_heartbeat_req *rq, kb_st_member **out,
                   kb_streams_group_result *res)
{
    kb_st_member *m = instance_find(sg, rq->instance_id);
    if (m != NULL && !kp_cstr_is(m->member_id, rq->member_id)) {
        if (m->epoch != KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH)
            return fail(res, KP_ERR_UNRELEASED_INSTANCE_ID, NULL);
        char *id = kp_str_cdup(rq->member_id);
        if (id == NULL)
            return KP_ERR__NOMEM;
        free(m->member_id);
        m->member_id = id;
        m->epoch = m->prev_epoch = 0;
        m->state = KB_CMS_STABLE;
    }
    if (m == NULL)
        m = kb_streams_group_member_find(sg, rq->member_id);
    if (m == NULL) {
        int32_t cap = env->max_size < KB_STREAMS_GROUP_MAX_MEMBERS ? env->max_size
                                                                   : KB_STREAMS_GROUP_MAX_MEMBERS;
        if (sg->nmembers >= cap)
            return fail(res, KP_ERR_GROUP_MAX_SIZE_REACHED,
                        "The group has reached its maximum size.");
        if (member_add(sg, rq->member_id, &m) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
        bool nomem = false;
        kb_cg_set_str(&m->instance_id, rq->instance_id, &nomem);
        if (nomem)
            return KP_ERR__NOMEM;
    }
    *out = m;
    m->topology_epoch = rq->topology->epoch;
    if (sg->topology != NULL && rq->topology->epoch <= sg->topology->epoch)
        return KP_ERR_NONE;
    kb_streams_topology *t;
    if (kb_streams_topology_new(rq->topology, &t) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_streams_topology_free(sg->topology);
    sg->topology = t;
    sg->dirty = true;
    return KP_ERR_NONE;
}

static kp_err find_member(kb_streams_group *sg, const kp_streams_group_heartbeat_req *rq,
                          const kb_cg_set *owned, bool has_owned, kb_st_member **out,
                          kb_streams_group_result *res)
{
    kb_st_member *m = kb_streams_group_member_find(sg, rq->member_id);
    *out = m;
    if (m == NULL)
        return fail(res, KP_ERR_UNKNOWN_MEMBER_ID, NULL);
    if (rq->instance_id.len > 0 && !kp_cstr_is(m->instance_id, rq->instance_id))
        return fail(res, KP_ERR_FENCED_INSTANCE_ID, NULL);
    if (kb_cg_epoch_fenced(m->epoch, m->prev_epoch, rq->member_epoch, owned, has_owned, &m->active))
        return fail(res, KP_ERR_FENCED_MEMBER_EPOCH, NULL);
    return KP_ERR_NONE;
}

/* Applies the member fields the request carries; a new process or endpoint
 * changes the assignment (the group epoch grows). */
static kp_err update_member(kb_streams_group *sg, kb_st_member *m,
                            const kp_streams_group_heartbeat_req *rq,
                            const kb_streams_group_client *cl)
{
    bool nomem = false;
    bool changed = kb_cg_set_str(&m->process_id, rq->process_id, &nomem);
    kb_cg_set_str(&m->rack_id, rq->rack_id, &nomem);
    kb_cg_set_str(&m->client_id, cl->client_id, &nomem);
    kb_cg_set_str(&m->client_host, cl->client_host, &nomem);
    if (rq->user_endpoint != NULL) {
        changed |= kb_cg_set_str(&m->endpoint_host, rq->user_endpoint->host, &nomem);
        changed |= m->endpoint_port != rq->user_endpoint->port;
        m->endpoint_port = rq->user_endpoint->port;
    }
    if (rq->rebalance_timeout_ms >= 0)
        m->rebalance_timeout_ms = rq->rebalance_timeout_ms;
    if (rq->shutdown_application)
        sg->shutdown = true;
    sg->dirty |= changed;
    return nomem ? KP_ERR__NOMEM : KP_ERR_NONE;
}

static bool same_tasks(const kb_st_member *m, const kb_cg_set *act, const kb_cg_set *stb)
{
    return kb_cg_set_eq(act, &m->active) && kb_cg_set_eq(stb, &m->standby);
}

static kp_err heartbeat_member(kb_streams_group *sg, const kb_streams_group_env *env,
                               const kp_streams_group_heartbeat_req *rq,
                               const kb_streams_group_client *cl, const kb_cg_set *owned,
                               bool has_owned, int64_t now, kb_streams_group_result *res)
{
    kb_st_member *m = NULL;
    kp_err e = rq->member_epoch == 0 ? join(sg, env, rq, &m, res)
                                     : find_member(sg, rq, owned, has_owned, &m, res);
    if (e != KP_ERR_NONE || res->err != KP_ERR_NONE)
        return e;
    if ((e = update_member(sg, m, rq, cl)) != KP_ERR_NONE)
        return e;
    m->session_deadline = now + env->session_timeout_ms;
    if (sg->delay_until != 0 && sg->delay_until <= now) {
        sg->delay_until = 0;
        sg->dirty = true;
    }
    kb_cg_set act = {0}, stb = {0};
    if (!set_copy(&m->active, &act) || !set_copy(&m->standby, &stb)) {
        kb_cg_set_free(&act);
        return KP_ERR__NOMEM;
    }
    if ((e = update_group(sg, env, now)) == KP_ERR_NONE)
        e = reconcile(sg, m, has_owned ? owned : NULL, now);
    res->with_tasks = rq->member_epoch == 0 || !same_tasks(m, &act, &stb);
    kb_cg_set_free(&act);
    kb_cg_set_free(&stb);
    res->member_id = m->member_id;
    res->epoch = m->epoch;
    res->member = m;
    res->stale_topology = sg->topology != NULL && m->topology_epoch < sg->topology->epoch;
    res->delayed = sg->delay_until > now;
    return e;
}

kp_err kb_streams_group_heartbeat(kb_streams_group *sg, const kb_streams_group_env *env,
                                  const kp_streams_group_heartbeat_req *rq,
                                  const kb_streams_group_client *cl, int64_t now,
                                  kb_streams_group_result *res)
{
    memset(res, 0, sizeof(*res));
    const char *msg;
    kp_err bad = kb_streams_group_check_request(rq, &msg);
    if (bad != KP_ERR_NONE)
        return fail(res, bad, msg);
    if (rq->member_epoch < 0) {
        kp_err e = leave(sg, rq, now, env, res);
        return e == KP_ERR_NONE && res->err == KP_ERR_NONE ? update_group(sg, env, now) : e;
    }
    kb_cg_set owned = {0};
    bool has_owned;
    kp_err e = owned_set(sg, rq, &owned, &has_owned);
    if (e == KP_ERR_INVALID_REQUEST)
        return fail(res, e, "ActiveTasks has too many tasks.");
    if (e == KP_ERR_NONE)
        e = heartbeat_member(sg, env, rq, cl, &owned, has_owned, now, res);
    kb_cg_set_free(&owned);
    return e;
}

/* ---- time and state ----------------------------------------------------- */

void kb_streams_group_tick(kb_streams_group *sg, const kb_streams_group_env *env, int64_t now)
{
    bool removed = false;
    for (int32_t i = 0; i < sg->nmembers;) {
        kb_st_member *m = sg->members[i];
        if (m->session_deadline <= now || m->revoke_deadline <= now) {
            member_remove(sg, m);
            removed = true;
        } else {
            i++;
        }
    }
    if (sg->delay_until != 0 && sg->delay_until <= now) {
        sg->delay_until = 0; /* the first real assignment, at a new group epoch */
        sg->dirty = true;
    }
    if (removed || sg->dirty)
        (void)update_group(sg, env, now);
}

int64_t kb_streams_group_next_deadline(const kb_streams_group *sg)
{
    int64_t d = sg->delay_until != 0 ? sg->delay_until : KB_STREAMS_GROUP_NO_DEADLINE;
    for (int32_t i = 0; i < sg->nmembers; i++) {
        const kb_st_member *m = sg->members[i];
        d = m->session_deadline < d ? m->session_deadline : d;
        d = m->revoke_deadline < d ? m->revoke_deadline : d;
    }
    return d;
}

kb_streams_group_state kb_streams_group_state_of(const kb_streams_group *sg)
{
    if (sg->nmembers == 0)
        return KB_STGS_EMPTY;
    if (sg->topology == NULL || sg->topology->nstatus > 0)
        return KB_STGS_NOT_READY;
    if (sg->group_epoch > sg->assignment_epoch)
        return KB_STGS_ASSIGNING;
    for (int32_t i = 0; i < sg->nmembers; i++) {
        const kb_st_member *m = sg->members[i];
        if (m->state != KB_CMS_STABLE ||
            (m->epoch != sg->assignment_epoch && m->epoch != KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH))
            return KB_STGS_RECONCILING;
    }
    return KB_STGS_STABLE;
}

/* ---- offsets ------------------------------------------------------------ */

kp_err kb_streams_group_check_commit(const kb_streams_group *sg, kp_str member_id, int32_t epoch)
{
    if (epoch < 0 && sg->nmembers == 0)
        return KP_ERR_NONE; /* an admin's commit to an empty group */
    const kb_st_member *m = kb_streams_group_member_find(sg, member_id);
    return kb_cg_offsets_epoch(m != NULL ? &m->epoch : NULL, epoch);
}

kp_err kb_streams_group_check_fetch(const kb_streams_group *sg, kp_str member_id, int32_t epoch)
{
    const kb_st_member *m = kb_streams_group_member_find(sg, member_id);
    return member_id.len < 0 && epoch < 0 ? KP_ERR_NONE
                                          : kb_cg_offsets_epoch(m != NULL ? &m->epoch : NULL, epoch);
}
