/* Handlers for cluster metadata: ApiVersions, Metadata, DescribeCluster,
 * DescribeQuorum, UpdateFeatures, UnregisterBroker. */
#include <string.h>

#include "kb_authz.h"
#include "kb_cluster_topics.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_group_coord.h"
#include "kb_dispatch.h"
#include "kb_features.h"
#include "kb_log.h"
#include "kb_partition_dirs.h"
#include "kb_server.h"
#include "kb_topics.h"


/* Client software names and versions must match Kafka's pattern. */
static bool software_string_ok(kp_str s)
{
    if (s.len <= 0)
        return s.len == 0;
    for (int32_t i = 0; i < s.len; i++) {
        char c = s.p[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        bool inner = c == '-' || c == '.';
        if (!alnum && (!inner || i == 0 || i == s.len - 1))
            return false;
    }
    return true;
}

/* Like Kafka (KIP-1022), a v3 request is not told of supported ranges
 * starting at 0, which its clients cannot parse. */
static kp_err api_versions_supported(kb_req *req, kp_api_versions_resp *rs)
{
    const kb_feature_range *f;
    int32_t n = 0;
    for (int i = 0; (f = kb_feature_at(i)) != NULL; i++)
        n += req->api_version >= 4 || f->min > 0;
    if (!KB_ARRAY_ALLOC(req, rs->supported_features, n))
        return KP_ERR__NOMEM;
    n = 0;
    for (int i = 0; (f = kb_feature_at(i)) != NULL; i++) {
        if (req->api_version < 4 && f->min == 0)
            continue;
        rs->supported_features.v[n].name = kp_str_from(f->name);
        rs->supported_features.v[n].min_version = f->min;
        rs->supported_features.v[n].max_version = f->max;
        n++;
    }
    return KP_ERR_NONE;
}

/* Cluster mode: the levels the FeatureLevelRecords finalized (level 0 is
 * no feature), their epoch the offset of the last record applied, as a
 * Kafka broker's metadata cache answers. */
static kp_err cluster_finalized_features(kb_req *req, const kb_meta_image *img,
                                         kp_api_versions_resp *rs)
{
    int32_t n = 0;
    for (int i = 0; i < img->features.n; i++)
        n += img->features.v[i].level > 0 ? 1 : 0;
    if (!KB_ARRAY_ALLOC(req, rs->finalized_features, n))
        return KP_ERR__NOMEM;
    int32_t k = 0;
    for (int i = 0; i < img->features.n; i++) {
        const kb_mi_feature *f = &img->features.v[i];
        if (f->level <= 0)
            continue;
        rs->finalized_features.v[k].name = kp_str_from(f->name);
        rs->finalized_features.v[k].min_version_level = f->level;
        rs->finalized_features.v[k++].max_version_level = f->level;
    }
    rs->finalized_features_epoch = img->applied_offset;
    return KP_ERR_NONE;
}

static kp_err api_versions_features(kb_req *req, kp_api_versions_resp *rs)
{
    if (req->api_version < 3)
        return KP_ERR_NONE;
    if (api_versions_supported(req, rs) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    const kb_meta_image *img = kb_cv_image(req);
    if (img != NULL)
        return cluster_finalized_features(req, img, rs);
    /* One node: the levels UpdateFeatures left (kb_features); level 0 is
     * not listed, as in Kafka. */
    const kb_features *fs = req->broker->features;
    const kb_feature_range *f;
    int32_t n = 0;
    for (int i = 0; (f = kb_feature_at(i)) != NULL; i++)
        n += kb_features_level(fs, f->name) > 0;
    if (!KB_ARRAY_ALLOC(req, rs->finalized_features, n))
        return KP_ERR__NOMEM;
    rs->finalized_features_epoch = kb_features_epoch(fs);
    n = 0;
    for (int i = 0; (f = kb_feature_at(i)) != NULL; i++) {
        int16_t level = kb_features_level(fs, f->name);
        if (level == 0)
            continue;
        rs->finalized_features.v[n].name = kp_str_from(f->name);
        rs->finalized_features.v[n].min_version_level = level;
        rs->finalized_features.v[n].max_version_level = level;
        n++;
    }
    return KP_ERR_NONE;
}

/* As Kafka 4.4's ApiVersionsRequest.isValid: v5 sends a cluster id and a
 * node id together or neither; v3+ names its software. */
static bool api_versions_valid(const kb_req *req, const kp_api_versions_req *rq)
{
    if (req->api_version >= 5 && (rq->cluster_id.len >= 0) != (rq->node_id != -1))
        return false;
    return req->api_version < 3 || (software_string_ok(rq->client_software_name) &&
                                     software_string_ok(rq->client_software_version));
}

/* KIP-1242: a v5 client that names another cluster or node than this
 * broker holds stale metadata and must rebootstrap. */
static bool api_versions_stale_client(const kb_req *req, const kp_api_versions_req *rq)
{
    return req->api_version >= 5 && rq->cluster_id.len >= 0 &&
           (!kp_str_eq_c(rq->cluster_id, req->broker->cluster_id) ||
            rq->node_id != req->broker->node_id);
}

kp_err kb_h_api_versions(kb_req *req, const kp_api_versions_req *rq, kp_api_versions_resp *rs)
{
    if (!api_versions_valid(req, rq) || api_versions_stale_client(req, rq)) {
        rs->error_code = api_versions_valid(req, rq) ? KP_ERR_REBOOTSTRAP_REQUIRED
                                                     : KP_ERR_INVALID_REQUEST;
        return KP_ERR_NONE;
    }
    int n = 0;
    for (int key = 0; key <= KP_API_KEY_MAX; key++) {
        int16_t lo, hi;
        n += kb_dispatch_versions(key, &lo, &hi) ? 1 : 0;
    }
    if (!KB_ARRAY_ALLOC(req, rs->api_keys, n))
        return KP_ERR__NOMEM;
    int i = 0;
    for (int key = 0; key <= KP_API_KEY_MAX; key++) {
        int16_t lo, hi;
        if (!kb_dispatch_versions(key, &lo, &hi))
            continue;
        rs->api_keys.v[i].api_key = (int16_t)key;
        rs->api_keys.v[i].min_version = lo;
        rs->api_keys.v[i].max_version = hi;
        i++;
    }
    return api_versions_features(req, rs);
}

static kp_err describe_partitions(kb_req *req, const kb_topic *t,
                                  kp_metadata_resp_metadata_response_topic *out)
{
    int32_t node = req->broker->node_id;
    if (!KB_ARRAY_ALLOC(req, out->partitions, t->npartitions))
        return KP_ERR__NOMEM;
    for (int32_t p = 0; p < t->npartitions; p++) {
        kp_metadata_resp_metadata_response_partition *mp = &out->partitions.v[p];
        mp->partition_index = p;
        mp->leader_id = node;
        mp->leader_epoch = t->partitions[p].leader_epoch;
        if (!KB_ARRAY_ALLOC(req, mp->replica_nodes, 1) || !KB_ARRAY_ALLOC(req, mp->isr_nodes, 1))
            return KP_ERR__NOMEM;
        mp->replica_nodes.v[0] = node;
        mp->isr_nodes.v[0] = node;
        mp->offline_replicas.n = 0;
    }
    return KP_ERR_NONE;
}

static kp_err describe_topic(kb_req *req, const kp_metadata_req *rq, const kb_topic *t,
                             kp_metadata_resp_metadata_response_topic *out)
{
    out->name = kb_req_str(req, t->name);
    out->topic_id = t->id;
    out->is_internal = t->internal;
    (void)rq;
    return describe_partitions(req, t, out);
}


/* Whether Metadata may create the unknown topic name (Kafka's checks, in
 * its order): KP_ERR_NONE, or the error the topic gets instead. */
static kp_err auto_create_check(kb_req *req, const kp_metadata_req *rq, kp_str name)
{
    kb_msgbuf msg;
    kp_err e = kb_topics_check_name(name, &msg);
    if (e != KP_ERR_NONE)
        return e;
    bool allowed = req->api_version < 4 || rq->allow_auto_topic_creation;
    if (!allowed || !req->broker->cfg->auto_create_topics_enable)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (!kb_authz_create_topic(req, name))
        return KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    return KP_ERR_NONE;
}
/* Looks up one requested topic, creating it when Kafka would. */
static kp_err metadata_one(kb_req *req, const kp_metadata_req *rq,
                           const kp_metadata_req_metadata_request_topic *want,
                           kp_metadata_resp_metadata_response_topic *out)
{
    kb_broker *b = req->broker;
    /* By topic id (KIP-516), as the KIP-848 consumer asks for the topics of
     * an assignment it cannot name: the name is null or "" then. */
    if (want->name.len < 0 || (want->name.len == 0 && !kp_uuid_is_zero(&want->topic_id))) {
        kb_topic *t = kb_topics_find_id(b->topics, &want->topic_id);
        out->topic_id = want->topic_id;
        if (t == NULL) {
            out->error_code = KP_ERR_UNKNOWN_TOPIC_ID;
            return KP_ERR_NONE;
        }
        if (!kb_authz_topic(req, KB_OP_DESCRIBE, t->name)) {
            out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
            return KP_ERR_NONE;
        }
        return describe_topic(req, rq, t, out);
    }
    out->name = want->name;
    /* Not disclosed: whether a topic the principal may not DESCRIBE exists. */
    if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, want->name)) {
        out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    kb_topic *t = kb_topics_find(b->topics, want->name);
    if (t != NULL)
        return describe_topic(req, rq, t, out);
    kp_err e = auto_create_check(req, rq, want->name);
    if (e != KP_ERR_NONE) {
        out->error_code = e;
        return KP_ERR_NONE;
    }
    kb_msgbuf msg;
    if (kb_topics_busy(b->topics, want->name) != NULL) {
        out->error_code = KP_ERR_LEADER_NOT_AVAILABLE; /* being created or deleted: retry */
        return KP_ERR_NONE;
    }
    e = kb_partition_dirs_auto_create(b, want->name, b->cfg->num_partitions, &t, &msg);
    if (e != KP_ERR_NONE) {
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"auto-create failed\" topic=%.*s error=%s",
               want->name.len, want->name.p, kp_err_name(e));
        out->error_code = kp_err_to_wire(e);
        return KP_ERR_NONE;
    }
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"topic auto-created\" topic=%.*s partitions=%d",
           want->name.len, want->name.p, b->cfg->num_partitions);
    /* Kafka answers the request that creates a topic before the topic has
     * partitions, as unknown still, and the client asks again. */
    out->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return KP_ERR_NONE;
}

