/* Handlers for the share-group offset APIs of KIP-932 (what
 * `kafka-share-groups.sh --describe / --reset-offsets / --delete-offsets`
 * send): DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
 * DeleteShareGroupOffsets (92), over the share-partitions the group keeps
 * (kb_share_partition).
 *
 * Kafka's checks in Kafka's order: the group id (INVALID_GROUP_ID), the
 * group ACL (DESCRIBE for 90, READ for 91, DELETE for 92:
 * GROUP_AUTHORIZATION_FAILED), the coordinator, then per topic its ACL
 * (DESCRIBE for 90, READ for 91 and 92: TOPIC_AUTHORIZATION_FAILED) and
 * existence (UNKNOWN_TOPIC_OR_PARTITION). Alter and delete need a share
 * group without members (NON_EMPTY_GROUP); alter makes the group when there
 * is none, as Kafka's coordinator does.
 *
 * Lag (v1 of 90) is Kafka's: the records from the share-partition start
 * offset to the high watermark not yet acknowledged or archived; -1 for a
 * partition the group never initialized.
 *
 * Deliberate difference: a negative StartOffset in AlterShareGroupOffsets
 * is answered INVALID_REQUEST for that partition (Kafka's tools never send
 * one; Runnel's window needs a real offset). */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_partition_log.h"
#include "kb_share_coord.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"
#include "kb_topics.h"

typedef kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_group dgroup;
typedef kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_topic dtopic;
typedef kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_partition dpart;
typedef kp_describe_share_group_offsets_req_describe_share_group_offsets_request_group rgroup;

/* Kafka's message for an authorization error, else none. */
static kp_str err_text(kb_req *req, int16_t err)
{
    const char *m = kb_authz_message(err);
    return m[0] != '\0' ? kb_req_str(req, m) : KP_STR_NULL;
}

/* The coordinator answer for group id: NONE when this broker serves it. */
static int16_t coordinator(kb_req *req, kp_str id)
{
    kb_topic *t;
    int16_t e = kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, id);
    if (e == KP_ERR_NONE && kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE)
        e = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return e;
}

/* The checks before the group is looked at: its id, the group ACL (op),
 * the coordinator. */
static int16_t group_checks(kb_req *req, kp_str id, int8_t op)
{
    if (id.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    if (!kb_authz(req, op, KB_RES_GROUP, id))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    return coordinator(req, id);
}

/* A top-level error message: msg when set, else Kafka's for err. */
static kp_str top_message(kb_req *req, int16_t err, kp_str msg)
{
    return err != KP_ERR_NONE && msg.p == NULL ? err_text(req, err) : msg;
}

/* The share group id names, or the error Kafka's coordinator gives. */
static int16_t find_share_group(kb_req *req, kp_str id, kb_group **out, kp_str *msg)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), id);
    *out = g;
    if (g != NULL && g->sg != NULL)
        return KP_ERR_NONE;
    *msg = kp_str_from(g == NULL ? kp_arena_printf(&req->arena, "Group %.*s not found.", id.len,
                                                   id.p)
                                 : kp_arena_printf(&req->arena, "Group %.*s is not a share group.",
                                                   id.len, id.p));
    return KP_ERR_GROUP_ID_NOT_FOUND;
}

static int64_t high_watermark(kb_req *req, kb_topic *t, int32_t part)
{
    ks_log *log;
    if (t->state != KB_TOPIC_READY || kb_partition_log_get(req->broker, t, part, &log) != KP_ERR_NONE)
        return -1;
    return ks_log_high_watermark(log);
}

/* ---- DescribeShareGroupOffsets ------------------------------------------ */

static void describe_partition(kb_req *req, const kb_group *g, kb_topic *t, int32_t p,
                               int16_t err, dpart *out)
{
    kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_partition_defaults(
        out);
    out->partition_index = p;
    out->start_offset = -1;
    out->leader_epoch = -1;
    out->lag = -1;
    if (err == KP_ERR_NONE && (t == NULL || p < 0 || p >= t->npartitions))
        err = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    out->error_code = err;
    if (err != KP_ERR_NONE)
        return;
    out->leader_epoch = t->partitions[p].leader_epoch;
    const kb_share_part *sp = g->sg->parts != NULL ? kb_share_parts_find(g->sg->parts, &t->id, p)
                                                    : NULL;
    if (sp == NULL)
        return;
    int64_t hwm = high_watermark(req, t, p);
    out->start_offset = sp->start;
    out->lag = hwm >= 0 ? kb_share_part_lag(sp, hwm) : -1;
}

/* Every share-partition of the group, by topic (Topics null): the topics
 * the principal may DESCRIBE. */
