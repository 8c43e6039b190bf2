/* Handlers for partition administration as a single node answers it:
 * DescribeLogDirs, ElectLeaders, AlterPartitionReassignments,
 * ListPartitionReassignments, DescribeProducers, DescribeTopicPartitions.
 * This node leads every partition with itself as the only replica, so
 * elections are never needed and a reassignment can only name this node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_admin.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_producer_state.h"
#include "kb_partition_log.h"
#include "kb_partition_txn.h"
#include "kb_topics.h"

/* The topic and partition a request names, or UNKNOWN_TOPIC_OR_PARTITION. */
static int16_t find_partition(kb_req *req, kp_str name, int32_t p, kb_topic **t)
{
    *t = kb_topics_find(req->broker->topics, name);
    if (*t == NULL || p < 0 || p >= (*t)->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return KP_ERR_NONE;
}

/* ---- DescribeLogDirs --------------------------------------------------------- */

typedef kp_describe_log_dirs_resp_describe_log_dirs_topic dir_topic;

static kp_err describe_topic_dir(kb_req *req, kb_topic *t, const int32_t *parts, int32_t n,
                                 dir_topic *out)
{
    out->name = kb_req_str(req, t->name);
    if (!KB_ARRAY_ALLOC(req, out->partitions, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t p = parts != NULL ? parts[i] : i;
        ks_log *log;
        if (p < 0 || p >= t->npartitions ||
            kb_partition_log_get(req->broker, t, p, &log) != KP_ERR_NONE)
            continue; /* Kafka leaves out what it does not host */
        kp_describe_log_dirs_resp_describe_log_dirs_partition *o = &out->partitions.v[used++];
        o->partition_index = p;
        o->partition_size = ks_log_size(log);
        o->offset_lag = 0;
        o->is_future_key = false;
    }
    out->partitions.n = used;
    return KP_ERR_NONE;
}

static void fill_dir_space(kb_req *req, kp_describe_log_dirs_resp_describe_log_dirs_result *r)
{
    const char *dir = kb_admin_dir(req->broker);
    struct statvfs sv;
    r->log_dir = kb_req_str(req, dir);
    if (statvfs(dir, &sv) == 0) {
        r->total_bytes = (int64_t)sv.f_blocks * (int64_t)sv.f_frsize;
        r->usable_bytes = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
    }
}

kp_err kb_h_describe_log_dirs(kb_req *req, const kp_describe_log_dirs_req *rq,
                              kp_describe_log_dirs_resp *rs)
{
    kb_topics *ts = req->broker->topics;
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return KB_ARRAY_ALLOC(req, rs->results, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    if (!KB_ARRAY_ALLOC(req, rs->results, 1))
        return KP_ERR__NOMEM;
    kp_describe_log_dirs_resp_describe_log_dirs_result *r = &rs->results.v[0];
    kp_describe_log_dirs_resp_describe_log_dirs_result_defaults(r);
    fill_dir_space(req, r);
    bool all = rq->topics.n < 0;
    size_t n = all ? kb_topics_count(ts) : (size_t)rq->topics.n;
    if (!KB_ARRAY_ALLOC(req, r->topics, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < n; i++) {
        kb_topic *t = all ? kb_topics_at(ts, i) : kb_topics_find(ts, rq->topics.v[i].topic);
        if (t == NULL)
            continue;
        const int32_t *parts = all ? NULL : rq->topics.v[i].partitions.v;
        int32_t np = all ? t->npartitions : rq->topics.v[i].partitions.n;
        if (describe_topic_dir(req, t, parts, np, &r->topics.v[used++]) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    r->topics.n = used;
    return KP_ERR_NONE;
}

/* ---- ElectLeaders ------------------------------------------------------------ */

/* Kafka's controller's words for one partition: no such topic, no such
 * partition, or (this node leads it already) no election needed. */
static kp_str election_message(kb_req *req, kp_str topic, int32_t partition, const kb_topic *t)
{
    const char *msg, *name = topic.len > 0 ? topic.p : "";
    int len = topic.len > 0 ? (int)topic.len : 0;
    if (t == NULL)
        msg = kp_arena_printf(&req->arena, "No such topic as %.*s", len, name);
    else if (partition < 0 || partition >= t->npartitions)
        msg = kp_arena_printf(&req->arena, "No such partition as %.*s-%d", len, name, partition);
    else
        msg = "Leader election not needed for topic partition.";
    return msg != NULL ? kb_req_str(req, msg) : KP_STR_NULL;
}

kp_err kb_h_elect_leaders(kb_req *req, const kp_elect_leaders_req *rq, kp_elect_leaders_resp *rs)
{
    /* All partitions (null): nothing needs an election, and Kafka lists
     * only the partitions it elected. */
    int32_t n = rq->topic_partitions.n < 0 ? 0 : rq->topic_partitions.n;
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return KB_ARRAY_ALLOC(req, rs->replica_election_results, 0) ? KP_ERR_NONE
                                                                     : KP_ERR__NOMEM;
    }
    if (!KB_ARRAY_ALLOC(req, rs->replica_election_results, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        const kp_elect_leaders_req_topic_partitions *tp = &rq->topic_partitions.v[i];
        kp_elect_leaders_resp_replica_election_result *out = &rs->replica_election_results.v[i];
        out->topic = tp->topic;
        if (!KB_ARRAY_ALLOC(req, out->partition_result, tp->partitions.n))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < tp->partitions.n; j++) {
            kp_elect_leaders_resp_partition_result *pr = &out->partition_result.v[j];
            kb_topic *t;
            pr->partition_id = tp->partitions.v[j];
            pr->error_code = find_partition(req, tp->topic, pr->partition_id, &t);
            pr->error_message = election_message(req, tp->topic, pr->partition_id, t);
            if (pr->error_code == KP_ERR_NONE)
                pr->error_code = KP_ERR_ELECTION_NOT_NEEDED;
        }
    }
    return KP_ERR_NONE;
}

/* ---- reassignments --------------------------------------------------------------- */

typedef kp_alter_partition_reassignments_req_reassignable_partition reassign_part;

static int16_t check_reassignment(kb_req *req, const reassign_part *p, kp_str *msg)
{
    if (p->replicas.n < 0) {
        *msg = kb_req_str(req, "No ongoing reassignment for this partition.");
        return KP_ERR_NO_REASSIGNMENT_IN_PROGRESS;
    }
    if (p->replicas.n == 0) {
        *msg = kb_req_str(req, "The manual partition assignment includes an empty replica list.");
        return KP_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    for (int32_t i = 0; i < p->replicas.n; i++) {
        if (p->replicas.v[i] != req->broker->node_id) {
            *msg = kb_req_str(req, kp_arena_printf(&req->arena,
                                                   "The manual partition assignment includes "
                                                   "broker %d, but no such broker is registered.",
                                                   p->replicas.v[i]));
            return KP_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
        for (int32_t k = 0; k < i; k++)
            if (p->replicas.v[k] == p->replicas.v[i]) {
                *msg = kb_req_str(req, "The manual partition assignment includes a duplicate "
                                       "replica.");
                return KP_ERR_INVALID_REPLICA_ASSIGNMENT;
            }
    }
    return KP_ERR_NONE; /* already in place: done at once */
}

kp_err kb_h_alter_partition_reassignments(kb_req *req,
                                          const kp_alter_partition_reassignments_req *rq,
                                          kp_alter_partition_reassignments_resp *rs)
{
    /* v1 (KIP-860): the answer echoes the flag, so a client sees it was
     * understood. Every valid target here is this node alone, the replica
     * set a single node's partitions already have, so the replication factor
     * never changes and the flag refuses nothing (in cluster mode the request
     * goes to the controller, which applies it). */
    rs->allow_replication_factor_change = rq->allow_replication_factor_change;
    rs->error_message = KP_STR_NULL; /* Kafka's controller answers null, not "" */
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = kb_cstr(kb_authz_message(rs->error_code));
        return KB_ARRAY_ALLOC(req, rs->responses, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    if (!KB_ARRAY_ALLOC(req, rs->responses, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_alter_partition_reassignments_req_reassignable_topic *tt = &rq->topics.v[i];
        kp_alter_partition_reassignments_resp_reassignable_topic_response *out =
            &rs->responses.v[i];
        out->name = tt->name;
        if (!KB_ARRAY_ALLOC(req, out->partitions, tt->partitions.n))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < tt->partitions.n; j++) {
            const reassign_part *p = &tt->partitions.v[j];
            kp_alter_partition_reassignments_resp_reassignable_partition_response *pr =
                &out->partitions.v[j];
            kb_topic *t;
            pr->partition_index = p->partition_index;
            pr->error_message = KP_STR_NULL;
            pr->error_code = find_partition(req, tt->name, p->partition_index, &t);
            if (pr->error_code == KP_ERR_NONE)
                pr->error_code = check_reassignment(req, p, &pr->error_message);
        }
    }
    return KP_ERR_NONE;
}

kp_err kb_h_list_partition_reassignments(kb_req *req,
                                         const kp_list_partition_reassignments_req *rq,
                                         kp_list_partition_reassignments_resp *rs)
{
    (void)rq;
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = kb_cstr(kb_authz_message(rs->error_code));
    }
    /* Reassignments complete as they are made: none is ever ongoing. */
    return KB_ARRAY_ALLOC(req, rs->topics, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
}

/* ---- DescribeProducers -------------------------------------------------------------- */

typedef kp_describe_producers_resp_partition_response producers_out;

static kp_err describe_partition_producers(kb_req *req, kp_str topic, producers_out *out)
{
    kb_topic *t;
    ks_log *log;
    out->error_code = find_partition(req, topic, out->partition_index, &t);
    if (out->error_code == KP_ERR_NONE) {
        kp_err e = kb_partition_log_get(req->broker, t, out->partition_index, &log);
        out->error_code = kp_err_to_wire(e);
    }
    if (out->error_code != KP_ERR_NONE)
        return KB_ARRAY_ALLOC(req, out->active_producers, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    kb_producer_state *ps = t->partitions[out->partition_index].pids;
    int32_t n = ps != NULL ? kb_producer_state_count(ps) : 0;
    if (!KB_ARRAY_ALLOC(req, out->active_producers, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        kp_describe_producers_resp_producer_state *s = &out->active_producers.v[used];
        kb_pid_info info;
        if (!kb_producer_state_at(ps, i, &info))
            continue;
        s->producer_id = info.producer_id;
        s->producer_epoch = info.epoch;
        s->last_sequence = info.last_seq;
        s->last_timestamp = info.last_timestamp;
        s->coordinator_epoch = info.coordinator_epoch;
        int64_t txn_start;
        s->current_txn_start_offset =
            kb_partition_txn_open(kb_producer_state_txns(ps), s->producer_id, &txn_start) ? txn_start : -1;
        used++;
    }
    out->active_producers.n = used;
    return KP_ERR_NONE;
}

kp_err kb_h_describe_producers(kb_req *req, const kp_describe_producers_req *rq,
                               kp_describe_producers_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->topics, rq->topics.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_describe_producers_req_topic_request *tr = &rq->topics.v[i];
        kp_describe_producers_resp_topic_response *out = &rs->topics.v[i];
        out->name = tr->name;
        if (!KB_ARRAY_ALLOC(req, out->partitions, tr->partition_indexes.n))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < tr->partition_indexes.n; j++) {
            producers_out *po = &out->partitions.v[j];
            kp_describe_producers_resp_partition_response_defaults(po);
            po->partition_index = tr->partition_indexes.v[j];
            if (!kb_authz(req, KB_OP_READ, KB_RES_TOPIC, tr->name)) {
                po->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
                if (!KB_ARRAY_ALLOC(req, po->active_producers, 0))
                    return KP_ERR__NOMEM;
                continue;
            }
            if (describe_partition_producers(req, tr->name, po) != KP_ERR_NONE)
                return KP_ERR__NOMEM;
        }
    }
    return KP_ERR_NONE;
}

/* ---- DescribeTopicPartitions ------------------------------------------------------------ */

typedef kp_describe_topic_partitions_resp_describe_topic_partitions_response_topic dtp_topic;
typedef kp_describe_topic_partitions_resp_describe_topic_partitions_response_partition dtp_part;

/* Kafka's ceiling on response_partition_limit (max.request.partition.size.limit). */
#define DTP_MAX_PARTITIONS 2000

static int name_cmp(const void *a, const void *b)
{
    const kp_str *x = a, *y = b;
    int32_t n = x->len < y->len ? x->len : y->len;
    int c = n > 0 ? memcmp(x->p, y->p, (size_t)n) : 0;
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* The topic names to describe, sorted: those requested, or every topic. */
static kp_str *dtp_names(kb_req *req, const kp_describe_topic_partitions_req *rq, int32_t *n)
{
    kb_topics *ts = req->broker->topics;
    const kb_meta_image *img = kb_cv_image(req); /* cluster mode: the cluster's topics */
    int32_t all = img != NULL ? img->topics.n : (int32_t)kb_topics_count(ts);
    *n = rq->topics.n > 0 ? rq->topics.n : all;
    kp_str *names = kp_arena_calloc(&req->arena, (size_t)*n + 1, sizeof(*names));
    if (names == NULL)
        return NULL;
    for (int32_t i = 0; i < *n; i++)
        names[i] = rq->topics.n > 0 ? rq->topics.v[i].name
                   : img != NULL    ? kp_str_from(img->topics.v[i]->name)
                                    : kb_req_str(req, kb_topics_at(ts, (size_t)i)->name);
    qsort(names, (size_t)*n, sizeof(*names), name_cmp);
    return names;
}

static kp_err dtp_fill_partitions(kb_req *req, const kb_topic *t, int32_t first, int32_t count,
                                  dtp_topic *out)
{
    if (!KB_ARRAY_ALLOC(req, out->partitions, count))
        return KP_ERR__NOMEM;
    int32_t *self = kp_arena_calloc(&req->arena, 1, sizeof(*self));
    if (self == NULL)
        return KP_ERR__NOMEM;
    *self = req->broker->node_id;
    for (int32_t i = 0; i < count; i++) {
        dtp_part *p = &out->partitions.v[i];
        kp_describe_topic_partitions_resp_describe_topic_partitions_response_partition_defaults(p);
        p->partition_index = first + i;
        p->leader_id = *self;
        p->leader_epoch = t->partitions[first + i].leader_epoch;
        p->replica_nodes.n = p->isr_nodes.n = 1;
        p->replica_nodes.v = p->isr_nodes.v = self;
        p->eligible_leader_replicas.n = p->last_known_elr.n = p->offline_replicas.n = 0;
    }
    return KP_ERR_NONE;
}

/* Cluster mode: the partitions as the image describes them. */
static kp_err dtp_fill_cluster(kb_req *req, const kb_meta_image *img, const kb_mi_topic *t,
                               int32_t first, int32_t count, dtp_topic *out)
{
    if (!KB_ARRAY_ALLOC(req, out->partitions, count))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < count; i++) {
        dtp_part *p = &out->partitions.v[i];
        const kb_mi_partition *mp = &t->parts[first + i];
        kp_describe_topic_partitions_resp_describe_topic_partitions_response_partition_defaults(p);
        p->partition_index = first + i;
        p->leader_id = kb_cv_leader(req, img, mp);
        p->error_code = p->leader_id >= 0 ? KP_ERR_NONE : KP_ERR_LEADER_NOT_AVAILABLE;
        p->leader_epoch = mp->leader_epoch;
        if (!kb_cv_ids(req, &mp->replicas, &p->replica_nodes.n, &p->replica_nodes.v) ||
            !kb_cv_ids(req, &mp->isr, &p->isr_nodes.n, &p->isr_nodes.v) ||
            !kb_cv_ids(req, &mp->elr, &p->eligible_leader_replicas.n,
                       &p->eligible_leader_replicas.v) ||
            !kb_cv_ids(req, &mp->last_known_elr, &p->last_known_elr.n, &p->last_known_elr.v) ||
            !kb_cv_offline(req, img, mp, &p->offline_replicas.n, &p->offline_replicas.v))
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

/* One topic to describe: the local registry's, or the image's in cluster
 * mode. */
typedef struct dtp_src {
    const kb_topic *local;
    const kb_mi_topic *cluster;
    kp_uuid id;
    bool internal;
    int32_t npartitions;
} dtp_src;

static bool dtp_find(kb_req *req, kp_str name, dtp_src *s)
{
    const kb_meta_image *img = kb_cv_image(req);
    memset(s, 0, sizeof(*s));
    if (img != NULL) {
        s->cluster = kb_meta_image_topic(img, name);
        if (s->cluster == NULL)
            return false;
        s->id = s->cluster->id;
        s->internal = kb_cv_internal(s->cluster);
        s->npartitions = s->cluster->n_parts;
        return true;
    }
    s->local = kb_topics_find(req->broker->topics, name);
    if (s->local == NULL)
        return false;
    s->id = s->local->id;
    s->internal = s->local->internal;
    s->npartitions = s->local->npartitions;
    return true;
}

static bool set_cursor(kb_req *req, kp_describe_topic_partitions_resp *rs, kp_str topic,
                       int32_t partition)
{
    rs->next_cursor = kp_arena_calloc(&req->arena, 1, sizeof(*rs->next_cursor));
    if (rs->next_cursor == NULL)
        return false;
    rs->next_cursor->topic_name = topic;
    rs->next_cursor->partition_index = partition;
    return true;
}

kp_err kb_h_describe_topic_partitions(kb_req *req, const kp_describe_topic_partitions_req *rq,
                                      kp_describe_topic_partitions_resp *rs)
{
    int32_t n, used = 0;
    kp_str *names = dtp_names(req, rq, &n);
    if (names == NULL || !KB_ARRAY_ALLOC(req, rs->topics, n))
        return KP_ERR__NOMEM;
    int32_t budget = rq->response_partition_limit;
    if (budget <= 0 || budget > DTP_MAX_PARTITIONS)
        budget = DTP_MAX_PARTITIONS;
    rs->next_cursor = NULL;
    for (int32_t i = 0; i < n; i++) {
        int32_t first = 0;
        if (rq->cursor != NULL) {
            int c = name_cmp(&names[i], &rq->cursor->topic_name);
            if (c < 0)
                continue;
            first = c == 0 && rq->cursor->partition_index > 0 ? rq->cursor->partition_index : 0;
        }
        /* Kafka: unauthorized topics are left out of a listing of all,
         * TOPIC_AUTHORIZATION_FAILED when named. */
        bool denied = !kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, names[i]);
        if (denied && rq->topics.n <= 0)
            continue;
        dtp_src src;
        bool found = !denied && dtp_find(req, names[i], &src);
        if (found && budget == 0) {
            rs->topics.n = used;
            return set_cursor(req, rs, names[i], first) ? KP_ERR_NONE : KP_ERR__NOMEM;
        }
        dtp_topic *out = &rs->topics.v[used++];
        kp_describe_topic_partitions_resp_describe_topic_partitions_response_topic_defaults(out);
        out->name = names[i];
        if (!found) {
            out->error_code =
                denied ? KP_ERR_TOPIC_AUTHORIZATION_FAILED : KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            out->partitions.n = 0;
            continue;
        }
        out->topic_id = src.id;
        out->is_internal = src.internal;
        int32_t count = src.npartitions - first < budget ? src.npartitions - first : budget;
        if (count < 0)
            count = 0;
        kp_err e = src.cluster != NULL
                       ? dtp_fill_cluster(req, kb_cv_image(req), src.cluster, first, count, out)
                       : dtp_fill_partitions(req, src.local, first, count, out);
        if (e != KP_ERR_NONE)
            return KP_ERR__NOMEM;
        budget -= count;
        if (first + count < src.npartitions) {
            rs->topics.n = used;
            return set_cursor(req, rs, names[i], first + count) ? KP_ERR_NONE : KP_ERR__NOMEM;
        }
    }
    rs->topics.n = used;
    return KP_ERR_NONE;
}
