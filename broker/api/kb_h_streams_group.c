/* Handlers for the KIP-1071 streams group APIs: StreamsGroupHeartbeat,
 * StreamsGroupDescribe and StreamsGroupTopologyDescriptionUpdate. The state
 * machine is kb_streams_group (its settings and internal topics from
 * kb_streams_coord); these find or make the group in the shared registry,
 * call it, and fill the responses.
 *
 * Invariants: a group of another type with members is never touched
 * (GROUP_ID_NOT_FOUND, as Kafka answers); an empty classic group is
 * converted, keeping its offsets; a group this handler created for a
 * request that failed is removed again. Topology descriptions (API 93) are
 * accepted from members and not stored: describe reports NOT_STORED. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_group_describe.h"
#include "kb_streams_coord.h"
#include "kb_streams_group.h"

#define ACCEPTABLE_RECOVERY_LAG 10000 /* Kafka's acceptable.recovery.lag default */
#define TASK_OFFSET_INTERVAL_MS 60000 /* Kafka's group.streams.task.offset.interval.ms */
#define TOPOLOGY_NOT_REQUESTED  0
#define TOPOLOGY_NOT_STORED     1

typedef kp_streams_group_heartbeat_resp_task_ids hb_tasks;
typedef kp_streams_group_describe_resp_task_ids ds_tasks;

/* The number of subtopologies a task set spans (the set is sorted). */
static int32_t count_subs(const kb_cg_set *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->n; i++)
        n += i == 0 || kb_st_task_sub(&s->v[i]) != kb_st_task_sub(&s->v[i - 1]);
    return n;
}

/* The two generated TaskIds types (heartbeat and describe) have one shape;
 * tasks_fill writes either. */
_Static_assert(sizeof(hb_tasks) == sizeof(ds_tasks) &&
                   offsetof(hb_tasks, partitions) == offsetof(ds_tasks, partitions),
               "TaskIds layouts differ");

/* One TaskIds entry per subtopology of s into *n and *v. */
static kp_err tasks_fill(kb_req *req, const kb_streams_topology *t, const kb_cg_set *s,
                         int32_t *n, hb_tasks **v)
{
    int32_t nsub = count_subs(s);
    *n = 0;
    if ((*v = kp_arena_calloc(&req->arena, (size_t)nsub + 1, sizeof(**v))) == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < s->n;) {
        int32_t sub = kb_st_task_sub(&s->v[i]), j = i;
        while (j < s->n && kb_st_task_sub(&s->v[j]) == sub)
            j++;
        hb_tasks *e = &(*v)[(*n)++];
        e->subtopology_id = kb_req_str(req, t->subs[sub].id);
        if (!KB_ARRAY_ALLOC(req, e->partitions, j - i))
            return KP_ERR__NOMEM;
        for (int32_t k = i; k < j; k++)
            e->partitions.v[k - i] = s->v[k].partition;
        i = j;
    }
    return KP_ERR_NONE;
}

#define TASKS_FILL(req, t, s, arr) tasks_fill(req, t, s, &(arr).n, (hb_tasks **)&(arr).v)

/* ---- StreamsGroupHeartbeat ---------------------------------------------- */

/* Internal topics are made for a principal that may CREATE them, as Kafka
 * (else the group reports them missing). */
static kp_err create_authorized(void *ctx, const char *name, int32_t partitions,
                                char *const *configs, int32_t nconfigs)
{
    kb_req *req = ctx;
    if (!kb_authz_create_topic(req, kp_str_from(name)))
        return KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    return kb_streams_coord_create_topic(req->broker, name, partitions, configs, nconfigs);
}

static void hb_error(kb_req *req, kp_streams_group_heartbeat_resp *rs, kp_err err,
                     const char *msg)
{
    rs->error_code = err;
    rs->error_message = msg != NULL ? kb_req_str(req, msg) : KP_STR_NULL;
}

static bool is_streams(const kb_group *g)
{
    return g->stg != NULL;
}

static bool make_streams(kb_group *g)
{
    return (g->stg = kb_streams_group_new()) != NULL;
}

static const kb_group_kind streams_kind = {"streams", false, is_streams, make_streams};

static kp_err add_status(kb_req *req, kp_streams_group_heartbeat_resp *rs, int8_t code,
                         const char *detail)
{
    kp_streams_group_heartbeat_resp_status *st = &rs->status.v[rs->status.n++];
    st->status_code = code;
    st->status_detail = kb_req_str(req, detail);
    return KP_ERR_NONE;
}

