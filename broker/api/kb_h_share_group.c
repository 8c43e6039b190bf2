/* Handlers for the KIP-932 share group membership APIs: ShareGroupHeartbeat
 * and ShareGroupDescribe. The state machine is kb_share_group; these find
 * or make the group in the shared registry (classic, consumer and share
 * groups share the id namespace), call it, and fill the response.
 *
 * Invariants: a group of another type is never touched (GROUP_ID_NOT_FOUND,
 * "Group %s is not a share group.", as Kafka answers); a group this handler
 * created for a request that failed is removed again. */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_group_describe.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"

/* ---- ShareGroupHeartbeat ------------------------------------------------- */

static void hb_error(kb_req *req, kp_share_group_heartbeat_resp *rs, kp_err err, const char *msg)
{
    rs->error_code = err;
    rs->error_message = msg != NULL ? kb_req_str(req, msg) : KP_STR_NULL;
    rs->member_id = KP_STR_NULL;
    rs->member_epoch = 0;
    rs->heartbeat_interval_ms = 0;
    rs->assignment = NULL;
}

static int32_t count_topics(const kb_cg_set *s)
{
    int32_t nt = 0;
    for (int32_t i = 0; i < s->n; i++)
        nt += i == 0 || memcmp(&s->v[i].topic, &s->v[i - 1].topic, sizeof(kp_uuid)) != 0;
    return nt;
}

