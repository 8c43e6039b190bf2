/* Handlers for the classic group APIs: FindCoordinator, JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups.
 * Offsets (OffsetCommit, OffsetFetch, OffsetDelete) are in kb_h_group_offsets.c.
 * Each decodes nothing itself: it validates, calls kb_group / kb_group_coord,
 * and fills the response. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kb_authz.h"
#include "kb_cluster_topics.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_consumer_group.h"
#include "kb_share_group.h"
#include "kb_streams_group.h"
#include "kb_conn.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_share_group.h"
#include "kb_log.h"
#include "kb_server.h"
#include "kb_txn_coord.h"

/* GROUP READ, which every request of a member needs (Kafka's KafkaApis). */
static bool group_read(const kb_req *req, kp_str group_id)
{
    return kb_authz(req, KB_OP_READ, KB_RES_GROUP, group_id);
}

/* A request parked in the group state machine. */
typedef struct gwait {
    kb_gwaiter w; /* first: the state machine hands this pointer back */
    kb_req *req;
    kb_broker *b;
    kp_str group_id;
    bool parked;
    bool done;
} gwait;

static kp_str arena_str(kb_req *req, const char *s)
{
    return s != NULL ? kb_req_str(req, s) : KP_STR_NULL;
}

static kp_slice arena_bytes(kb_req *req, kp_slice s)
{
    if (s.len <= 0)
        return (kp_slice){(const uint8_t *)"", 0};
    uint8_t *p = kp_arena_alloc(&req->arena, (size_t)s.len);
    if (p == NULL)
        return (kp_slice){(const uint8_t *)"", 0};
    memcpy(p, s.p, (size_t)s.len);
    return (kp_slice){p, s.len};
}

/* Ends a waiting request: at once if still inside the handler, else now. */
static void gwait_answered(gwait *gw)
{
    gw->done = true;
    if (gw->parked) {
        gw->req->on_cancel = NULL;
        kb_req_finish(gw->req);
    }
}

static void gwait_cancel(kb_req *req)
{
    gwait *gw = req->park_state;
    kb_group *g = kb_groups_find(kb_group_coord_groups(gw->b), gw->group_id);
    if (g != NULL)
        kb_group_forget_waiter(g, gw);
}

/* After the state machine ran: park if no answer came, and re-arm timers. */
static kp_err gwait_finish(gwait *gw)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(gw->b), gw->group_id);
    if (g != NULL)
        kb_group_coord_touch(gw->b, g);
    if (gw->done)
        return KP_ERR_NONE;
    gw->parked = true;
    gw->req->park_state = gw;
    gw->req->on_cancel = gwait_cancel;
    return KB_PARKED;
}

/* Every group API wants the coordinator's topic to exist (FindCoordinator
 * creates it, as Kafka's auto-creation does). */
static kp_err coordinator_ready(kb_req *req)
{
    kb_topic *t;
    if (kb_cluster_topics_internal_pending(req->broker, KB_GROUP_COORD_OFFSETS_TOPIC))
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return kb_group_coord_offsets_topic(req->broker, &t) == KP_ERR_NONE
               ? KP_ERR_NONE
               : KP_ERR_COORDINATOR_NOT_AVAILABLE;
}

/* ---- FindCoordinator ---------------------------------------------------- */

/* Kafka's description of the errors FindCoordinator gives (v1-v3 carry it). */
static const char *coordinator_error_message(kp_err err)
{
    switch (err) {
    case KP_ERR_COORDINATOR_NOT_AVAILABLE:
        return "The coordinator is not available.";
    case KP_ERR_INVALID_REQUEST:
        return "This most likely occurs because of a request being malformed by the client "
               "library or the message was sent to an incompatible broker. See the broker logs "
               "for more details.";
    default:
        return kb_authz_message(err)[0] != '\0' ? kb_authz_message(err) : kp_err_name(err);
    }
}

/* Cluster mode: the coordinator of key is the leader of its partition of
 * the internal topic, wherever it is; *node -1 when there is none yet. */