static kp_err describe_all(kb_req *req, const kb_group *g, dgroup *out)
{
    size_t n = g->sg->parts != NULL ? kb_share_parts_count(g->sg->parts) : 0;
    kb_topic **seen = kp_arena_calloc(&req->arena, n + 1, sizeof(*seen));
    int32_t nt = 0;
    if (seen == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++) {
        const kb_share_part *sp = kb_share_parts_at(g->sg->parts, i);
        kb_topic *t = kb_topics_find_id(req->broker->topics, &sp->topic);
        bool dup = false;
        for (int32_t k = 0; k < nt && !dup; k++)
            dup = seen[k] == t;
        if (t != NULL && !dup && kb_authz_topic(req, KB_OP_DESCRIBE, t->name))
            seen[nt++] = t;
    }
    if (!KB_ARRAY_ALLOC(req, out->topics, nt))
        return KP_ERR__NOMEM;
    for (int32_t k = 0; k < nt; k++) {
        dtopic *dt = &out->topics.v[k];
        int32_t np = 0;
        for (size_t i = 0; i < n; i++)
            np += memcmp(&kb_share_parts_at(g->sg->parts, i)->topic, &seen[k]->id,
                         sizeof(kp_uuid)) == 0;
        dt->topic_name = kb_req_str(req, seen[k]->name);
        dt->topic_id = seen[k]->id;
        if (!KB_ARRAY_ALLOC(req, dt->partitions, np))
            return KP_ERR__NOMEM;
        /* in partition order */
        for (int32_t p = 0, j = 0; p < seen[k]->npartitions && j < np; p++)
            if (kb_share_parts_find(g->sg->parts, &seen[k]->id, p) != NULL)
                describe_partition(req, g, seen[k], p, KP_ERR_NONE, &dt->partitions.v[j++]);
    }
    return KP_ERR_NONE;
}

