#include "kb_meta_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_ctrl_conn.h"
#include "kb_log.h"
#include "kp_msg.h"

#define FETCH_VERSION 17
#define FETCH_MAX_BYTES (1024 * 1024) /* one response's decoding stays short */
#define RETRY_MS 200
#define METADATA_TOPIC_ID {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}

struct kb_meta_fetch {
    kb_loop *loop;
    kb_quorum *q;
    kb_meta_fetch_opts o;
    kb_ctrl_conn *conn;
    int target; /* index of the node conn talks to (kb_quorum), -1: none */
    kb_meta_pos pos;
    int64_t high_watermark;
    int64_t records;
    bool caught_up;
    bool snapshot_warned;
    kb_timer retry;
};

static void send_fetch(kb_meta_fetch *f);

static void on_retry(kb_loop *loop, void *arg)
{
    (void)loop;
    send_fetch(arg);
}

kb_meta_fetch *kb_meta_fetch_new(kb_loop *loop, kb_quorum *q, const kb_meta_fetch_opts *o)
{
    kb_meta_fetch *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    char client_id[64];
    snprintf(client_id, sizeof(client_id), "raft-observer-%d", o->node_id);
    f->conn = kb_ctrl_conn_new(loop, o->work, client_id);
    if (f->conn == NULL) {
        free(f);
        return NULL;
    }
    f->loop = loop;
    f->q = q;
    f->o = *o;
    f->pos.last_epoch = 0; /* Kafka's for an empty log; the leader refuses -1 */
    f->high_watermark = -1;
    f->target = -1;
    kb_timer_init(&f->retry, on_retry, f);
    return f;
}

void kb_meta_fetch_start(kb_meta_fetch *f)
{
    send_fetch(f);
}

void kb_meta_fetch_free(kb_meta_fetch *f)
{
    if (f == NULL)
        return;
    kb_timer_disarm(f->loop, &f->retry);
    kb_ctrl_conn_free(f->conn);
    free(f);
}

int64_t kb_meta_fetch_next_offset(const kb_meta_fetch *f)
{
    return f->pos.next_offset;
}

int64_t kb_meta_fetch_high_watermark(const kb_meta_fetch *f)
{
    return f->high_watermark;
}

bool kb_meta_fetch_caught_up(const kb_meta_fetch *f)
{
    return f->caught_up;
}

int64_t kb_meta_fetch_records(const kb_meta_fetch *f)
{
    return f->records;
}

static void encode_fetch(kp_writer *w, const void *msg, int16_t v)
{
    kp_fetch_req_encode(w, msg, v);
}

static void on_fetch(void *arg, kp_reader *body);

/* Connects to the leader (or the next controller) unless already there. */
static bool ensure_conn(kb_meta_fetch *f)
{
    int want = kb_quorum_pick(f->q);
    if (kb_ctrl_conn_is_open(f->conn) && want == f->target)
        return true;
    f->target = want;
    if (kb_ctrl_conn_open(f->conn, f->q->v[want].host, f->q->v[want].port) == KP_ERR_NONE)
        return true;
    f->target = -1;
    return false;
}

static void send_fetch(kb_meta_fetch *f)
{
    if (!ensure_conn(f)) {
        kb_timer_arm(f->loop, &f->retry, RETRY_MS);
        return;
    }
    kp_fetch_req_fetch_partition part;
    kp_fetch_req_fetch_partition_defaults(&part);
    part.partition = 0;
    /* epoch 0 when unknown: the leader answers FENCED_LEADER_EPOCH with itself */
    part.current_leader_epoch = f->q->leader_epoch > 0 ? f->q->leader_epoch : 0;
    part.fetch_offset = f->pos.next_offset;
    part.last_fetched_epoch = f->pos.last_epoch;
    part.partition_max_bytes = FETCH_MAX_BYTES;
    part.replica_directory_id = f->o.directory_id;
    kp_fetch_req_fetch_topic topic;
    kp_fetch_req_fetch_topic_defaults(&topic);
    topic.topic_id = (kp_uuid)METADATA_TOPIC_ID;
    topic.partitions.n = 1;
    topic.partitions.v = &part;
    kp_fetch_req rq;
    kp_fetch_req_defaults(&rq);
    rq.cluster_id = kp_str_from(f->o.cluster_id);
    rq.replica_state.replica_id = f->o.node_id;
    rq.replica_state.replica_epoch = -1;
    rq.max_wait_ms = f->o.max_wait_ms;
    rq.min_bytes = 0;
    rq.max_bytes = FETCH_MAX_BYTES;
    rq.topics.n = 1;
    rq.topics.v = &topic;
    if (kb_ctrl_conn_send(f->conn, KP_API_FETCH, FETCH_VERSION, encode_fetch, &rq, on_fetch, f) !=
        KP_ERR_NONE) {
        kb_ctrl_conn_close(f->conn);
        kb_timer_arm(f->loop, &f->retry, RETRY_MS);
    }
}

