#include "kb_interbroker.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_config.h"
#include "kb_log.h"
#include "kb_meta_image.h"
#include "kp_msg.h"

#define MARKERS_VERSION 1 /* flexible; v2 only adds the transaction version */
#define ALLOC_PIDS_VERSION 0

typedef struct peer {
    int32_t node; /* -1: free slot */
    char host[256];
    uint16_t port;
    kb_ctrl_conn *conn;
} peer;

struct kb_ib {
    kb_broker *b;
    kb_quorum *q;
    const kb_meta_image *img; /* the cluster's, borrowed */
    int64_t (*broker_epoch)(void *);
    void *epoch_arg;
    peer peers[KB_IB_MAX_PEERS];
    kb_ctrl_conn *ctrl; /* to the active controller */
    int ctrl_target;    /* quorum index ctrl talks to, -1: none */
    bool pids_in_flight;
    kb_hook_pids_done *pids_done;
    kb_cluster_hooks hooks;
};

/* The hooks are installed only from an ib (kb_ib_new), so they lead back to it. */
static kb_ib *the_ib(kb_broker *b)
{
    return (kb_ib *)(void *)((char *)b->hooks - offsetof(kb_ib, hooks));
}

/* The endpoint of node on the inter-broker listener, as it registered. */
static const kb_mi_endpoint *endpoint_of(kb_ib *ib, int32_t node)
{
    const kb_mi_broker *br = kb_meta_image_broker(ib->img, node);
    if (br == NULL || br->fenced)
        return NULL;
    const char *want = ib->b->cfg->inter_broker_listener_name;
    for (int i = 0; i < br->n_endpoints; i++)
        if (want == NULL || strcmp(br->endpoints[i].listener, want) == 0)
            return &br->endpoints[i];
    return NULL;
}

static peer *peer_for(kb_ib *ib, int32_t node)
{
    peer *free_slot = NULL;
    for (int i = 0; i < KB_IB_MAX_PEERS; i++) {
        if (ib->peers[i].node == node)
            return &ib->peers[i];
        if (ib->peers[i].node < 0 && free_slot == NULL)
            free_slot = &ib->peers[i];
    }
    if (free_slot == NULL)
        return NULL;
    char client_id[64];
    snprintf(client_id, sizeof client_id, "runnel-broker-%d-interbroker", ib->b->node_id);
    free_slot->conn = kb_ctrl_conn_new(ib->b->loop, ib->b->work, client_id);
    if (free_slot->conn == NULL)
        return NULL;
    free_slot->node = node;
    free_slot->host[0] = '\0';
    return free_slot;
}

kp_err kb_ib_send(kb_ib *ib, int32_t node, int16_t api_key, int16_t version,
                  kb_ctrl_encode_fn *enc, const void *msg, kb_ctrl_resp_fn *cb, void *arg)
{
    const kb_mi_endpoint *ep = endpoint_of(ib, node);
    if (ep == NULL || strlen(ep->host) >= sizeof(((peer *)0)->host))
        return KP_ERR__INVAL;
    peer *p = peer_for(ib, node);
    if (p == NULL)
        return KP_ERR__NOMEM;
    bool moved = strcmp(p->host, ep->host) != 0 || p->port != ep->port;
    if (moved || !kb_ctrl_conn_is_open(p->conn)) {
        snprintf(p->host, sizeof p->host, "%s", ep->host);
        p->port = ep->port;
        kp_err e = kb_ctrl_conn_open(p->conn, p->host, p->port);
        if (e != KP_ERR_NONE)
            return e;
    }
    return kb_ctrl_conn_send(p->conn, api_key, version, enc, msg, cb, arg);
}

/* ---- hooks: the leader of a partition ------------------------------------ */

static int32_t hook_leader(kb_broker *b, const char *topic, int32_t p)
{
    const kb_mi_topic *t = kb_meta_image_topic(the_ib(b)->img, kp_str_from(topic));
    if (t == NULL || p < 0 || p >= t->n_parts || !t->parts[p].present)
        return -1;
    return t->parts[p].leader;
}

/* ---- hooks: WriteTxnMarkers to a partition's leader ---------------------- */

typedef struct marker_call {
    kb_hook_marker_done *done;
    void *arg;
} marker_call;

static void encode_markers(kp_writer *w, const void *msg, int16_t version)
{
    kp_write_txn_markers_req_encode(w, msg, version);
}

static void on_marker_reply(void *arg, kp_reader *body)
{
    marker_call *mc = arg;
    int16_t err = KP_ERR_NETWORK_EXCEPTION;
    if (body != NULL) {
        kp_arena a;
        kp_arena_init(&a);
        kp_write_txn_markers_resp rs;
        if (kp_write_txn_markers_resp_decode(body, &a, &rs, MARKERS_VERSION) == KP_ERR_NONE &&
            rs.markers.n == 1 && rs.markers.v[0].topics.n == 1 &&
            rs.markers.v[0].topics.v[0].partitions.n == 1)
            err = rs.markers.v[0].topics.v[0].partitions.v[0].error_code;
        else
            err = KP_ERR_UNKNOWN_SERVER_ERROR;
        kp_arena_fini(&a);
    }
    kb_hook_marker_done *done = mc->done;
    void *darg = mc->arg;
    free(mc);
    done(darg, err);
}