static void cluster_coordinator(kb_req *req, const kb_meta_image *img, const char *topic,
                                kp_str key, int32_t *node, kp_str *host, int32_t *port)
{
    int32_t leader = kb_cv_coordinator(req, img, topic, key);
    kp_str rack;
    *node = leader >= 0 && kb_cv_endpoint(req, img, leader, host, port, &rack) ? leader : -1;
}

/* error_message is NULL from v4 on: Kafka leaves each coordinator's message
 * empty there, whatever the error, where v1-v3 describe the error (or say
 * NONE). */
static void find_one(kb_req *req, int8_t key_type, kp_str key, kp_str *host, int32_t *port,
                     int32_t *node, int16_t *error_code, kp_str *error_message)
{
    kp_err err = KP_ERR_NONE;
    if (key_type == 0 && !kb_authz(req, KB_OP_DESCRIBE, KB_RES_GROUP, key))
        err = KP_ERR_GROUP_AUTHORIZATION_FAILED;
    else if (key_type == 1 && !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TRANSACTIONAL_ID, key))
        err = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (key_type != 0 && key_type != 1)
        err = KP_ERR_INVALID_REQUEST;
    else if (key_type == 0)
        err = coordinator_ready(req);
    else if (kb_cluster_topics_internal_pending(req->broker, KB_TXN_COORD_STATE_TOPIC) ||
             kb_txn_coord_state_topic(req->broker, &(kb_topic *){NULL}) != KP_ERR_NONE)
        err = KP_ERR_COORDINATOR_NOT_AVAILABLE; /* Kafka creates it here too */
    const kb_meta_image *img = kb_cv_image(req);
    if (err == KP_ERR_NONE && img != NULL) {
        cluster_coordinator(req, img, key_type == 0 ? KB_GROUP_COORD_OFFSETS_TOPIC
                                                    : KB_TXN_COORD_STATE_TOPIC,
                            key, node, host, port);
        if (*node < 0)
            err = KP_ERR_COORDINATOR_NOT_AVAILABLE;
        else if (*node != req->broker->node_id) {
            *error_code = KP_ERR_NONE;
            if (error_message != NULL)
                *error_message = KP_STR_LIT("NONE");
            return;
        }
    }
    *error_code = err;
    if (err != KP_ERR_NONE) {
        *node = -1;
        *host = KP_STR_LIT("");
        *port = -1;
        if (error_message != NULL)
            *error_message = kb_req_str(req, coordinator_error_message(err));
        return;
    }
    *node = req->broker->node_id;
    kb_server_advertised(req, host, port);
    if (error_message != NULL)
        *error_message = KP_STR_LIT("NONE");
}

kp_err kb_h_find_coordinator(kb_req *req, const kp_find_coordinator_req *rq,
                             kp_find_coordinator_resp *rs)
{
    if (req->api_version < 4) {
        find_one(req, rq->key_type, rq->key, &rs->host, &rs->port, &rs->node_id,
                 &rs->error_code, &rs->error_message);
        return KP_ERR_NONE;
    }
    int32_t n = rq->coordinator_keys.n > 0 ? rq->coordinator_keys.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->coordinators, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_find_coordinator_resp_coordinator *c = &rs->coordinators.v[i];
        kp_find_coordinator_resp_coordinator_defaults(c);
        c->key = rq->coordinator_keys.v[i];
        find_one(req, rq->key_type, c->key, &c->host, &c->port, &c->node_id, &c->error_code,
                 NULL);
    }
    return KP_ERR_NONE;
}

/* ---- JoinGroup ---------------------------------------------------------- */

static kp_err join_members(kb_req *req, const kb_group *g, kp_join_group_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->members, g->nmembers))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < g->nmembers; i++) {
        const kb_group_member *m = g->members[i];
        kp_join_group_resp_join_group_response_member *out = &rs->members.v[i];
        out->member_id = kb_req_str(req, m->member_id);
        out->group_instance_id = arena_str(req, m->instance_id);
        out->metadata = arena_bytes(req, kb_group_member_metadata(m, g->protocol_name));
    }
    return KP_ERR_NONE;
}