/* Kafka reports the cluster's operations only to a principal that may
 * DESCRIBE the cluster (0 otherwise). */
static int32_t cluster_operations(const kb_req *req)
{
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE))
        return 0;
    return kb_authz_ops(req, KB_RES_CLUSTER, KP_STR_LIT(KB_ACL_CLUSTER_NAME));
}

/* One requested topic in cluster mode: the image's, by id or by name; an
 * unknown name Metadata may create is asked of the controller
 * (kb_cluster_topics) and answered unknown meanwhile, as Kafka does. */
static kp_err cluster_topic_one(kb_req *req, const kb_meta_image *img, const kp_metadata_req *rq,
                                const kp_metadata_req_metadata_request_topic *want,
                                kp_metadata_resp_metadata_response_topic *out)
{
    bool by_id = want->name.len < 0 || (want->name.len == 0 && !kp_uuid_is_zero(&want->topic_id));
    const kb_mi_topic *t = by_id ? kb_meta_image_topic_by_id(img, want->topic_id)
                                 : kb_meta_image_topic(img, want->name);
    out->name = want->name;
    out->topic_id = want->topic_id;
    bool allowed = t != NULL ? kb_authz_topic(req, KB_OP_DESCRIBE, t->name)
                             : by_id || kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, want->name);
    if (!allowed) {
        out->error_code = KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    } else if (t == NULL && by_id) {
        out->error_code = KP_ERR_UNKNOWN_TOPIC_ID;
    } else if (t == NULL) {
        kp_err e = auto_create_check(req, rq, want->name);
        if (e == KP_ERR_NONE)
            kb_cluster_topics_auto_create(req->broker, want->name, req);
        out->error_code = e != KP_ERR_NONE ? e : KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    } else {
        return kb_cv_metadata_topic(req, img, t, out);
    }
    return KP_ERR_NONE;
}