/* The member's partitions, one entry per topic (the set is sorted by id). */
static kp_err fill_assignment(kb_req *req, const kb_cg_set *s, kp_share_group_heartbeat_resp *rs)
{
    kp_share_group_heartbeat_resp_assignment *a = kp_arena_calloc(&req->arena, 1, sizeof(*a));
    if (a == NULL || !KB_ARRAY_ALLOC(req, a->topic_partitions, count_topics(s)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0, t = 0; i < s->n; t++) {
        int32_t j = i;
        while (j < s->n && memcmp(&s->v[j].topic, &s->v[i].topic, sizeof(kp_uuid)) == 0)
            j++;
        kp_share_group_heartbeat_resp_topic_partitions *tp = &a->topic_partitions.v[t];
        tp->topic_id = s->v[i].topic;
        if (!KB_ARRAY_ALLOC(req, tp->partitions, j - i))
            return KP_ERR__NOMEM;
        for (int32_t k = i; k < j; k++)
            tp->partitions.v[k - i] = s->v[k].partition;
        i = j;
    }
    rs->assignment = a;
    return KP_ERR_NONE;
}

static bool is_share(const kb_group *g)
{
    return g->sg != NULL;
}

static bool make_share(kb_group *g)
{
    return (g->sg = kb_share_group_new()) != NULL;
}

static const kb_group_kind share_kind = {"share", true, is_share, make_share};

static kp_err heartbeat_authz(kb_req *req, const kp_share_group_heartbeat_req *rq)
{
    return kb_authz_group_member(req, rq->group_id, rq->subscribed_topic_names.v,
                                 rq->subscribed_topic_names.n);
}

/* A member that left: its share session closes and its records go back. */
static void member_left(kb_req *req, kb_group *g, kp_str member_id)
{
    kb_share_session *s = kb_share_session_find(g->sg->parts, member_id);
    kb_share_limits lim;
    kb_group_coord_share_limits_for(req->broker, g, &lim);
    kb_share_parts_release(g->sg->parts, kb_share_member_key(member_id), &lim,
                           kb_group_coord_now(req->broker));
    if (s != NULL)
        kb_share_session_close(g->sg->parts, s);
}

static kp_err heartbeat_checks(kb_req *req, const kp_share_group_heartbeat_req *rq,
                               const char **msg)
{
    kb_topic *t;
    if (!kb_cv_share_groups_on(req))
        return KP_ERR_UNSUPPORTED_VERSION;
    kp_err bad = kb_share_group_check_request(rq, msg);
    if (bad == KP_ERR_NONE)
        bad = heartbeat_authz(req, rq);
    if (bad == KP_ERR_NONE && kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE)
        bad = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return bad;
}

kp_err kb_h_share_group_heartbeat(kb_req *req, const kp_share_group_heartbeat_req *rq,
                                  kp_share_group_heartbeat_resp *rs)
{
    const char *msg = NULL;
    kp_err err = heartbeat_checks(req, rq, &msg);
    kb_group *g = NULL;
    bool created = false;
    if (err == KP_ERR_NONE)
        err = kb_group_coord_heartbeat_group(req->broker, rq->group_id, rq->member_epoch == 0,
                                             &share_kind, &req->arena, &g, &created, &msg);
    if (err == KP_ERR__NOMEM)
        return err;
    if (err != KP_ERR_NONE) {
        hb_error(req, rs, err, msg);
        return KP_ERR_NONE;
    }
    kb_share_group_client cl = {req->client_id, kb_req_client_host(req)};
    kb_share_group_result res;
    kb_share_group_env env;
    kb_group_coord_share_env_for(req->broker, g, &env);
    err = kb_share_group_heartbeat(g->sg, &env, rq, &cl, kb_group_coord_now(req->broker), &res);
    if (err == KP_ERR_NONE && res.err == KP_ERR_NONE) {
        rs->member_id = rq->member_id;
        rs->member_epoch = res.epoch;
        rs->heartbeat_interval_ms = rq->member_epoch < 0 ? 0 : res.heartbeat_interval_ms;
        if (rq->member_epoch < 0)
            member_left(req, g, rq->member_id);
        else if (res.with_assignment)
            err = fill_assignment(req, res.assignment, rs);
    } else if (err == KP_ERR_NONE) {
        hb_error(req, rs, res.err, res.message);
    }
    kb_group_coord_heartbeat_done(req->broker, g, created, g->sg->nmembers);
    return err;
}

/* ---- ShareGroupDescribe -------------------------------------------------- */

typedef kp_share_group_describe_resp_described_group described;
typedef kp_share_group_describe_resp_member described_member;

static kp_err describe_set(kb_req *req, const kb_cg_set *s,
                           kp_share_group_describe_resp_assignment *out)
{
    if (!KB_ARRAY_ALLOC(req, out->topic_partitions, count_topics(s)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0, t = 0; i < s->n; t++) {
        int32_t j = i;
        while (j < s->n && memcmp(&s->v[j].topic, &s->v[i].topic, sizeof(kp_uuid)) == 0)
            j++;
        kp_share_group_describe_resp_topic_partitions *tp = &out->topic_partitions.v[t];
        const kb_topic *topic = kb_topics_find_id(req->broker->topics, &s->v[i].topic);
        tp->topic_id = s->v[i].topic;
        tp->topic_name = topic != NULL ? kb_req_str(req, topic->name) : KP_STR_LIT("");
        if (!KB_ARRAY_ALLOC(req, tp->partitions, j - i))
            return KP_ERR__NOMEM;
        for (int32_t k = i; k < j; k++)
            tp->partitions.v[k - i] = s->v[k].partition;
        i = j;
    }
    return KP_ERR_NONE;
}

static kp_err describe_member(kb_req *req, const kb_sg_member *m, described_member *dm)
{
    kp_share_group_describe_resp_member_defaults(dm);
    dm->member_id = kb_req_str(req, m->member_id);
    dm->rack_id = m->rack_id != NULL ? kb_req_str(req, m->rack_id) : KP_STR_NULL;
    dm->member_epoch = m->epoch;
    dm->client_id = kb_req_str(req, m->client_id != NULL ? m->client_id : "");
    dm->client_host = kb_req_str(req, m->client_host != NULL ? m->client_host : "");
    if (!KB_ARRAY_ALLOC(req, dm->subscribed_topic_names, m->ntopics))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < m->ntopics; i++)
        dm->subscribed_topic_names.v[i] = kb_req_str(req, m->topics[i]);
    return describe_set(req, &m->assigned, &dm->assignment);
}

static kp_err describe_group(kb_req *req, kp_str id, bool ops, described *out)
{
    kp_share_group_describe_resp_described_group_defaults(out);
    out->group_id = id;
    out->group_state = out->assignor_name = KP_STR_LIT("");
    const kb_group *g = kb_group_describe_find(req, id, ops, &share_kind, &out->error_code,
                                               &out->error_message, &out->authorized_operations);
    if (g == NULL)
        return KP_ERR_NONE;
    const kb_share_group *sg = g->sg;
    out->group_state = kb_req_str(req, kb_share_group_state_name(kb_share_group_state_of(sg)));
    out->group_epoch = sg->group_epoch;
    out->assignment_epoch = sg->assignment_epoch;
    out->assignor_name = KP_STR_LIT(KB_SHARE_GROUP_ASSIGNOR);
    if (!KB_ARRAY_ALLOC(req, out->members, sg->nmembers))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < sg->nmembers; i++) {
        kp_err e = describe_member(req, sg->members[i], &out->members.v[i]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

kp_err kb_h_share_group_describe(kb_req *req, const kp_share_group_describe_req *rq,
                                 kp_share_group_describe_resp *rs)
{
    int32_t n = rq->group_ids.n > 0 ? rq->group_ids.n : 0;
    kb_topic *t;
    bool ready = kb_group_coord_offsets_topic(req->broker, &t) == KP_ERR_NONE;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_err e = describe_group(req, rq->group_ids.v[i], rq->include_authorized_operations,
                                  &rs->groups.v[i]);
        if (e != KP_ERR_NONE)
            return e;
        if (!kb_cv_share_groups_on(req))
            rs->groups.v[i].error_code = KP_ERR_UNSUPPORTED_VERSION;
        else if (!ready)
            rs->groups.v[i].error_code = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    }
    return KP_ERR_NONE;
}