static void join_done(kb_gwaiter *w, const kb_group *g, const kb_group_join_result *res)
{
    gwait *gw = (gwait *)w;
    kb_req *req = gw->req;
    kp_join_group_resp *rs = req->response;
    bool old = req->api_version < 7; /* protocol name not nullable before v7 */
    rs->error_code = res->err;
    rs->generation_id = res->generation;
    rs->member_id = kb_req_str(req, res->member_id != NULL ? res->member_id : "");
    rs->leader = kb_req_str(req, res->leader != NULL ? res->leader : "");
    rs->protocol_type = arena_str(req, res->protocol_type);
    rs->protocol_name = res->protocol_name != NULL || !old ? arena_str(req, res->protocol_name)
                                                           : KP_STR_LIT("");
    rs->skip_assignment = res->skip_assignment && req->api_version >= 9;
    if (res->with_members && g != NULL && join_members(req, g, rs) != KP_ERR_NONE)
        rs->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
    gwait_answered(gw);
}

static void sync_done(kb_gwaiter *w, const kb_group *g, kp_err err, kp_slice assignment);

/* Checks the group id and the coordinator (a Kafka error code), then makes
 * the waiter (*out stays NULL when out of memory). */
static kp_err gwait_new(kb_req *req, kp_str group_id, gwait **out)
{
    if (group_id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    kp_err err = coordinator_ready(req);
    if (err == KP_ERR_NONE)
        err = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, group_id);
    if (err != KP_ERR_NONE)
        return err;
    gwait *gw = kp_arena_alloc(&req->arena, sizeof(*gw));
    *out = gw;
    if (gw == NULL)
        return KP_ERR_NONE;
    gw->w.join_done = join_done;
    gw->w.sync_done = sync_done;
    gw->req = req;
    gw->b = req->broker;
    gw->group_id = group_id;
    return KP_ERR_NONE;
}

kp_err kb_h_join_group(kb_req *req, const kp_join_group_req *rq, kp_join_group_resp *rs)
{
    rs->member_id = rq->member_id.len >= 0 ? rq->member_id : KP_STR_LIT("");
    rs->protocol_name = req->api_version < 7 ? KP_STR_LIT("") : KP_STR_NULL;
    if (!group_read(req, rq->group_id)) {
        rs->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        rs->member_id = rs->leader = KP_STR_LIT("");
        rs->generation_id = -1;
        return KP_ERR_NONE;
    }
    gwait *gw = NULL;
    if ((rs->error_code = gwait_new(req, rq->group_id, &gw)) != KP_ERR_NONE || gw == NULL)
        return gw == NULL && rs->error_code == KP_ERR_NONE ? KP_ERR__NOMEM : KP_ERR_NONE;
    kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), rq->group_id);
    if (g != NULL && (g->sg != NULL || g->stg != NULL)) { /* Kafka: not a classic group */
        rs->error_code = KP_ERR_INCONSISTENT_GROUP_PROTOCOL;
        return KP_ERR_NONE;
    }
    if (g != NULL && g->cg != NULL && g->cg->nmembers > 0) {
        /* Kafka 4.1 admits classic members into a consumer group (online
         * migration); Runnel does not mix the protocols in one group. */
        rs->error_code = KP_ERR_INCONSISTENT_GROUP_PROTOCOL;
        return KP_ERR_NONE;
    }
    if (g != NULL && g->cg != NULL) { /* empty: becomes a classic group */
        kb_consumer_group_free(g->cg);
        g->cg = NULL;
    }
    kb_group_client cl = {req->client_id, kb_req_client_host(req), req->api_version};
    kp_err e = kb_group_join(kb_group_coord_groups(req->broker), rq, &cl, gw,
                             kb_group_coord_now(req->broker));
    if (e != KP_ERR_NONE)
        return e;
    return gwait_finish(gw);
}

/* ---- SyncGroup ---------------------------------------------------------- */

static void sync_done(kb_gwaiter *w, const kb_group *g, kp_err err, kp_slice assignment)
{
    gwait *gw = (gwait *)w;
    kb_req *req = gw->req;
    kp_sync_group_resp *rs = req->response;
    rs->error_code = err;
    if (err == KP_ERR_NONE && g != NULL) {
        rs->protocol_type = arena_str(req, g->protocol_type);
        rs->protocol_name = arena_str(req, g->protocol_name);
    }
    rs->assignment = arena_bytes(req, assignment);
    gwait_answered(gw);
}

