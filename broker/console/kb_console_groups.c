/* The console's group routes: list, show, reset (kb_console_routes.h). */
#include <stdlib.h>
#include <string.h>

#include "kb_acl.h"
#include "kb_console_lag.h"
#include "kb_console_routes.h"
#include "kb_consumer_group.h"
#include "kb_group_coord.h"
#include "kb_lag.h"
#include "kb_partition_log.h"
#include "kb_share_group.h"
#include "kb_streams_group.h"
#include "kb_share_lag.h"
#include "kb_topics.h"

#define LIST_MAX (8 << 20)
#define SHOW_MAX (8 << 20)
#define RESET_MAX 10000 /* partitions one reset may move */

static bool is_consumer_group(const kb_group *g)
{
    return g->cg != NULL;
}

static bool is_share_group(const kb_group *g)
{
    return g->sg != NULL;
}

static const char *group_type(const kb_group *g)
{
    return is_consumer_group(g) ? "consumer"
           : is_share_group(g)  ? "share"
           : g->stg != NULL     ? "streams"
                                : "classic";
}

static const char *group_state(const kb_group *g)
{
    if (g->stg != NULL)
        return kb_streams_group_state_name(kb_streams_group_state_of(g->stg));
    if (is_share_group(g))
        return kb_share_group_state_name(kb_share_group_state_of(g->sg));
    if (is_consumer_group(g))
        return kb_consumer_group_state_name(kb_consumer_group_state_of(g->cg));
    return kb_group_state_name(g->state);
}

static bool group_empty(const kb_group *g)
{
    if (g->stg != NULL)
        return g->stg->nmembers == 0;
    if (is_share_group(g))
        return g->sg->nmembers == 0;
    if (is_consumer_group(g))
        return kb_consumer_group_state_of(g->cg) == KB_CGS_EMPTY;
    return g->state == KB_GS_EMPTY;
}

static int32_t member_count(const kb_group *g)
{
    if (g->stg != NULL)
        return g->stg->nmembers;
    if (is_share_group(g))
        return g->sg->nmembers;
    return is_consumer_group(g) ? g->cg->nmembers : g->nmembers;
}

/* A share group's lag, in the shape of the consumer lag rows (no verdict:
 * status OK). */
static void group_lag(kb_broker *b, const kb_group *g, kb_lag_group_row *out)
{
    if (!is_share_group(g)) {
        kb_lag_group_of(b, g, out);
        return;
    }
    kb_share_lag_group_row sr;
    kb_share_lag_group_of(b, g, &sr);
    *out = (kb_lag_group_row){g->id, sr.members, sr.partitions, sr.lag, KB_LAG_GROUP_OK};
}

