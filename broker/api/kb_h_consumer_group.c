/* Handlers for the KIP-848 consumer group APIs: ConsumerGroupHeartbeat and
 * ConsumerGroupDescribe. The state machine is kb_consumer_group; these find or make
 * the group in the shared registry (classic and consumer groups share the
 * id namespace), call it, and fill the response.
 *
 * Invariants: a group with members of one protocol is never touched by the
 * other protocol's requests (GROUP_ID_NOT_FOUND, as Kafka answers); an
 * empty group of the other type is converted, keeping its offsets; a group
 * this handler created for a request that failed is removed again. */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_consumer_group.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_group_describe.h"

/* ---- ConsumerGroupHeartbeat --------------------------------------------- */

typedef kp_consumer_group_heartbeat_resp_topic_partitions hb_tps;

/* The member's partitions, one entry per topic (the set is sorted by id). */
static kp_err fill_assignment(kb_req *req, const kb_cg_set *s,
                              kp_consumer_group_heartbeat_resp *rs)
{
    kp_consumer_group_heartbeat_resp_assignment *a = kp_arena_calloc(&req->arena, 1, sizeof(*a));
    int32_t nt = 0;
    for (int32_t i = 0; i < s->n; i++)
        nt += i == 0 || memcmp(&s->v[i].topic, &s->v[i - 1].topic, sizeof(kp_uuid)) != 0;
    if (a == NULL || !KB_ARRAY_ALLOC(req, a->topic_partitions, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0, t = -1; i < s->n; i++) {
        if (i == 0 || memcmp(&s->v[i].topic, &s->v[i - 1].topic, sizeof(kp_uuid)) != 0) {
            int32_t j = i;
            while (j < s->n && memcmp(&s->v[j].topic, &s->v[i].topic, sizeof(kp_uuid)) == 0)
                j++;
            hb_tps *tp = &a->topic_partitions.v[++t];
            tp->topic_id = s->v[i].topic;
            if (!KB_ARRAY_ALLOC(req, tp->partitions, j - i))
                return KP_ERR__NOMEM;
            tp->partitions.n = 0;
        }
        hb_tps *tp = &a->topic_partitions.v[t];
        tp->partitions.v[tp->partitions.n++] = s->v[i].partition;
    }
    rs->assignment = a;
    return KP_ERR_NONE;
}

static void hb_error(kb_req *req, kp_consumer_group_heartbeat_resp *rs, kp_err err,
                     const char *msg)
{
    rs->error_code = err;
    rs->error_message = msg != NULL ? kb_req_str(req, msg) : KP_STR_NULL;
    rs->member_id = KP_STR_NULL;
    rs->member_epoch = 0;
    rs->heartbeat_interval_ms = 0;
    rs->assignment = NULL;
}

static bool is_consumer(const kb_group *g)
{
    return g->cg != NULL;
}

static bool make_consumer(kb_group *g)
{
    return (g->cg = kb_consumer_group_new()) != NULL;
}

static const kb_group_kind consumer_kind = {"consumer", false, is_consumer, make_consumer};

/* Kafka 4.1 also leaves topics a regex member may not describe out of its
 * subscription; Runnel does not filter regex matches. */
static kp_err heartbeat_authz(kb_req *req, const kp_consumer_group_heartbeat_req *rq)
{
    return kb_authz_group_member(req, rq->group_id, rq->subscribed_topic_names.v,
                                 rq->subscribed_topic_names.n);
}

kp_err kb_h_consumer_group_heartbeat(kb_req *req, const kp_consumer_group_heartbeat_req *rq,
                                     kp_consumer_group_heartbeat_resp *rs)
{
    kb_topic *t;
    const char *msg = NULL;
    if (!kb_cv_consumer_groups_on(req)) {
        hb_error(req, rs, KP_ERR_UNSUPPORTED_VERSION, NULL);
        return KP_ERR_NONE;
    }
    if (rq->group_id.len <= 0) {
        hb_error(req, rs, KP_ERR_INVALID_REQUEST, "GroupId can't be empty.");
        return KP_ERR_NONE;
    }
    kp_err bad = kb_consumer_group_check_request(kb_group_coord_cgroup_env(req->broker), rq,
                                         req->api_version, &msg);
    if (bad == KP_ERR__NOMEM)
        return bad;
    if (bad != KP_ERR_NONE) {
        hb_error(req, rs, bad, msg);
        return KP_ERR_NONE;
    }
    if ((bad = heartbeat_authz(req, rq)) != KP_ERR_NONE) {
        hb_error(req, rs, bad, NULL);
        return KP_ERR_NONE;
    }
    if (kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE)
        bad = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    else
        bad = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
    if (bad != KP_ERR_NONE) {
        hb_error(req, rs, bad, NULL);
        return KP_ERR_NONE;
    }
    kb_group *g;
    bool created;
    kp_err err = kb_group_coord_heartbeat_group(req->broker, rq->group_id, rq->member_epoch == 0,
                                                &consumer_kind, &req->arena, &g, &created, &msg);
    if (err == KP_ERR__NOMEM)
        return err;
    if (err != KP_ERR_NONE) {
        hb_error(req, rs, err, msg);
        return KP_ERR_NONE;
    }
    kb_consumer_group_client cl = {req->client_id, kb_req_client_host(req), req->api_version};
    kb_consumer_group_result res;
    kb_consumer_group_env env; /* the broker's settings under the group's configs */
    kb_group_coord_cgroup_env_for(req->broker, g, &env);
    err = kb_consumer_group_heartbeat(g->cg, &env, rq, &cl, kb_group_coord_now(req->broker), &res);
    if (err == KP_ERR_NONE && res.err == KP_ERR_NONE) {
        rs->member_id = res.member_id != NULL ? kb_req_str(req, res.member_id) : rq->member_id;
        rs->member_epoch = res.epoch;
        rs->heartbeat_interval_ms = rq->member_epoch < 0 ? 0 : res.heartbeat_interval_ms;
        if (res.with_assignment && rq->member_epoch >= 0)
            err = fill_assignment(req, res.assignment, rs);
    } else if (err == KP_ERR_NONE) {
        hb_error(req, rs, res.err, res.message);
    }
    kb_group_coord_heartbeat_done(req->broker, g, created, g->cg->nmembers);
    return err;
}

/* ---- ConsumerGroupDescribe ---------------------------------------------- */

typedef kp_consumer_group_describe_resp_described_group described;
typedef kp_consumer_group_describe_resp_member described_member;

static kp_err describe_set(kb_req *req, const kb_cg_set *s,
                           kp_consumer_group_describe_resp_assignment *out)
{
    int32_t nt = 0;
    for (int32_t i = 0; i < s->n; i++)
        nt += i == 0 || memcmp(&s->v[i].topic, &s->v[i - 1].topic, sizeof(kp_uuid)) != 0;
    if (!KB_ARRAY_ALLOC(req, out->topic_partitions, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0, t = 0; i < s->n; t++) {
        int32_t j = i;
        while (j < s->n && memcmp(&s->v[j].topic, &s->v[i].topic, sizeof(kp_uuid)) == 0)
            j++;
        kp_consumer_group_describe_resp_topic_partitions *tp = &out->topic_partitions.v[t];
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

static kp_str opt_str(kb_req *req, const char *s)
{
    return s != NULL ? kb_req_str(req, s) : KP_STR_NULL;
}

static kp_err describe_member(kb_req *req, const kb_cg_member *m, described_member *dm)
{
    kp_consumer_group_describe_resp_member_defaults(dm);
    dm->member_id = kb_req_str(req, m->member_id);
    dm->instance_id = opt_str(req, m->instance_id);
    dm->rack_id = opt_str(req, m->rack_id);
    dm->member_epoch = m->epoch;
    dm->member_type = 1; /* v1: a consumer-protocol member (Runnel has no classic ones here) */
    dm->client_id = kb_req_str(req, m->client_id != NULL ? m->client_id : "");
    dm->client_host = kb_req_str(req, m->client_host != NULL ? m->client_host : "");
    dm->subscribed_topic_regex = kb_req_str(req, m->regex != NULL ? m->regex : "");
    if (!KB_ARRAY_ALLOC(req, dm->subscribed_topic_names, m->ntopics))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < m->ntopics; i++)
        dm->subscribed_topic_names.v[i] = kb_req_str(req, m->topics[i]);
    kp_err e = describe_set(req, &m->assigned, &dm->assignment);
    return e != KP_ERR_NONE ? e : describe_set(req, &m->target, &dm->target_assignment);
}

static kp_err describe_group(kb_req *req, kp_str id, bool ops, described *out)
{
    kp_consumer_group_describe_resp_described_group_defaults(out);
    out->group_id = id;
    out->group_state = out->assignor_name = KP_STR_LIT("");
    const kb_group *g = kb_group_describe_find(req, id, ops, &consumer_kind, &out->error_code,
                                               &out->error_message, &out->authorized_operations);
    if (g == NULL)
        return KP_ERR_NONE;
    const kb_consumer_group *cg = g->cg;
    out->group_state = kb_req_str(req, kb_consumer_group_state_name(kb_consumer_group_state_of(cg)));
    out->group_epoch = cg->group_epoch;
    out->assignment_epoch = cg->assignment_epoch;
    out->assignor_name = kb_req_str(req, kb_consumer_group_assignor(cg, kb_group_coord_cgroup_env(req->broker)));
    if (!KB_ARRAY_ALLOC(req, out->members, cg->nmembers))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < cg->nmembers; i++) {
        kp_err e = describe_member(req, cg->members[i], &out->members.v[i]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

kp_err kb_h_consumer_group_describe(kb_req *req, const kp_consumer_group_describe_req *rq,
                                    kp_consumer_group_describe_resp *rs)
{
    int32_t n = rq->group_ids.n > 0 ? rq->group_ids.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_err e = describe_group(req, rq->group_ids.v[i], rq->include_authorized_operations,
                                  &rs->groups.v[i]);
        if (e != KP_ERR_NONE)
            return e;
        rs->groups.v[i].error_code =
            kb_group_describe_error(req, kb_cv_consumer_groups_on(req),
                                    rs->groups.v[i].error_code, rq->group_ids.v[i]);
    }
    return KP_ERR_NONE;
}