/* A classic request to a KIP-848 group: its members are unknown there. */
static bool consumer_group(kb_req *req, kp_str group_id)
{
    const kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), group_id);
    return g != NULL && (g->cg != NULL || g->sg != NULL || g->stg != NULL);
}

kp_err kb_h_sync_group(kb_req *req, const kp_sync_group_req *rq, kp_sync_group_resp *rs)
{
    if (!group_read(req, rq->group_id)) {
        rs->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    gwait *gw = NULL;
    if ((rs->error_code = gwait_new(req, rq->group_id, &gw)) != KP_ERR_NONE || gw == NULL)
        return gw == NULL && rs->error_code == KP_ERR_NONE ? KP_ERR__NOMEM : KP_ERR_NONE;
    if (consumer_group(req, rq->group_id)) {
        rs->error_code = KP_ERR_UNKNOWN_MEMBER_ID;
        return KP_ERR_NONE;
    }
    kp_err e = kb_group_sync(kb_group_coord_groups(req->broker), rq, gw, kb_group_coord_now(req->broker));
    if (e != KP_ERR_NONE)
        return e;
    return gwait_finish(gw);
}

/* ---- Heartbeat, LeaveGroup ---------------------------------------------- */

kp_err kb_h_heartbeat(kb_req *req, const kp_heartbeat_req *rq, kp_heartbeat_resp *rs)
{
    if (!group_read(req, rq->group_id)) {
        rs->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    if (rq->group_id.len <= 0) {
        rs->error_code = KP_ERR_INVALID_GROUP_ID;
        return KP_ERR_NONE;
    }
    rs->error_code = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
    if (rs->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    kb_groups *gs = kb_group_coord_groups(req->broker);
    if (consumer_group(req, rq->group_id)) {
        rs->error_code = KP_ERR_UNKNOWN_MEMBER_ID;
        return KP_ERR_NONE;
    }
    rs->error_code = kb_group_heartbeat(gs, rq, kb_group_coord_now(req->broker));
    kb_group *g = kb_groups_find(gs, rq->group_id);
    if (g != NULL)
        kb_group_coord_touch(req->broker, g);
    return KP_ERR_NONE;
}

kp_err kb_h_leave_group(kb_req *req, const kp_leave_group_req *rq, kp_leave_group_resp *rs)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    kb_group *g = rq->group_id.len > 0 ? kb_groups_find(gs, rq->group_id) : NULL;
    bool batched = req->api_version >= 3;
    int32_t n = batched ? (rq->members.n > 0 ? rq->members.n : 0) : 1;
    if (!group_read(req, rq->group_id)) {
        rs->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    if (rq->group_id.len <= 0) {
        rs->error_code = KP_ERR_INVALID_GROUP_ID;
        return KP_ERR_NONE;
    }
    rs->error_code = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, rq->group_id);
    if (rs->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    if (g == NULL || g->state == KB_GS_DEAD) {
        rs->error_code = g == NULL ? KP_ERR_UNKNOWN_MEMBER_ID : KP_ERR_COORDINATOR_NOT_AVAILABLE;
        return KP_ERR_NONE;
    }
    if (batched && !KB_ARRAY_ALLOC(req, rs->members, n))
        return KP_ERR__NOMEM;
    int64_t now = kb_group_coord_now(req->broker);
    for (int32_t i = 0; i < n; i++) {
        kp_str member = batched ? rq->members.v[i].member_id : rq->member_id;
        kp_str instance = batched ? rq->members.v[i].group_instance_id : KP_STR_NULL;
        kp_err err = g->cg != NULL || g->stg != NULL ? KP_ERR_UNKNOWN_MEMBER_ID
                                   : kb_group_leave(gs, g, member, instance, now);
        if (!batched) {
            rs->error_code = err;
            continue;
        }
        rs->members.v[i].member_id = member;
        rs->members.v[i].group_instance_id = instance;
        rs->members.v[i].error_code = err;
    }
    kb_group_coord_touch(req->broker, g);
    return KP_ERR_NONE;
}

/* ---- ListGroups, DescribeGroups, DeleteGroups --------------------------- */

static bool filter_has(const kp_str *v, int32_t n, const char *name)
{
    if (n <= 0)
        return true;
    for (int32_t i = 0; i < n; i++)
        if ((size_t)v[i].len == strlen(name) && strncasecmp(v[i].p, name, (size_t)v[i].len) == 0)
            return true;
    return false;
}

kp_err kb_h_list_groups(kb_req *req, const kp_list_groups_req *rq, kp_list_groups_resp *rs)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    if (!KB_ARRAY_ALLOC(req, rs->groups, kb_groups_count(gs)))
        return KP_ERR__NOMEM;
    int32_t n = 0;
    size_t cur = 0;
    bool classic = filter_has(rq->types_filter.v, rq->types_filter.n, "classic");
    bool consumer = filter_has(rq->types_filter.v, rq->types_filter.n, "consumer");
    bool share = filter_has(rq->types_filter.v, rq->types_filter.n, "share");
    bool streams = filter_has(rq->types_filter.v, rq->types_filter.n, "streams");
    /* Kafka: every group with CLUSTER DESCRIBE, else those the principal
     * may DESCRIBE. */
    bool all = kb_authz_cluster(req, KB_OP_DESCRIBE);
    for (kb_group *g; (g = kb_groups_next(gs, &cur)) != NULL;) {
        const char *state = g->cg != NULL ? kb_consumer_group_state_name(kb_consumer_group_state_of(g->cg))
                            : g->sg != NULL ? kb_share_group_state_name(kb_share_group_state_of(g->sg))
                            : g->stg != NULL ? kb_streams_group_state_name(kb_streams_group_state_of(g->stg))
                                            : kb_group_state_name(g->state);
        const char *type = g->cg != NULL    ? "consumer"
                           : g->sg != NULL  ? "share"
                           : g->stg != NULL ? "streams"
                                            : "classic";
        const char *ptype = g->cg != NULL || g->sg != NULL || g->stg != NULL ? type : g->protocol_type;
        bool listed = g->cg != NULL ? consumer : g->sg != NULL ? share : g->stg != NULL ? streams : classic;
        if (g->state == KB_GS_DEAD || !listed ||
            !filter_has(rq->states_filter.v, rq->states_filter.n, state))
            continue;
        if (!all && !kb_authz(req, KB_OP_DESCRIBE, KB_RES_GROUP, kb_cstr(g->id)))
            continue;
        kp_list_groups_resp_listed_group *out = &rs->groups.v[n++];
        out->group_id = kb_req_str(req, g->id);
        out->protocol_type = kb_req_str(req, ptype != NULL ? ptype : "");
        out->group_state = kb_req_str(req, state);
        out->group_type = kb_req_str(req, type);
    }
    rs->groups.n = n;
    return KP_ERR_NONE;
}

static kp_err describe_members(kb_req *req, const kb_group *g,
                               kp_describe_groups_resp_described_group *out)
{
    if (!KB_ARRAY_ALLOC(req, out->members, g->nmembers))
        return KP_ERR__NOMEM;
    bool stable = g->state == KB_GS_STABLE;
    for (int32_t i = 0; i < g->nmembers; i++) {
        const kb_group_member *m = g->members[i];
        kp_describe_groups_resp_described_group_member *dm = &out->members.v[i];
        kp_describe_groups_resp_described_group_member_defaults(dm);
        dm->member_id = kb_req_str(req, m->member_id);
        dm->group_instance_id = arena_str(req, m->instance_id);
        dm->client_id = kb_req_str(req, m->client_id);
        dm->client_host = kb_req_str(req, m->client_host);
        if (stable) {
            dm->member_metadata = arena_bytes(req, kb_group_member_metadata(m, g->protocol_name));
            dm->member_assignment = arena_bytes(req, (kp_slice){m->assignment, m->assignment_len});
        } else {
            dm->member_metadata = dm->member_assignment = (kp_slice){(const uint8_t *)"", 0};
        }
    }
    return KP_ERR_NONE;
}

/* DescribeGroups v6's answer for a group that does not exist, or is not a
 * classic group (a consumer or share group), in Kafka's words. */
static void describe_not_found(kb_req *req, bool not_classic,
                               kp_describe_groups_resp_described_group *out)
{
    size_t cap = (size_t)out->group_id.len + 40;
    char *text = kp_arena_alloc(&req->arena, cap);
    out->error_code = KP_ERR_GROUP_ID_NOT_FOUND;
    if (text == NULL)
        return;
    snprintf(text, cap, "Group %.*s %s.", (int)out->group_id.len, out->group_id.p,
             not_classic ? "is not a classic group" : "not found");
    out->error_message = (kp_str){text, (int32_t)strlen(text)};
}

kp_err kb_h_describe_groups(kb_req *req, const kp_describe_groups_req *rq,
                            kp_describe_groups_resp *rs)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    int32_t n = rq->groups.n > 0 ? rq->groups.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_describe_groups_resp_described_group *out = &rs->groups.v[i];
        kp_describe_groups_resp_described_group_defaults(out);
        out->group_id = rq->groups.v[i];
        out->protocol_type = out->protocol_data = KP_STR_LIT("");
        out->group_state = KP_STR_LIT("Dead");
        if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_GROUP, rq->groups.v[i])) {
            out->error_code = KP_ERR_GROUP_AUTHORIZATION_FAILED;
            out->group_state = KP_STR_LIT("");
            continue;
        }
        if (rq->include_authorized_operations)
            out->authorized_operations = kb_authz_ops(req, KB_RES_GROUP, rq->groups.v[i]);
        out->error_code = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC,
                                                  rq->groups.v[i]);
        if (out->error_code != KP_ERR_NONE) {
            out->group_state = KP_STR_LIT("");
            continue;
        }
        const kb_group *g = rq->groups.v[i].len > 0 ? kb_groups_find(gs, rq->groups.v[i]) : NULL;
        if (g == NULL || g->cg != NULL || g->sg != NULL || g->stg != NULL) {
            /* Kafka: Dead, and from v6 (KIP-1043) GROUP_ID_NOT_FOUND saying why */
            if (req->api_version >= 6)
                describe_not_found(req, g != NULL, out);
            continue;
        }
        out->group_state = kb_req_str(req, kb_group_state_name(g->state));
        out->protocol_type = kb_req_str(req, g->protocol_type != NULL ? g->protocol_type : "");
        out->protocol_data = kb_req_str(req, g->protocol_name != NULL ? g->protocol_name : "");
        if (describe_members(req, g, out) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

/* Why group id cannot be deleted (NONE: it can), in Kafka's order. */
static kp_err delete_group_error(kb_req *req, kp_str id, const kb_group *g)
{
    if (!kb_authz(req, KB_OP_DELETE, KB_RES_GROUP, id))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    if (id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    kp_err err = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, id);
    if (err != KP_ERR_NONE)
        return err;
    if (g == NULL || g->state == KB_GS_DEAD)
        return KP_ERR_GROUP_ID_NOT_FOUND;
    if (g->state != KB_GS_EMPTY || (g->cg != NULL && g->cg->nmembers > 0) ||
        (g->sg != NULL && g->sg->nmembers > 0) || (g->stg != NULL && g->stg->nmembers > 0))
        return KP_ERR_NON_EMPTY_GROUP;
    return KP_ERR_NONE;
}

kp_err kb_h_delete_groups(kb_req *req, const kp_delete_groups_req *rq, kp_delete_groups_resp *rs)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    int32_t n = rq->groups_names.n > 0 ? rq->groups_names.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->results, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_str id = rq->groups_names.v[i];
        rs->results.v[i].group_id = id;
        kb_group *g = id.len > 0 ? kb_groups_find(gs, id) : NULL;
        kp_err err = delete_group_error(req, id, g);
        if (err == KP_ERR_NONE && kb_group_coord_delete_group(req->broker, g) != KP_ERR_NONE)
            err = KP_ERR_COORDINATOR_NOT_AVAILABLE;
        rs->results.v[i].error_code = err;
    }
    return KP_ERR_NONE;
}