/* The i-th topic of a listing of all (all) or the i-th requested; *listed
 * false when a listing of all leaves it out (the principal may not
 * DESCRIBE it). Cluster mode (img): the image's topics. */
static kp_err metadata_topic(kb_req *req, const kb_meta_image *img, const kp_metadata_req *rq,
                             bool all, int32_t i, kp_metadata_resp_metadata_response_topic *out,
                             bool *listed)
{
    if (img != NULL) {
        const kb_mi_topic *t = all ? img->topics.v[i] : NULL;
        *listed = t == NULL || kb_authz_topic(req, KB_OP_DESCRIBE, t->name);
        if (!*listed)
            return KP_ERR_NONE;
        return t != NULL ? kb_cv_metadata_topic(req, img, t, out)
                         : cluster_topic_one(req, img, rq, &rq->topics.v[i], out);
    }
    const kb_topic *t = all ? kb_topics_at(req->broker->topics, (size_t)i) : NULL;
    *listed = t == NULL || kb_authz_topic(req, KB_OP_DESCRIBE, t->name);
    if (!*listed)
        return KP_ERR_NONE;
    return t != NULL ? describe_topic(req, rq, t, out)
                     : metadata_one(req, rq, &rq->topics.v[i], out);
}

/* The brokers: this one alone, or in cluster mode every live one. */
static kp_err metadata_brokers(kb_req *req, const kb_meta_image *img, kp_metadata_resp *rs)
{
    if (img != NULL)
        return kb_cv_metadata_brokers(req, img, rs);
    kb_broker *b = req->broker;
    if (!KB_ARRAY_ALLOC(req, rs->brokers, 1))
        return KP_ERR__NOMEM;
    rs->brokers.v[0].node_id = b->node_id;
    rs->brokers.v[0].rack = KP_STR_NULL;
    kb_server_advertised(req, &rs->brokers.v[0].host, &rs->brokers.v[0].port);
    rs->controller_id = b->node_id;
    return KP_ERR_NONE;
}