static kp_err describe_listed(kb_req *req, const kb_group *g, const rgroup *rg, dgroup *out)
{
    if (!KB_ARRAY_ALLOC(req, out->topics, rg->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rg->topics.n; i++) {
        const kp_describe_share_group_offsets_req_describe_share_group_offsets_request_topic *rt =
            &rg->topics.v[i];
        dtopic *dt = &out->topics.v[i];
        kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_topic_defaults(
            dt);
        int16_t err = kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, rt->topic_name)
                          ? KP_ERR_NONE
                          : KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        kb_topic *t = err == KP_ERR_NONE ? kb_topics_find(req->broker->topics, rt->topic_name)
                                         : NULL;
        dt->topic_name = rt->topic_name;
        if (t != NULL)
            dt->topic_id = t->id;
        int32_t np = rt->partitions.n > 0 ? rt->partitions.n : 0;
        if (!KB_ARRAY_ALLOC(req, dt->partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++)
            describe_partition(req, g, t, rt->partitions.v[j], err, &dt->partitions.v[j]);
    }
    return KP_ERR_NONE;
}

static kp_err describe_group(kb_req *req, const rgroup *rg, dgroup *out)
{
    kp_describe_share_group_offsets_resp_describe_share_group_offsets_response_group_defaults(out);
    out->group_id = rg->group_id;
    kb_group *g = NULL;
    if ((out->error_code = group_checks(req, rg->group_id, KB_OP_DESCRIBE)) == KP_ERR_NONE)
        out->error_code = find_share_group(req, rg->group_id, &g, &out->error_message);
    if (out->error_code != KP_ERR_NONE)
        return KP_ERR_NONE;
    return rg->topics.n < 0 ? describe_all(req, g, out) : describe_listed(req, g, rg, out);
}

kp_err kb_h_describe_share_group_offsets(kb_req *req, const kp_describe_share_group_offsets_req *rq,
                                         kp_describe_share_group_offsets_resp *rs)
{
    int32_t n = rq->groups.n > 0 ? rq->groups.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->groups, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_err e = describe_group(req, &rq->groups.v[i], &rs->groups.v[i]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

/* ---- AlterShareGroupOffsets --------------------------------------------- */

/* The group to alter: an empty share group, made when there is none. */
static int16_t alter_group(kb_req *req, kp_str id, kb_group **out, kp_str *msg)
{
    kb_groups *gs = kb_group_coord_groups(req->broker);
    kb_group *g = kb_groups_find(gs, id);
    if (g != NULL && g->sg == NULL)
        return find_share_group(req, id, out, msg);
    if (g == NULL) {
        if (kb_groups_get(gs, id, &g) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
        if ((g->sg = kb_share_group_new()) == NULL) {
            kb_groups_remove(gs, g);
            return KP_ERR__NOMEM;
        }
    }
    *out = g;
    if (g->sg->nmembers > 0) {
        *msg = KP_STR_LIT("The group is not empty.");
        return KP_ERR_NON_EMPTY_GROUP;
    }
    if (g->sg->parts == NULL && (g->sg->parts = kb_share_parts_new()) == NULL)
        return KP_ERR__NOMEM;
    return KP_ERR_NONE;
}

static int16_t alter_partition(kb_group *g, kb_topic *t, int16_t topic_err,
                               const kp_alter_share_group_offsets_req_alter_share_group_offsets_request_partition *rp)
{
    if (topic_err != KP_ERR_NONE)
        return topic_err;
    if (rp->partition_index < 0 || rp->partition_index >= t->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (rp->start_offset < 0)
        return KP_ERR_INVALID_REQUEST;
    kb_share_part *sp;
    if (kb_share_parts_get(g->sg->parts, &t->id, rp->partition_index, rp->start_offset, &sp) !=
        KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kb_share_part_reset(sp, rp->start_offset);
    return KP_ERR_NONE;
}

/* The topic name names, when the principal may READ it and it exists:
 * TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, else NONE. */
static int16_t readable_topic(kb_req *req, kp_str name, kb_topic **out)
{
    *out = NULL;
    if (!kb_authz(req, KB_OP_READ, KB_RES_TOPIC, name))
        return KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    kb_topic *t = kb_topics_find(req->broker->topics, name);
    if (t == NULL || t->state != KB_TOPIC_READY)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    *out = t;
    return KP_ERR_NONE;
}

static kp_err alter_topics(kb_req *req, const kp_alter_share_group_offsets_req *rq, kb_group *g,
                           int16_t group_err, kp_alter_share_group_offsets_resp *rs)
{
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->responses, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        const kp_alter_share_group_offsets_req_alter_share_group_offsets_request_topic *rt =
            &rq->topics.v[i];
        kp_alter_share_group_offsets_resp_alter_share_group_offsets_response_topic *ot =
            &rs->responses.v[i];
        kb_topic *t = NULL;
        int16_t terr = group_err != KP_ERR_NONE ? group_err : readable_topic(req, rt->topic_name, &t);
        ot->topic_name = rt->topic_name;
        if (t != NULL)
            ot->topic_id = t->id;
        int32_t np = rt->partitions.n > 0 ? rt->partitions.n : 0;
        if (!KB_ARRAY_ALLOC(req, ot->partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++) {
            int16_t e = alter_partition(g, t, terr, &rt->partitions.v[j]);
            if (e == KP_ERR__NOMEM)
                return KP_ERR__NOMEM;
            ot->partitions.v[j].partition_index = rt->partitions.v[j].partition_index;
            ot->partitions.v[j].error_code = e;
            ot->partitions.v[j].error_message = err_text(req, e);
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_alter_share_group_offsets(kb_req *req, const kp_alter_share_group_offsets_req *rq,
                                      kp_alter_share_group_offsets_resp *rs)
{
    kb_group *g = NULL;
    kp_str msg = KP_STR_NULL;
    int16_t err = group_checks(req, rq->group_id, KB_OP_READ);
    if (err == KP_ERR_NONE)
        err = alter_group(req, rq->group_id, &g, &msg);
    if (err == KP_ERR__NOMEM)
        return KP_ERR__NOMEM;
    rs->error_code = err;
    rs->error_message = top_message(req, err, msg);
    kp_err e = alter_topics(req, rq, g, err, rs);
    if (g != NULL && err == KP_ERR_NONE)
        kb_group_coord_touch(req->broker, g);
    return e;
}

/* ---- DeleteShareGroupOffsets -------------------------------------------- */

static bool has_parts(const kb_group *g, const kb_topic *t)
{
    size_t n = g->sg->parts != NULL ? kb_share_parts_count(g->sg->parts) : 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&kb_share_parts_at(g->sg->parts, i)->topic, &t->id, sizeof(kp_uuid)) == 0)
            return true;
    return false;
}

kp_err kb_h_delete_share_group_offsets(kb_req *req, const kp_delete_share_group_offsets_req *rq,
                                       kp_delete_share_group_offsets_resp *rs)
{
    kb_group *g = NULL;
    kp_str msg = KP_STR_NULL;
    int16_t err = group_checks(req, rq->group_id, KB_OP_DELETE);
    if (err == KP_ERR_NONE && (err = find_share_group(req, rq->group_id, &g, &msg)) ==
                                  KP_ERR_NONE && g->sg->nmembers > 0) {
        err = KP_ERR_NON_EMPTY_GROUP;
        msg = KP_STR_LIT("The group is not empty.");
    }
    rs->error_code = err;
    rs->error_message = top_message(req, err, msg);
    if (err != KP_ERR_NONE)
        return KP_ERR_NONE;
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->responses, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        kp_str name = rq->topics.v[i].topic_name;
        kp_delete_share_group_offsets_resp_delete_share_group_offsets_response_topic *ot =
            &rs->responses.v[i];
        kb_topic *t;
        ot->topic_name = name;
        ot->error_code = readable_topic(req, name, &t);
        if (ot->error_code == KP_ERR_NONE && !has_parts(g, t))
            ot->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        if (ot->error_code == KP_ERR_TOPIC_AUTHORIZATION_FAILED) {
            ot->error_message = err_text(req, ot->error_code);
        } else if (ot->error_code != KP_ERR_NONE) {
            ot->error_message = KP_STR_LIT("There is no offset information to delete.");
        } else {
            ot->topic_id = t->id;
            ot->error_message = KP_STR_NULL;
            if (kb_share_coord_delete_topic(req->broker, g, &t->id) != KP_ERR_NONE) {
                ot->error_code = KP_ERR_COORDINATOR_NOT_AVAILABLE;
                ot->error_message = err_text(req, ot->error_code);
            }
        }
    }
    kb_group_coord_touch(req->broker, g);
    return KP_ERR_NONE;
}