static kp_err fill_statuses(kb_req *req, const kb_streams_group *sg,
                            const kb_streams_group_result *res,
                            kp_streams_group_heartbeat_resp *rs)
{
    const kb_streams_topology *t = sg->topology;
    if (!KB_ARRAY_ALLOC(req, rs->status, KB_ST_MAX_STATUS + 3))
        return KP_ERR__NOMEM;
    rs->status.n = 0;
    if (res->delayed)
        add_status(req, rs, KB_ST_ASSIGNMENT_DELAYED,
                   "Assignment delayed due to the configured initial rebalance delay.");
    for (int32_t i = 0; t != NULL && i < t->nstatus; i++)
        add_status(req, rs, t->status[i].code, t->status[i].detail);
    if (res->stale_topology)
        add_status(req, rs, KB_ST_STALE_TOPOLOGY,
                   "The member's topology epoch is older than the group's.");
    if (sg->shutdown)
        add_status(req, rs, KB_ST_SHUTDOWN_APPLICATION,
                   "A member of the group asked the application to shut down.");
    return KP_ERR_NONE;
}

static kp_err fill_heartbeat(kb_req *req, const kb_group *g, const kb_streams_group_result *res,
                             const kp_streams_group_heartbeat_req *rq,
                             kp_streams_group_heartbeat_resp *rs)
{
    const kb_streams_group *sg = g->stg;
    rs->member_id = res->member_id != NULL ? kb_req_str(req, res->member_id) : rq->member_id;
    rs->member_epoch = res->epoch;
    if (rq->member_epoch < 0)
        return KP_ERR_NONE; /* a leave: only who and the epoch, as Kafka answers */
    rs->heartbeat_interval_ms = kb_streams_coord_heartbeat_ms(req->broker, g);
    rs->acceptable_recovery_lag_legacy = ACCEPTABLE_RECOVERY_LAG;
    rs->acceptable_recovery_lag = ACCEPTABLE_RECOVERY_LAG;
    rs->task_offset_interval_ms = TASK_OFFSET_INTERVAL_MS;
    rs->endpoint_information_epoch = rq->endpoint_information_epoch;
    kp_err e = fill_statuses(req, sg, res, rs);
    if (e != KP_ERR_NONE || !res->with_tasks || res->member == NULL)
        return e;
    const kb_cg_set none = {0};
    if ((e = TASKS_FILL(req, sg->topology, &res->member->active, rs->active_tasks)) == KP_ERR_NONE &&
        (e = TASKS_FILL(req, sg->topology, &res->member->standby, rs->standby_tasks)) == KP_ERR_NONE)
        e = TASKS_FILL(req, sg->topology, &none, rs->warmup_tasks);
    return e;
}

/* Everything Kafka checks before the group: the feature, the request,
 * authorization, this broker being the coordinator. */