kp_err kb_h_metadata(kb_req *req, const kp_metadata_req *rq, kp_metadata_resp *rs)
{
    kb_broker *b = req->broker;
    const kb_meta_image *img = kb_cv_image(req);
    kp_err e = metadata_brokers(req, img, rs);
    if (e != KP_ERR_NONE)
        return e;
    rs->cluster_id = kb_req_str(req, b->cluster_id);
    if (rq->include_cluster_authorized_operations)
        rs->cluster_authorized_operations = cluster_operations(req);

    /* v0: an empty list means every topic; v1+: null means every topic. */
    bool all = rq->topics.n < 0 || (req->api_version == 0 && rq->topics.n == 0);
    int32_t n = !all ? rq->topics.n : img != NULL ? img->topics.n
                                                  : (int32_t)kb_topics_count(b->topics);
    if (!KB_ARRAY_ALLOC(req, rs->topics, n))
        return KP_ERR__NOMEM;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        kp_metadata_resp_metadata_response_topic *out = &rs->topics.v[k];
        kp_metadata_resp_metadata_response_topic_defaults(out);
        bool listed;
        if ((e = metadata_topic(req, img, rq, all, i, out, &listed)) != KP_ERR_NONE)
            return e;
        if (!listed)
            continue;
        k++;
        /* Every operation the principal may do, error or not (as Kafka), but
         * nothing for a topic it may not see. */
        if (rq->include_topic_authorized_operations &&
            out->error_code != KP_ERR_TOPIC_AUTHORIZATION_FAILED)
            out->topic_authorized_operations = kb_authz_ops(req, KB_RES_TOPIC, out->name);
    }
    rs->topics.n = k;
    return KP_ERR_NONE;
}

