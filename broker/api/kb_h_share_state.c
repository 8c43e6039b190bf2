/* Handlers for the share-group state persister APIs a Kafka share
 * coordinator serves to share-partition leaders (KIP-932):
 * InitializeShareGroupState (83), ReadShareGroupState (84),
 * WriteShareGroupState (85), DeleteShareGroupState (86) and
 * ReadShareGroupStateSummary (87), over the share coordinator's state
 * (kb_share_coord). Like Kafka they need CLUSTER_ACTION on the cluster
 * (else every partition answers CLUSTER_AUTHORIZATION_FAILED); an admin
 * client never sends them.
 *
 * Invariants: every partition of the request gets one answer, in request
 * order; a share-partition with no state reads as Kafka's uninitialized
 * one (start offset -1, state epoch 0, no batches). */
#include <string.h>

#include "kb_authz.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_share_coord.h"
#include "kb_topics.h"
#include "kp_err.h"

#define UNINITIALIZED_START (-1)

/* The checks every partition passes first: the wire error. */
static int16_t check_part(kb_req *req, bool allowed, kp_str group, const kp_uuid *topic,
                          int32_t partition)
{
    if (!allowed)
        return KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
    if (group.len <= 0)
        return KP_ERR_INVALID_GROUP_ID;
    if (kp_uuid_is_zero(topic) || partition < 0)
        return KP_ERR_INVALID_REQUEST;
    const kb_topic *t = kb_topics_find_id(req->broker->topics, topic);
    if (t == NULL || partition >= t->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return KP_ERR_NONE;
}

/* Kafka's message for an authorization error, else none. */
static kp_str message(kb_req *req, int16_t err)
{
    const char *m = kb_authz_message(err);
    return m[0] != '\0' ? kb_req_str(req, m) : KP_STR_NULL;
}

static int32_t count(int32_t n)
{
    return n > 0 ? n : 0;
}

kp_err kb_h_initialize_share_group_state(kb_req *req, const kp_initialize_share_group_state_req *rq,
                                         kp_initialize_share_group_state_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->results, count(rq->topics.n)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rs->results.n; i++) {
        const kp_initialize_share_group_state_req_initialize_state_data *t = &rq->topics.v[i];
        kp_initialize_share_group_state_resp_initialize_state_result *o = &rs->results.v[i];
        o->topic_id = t->topic_id;
        if (!KB_ARRAY_ALLOC(req, o->partitions, count(t->partitions.n)))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < o->partitions.n; j++) {
            const kp_initialize_share_group_state_req_partition_data *p = &t->partitions.v[j];
            int16_t e = check_part(req, allowed, rq->group_id, &t->topic_id, p->partition);
            if (e == KP_ERR_NONE)
                e = kb_share_coord_initialize(req->broker, rq->group_id, &t->topic_id,
                                              p->partition, p->state_epoch, p->start_offset);
            if (e == KP_ERR__NOMEM)
                return e;
            o->partitions.v[j] = (kp_initialize_share_group_state_resp_partition_result){
                p->partition, e, message(req, e)};
        }
    }
    return KP_ERR_NONE;
}

/* The persisted view of sp into the response's batches. */
static kp_err read_batches(kb_req *req, const kb_share_part *sp,
                           kp_read_share_group_state_resp_partition_result *o)
{
    int32_t max = (int32_t)(sp->end - sp->start) + 1;
    kb_share_state_batch *b = kp_arena_calloc(&req->arena, (size_t)max, sizeof(*b));
    int32_t n = b != NULL ? kb_share_part_batches(sp, sp->start, sp->end - 1, b, max) : -1;
    if (n < 0 || !KB_ARRAY_ALLOC(req, o->state_batches, n))
        return KP_ERR__NOMEM;
    for (int32_t k = 0; k < n; k++)
        o->state_batches.v[k] = (kp_read_share_group_state_resp_state_batch){
            b[k].first, b[k].last, b[k].state, b[k].delivery_count};
    return KP_ERR_NONE;
}