static kp_err hook_send_marker(kb_broker *b, int32_t node, const char *topic, int32_t p,
                               int64_t pid, int16_t epoch, bool commit, int32_t coordinator_epoch,
                               kb_hook_marker_done *done, void *arg)
{
    marker_call *mc = malloc(sizeof(*mc));
    if (mc == NULL)
        return KP_ERR__NOMEM;
    *mc = (marker_call){done, arg};
    int32_t part = p;
    kp_write_txn_markers_req_writable_txn_marker_topic mt = {kp_str_from(topic), {1, &part}};
    kp_write_txn_markers_req_writable_txn_marker m = {pid, epoch, commit, {1, &mt},
                                                      coordinator_epoch, 0};
    kp_write_txn_markers_req rq = {{1, &m}};
    kp_err e = kb_ib_send(the_ib(b), node, KP_API_WRITE_TXN_MARKERS, MARKERS_VERSION,
                          encode_markers, &rq, on_marker_reply, mc);
    if (e != KP_ERR_NONE)
        free(mc);
    return e;
}

/* ---- hooks: AllocateProducerIds to the active controller ----------------- */

static void encode_alloc(kp_writer *w, const void *msg, int16_t version)
{
    kp_allocate_producer_ids_req_encode(w, msg, version);
}

static void on_pids_reply(void *arg, kp_reader *body)
{
    kb_ib *ib = arg;
    ib->pids_in_flight = false;
    int16_t err = KP_ERR_NETWORK_EXCEPTION;
    int64_t start = -1;
    int32_t len = 0;
    if (body != NULL) {
        kp_arena a;
        kp_arena_init(&a);
        kp_allocate_producer_ids_resp rs;
        if (kp_allocate_producer_ids_resp_decode(body, &a, &rs, ALLOC_PIDS_VERSION) ==
            KP_ERR_NONE) {
            err = rs.error_code;
            start = rs.producer_id_start;
            len = rs.producer_id_len;
            if (err == KP_ERR_NONE && (start < 0 || len <= 0 || start > INT64_MAX - len))
                err = KP_ERR_UNKNOWN_SERVER_ERROR;
        } else {
            err = KP_ERR_UNKNOWN_SERVER_ERROR;
        }
        kp_arena_fini(&a);
    }
    if (err == KP_ERR_NOT_CONTROLLER || body == NULL)
        kb_quorum_forget_leader(ib->q);
    if (err != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"no producer id block from the controller\" "
               "error=%s", kp_err_name(err));
    else
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"producer id block from the controller\" "
               "start=%lld len=%d", (long long)start, len);
    ib->pids_done(ib->b, err, start, len);
}

static kp_err hook_alloc_pids(kb_broker *b, kb_hook_pids_done *done)
{
    kb_ib *ib = the_ib(b);
    if (ib->pids_in_flight)
        return KP_ERR_NONE;
    if (!kb_ctrl_conn_is_open(ib->ctrl) || (ib->q->leader >= 0 && ib->q->leader != ib->ctrl_target)) {
        ib->ctrl_target = kb_quorum_pick(ib->q);
        kp_err e = kb_ctrl_conn_open(ib->ctrl, ib->q->v[ib->ctrl_target].host,
                                     ib->q->v[ib->ctrl_target].port);
        if (e != KP_ERR_NONE)
            return e;
    }
    kp_allocate_producer_ids_req rq = {b->node_id, ib->broker_epoch(ib->epoch_arg)};
    ib->pids_done = done;
    kp_err e = kb_ctrl_conn_send(ib->ctrl, KP_API_ALLOCATE_PRODUCER_IDS, ALLOC_PIDS_VERSION,
                                 encode_alloc, &rq, on_pids_reply, ib);
    ib->pids_in_flight = e == KP_ERR_NONE;
    return e;
}

/* ---- life ---------------------------------------------------------------- */

kb_ib *kb_ib_new(kb_broker *b, kb_quorum *q, const kb_meta_image *img,
                 int64_t (*broker_epoch)(void *), void *epoch_arg)
{
    kb_ib *ib = calloc(1, sizeof(*ib));
    if (ib == NULL)
        return NULL;
    char client_id[64];
    snprintf(client_id, sizeof client_id, "runnel-broker-%d-producer-ids", b->node_id);
    ib->ctrl = kb_ctrl_conn_new(b->loop, b->work, client_id);
    if (ib->ctrl == NULL) {
        free(ib);
        return NULL;
    }
    ib->b = b;
    ib->q = q;
    ib->img = img;
    ib->broker_epoch = broker_epoch;
    ib->epoch_arg = epoch_arg;
    ib->ctrl_target = -1;
    for (int i = 0; i < KB_IB_MAX_PEERS; i++)
        ib->peers[i].node = -1;
    ib->hooks = (kb_cluster_hooks){hook_leader, hook_send_marker, hook_alloc_pids};
    b->hooks = &ib->hooks;
    return ib;
}

void kb_ib_free(kb_ib *ib)
{
    if (ib == NULL)
        return;
    if (ib->b->hooks == &ib->hooks)
        ib->b->hooks = NULL;
    for (int i = 0; i < KB_IB_MAX_PEERS; i++)
        if (ib->peers[i].node >= 0)
            kb_ctrl_conn_free(ib->peers[i].conn);
    kb_ctrl_conn_free(ib->ctrl);
    free(ib);
}