void kb_console_groups_list(const kb_console_api *api, const kb_console_req *rq,
                            kb_console_resp *out)
{
    kb_groups *gs = kb_group_coord_groups(api->b);
    kb_json j;
    kb_json_init(&j, LIST_MAX);
    kb_json_obj(&j);
    kb_json_key(&j, "groups");
    kb_json_arr(&j);
    size_t cur = 0;
    kb_group *g;
    while (gs != NULL && (g = kb_groups_next(gs, &cur)) != NULL) {
        if (!kb_console_allowed(api, rq, KB_OP_DESCRIBE, KB_RES_GROUP, g->id))
            continue;
        kb_json_obj(&j);
        kb_json_kstr(&j, "groupId", g->id);
        kb_json_kstr(&j, "type", group_type(g));
        kb_json_kstr(&j, "state", group_state(g));
        kb_json_kstr(&j, "protocolType", is_consumer_group(g) || is_share_group(g)
                                             ? group_type(g)
                                             : g->protocol_type);
        kb_json_kint(&j, "members", member_count(g));
        kb_lag_group_row lag;
        group_lag(api->b, g, &lag);
        kb_json_kint(&j, "partitions", is_share_group(g)
                                           ? lag.partitions
                                           : (int64_t)kb_offset_map_count(&g->offsets));
        kb_json_kint(&j, "lag", lag.lag);
        kb_json_kstr(&j, "status", kb_lag_group_status_name(lag.status));
        kb_json_obj_end(&j);
    }
    kb_json_arr_end(&j);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

/* A classic consumer's assignment (ConsumerProtocolAssignment: int16
 * version, [topic string, [int32 partition]], user data): its topics and
 * partitions, or nothing when it does not parse. */
static void classic_assignment(kb_json *j, const uint8_t *p, int32_t len)
{
    kp_reader r = {p, p + (len > 0 ? len : 0), KP_ERR_NONE};
    kb_json_key(j, "assignment");
    kb_json_arr(j);
    if (len < 2 || kp_read_i16(&r) < 0) {
        kb_json_arr_end(j);
        return;
    }
    int32_t nt = kp_read_array_len(&r, false, 6);
    for (int32_t i = 0; i < nt && r.err == KP_ERR_NONE; i++) {
        kp_str topic = kp_read_str(&r, false);
        int32_t np = kp_read_array_len(&r, false, 4);
        if (r.err != KP_ERR_NONE || topic.len < 0)
            break;
        kb_json_obj(j);
        kb_json_key(j, "topic");
        kb_json_strn(j, (const uint8_t *)topic.p, (size_t)topic.len);
        kb_json_key(j, "partitions");
        kb_json_arr(j);
        for (int32_t k = 0; k < np && r.err == KP_ERR_NONE; k++)
            kb_json_int(j, kp_read_i32(&r));
        kb_json_arr_end(j);
        kb_json_obj_end(j);
    }
    kb_json_arr_end(j);
}

/* A KIP-848 member's assigned partitions, grouped by topic name. */
static void cg_assignment(kb_json *j, const kb_topics *ts, const kb_cg_set *s)
{
    kb_json_key(j, "assignment");
    kb_json_arr(j);
    for (int32_t i = 0; i < s->n;) {
        const kb_topic *t = kb_topics_find_id(ts, &s->v[i].topic);
        kb_json_obj(j);
        kb_json_kstr(j, "topic", t ? t->name : "(deleted)");
        kb_json_key(j, "partitions");
        kb_json_arr(j);
        int32_t k = i;
        for (; k < s->n && memcmp(&s->v[k].topic, &s->v[i].topic, sizeof(kp_uuid)) == 0; k++)
            kb_json_int(j, s->v[k].partition);
        kb_json_arr_end(j);
        kb_json_obj_end(j);
        i = k;
    }
    kb_json_arr_end(j);
}

static void member_common(kb_json *j, const char *id, const char *instance, const char *client,
                          const char *host)
{
    kb_json_kstr(j, "memberId", id);
    kb_json_kstr(j, "instanceId", instance);
    kb_json_kstr(j, "clientId", client);
    kb_json_kstr(j, "host", host);
}

static void members(kb_json *j, const kb_broker *b, const kb_group *g)
{
    kb_json_key(j, "members");
    kb_json_arr(j);
    if (is_share_group(g)) {
        for (int32_t i = 0; i < g->sg->nmembers; i++) {
            const kb_sg_member *m = g->sg->members[i];
            kb_json_obj(j);
            member_common(j, m->member_id, NULL, m->client_id, m->client_host);
            kb_json_kint(j, "epoch", m->epoch);
            cg_assignment(j, b->topics, &m->assigned);
            kb_json_obj_end(j);
        }
    } else if (is_consumer_group(g)) {
        for (int32_t i = 0; i < g->cg->nmembers; i++) {
            const kb_cg_member *m = g->cg->members[i];
            kb_json_obj(j);
            member_common(j, m->member_id, m->instance_id, m->client_id, m->client_host);
            kb_json_kint(j, "epoch", m->epoch);
            cg_assignment(j, b->topics, &m->assigned);
            kb_json_obj_end(j);
        }
    } else {
        for (int32_t i = 0; i < g->nmembers; i++) {
            const kb_group_member *m = g->members[i];
            kb_json_obj(j);
            member_common(j, m->member_id, m->instance_id, m->client_id, m->client_host);
            if (g->protocol_type != NULL && strcmp(g->protocol_type, "consumer") == 0)
                classic_assignment(j, m->assignment, m->assignment_len);
            kb_json_obj_end(j);
        }
    }
    kb_json_arr_end(j);
}

static void offset_row(void *arg, const kb_lag_row *r)
{
    kb_json *j = arg;
    kb_json_obj(j);
    kb_json_kstr(j, "topic", r->topic);
    kb_json_kint(j, "partition", r->partition);
    kb_json_kint(j, "committed", r->committed);
    kb_json_kint(j, "high", r->log_end);
    kb_json_kint(j, "lag", r->lag);
    kb_json_kint(j, "lagMs", r->lag_ms);
    kb_json_kstr(j, "status", kb_lag_status_name(r->status));
    kb_json_kint(j, "commitTimestamp", r->commit_ts);
    kb_json_obj_end(j);
}

/* A share-partition, as a consumer group's row: its start offset where a
 * consumer group shows its committed offset; no time lag, no verdict. */
static void share_row(void *arg, const kb_share_lag_row *r)
{
    kb_lag_row row = {r->group, r->topic,  r->partition, r->start, -1,
                      r->log_end, r->lag, -1,           KB_LAG_OK};
    offset_row(arg, &row);
}

static void offsets(kb_json *j, kb_broker *b, const kb_group *g)
{
    kb_json_key(j, "offsets");
    kb_json_arr(j);
    if (is_share_group(g))
        kb_share_lag_each_of(b, g, share_row, j);
    else
        kb_lag_each_of(b, g, offset_row, j);
    kb_json_arr_end(j);
}

static void history(kb_json *j, const kb_lag_series *s)
{
    kb_json_key(j, "lagHistory");
    kb_json_arr(j);
    for (int32_t i = 0; s != NULL && i < s->n; i++) {
        const kb_lag_point *p = kb_console_lag_point(s, i);
        kb_json_arr(j);
        kb_json_int(j, p->ts_ms);
        kb_json_int(j, p->lag);
        kb_json_arr_end(j);
    }
    kb_json_arr_end(j);
}

/* The group, or NULL with out filled (kb_console_gate). */
static kb_group *visible_group(const kb_console_api *api, const kb_console_req *rq, const char *id,
                               int8_t op, kb_console_resp *out)
{
    kb_groups *gs = kb_group_coord_groups(api->b);
    kb_group *g = gs ? kb_groups_find(gs, kp_str_from(id)) : NULL;
    return kb_console_gate(api, rq, KB_RES_GROUP, id, g != NULL, op, out) ? g : NULL;
}

void kb_console_group_show(const kb_console_api *api, const kb_console_req *rq, const char *group,
                           kb_console_resp *out)
{
    kb_group *g = visible_group(api, rq, group, KB_OP_DESCRIBE, out);
    if (g == NULL)
        return;
    kb_json j;
    kb_json_init(&j, SHOW_MAX);
    kb_json_obj(&j);
    kb_json_kstr(&j, "groupId", g->id);
    kb_json_kstr(&j, "type", group_type(g));
    kb_json_kstr(&j, "state", group_state(g));
    kb_json_kbool(&j, "empty", group_empty(g));
    kb_json_kstr(&j, "protocol",
                 is_consumer_group(g) || is_share_group(g) ? NULL : g->protocol_name);
    kb_json_kint(&j, "epoch", is_share_group(g)      ? g->sg->group_epoch
                              : is_consumer_group(g) ? g->cg->group_epoch
                                                     : g->generation);
    kb_lag_group_row lag;
    group_lag(api->b, g, &lag);
    kb_json_kint(&j, "lag", lag.lag);
    kb_json_kstr(&j, "status", kb_lag_group_status_name(lag.status));
    members(&j, api->b, g);
    offsets(&j, api->b, g);
    history(&j, kb_console_lag_series(api->lag, g));
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

typedef enum reset_to { RESET_EARLIEST, RESET_LATEST, RESET_TIMESTAMP } reset_to;

static int64_t reset_offset(ks_log *log, reset_to to, int64_t ts)
{
    int64_t off, found_ts;
    kp_errctx ctx = {0};
    if (to == RESET_EARLIEST)
        return ks_log_start_offset(log);
    if (to == RESET_TIMESTAMP && ks_log_offset_for_time(log, ts, &off, &found_ts, &ctx) == KP_ERR_NONE)
        return off;
    return ks_log_high_watermark(log);
}

typedef struct reset_plan {
    kb_offset *v;
    int32_t n;
    reset_to to;
    int64_t ts;
    int64_t now;
} reset_plan;

static bool planned(const reset_plan *pl, const kb_topic *t, int32_t p)
{
    for (int32_t k = 0; k < pl->n; k++)
        if (pl->v[k].partition == p && strcmp(pl->v[k].topic, t->name) == 0)
            return true;
    return false;
}

/* Adds every partition of t to the plan; false when the plan is full. */
static bool plan_topic(kb_broker *b, reset_plan *pl, kb_topic *t)
{
    for (int32_t p = 0; p < t->npartitions; p++) {
        ks_log *log;
        if (planned(pl, t, p) || kb_partition_log_get(b, t, p, &log) != KP_ERR_NONE)
            continue;
        if (pl->n >= RESET_MAX)
            return false;
        pl->v[pl->n++] = (kb_offset){.topic = t->name, .partition = p,
                                     .offset = reset_offset(log, pl->to, pl->ts),
                                     .leader_epoch = -1, .metadata = "", .commit_ts = pl->now,
                                     .expire_ts = -1};
    }
    return true;
}

static bool parse_target(const char *query, reset_plan *pl)
{
    char to[16];
    if (!kb_console_query(query, "to", to, sizeof(to), NULL))
        return false;
    if (strcmp(to, "earliest") == 0)
        pl->to = RESET_EARLIEST;
    else if (strcmp(to, "latest") == 0)
        pl->to = RESET_LATEST;
    else if (strcmp(to, "timestamp") == 0 && kb_console_query_long(query, "timestamp", &pl->ts))
        pl->to = RESET_TIMESTAMP;
    else
        return false;
    return true;
}

/* The topics to move: topic=t, else every topic the group has offsets for. */
static const char *plan_all(const kb_console_api *api, const kb_console_req *rq, const kb_group *g,
                            reset_plan *pl)
{
    char name[KB_TOPIC_NAME_MAX + 1];
    if (kb_console_query(rq->query, "topic", name, sizeof(name), NULL)) {
        kb_topic *t = kb_topics_find(api->b->topics, kp_str_from(name));
        if (t == NULL || !kb_console_allowed(api, rq, KB_OP_READ, KB_RES_TOPIC, name))
            return "no such topic";
        return plan_topic(api->b, pl, t) ? NULL : "too many partitions";
    }
    size_t cur = 0;
    const kb_offset *o;
    while ((o = kb_offset_map_next(&g->offsets, &cur)) != NULL) {
        kb_topic *t = kb_topics_find(api->b->topics, kp_str_from(o->topic));
        if (t == NULL || !kb_console_allowed(api, rq, KB_OP_READ, KB_RES_TOPIC, t->name))
            continue;
        if (!plan_topic(api->b, pl, t))
            return "too many partitions";
    }
    return NULL;
}

static void reset_done(kb_console_resp *out, const reset_plan *pl)
{
    kb_json j;
    kb_json_init(&j, (size_t)pl->n * 400 + 4096);
    kb_json_obj(&j);
    kb_json_key(&j, "offsets");
    kb_json_arr(&j);
    for (int32_t i = 0; i < pl->n; i++) {
        kb_json_obj(&j);
        kb_json_kstr(&j, "topic", pl->v[i].topic);
        kb_json_kint(&j, "partition", pl->v[i].partition);
        kb_json_kint(&j, "committed", pl->v[i].offset);
        kb_json_obj_end(&j);
    }
    kb_json_arr_end(&j);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

void kb_console_group_reset(const kb_console_api *api, const kb_console_req *rq, const char *group,
                            kb_console_resp *out)
{
    kb_group *g = visible_group(api, rq, group, KB_OP_READ, out);
    if (g == NULL)
        return;
    reset_plan pl = {.now = kb_console_wall_ms()};
    if (!parse_target(rq->query, &pl)) {
        kb_console_error(out, 400, "to must be earliest, latest or timestamp (with timestamp=ms)");
        return;
    }
    if (is_share_group(g)) {
        kb_console_error(out, 400, "a share group's offsets are reset with kafka-share-groups.sh --reset-offsets");
        return;
    }
    if (!group_empty(g)) {
        kb_console_error(out, 409, "the group has active members: stop them before resetting its offsets");
        return;
    }
    if ((pl.v = calloc(RESET_MAX, sizeof(*pl.v))) == NULL) {
        kb_console_error(out, 500, "out of memory");
        return;
    }
    const char *why = plan_all(api, rq, g, &pl);
    kp_err e = why == NULL && pl.n > 0 ? kb_group_coord_commit(api->b, g, pl.v, pl.n) : KP_ERR_NONE;
    if (why != NULL)
        kb_console_error(out, 400, why);
    else if (e != KP_ERR_NONE)
        kb_console_error(out, 503, kp_err_name(e));
    else
        reset_done(out, &pl);
    free(pl.v);
}