kp_err kb_h_describe_cluster(kb_req *req, const kp_describe_cluster_req *rq,
                             kp_describe_cluster_resp *rs)
{
    kb_broker *b = req->broker;
    rs->endpoint_type = 1;
    if (req->api_version >= 1 && rq->endpoint_type != 1) {
        rs->error_code = KP_ERR_MISMATCHED_ENDPOINT_TYPE;
        rs->error_message = KP_STR_LIT("The request was sent to an endpoint of type BROKER, but we "
                                       "wanted an endpoint of type CONTROLLER");
        return KP_ERR_NONE;
    }
    rs->cluster_id = kb_req_str(req, b->cluster_id);
    rs->controller_id = b->node_id;
    if (rq->include_cluster_authorized_operations)
        rs->cluster_authorized_operations = cluster_operations(req);
    const kb_meta_image *img = kb_cv_image(req);
    if (img != NULL)
        return kb_cv_describe_cluster_brokers(req, img, rs);
    if (!KB_ARRAY_ALLOC(req, rs->brokers, 1))
        return KP_ERR__NOMEM;
    rs->brokers.v[0].broker_id = b->node_id;
    rs->brokers.v[0].rack = KP_STR_NULL;
    kb_server_advertised(req, &rs->brokers.v[0].host, &rs->brokers.v[0].port);
    return KP_ERR_NONE;
}

/* The metadata quorum as a single-node KRaft cluster would describe itself:
 * this node is the one voter and the leader, caught up now. Runnel keeps no
 * metadata log, so the high watermark and the voter's log end offset are 0.
 * As in Kafka, anything but exactly one topic __cluster_metadata with
 * exactly partition 0 gets UNKNOWN_TOPIC_OR_PARTITION on every partition
 * asked for, with leader and epoch 0. */
#define QUORUM_TOPIC "__cluster_metadata"

static bool quorum_request_valid(const kp_describe_quorum_req *rq)
{
    return rq->topics.n == 1 && kp_str_eq_c(rq->topics.v[0].topic_name, QUORUM_TOPIC) &&
           rq->topics.v[0].partitions.n == 1 &&
           rq->topics.v[0].partitions.v[0].partition_index == 0;
}

static kp_err quorum_voter(kb_req *req, kp_describe_quorum_resp_partition_data *p)
{
    if (!KB_ARRAY_ALLOC(req, p->current_voters, 1))
        return KP_ERR__NOMEM;
    kp_describe_quorum_resp_replica_state *v = &p->current_voters.v[0];
    kp_describe_quorum_resp_replica_state_defaults(v);
    v->replica_id = req->broker->node_id;
    v->log_end_offset = 0;
    v->last_fetch_timestamp = v->last_caught_up_timestamp = kb_group_coord_wall(req->broker);
    p->leader_id = req->broker->node_id;
    p->leader_epoch = 1;
    p->high_watermark = 0;
    return KP_ERR_NONE;
}

static kp_err quorum_nodes(kb_req *req, kp_describe_quorum_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->nodes, 1))
        return KP_ERR__NOMEM;
    kp_describe_quorum_resp_node *n = &rs->nodes.v[0];
    n->node_id = req->broker->node_id;
    if (!KB_ARRAY_ALLOC(req, n->listeners, 1))
        return KP_ERR__NOMEM;
    kp_describe_quorum_resp_listener *l = &n->listeners.v[0];
    int32_t port;
    l->name = kb_req_str(req, req->listener->li_name);
    kb_server_advertised(req, &l->host, &port);
    l->port = (uint16_t)port;
    return KP_ERR_NONE;
}