static kp_err heartbeat_precheck(kb_req *req, const kp_streams_group_heartbeat_req *rq,
                                 const char **msg)
{
    kb_topic *t;
    *msg = NULL;
    if (!kb_cv_streams_groups_on(req))
        return KP_ERR_UNSUPPORTED_VERSION;
    if (rq->group_id.len <= 0) {
        *msg = "GroupId can't be empty.";
        return KP_ERR_INVALID_REQUEST;
    }
    kp_err bad = kb_streams_group_check_request(rq, msg);
    if (bad != KP_ERR_NONE)
        return bad;
    if ((bad = kb_authz_group_member(req, rq->group_id, NULL, 0)) != KP_ERR_NONE)
        return bad;
    if (kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
}

kp_err kb_h_streams_group_heartbeat(kb_req *req, const kp_streams_group_heartbeat_req *rq,
                                    kp_streams_group_heartbeat_resp *rs)
{
    const char *msg = NULL;
    rs->member_id = KP_STR_LIT("");
    kp_err err = heartbeat_precheck(req, rq, &msg);
    if (err != KP_ERR_NONE) {
        hb_error(req, rs, err, msg);
        return KP_ERR_NONE;
    }
    kb_group *g;
    bool created;
    err = kb_group_coord_heartbeat_group(req->broker, rq->group_id, rq->member_epoch == 0,
                                         &streams_kind, &req->arena, &g, &created, &msg);
    if (err == KP_ERR__NOMEM)
        return err;
    if (err != KP_ERR_NONE) {
        hb_error(req, rs, err, msg);
        return KP_ERR_NONE;
    }
    kb_streams_group_client cl = {req->client_id, kb_req_client_host(req)};
    kb_streams_group_env env;
    kb_streams_coord_env_for(req->broker, g, &env);
    env.create_topic = create_authorized;
    env.create_ctx = req;
    kb_streams_group_result res;
    err = kb_streams_group_heartbeat(g->stg, &env, rq, &cl, kb_group_coord_now(req->broker), &res);
    if (err == KP_ERR_NONE && res.err == KP_ERR_NONE)
        err = fill_heartbeat(req, g, &res, rq, rs);
    else if (err == KP_ERR_NONE)
        hb_error(req, rs, res.err, res.message);
    kb_group_coord_heartbeat_done(req->broker, g, created, g->stg->nmembers);
    return err;
}

/* ---- StreamsGroupDescribe ----------------------------------------------- */

typedef kp_streams_group_describe_resp_described_group described;
typedef kp_streams_group_describe_resp_member described_member;
typedef kp_streams_group_describe_resp_topic_info ds_topic;

static kp_str opt_str(kb_req *req, const char *s)
{
    return s != NULL ? kb_req_str(req, s) : KP_STR_NULL;
}

static kp_err describe_topics(kb_req *req, const kb_st_topic *v, int32_t n, int32_t *nout,
                              ds_topic **out)
{
    *nout = n;
    if ((*out = kp_arena_calloc(&req->arena, (size_t)n + 1, sizeof(**out))) == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        ds_topic *o = &(*out)[i];
        o->name = kb_req_str(req, v[i].name);
        o->partitions = v[i].partitions;
        o->replication_factor = v[i].replication_factor;
        if (!KB_ARRAY_ALLOC(req, o->topic_configs, v[i].nconfigs))
            return KP_ERR__NOMEM;
        for (int32_t k = 0; k < v[i].nconfigs; k++) {
            o->topic_configs.v[k].key = kb_req_str(req, v[i].configs[2 * k]);
            o->topic_configs.v[k].value = kb_req_str(req, v[i].configs[2 * k + 1]);
        }
    }
    return KP_ERR_NONE;
}

static kp_err describe_strs(kb_req *req, char *const *v, int32_t n, int32_t *nout, kp_str **out)
{
    *nout = n;
    if ((*out = kp_arena_calloc(&req->arena, (size_t)n + 1, sizeof(**out))) == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++)
        (*out)[i] = kb_req_str(req, v[i]);
    return KP_ERR_NONE;
}

/* The topology, its subtopologies null unless configured (Kafka's). */
static kp_err describe_topology(kb_req *req, const kb_streams_topology *t, described *out)
{
    if (t == NULL)
        return KP_ERR_NONE;
    kp_streams_group_describe_resp_topology *dt = kp_arena_calloc(&req->arena, 1, sizeof(*dt));
    if (dt == NULL)
        return KP_ERR__NOMEM;
    out->topology = dt;
    dt->epoch = t->epoch;
    dt->subtopologies.n = -1;
    if (t->nstatus > 0)
        return KP_ERR_NONE;
    if (!KB_ARRAY_ALLOC(req, dt->subtopologies, t->nsubs))
        return KP_ERR__NOMEM;
    kp_err e = KP_ERR_NONE;
    for (int32_t i = 0; e == KP_ERR_NONE && i < t->nsubs; i++) {
        const kb_st_sub *s = &t->subs[i];
        kp_streams_group_describe_resp_subtopology *ds = &dt->subtopologies.v[i];
        ds->subtopology_id = kb_req_str(req, s->id);
        e = describe_strs(req, s->sources, s->nsources, &ds->source_topics.n, &ds->source_topics.v);
        if (e == KP_ERR_NONE)
            e = describe_strs(req, s->sinks, s->nsinks, &ds->repartition_sink_topics.n,
                              &ds->repartition_sink_topics.v);
        if (e == KP_ERR_NONE)
            e = describe_topics(req, s->changelogs, s->nchangelogs,
                                &ds->state_changelog_topics.n, &ds->state_changelog_topics.v);
        if (e == KP_ERR_NONE)
            e = describe_topics(req, s->rsources, s->nrsources,
                                &ds->repartition_source_topics.n,
                                &ds->repartition_source_topics.v);
    }
    return e;
}

static kp_err describe_assignment(kb_req *req, const kb_streams_topology *t,
                                  const kb_cg_set *act, const kb_cg_set *stb,
                                  kp_streams_group_describe_resp_assignment *out)
{
    const kb_cg_set none = {0};
    kp_err e = TASKS_FILL(req, t, act, out->active_tasks);
    if (e == KP_ERR_NONE)
        e = TASKS_FILL(req, t, stb, out->standby_tasks);
    return e == KP_ERR_NONE ? TASKS_FILL(req, t, &none, out->warmup_tasks) : e;
}

static kp_err describe_member(kb_req *req, const kb_streams_topology *t, const kb_st_member *m,
                              described_member *dm)
{
    kp_streams_group_describe_resp_member_defaults(dm);
    dm->member_id = kb_req_str(req, m->member_id);
    dm->member_epoch = m->epoch;
    dm->instance_id = opt_str(req, m->instance_id);
    dm->rack_id = opt_str(req, m->rack_id);
    dm->client_id = kb_req_str(req, m->client_id != NULL ? m->client_id : "");
    dm->client_host = kb_req_str(req, m->client_host != NULL ? m->client_host : "");
    dm->topology_epoch = m->topology_epoch;
    dm->process_id = kb_req_str(req, m->process_id != NULL ? m->process_id : "");
    if (m->endpoint_host != NULL) {
        dm->user_endpoint = kp_arena_calloc(&req->arena, 1, sizeof(*dm->user_endpoint));
        if (dm->user_endpoint == NULL)
            return KP_ERR__NOMEM;
        dm->user_endpoint->host = kb_req_str(req, m->endpoint_host);
        dm->user_endpoint->port = m->endpoint_port;
    }
    dm->client_tags.n = dm->task_offsets.n = dm->task_end_offsets.n = 0;
    kp_err e = describe_assignment(req, t, &m->active, &m->standby, &dm->assignment);
    return e != KP_ERR_NONE ? e
                            : describe_assignment(req, t, &m->target_active, &m->target_standby,
                                                  &dm->target_assignment);
}

static kp_err describe_group(kb_req *req, kp_str id, const kp_streams_group_describe_req *rq,
                             described *out)
{
    kp_streams_group_describe_resp_described_group_defaults(out);
    out->group_id = id;
    out->group_state = KP_STR_LIT("");
    out->topology_description_status = rq->include_topology_description ? TOPOLOGY_NOT_STORED
                                                                        : TOPOLOGY_NOT_REQUESTED;
    const kb_group *g = kb_group_describe_find(req, id, rq->include_authorized_operations, &streams_kind, &out->error_code,
                                               &out->error_message, &out->authorized_operations);
    if (g == NULL)
        return KP_ERR_NONE;
    const kb_streams_group *sg = g->stg;
    out->group_state = kb_req_str(req, kb_streams_group_state_name(kb_streams_group_state_of(sg)));
    out->group_epoch = sg->group_epoch;
    out->assignment_epoch = sg->assignment_epoch;
    out->assignor_name = KP_STR_LIT(KB_STREAMS_GROUP_ASSIGNOR);
    kp_err e = describe_topology(req, sg->topology, out);
    if (e != KP_ERR_NONE || !KB_ARRAY_ALLOC(req, out->members, sg->nmembers))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; e == KP_ERR_NONE && i < sg->nmembers; i++)
        e = describe_member(req, sg->topology, sg->members[i], &out->members.v[i]);
    return e;
}