kp_err kb_h_read_share_group_state(kb_req *req, const kp_read_share_group_state_req *rq,
                                   kp_read_share_group_state_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->results, count(rq->topics.n)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rs->results.n; i++) {
        const kp_read_share_group_state_req_read_state_data *t = &rq->topics.v[i];
        kp_read_share_group_state_resp_read_state_result *o = &rs->results.v[i];
        o->topic_id = t->topic_id;
        if (!KB_ARRAY_ALLOC(req, o->partitions, count(t->partitions.n)))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < o->partitions.n; j++) {
            int32_t part = t->partitions.v[j].partition;
            kp_read_share_group_state_resp_partition_result *po = &o->partitions.v[j];
            int16_t e = check_part(req, allowed, rq->group_id, &t->topic_id, part);
            const kb_share_part *sp =
                e == KP_ERR_NONE ? kb_share_coord_find(req->broker, rq->group_id, &t->topic_id, part)
                                 : NULL;
            *po = (kp_read_share_group_state_resp_partition_result){
                part, e, message(req, e), 0, UNINITIALIZED_START, {0, NULL}};
            if (sp != NULL) {
                po->state_epoch = sp->persist.state_epoch;
                po->start_offset = sp->start;
                if (read_batches(req, sp, po) != KP_ERR_NONE)
                    return KP_ERR__NOMEM;
            }
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_write_share_group_state(kb_req *req, const kp_write_share_group_state_req *rq,
                                    kp_write_share_group_state_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->results, count(rq->topics.n)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rs->results.n; i++) {
        const kp_write_share_group_state_req_write_state_data *t = &rq->topics.v[i];
        kp_write_share_group_state_resp_write_state_result *o = &rs->results.v[i];
        o->topic_id = t->topic_id;
        if (!KB_ARRAY_ALLOC(req, o->partitions, count(t->partitions.n)))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < o->partitions.n; j++) {
            const kp_write_share_group_state_req_partition_data *p = &t->partitions.v[j];
            int32_t nb = count(p->state_batches.n);
            kb_share_state_batch *b = kp_arena_calloc(&req->arena, (size_t)nb + 1, sizeof(*b));
            if (b == NULL)
                return KP_ERR__NOMEM;
            for (int32_t k = 0; k < nb; k++)
                b[k] = (kb_share_state_batch){p->state_batches.v[k].first_offset,
                                              p->state_batches.v[k].last_offset,
                                              p->state_batches.v[k].delivery_state,
                                              p->state_batches.v[k].delivery_count};
            int16_t e = check_part(req, allowed, rq->group_id, &t->topic_id, p->partition);
            if (e == KP_ERR_NONE)
                e = kb_share_coord_write(req->broker, rq->group_id, &t->topic_id, p->partition,
                                         p->state_epoch, p->start_offset, b, nb);
            if (e == KP_ERR__NOMEM)
                return e;
            o->partitions.v[j] = (kp_write_share_group_state_resp_partition_result){
                p->partition, e, message(req, e)};
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_delete_share_group_state(kb_req *req, const kp_delete_share_group_state_req *rq,
                                     kp_delete_share_group_state_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->results, count(rq->topics.n)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rs->results.n; i++) {
        const kp_delete_share_group_state_req_delete_state_data *t = &rq->topics.v[i];
        kp_delete_share_group_state_resp_delete_state_result *o = &rs->results.v[i];
        o->topic_id = t->topic_id;
        if (!KB_ARRAY_ALLOC(req, o->partitions, count(t->partitions.n)))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < o->partitions.n; j++) {
            int32_t part = t->partitions.v[j].partition;
            int16_t e = check_part(req, allowed, rq->group_id, &t->topic_id, part);
            if (e == KP_ERR_NONE)
                e = kb_share_coord_remove(req->broker, rq->group_id, &t->topic_id, part);
            o->partitions.v[j] =
                (kp_delete_share_group_state_resp_partition_result){part, e, message(req, e)};
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_read_share_group_state_summary(kb_req *req,
                                           const kp_read_share_group_state_summary_req *rq,
                                           kp_read_share_group_state_summary_resp *rs)
{
    bool allowed = kb_authz_cluster(req, KB_OP_CLUSTER_ACTION);
    if (!KB_ARRAY_ALLOC(req, rs->results, count(rq->topics.n)))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rs->results.n; i++) {
        const kp_read_share_group_state_summary_req_read_state_summary_data *t = &rq->topics.v[i];
        kp_read_share_group_state_summary_resp_read_state_summary_result *o = &rs->results.v[i];
        o->topic_id = t->topic_id;
        if (!KB_ARRAY_ALLOC(req, o->partitions, count(t->partitions.n)))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < o->partitions.n; j++) {
            int32_t part = t->partitions.v[j].partition;
            int16_t e = check_part(req, allowed, rq->group_id, &t->topic_id, part);
            const kb_share_part *sp =
                e == KP_ERR_NONE ? kb_share_coord_find(req->broker, rq->group_id, &t->topic_id, part)
                                 : NULL;
            const kb_topic *tp = kb_topics_find_id(req->broker->topics, &t->topic_id);
            o->partitions.v[j] = (kp_read_share_group_state_summary_resp_partition_result){
                part, e, message(req, e), sp != NULL ? sp->persist.state_epoch : 0,
                sp != NULL && tp != NULL ? tp->partitions[part].leader_epoch : -1,
                sp != NULL ? sp->start : UNINITIALIZED_START,
                sp != NULL ? kb_share_part_done_count(sp) : -1};
        }
    }
    return KP_ERR_NONE;
}
