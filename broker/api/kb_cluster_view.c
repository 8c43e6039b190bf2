#include "kb_cluster_view.h"

#include <stdlib.h>
#include <string.h>

#include "kb_cluster.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_coord_load.h"
#include "kb_features.h"
#include "kb_group_coord.h"
#include "kb_offsets.h"
#include "kb_txn_coord.h"

const kb_meta_image *kb_cv_image(const kb_req *req)
{
    return kb_cluster_image(req->broker->cluster);
}

int16_t kb_cv_feature_level(const kb_req *req, const char *name)
{
    const kb_meta_image *img = kb_cv_image(req);
    if (img == NULL)
        return kb_features_level(req->broker->features, name);
    for (int i = 0; i < img->features.n; i++)
        if (strcmp(img->features.v[i].name, name) == 0)
            return img->features.v[i].level;
    return 0;
}

bool kb_cv_live(const kb_meta_image *img, int32_t id)
{
    const kb_mi_broker *b = kb_meta_image_broker(img, id);
    return b != NULL && !b->fenced;
}

static const kb_mi_endpoint *endpoint_for(const kb_req *req, const kb_mi_broker *b)
{
    const char *name = req->listener != NULL ? req->listener->li_name : NULL;
    for (int i = 0; i < b->n_endpoints; i++)
        if (name == NULL || strcmp(b->endpoints[i].listener, name) == 0)
            return &b->endpoints[i];
    return NULL;
}

bool kb_cv_endpoint(const kb_req *req, const kb_meta_image *img, int32_t id, kp_str *host,
                    int32_t *port, kp_str *rack)
{
    const kb_mi_broker *b = kb_meta_image_broker(img, id);
    const kb_mi_endpoint *e = b != NULL && !b->fenced ? endpoint_for(req, b) : NULL;
    if (e == NULL)
        return false;
    *host = kp_str_from(e->host);
    *port = e->port;
    *rack = b->rack != NULL ? kp_str_from(b->rack) : KP_STR_NULL;
    return true;
}

/* The live brokers with an endpoint for req's listener, in *n. */
static int32_t *live_brokers(kb_req *req, const kb_meta_image *img, int32_t *n)
{
    int32_t *ids = kp_arena_calloc(&req->arena, (size_t)img->brokers.n + 1, sizeof(*ids));
    *n = 0;
    for (int i = 0; ids != NULL && i < img->brokers.n; i++) {
        const kb_mi_broker *b = &img->brokers.v[i];
        if (!b->fenced && endpoint_for(req, b) != NULL)
            ids[(*n)++] = b->id;
    }
    return ids;
}

int32_t kb_cv_controller_id(const kb_req *req, const kb_meta_image *img)
{
    int32_t n = 0;
    int32_t *ids = live_brokers((kb_req *)req, img, &n);
    if (ids == NULL || n == 0)
        return -1;
    return ids[rand() % n];
}