kp_err kb_h_streams_group_describe(kb_req *req, const kp_streams_group_describe_req *rq,
                                   kp_streams_group_describe_resp *rs)
{
    int32_t n = rq->group_ids.n > 0 ? rq->group_ids.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        described *d = &rs->groups.v[i];
        kp_err e = describe_group(req, rq->group_ids.v[i], rq, d);
        if (e != KP_ERR_NONE)
            return e;
        d->error_code = kb_group_describe_error(req, kb_cv_streams_groups_on(req),
                                                d->error_code, rq->group_ids.v[i]);
    }
    return KP_ERR_NONE;
}

/* ---- StreamsGroupTopologyDescriptionUpdate ------------------------------ */

kp_err kb_h_streams_group_topology_description_update(
    kb_req *req, const kp_streams_group_topology_description_update_req *rq,
    kp_streams_group_topology_description_update_resp *rs)
{
    kb_topic *t;
    if (!kb_cv_streams_groups_on(req)) {
        rs->error_code = KP_ERR_UNSUPPORTED_VERSION;
        return KP_ERR_NONE;
    }
    if (rq->group_id.len <= 0 || rq->member_id.len <= 0) {
        rs->error_code = KP_ERR_INVALID_REQUEST;
        rs->error_message = KP_STR_LIT("GroupId and MemberId can't be empty.");
        return KP_ERR_NONE;
    }
    if ((rs->error_code = kb_authz_group_member(req, rq->group_id, NULL, 0)) != KP_ERR_NONE)
        return KP_ERR_NONE;
    if (kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE) {
        rs->error_code = KP_ERR_COORDINATOR_NOT_AVAILABLE;
        return KP_ERR_NONE;
    }
    rs->error_code = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
    if (rs->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    const kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), rq->group_id);
    if (g == NULL || g->stg == NULL || kb_streams_group_member_find(g->stg, rq->member_id) == NULL)
        rs->error_code = KP_ERR_UNKNOWN_MEMBER_ID;
    return KP_ERR_NONE;
}