kp_err kb_h_describe_quorum(kb_req *req, const kp_describe_quorum_req *rq,
                            kp_describe_quorum_resp *rs)
{
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    bool valid = quorum_request_valid(rq); /* error messages stay "", as Kafka sends them */
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->topics, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        const kp_describe_quorum_req_topic_data *in = &rq->topics.v[i];
        kp_describe_quorum_resp_topic_data *out = &rs->topics.v[i];
        out->topic_name = in->topic_name;
        int32_t np = in->partitions.n > 0 ? in->partitions.n : 0;
        if (!KB_ARRAY_ALLOC(req, out->partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++) {
            kp_describe_quorum_resp_partition_data *p = &out->partitions.v[j];
            kp_describe_quorum_resp_partition_data_defaults(p);
            p->partition_index = in->partitions.v[j].partition_index;
            if (valid) {
                kp_err e = quorum_voter(req, p);
                if (e != KP_ERR_NONE)
                    return e;
                continue;
            }
            p->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            p->error_message = KP_STR_LIT("This server does not host this topic-partition.");
        }
    }
    return valid ? quorum_nodes(req, rs) : KP_ERR_NONE;
}

/* ---- UpdateFeatures -------------------------------------------------------- */

/* One node: the levels kb_features finalizes, refused and answered as
 * Kafka 4.4's controller does (in cluster mode the request goes to the
 * controller, kb_forward). v0 and v1 list each update's result: every
 * update "NONE" on success, none at all when the request failed. */
kp_err kb_h_update_features(kb_req *req, const kp_update_features_req *rq,
                            kp_update_features_resp *rs)
{
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = KP_STR_LIT("Cluster authorization failed.");
        return KB_ARRAY_ALLOC(req, rs->results, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    int32_t n = rq->feature_updates.n > 0 ? rq->feature_updates.n : 0;
    kb_feature_update *u = kp_arena_calloc(&req->arena, (size_t)n + 1, sizeof(*u));
    if (u == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        const kp_update_features_req_feature_update_key *in = &rq->feature_updates.v[i];
        u[i].name = in->feature;
        u[i].level = in->max_version_level;
        /* Kafka 4.4 reads v0's AllowDowngrade as no downgrade at all */
        u[i].type = req->api_version == 0 ? KB_FEATURE_UPGRADE : in->upgrade_type;
    }
    kb_msgbuf msg = {{0}};
    kp_err e = kb_features_update(req->broker->features, u, n, rq->validate_only,
                                  req->broker->node_id, &msg);
    if (e == KP_ERR__NOMEM)
        return e;
    rs->error_code = (int16_t)e;
    if (e != KP_ERR_NONE) {
        rs->error_message = kb_req_str(req, msg.text);
        return KB_ARRAY_ALLOC(req, rs->results, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    rs->error_message = KP_STR_NULL;
    if (!KB_ARRAY_ALLOC(req, rs->results, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        rs->results.v[i].feature = u[i].name;
        rs->results.v[i].error_message = KP_STR_LIT("NONE");
    }
    return KP_ERR_NONE;
}

/* ---- UnregisterBroker -------------------------------------------------------- */

/* One node answers as a Kafka 4.4.0 combined node's controller does: only
 * this node is registered, so any other id is BROKER_ID_NOT_REGISTERED
 * with the controller's message; this node's own id is accepted (a combined
 * node unregistered this way registers again with its next heartbeat, so
 * there is nothing to undo here). In cluster mode the request goes to the
 * controller (kb_forward). */
kp_err kb_h_unregister_broker(kb_req *req, const kp_unregister_broker_req *rq,
                              kp_unregister_broker_resp *rs)
{
    rs->error_message = KP_STR_NULL;
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = kb_cstr(kb_authz_message(rs->error_code));
        return KP_ERR_NONE;
    }
    if (rq->broker_id == req->broker->node_id) {
        rs->error_message = KP_STR_LIT(""); /* Kafka's controller answers "", not null */
        return KP_ERR_NONE;
    }
    rs->error_code = KP_ERR_BROKER_ID_NOT_REGISTERED;
    const char *msg = kp_arena_printf(&req->arena, "Broker ID %d is not currently registered",
                                      rq->broker_id);
    rs->error_message = msg != NULL ? kb_req_str(req, msg) : KP_STR_NULL;
    return KP_ERR_NONE;
}