kp_err kb_cv_metadata_brokers(kb_req *req, const kb_meta_image *img, kp_metadata_resp *rs)
{
    int32_t n = 0;
    int32_t *ids = live_brokers(req, img, &n);
    if (ids == NULL || !KB_ARRAY_ALLOC(req, rs->brokers, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_metadata_resp_metadata_response_broker *out = &rs->brokers.v[i];
        out->node_id = ids[i];
        (void)kb_cv_endpoint(req, img, ids[i], &out->host, &out->port, &out->rack);
    }
    rs->controller_id = kb_cv_controller_id(req, img);
    return KP_ERR_NONE;
}

kp_err kb_cv_describe_cluster_brokers(kb_req *req, const kb_meta_image *img,
                                      kp_describe_cluster_resp *rs)
{
    int32_t n = 0;
    int32_t *ids = live_brokers(req, img, &n);
    if (ids == NULL || !KB_ARRAY_ALLOC(req, rs->brokers, n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        kp_describe_cluster_resp_describe_cluster_broker *out = &rs->brokers.v[i];
        out->broker_id = ids[i];
        (void)kb_cv_endpoint(req, img, ids[i], &out->host, &out->port, &out->rack);
    }
    rs->controller_id = kb_cv_controller_id(req, img);
    return KP_ERR_NONE;
}

bool kb_cv_ids(kb_req *req, const kb_mi_ints *src, int32_t *n, int32_t **v)
{
    *v = kp_arena_calloc(&req->arena, (size_t)src->n + 1, sizeof(**v));
    if (*v == NULL)
        return false;
    if (src->n > 0)
        memcpy(*v, src->v, (size_t)src->n * sizeof(**v));
    *n = src->n;
    return true;
}

bool kb_cv_offline(kb_req *req, const kb_meta_image *img, const kb_mi_partition *p, int32_t *n,
                   int32_t **v)
{
    *v = kp_arena_calloc(&req->arena, (size_t)p->replicas.n + 1, sizeof(**v));
    if (*v == NULL)
        return false;
    *n = 0;
    for (int32_t i = 0; i < p->replicas.n; i++)
        if (!kb_cv_live(img, p->replicas.v[i]))
            (*v)[(*n)++] = p->replicas.v[i];
    return true;
}

int32_t kb_cv_leader(const kb_req *req, const kb_meta_image *img, const kb_mi_partition *p)
{
    kp_str host, rack;
    int32_t port;
    return p->leader >= 0 && kb_cv_endpoint(req, img, p->leader, &host, &port, &rack) ? p->leader
                                                                                     : -1;
}

static kp_err describe_partition(kb_req *req, const kb_meta_image *img, const kb_mi_partition *p,
                                 int32_t index, kp_metadata_resp_metadata_response_partition *mp)
{
    mp->partition_index = index;
    mp->leader_id = kb_cv_leader(req, img, p);
    mp->error_code = mp->leader_id >= 0 ? KP_ERR_NONE : KP_ERR_LEADER_NOT_AVAILABLE;
    mp->leader_epoch = p->leader_epoch;
    if (!kb_cv_ids(req, &p->replicas, &mp->replica_nodes.n, &mp->replica_nodes.v) ||
        !kb_cv_ids(req, &p->isr, &mp->isr_nodes.n, &mp->isr_nodes.v) ||
        !kb_cv_offline(req, img, p, &mp->offline_replicas.n, &mp->offline_replicas.v))
        return KP_ERR__NOMEM;
    return KP_ERR_NONE;
}

int32_t kb_cv_coordinator(const kb_req *req, const kb_meta_image *img, const char *topic,
                          kp_str key)
{
    const kb_mi_topic *t = kb_meta_image_topic(img, kp_str_from(topic));
    if (t == NULL || t->n_parts <= 0)
        return -1;
    const kb_mi_partition *p = &t->parts[kb_offsets_partition_for(key, t->n_parts)];
    return p->present ? kb_cv_leader(req, img, p) : -1;
}

int16_t kb_cv_check_coordinator(const kb_req *req, const char *topic, kp_str key)
{
    const kb_meta_image *img = kb_cv_image(req);
    if (img == NULL)
        return KP_ERR_NONE;
    int32_t node = kb_cv_coordinator(req, img, topic, key);
    if (node < 0)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    if (node != req->broker->node_id)
        return KP_ERR_NOT_COORDINATOR;
    /* this broker leads the partition: its coordinator may still load it */
    const kb_mi_topic *t = kb_meta_image_topic(img, kp_str_from(topic));
    int32_t p = kb_offsets_partition_for(key, t->n_parts);
    return kb_coord_parts_check(strcmp(topic, KB_TXN_COORD_STATE_TOPIC) == 0
                                    ? kb_txn_coord_parts(req->broker)
                                    : kb_group_coord_parts(req->broker),
                                p);
}

bool kb_cv_internal(const kb_mi_topic *t)
{
    return strcmp(t->name, "__consumer_offsets") == 0 ||
           strcmp(t->name, "__transaction_state") == 0 ||
           strcmp(t->name, "__share_group_state") == 0;
}

kp_err kb_cv_metadata_topic(kb_req *req, const kb_meta_image *img, const kb_mi_topic *t,
                            kp_metadata_resp_metadata_response_topic *out)
{
    out->name = kp_str_from(t->name);
    out->topic_id = t->id;
    out->is_internal = kb_cv_internal(t);
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_parts; i++)
        n += t->parts[i].present ? 1 : 0;
    if (!KB_ARRAY_ALLOC(req, out->partitions, n))
        return KP_ERR__NOMEM;
    int32_t k = 0;
    for (int32_t i = 0; i < t->n_parts; i++) {
        if (!t->parts[i].present)
            continue;
        kp_err e = describe_partition(req, img, &t->parts[i], i, &out->partitions.v[k++]);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

int16_t kb_cv_check_leader(const kb_req *req, const kp_uuid *topic_id, int32_t p,
                           int32_t *leader, int32_t *epoch)
{
    const kb_meta_image *img = kb_cv_image(req);
    if (img == NULL)
        return KP_ERR_NONE;
    const kb_mi_topic *t = kb_meta_image_topic_by_id(img, *topic_id);
    if (t == NULL || p < 0 || p >= t->n_parts || !t->parts[p].present)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (t->parts[p].leader == req->broker->node_id)
        return KP_ERR_NONE;
    *leader = t->parts[p].leader;
    *epoch = t->parts[p].leader_epoch;
    return KP_ERR_NOT_LEADER_OR_FOLLOWER;
}

kp_err kb_cv_nodes(kb_req *req, const int32_t *ids, int32_t n, kb_cv_node **out, int32_t *nout)
{
    *out = NULL;
    *nout = 0;
    const kb_meta_image *img = kb_cv_image(req);
    if (img == NULL || n <= 0)
        return KP_ERR_NONE;
    kb_cv_node *v = kp_arena_calloc(&req->arena, (size_t)n, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        bool seen = ids[i] < 0;
        for (int32_t j = 0; j < *nout && !seen; j++)
            seen = v[j].node_id == ids[i];
        if (!seen && kb_cv_endpoint(req, img, ids[i], &v[*nout].host, &v[*nout].port,
                                    &v[*nout].rack))
            v[(*nout)++].node_id = ids[i];
    }
    *out = v;
    return KP_ERR_NONE;
}