static void deliver(void *arg, const kb_meta_record *rec)
{
    kb_meta_fetch *f = arg;
    f->o.on_record(f->o.arg, rec);
}

/* The leader a response names, with its endpoint from NodeEndpoints. */
static void learn_leader(kb_meta_fetch *f, const kp_fetch_resp *rs,
                         const kp_fetch_resp_partition_data *pd)
{
    int32_t id = pd->current_leader.leader_id;
    const char *host = NULL;
    int32_t port = 0;
    char hostbuf[256];
    for (int32_t i = 0; i < rs->node_endpoints.n; i++) {
        const kp_fetch_resp_node_endpoint *ep = &rs->node_endpoints.v[i];
        if (ep->node_id == id && ep->host.len > 0 && (size_t)ep->host.len < sizeof(hostbuf)) {
            memcpy(hostbuf, ep->host.p, (size_t)ep->host.len);
            hostbuf[ep->host.len] = '\0';
            host = hostbuf;
            port = ep->port;
        }
    }
    if (kb_quorum_learn(f->q, id, pd->current_leader.leader_epoch, host, port))
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"metadata quorum leader\" leader_id=%d epoch=%d",
               id, pd->current_leader.leader_epoch);
}

static void truncate_to(kb_meta_fetch *f, const kp_fetch_resp_epoch_end_offset *d)
{
    KB_LOG(KB_LL_WARN, KB_SUB_MAIN,
           "msg=\"metadata log diverged; truncating\" from=%lld to=%lld epoch=%d",
           (long long)f->pos.next_offset, (long long)d->end_offset, d->epoch);
    f->pos.next_offset = d->end_offset;
    f->pos.last_epoch = d->epoch;
}

static kp_err take_records(kb_meta_fetch *f, const kp_fetch_resp_partition_data *pd)
{
    if (pd->diverging_epoch.end_offset >= 0) {
        truncate_to(f, &pd->diverging_epoch);
        return KP_ERR_NONE;
    }
    if (pd->snapshot_id.end_offset >= 0) {
        if (!f->snapshot_warned)
            KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"metadata log starts at a snapshot; "
                   "FetchSnapshot is not implemented yet\" snapshot_end=%lld",
                   (long long)pd->snapshot_id.end_offset);
        f->snapshot_warned = true;
        return KP_ERR__INVAL;
    }
    int64_t n = 0;
    size_t len = pd->records.len > 0 ? (size_t)pd->records.len : 0;
    kp_err e = kb_meta_batches_read(pd->records.p, len, &f->pos, deliver, f, &n);
    f->records += n;
    f->high_watermark = pd->high_watermark;
    if (!f->caught_up && f->high_watermark >= 0 && f->pos.next_offset >= f->high_watermark) {
        f->caught_up = true;
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN,
               "msg=\"caught up with the metadata log\" offset=%lld records=%lld",
               (long long)f->pos.next_offset, (long long)f->records);
    }
    return e;
}

/* NONE: go on now; a retriable error: after a pause; anything else: reconnect. */
static kp_err handle(kb_meta_fetch *f, kp_reader *body, kp_arena *a)
{
    kp_fetch_resp rs;
    if (kp_fetch_resp_decode(body, a, &rs, FETCH_VERSION) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    if (rs.error_code != 0)
        return (kp_err)rs.error_code;
    if (rs.responses.n != 1 || rs.responses.v[0].partitions.n != 1)
        return KP_ERR__CORRUPT;
    const kp_fetch_resp_partition_data *pd = &rs.responses.v[0].partitions.v[0];
    learn_leader(f, &rs, pd);
    if (pd->error_code != 0)
        return (kp_err)pd->error_code;
    return take_records(f, pd);
}

static void on_fetch(void *arg, kp_reader *body)
{
    kb_meta_fetch *f = arg;
    if (body == NULL) {
        kb_quorum_forget_leader(f->q);
        kb_timer_arm(f->loop, &f->retry, RETRY_MS);
        return;
    }
    kp_arena a;
    kp_arena_init(&a);
    kp_err e = handle(f, body, &a);
    kp_arena_fini(&a);
    if (e == KP_ERR_INCONSISTENT_CLUSTER_ID) {
        char addr[300];
        f->o.on_fatal(f->o.arg, e, kb_quorum_addr(f->q, f->target, addr, sizeof addr));
        return;
    }
    if (e == KP_ERR_NONE) {
        send_fetch(f);
        return;
    }
    if (e == KP_ERR__CORRUPT)
        kb_ctrl_conn_close(f->conn);
    KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"metadata fetch failed\" error=%s", kp_err_name(e));
    kb_timer_arm(f->loop, &f->retry, e == KP_ERR_NOT_LEADER_OR_FOLLOWER ||
                                             e == KP_ERR_FENCED_LEADER_EPOCH ? 0 : RETRY_MS);
}
