#include "kb_replica_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_ctrl_conn.h"
#include "kb_log.h"
#include "kb_partition_log.h"
#include "kb_replica.h"
#include "kp_batch.h"
#include "kp_msg.h"

#define FETCH_VERSION 18 /* the newest Fetch both Runnel and Kafka 4.4 serve */
#define MAX_LEADERS 1024
#define NOT_READY_RETRY_MS 50

/* A partition this broker follows. */
typedef struct rf_part {
    kp_uuid topic_id;
    int32_t partition;
    int32_t leader;
    int32_t epoch;
} rf_part;

/* The fetcher of one leader broker. */
typedef struct rf_leader {
    kb_replica_fetch *rf;
    int32_t id;
    kb_ctrl_conn *conn;
    kb_timer retry;
    bool in_flight;
    rf_part *asked; /* what the Fetch in flight asked for */
    int32_t nasked;
} rf_leader;

struct kb_replica_fetch {
    kb_broker *b;
    const kb_meta_image *img;
    rf_part *parts;
    int32_t nparts, cap;
    rf_leader *leaders[MAX_LEADERS];
    int32_t nleaders;
};

static void send_fetch(rf_leader *l);

static void on_retry(kb_loop *loop, void *arg)
{
    (void)loop;
    send_fetch(arg);
}

kb_replica_fetch *kb_replica_fetch_new(kb_broker *b, const kb_meta_image *img)
{
    kb_replica_fetch *rf = calloc(1, sizeof(*rf));
    if (rf == NULL)
        return NULL;
    rf->b = b;
    rf->img = img;
    return rf;
}

void kb_replica_fetch_free(kb_replica_fetch *rf)
{
    if (rf == NULL)
        return;
    for (int32_t i = 0; i < rf->nleaders; i++) {
        kb_timer_disarm(rf->b->loop, &rf->leaders[i]->retry);
        kb_ctrl_conn_free(rf->leaders[i]->conn);
        free(rf->leaders[i]->asked);
        free(rf->leaders[i]);
    }
    free(rf->parts);
    free(rf);
}

static bool same_part(const rf_part *a, const kp_uuid *id, int32_t p)
{
    return a->partition == p && memcmp(a->topic_id.b, id->b, sizeof(id->b)) == 0;
}

static rf_part *find_part(kb_replica_fetch *rf, const kp_uuid *id, int32_t p)
{
    for (int32_t i = 0; i < rf->nparts; i++)
        if (same_part(&rf->parts[i], id, p))
            return &rf->parts[i];
    return NULL;
}

static rf_leader *leader_of(kb_replica_fetch *rf, int32_t id)
{
    for (int32_t i = 0; i < rf->nleaders; i++)
        if (rf->leaders[i]->id == id)
            return rf->leaders[i];
    if (rf->nleaders >= MAX_LEADERS)
        return NULL;
    rf_leader *l = calloc(1, sizeof(*l));
    char client_id[64];
    snprintf(client_id, sizeof(client_id), "replica-fetcher-%d-to-%d", rf->b->node_id, id);
    if (l == NULL || (l->conn = kb_ctrl_conn_new(rf->b->loop, rf->b->work, client_id)) == NULL) {
        free(l);
        return NULL;
    }
    l->rf = rf;
    l->id = id;
    kb_timer_init(&l->retry, on_retry, l);
    rf->leaders[rf->nleaders++] = l;
    return l;
}

/* Starts the leader's next fetch unless one is in flight or waiting. */
static void kick(kb_replica_fetch *rf, int32_t id)
{
    rf_leader *l = leader_of(rf, id);
    if (l != NULL && !l->in_flight && !kb_timer_armed(&l->retry))
        send_fetch(l);
}

void kb_replica_fetch_follow(kb_replica_fetch *rf, const kb_topic *t, int32_t p, int32_t leader,
                             int32_t leader_epoch)
{
    rf_part *fp = find_part(rf, &t->id, p);
    if (leader < 0 || leader == rf->b->node_id) {
        if (fp != NULL)
            *fp = rf->parts[--rf->nparts];
        return;
    }
    if (fp == NULL) {
        if (rf->nparts == rf->cap) {
            int32_t cap = rf->cap > 0 ? rf->cap * 2 : 16;
            rf_part *v = realloc(rf->parts, (size_t)cap * sizeof(*v));
            if (v == NULL)
                return;
            rf->parts = v;
            rf->cap = cap;
        }
        fp = &rf->parts[rf->nparts++];
        *fp = (rf_part){t->id, p, -1, -1};
    }
    if (fp->leader != leader || fp->epoch != leader_epoch)
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"following a leader\" topic=%s partition=%d "
               "leader=%d leader_epoch=%d", t->name, p, leader, leader_epoch);
    fp->leader = leader;
    fp->epoch = leader_epoch;
    kick(rf, leader);
}

void kb_replica_fetch_forget_topic(kb_replica_fetch *rf, const kp_uuid *id)
{
    for (int32_t i = rf->nparts - 1; i >= 0; i--)
        if (memcmp(rf->parts[i].topic_id.b, id->b, sizeof(id->b)) == 0)
            rf->parts[i] = rf->parts[--rf->nparts];
}

/* ---- the request -------------------------------------------------------- */

/* The leader's endpoint on the inter-broker listener. */
static bool endpoint_of(const kb_replica_fetch *rf, int32_t id, const char **host,
                        uint16_t *port)
{
    const kb_mi_broker *br = kb_meta_image_broker(rf->img, id);
    if (br == NULL || br->n_endpoints <= 0)
        return false;
    const char *want = rf->b->cfg->inter_broker_listener_name;
    want = want != NULL ? want : "PLAINTEXT";
    const kb_mi_endpoint *ep = br->n_endpoints == 1 ? &br->endpoints[0] : NULL;
    for (int i = 0; i < br->n_endpoints; i++)
        if (strcmp(br->endpoints[i].listener, want) == 0)
            ep = &br->endpoints[i];
    if (ep == NULL)
        return false;
    *host = ep->host;
    *port = ep->port;
    return true;
}

static void encode_fetch(kp_writer *w, const void *msg, int16_t v)
{
    kp_fetch_req_encode(w, msg, v);
}

static void on_fetch(void *arg, kp_reader *body);

static void retry_later(rf_leader *l)
{
    (void)kb_timer_arm(l->rf->b->loop, &l->retry, l->rf->b->cfg->replica_fetch_backoff_ms);
}

/* One partition of the request; false when its log is not open yet. */
static bool fill_partition(rf_leader *l, const rf_part *fp, kp_fetch_req_fetch_partition *out)
{
    kb_broker *b = l->rf->b;
    kb_topic *t = kb_topics_find_id(b->topics, &fp->topic_id);
    ks_log *log;
    if (t == NULL || kb_partition_log_get(b, t, fp->partition, &log) != KP_ERR_NONE)
        return false;
    kp_fetch_req_fetch_partition_defaults(out);
    out->partition = fp->partition;
    out->current_leader_epoch = fp->epoch;
    out->fetch_offset = ks_log_end_offset(log);
    out->last_fetched_epoch = ks_log_latest_epoch(log); /* the leader checks divergence */
    out->log_start_offset = ks_log_start_offset(log);
    out->partition_max_bytes = b->cfg->replica_fetch_max_bytes;
    out->high_watermark = ks_log_high_watermark(log);
    return true;
}

/* The topics of the request: one per partition (the leader accepts a topic
 * named more than once, and the answer is matched per partition). */
static int32_t fill_topics(rf_leader *l, kp_fetch_req_fetch_topic *topics,
                           kp_fetch_req_fetch_partition *parts)
{
    kb_replica_fetch *rf = l->rf;
    int32_t n = 0;
    for (int32_t i = 0; i < rf->nparts; i++) {
        const rf_part *fp = &rf->parts[i];
        if (fp->leader != l->id || !fill_partition(l, fp, &parts[n]))
            continue;
        kp_fetch_req_fetch_topic_defaults(&topics[n]);
        topics[n].topic_id = fp->topic_id;
        topics[n].partitions.n = 1;
        topics[n].partitions.v = &parts[n];
        l->asked[n++] = *fp;
    }
    return n;
}

static bool ensure_conn(rf_leader *l)
{
    if (kb_ctrl_conn_is_open(l->conn))
        return true;
    const char *host;
    uint16_t port;
    return endpoint_of(l->rf, l->id, &host, &port) &&
           kb_ctrl_conn_open(l->conn, host, port) == KP_ERR_NONE;
}

static void send_request(rf_leader *l, kp_fetch_req_fetch_topic *topics, int32_t n)
{
    const kb_config *cfg = l->rf->b->cfg;
    const kb_mi_broker *self = kb_meta_image_broker(l->rf->img, l->rf->b->node_id);
    kp_fetch_req rq;
    kp_fetch_req_defaults(&rq);
    rq.replica_state.replica_id = l->rf->b->node_id;
    rq.replica_state.replica_epoch = self != NULL ? self->epoch : -1;
    rq.max_wait_ms = cfg->replica_fetch_wait_max_ms;
    rq.min_bytes = cfg->replica_fetch_min_bytes;
    rq.max_bytes = cfg->replica_fetch_response_max_bytes;
    rq.topics.n = n;
    rq.topics.v = topics;
    l->nasked = n;
    l->in_flight = true;
    if (kb_ctrl_conn_send(l->conn, KP_API_FETCH, FETCH_VERSION, encode_fetch, &rq, on_fetch, l) !=
        KP_ERR_NONE) {
        l->in_flight = false;
        kb_ctrl_conn_close(l->conn);
        retry_later(l);
    }
}

static void send_fetch(rf_leader *l)
{
    kb_replica_fetch *rf = l->rf;
    free(l->asked);
    l->asked = calloc((size_t)rf->nparts + 1, sizeof(*l->asked));
    kp_fetch_req_fetch_topic *topics = calloc((size_t)rf->nparts + 1, sizeof(*topics));
    kp_fetch_req_fetch_partition *parts = calloc((size_t)rf->nparts + 1, sizeof(*parts));
    int32_t n = l->asked != NULL && topics != NULL && parts != NULL ? fill_topics(l, topics, parts)
                                                                    : -1;
    bool any = false;
    for (int32_t i = 0; i < rf->nparts; i++)
        any |= rf->parts[i].leader == l->id;
    if (!any)
        kb_ctrl_conn_close(l->conn); /* nothing left to follow there */
    else if (n <= 0) /* its logs are still being made or loaded */
        (void)kb_timer_arm(rf->b->loop, &l->retry, NOT_READY_RETRY_MS);
    else if (!ensure_conn(l))
        retry_later(l);
    else
        send_request(l, topics, n);
    free(topics);
    free(parts);
}

/* ---- the response ------------------------------------------------------- */

/* The whole batches at the front of the records (a leader may end a
 * response with a partial one). */
static size_t whole_batches(const uint8_t *p, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        kp_batch_hdr h;
        if (kp_batch_hdr_parse(p + pos, len - pos, &h) != KP_ERR_NONE ||
            (uint64_t)kp_batch_total_size(&h) > len - pos)
            break;
        pos += (size_t)kp_batch_total_size(&h);
    }
    return pos;
}

/* Where a diverged log is cut (Kafka's getOffsetTruncationState): at the
 * leader's end of the epoch, or of this log's largest epoch below it when
 * this log lacks the leader's (the next fetch then checks again), never
 * past its own end. */
static int64_t truncation_offset(ks_log *log, const kp_fetch_resp_epoch_end_offset *d)
{
    int64_t leo = ks_log_end_offset(log);
    if (d->end_offset < 0)
        return ks_log_high_watermark(log);
    if (d->epoch < 0)
        return d->end_offset < leo ? d->end_offset : leo;
    int32_t epoch;
    int64_t end;
    ks_log_epoch_end_offset(log, d->epoch, &epoch, &end);
    int64_t to = end < 0 ? d->end_offset : epoch != d->epoch ? end
               : end < d->end_offset ? end : d->end_offset;
    return to < leo ? to : leo;
}

/* Appends what the leader sent for one partition still followed there;
 * KP_ERR__CORRUPT when its batches are refused. */
static kp_err take_partition(rf_leader *l, const rf_part *fp,
                             const kp_fetch_resp_partition_data *pd)
{
    kb_broker *b = l->rf->b;
    kb_topic *t = kb_topics_find_id(b->topics, &fp->topic_id);
    if (t == NULL || pd->error_code != KP_ERR_NONE) {
        if (t != NULL)
            KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"replica fetch error\" topic=%s "
                   "partition=%d leader=%d error=%s", t->name, fp->partition, l->id,
                   kp_err_name((kp_err)pd->error_code));
        return (kp_err)pd->error_code;
    }
    ks_log *dlog = t->partitions[fp->partition].log;
    if (dlog != NULL && (pd->diverging_epoch.epoch >= 0 || pd->diverging_epoch.end_offset >= 0)) {
        int64_t to = truncation_offset(dlog, &pd->diverging_epoch);
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"log diverged from the leader's\" topic=%s "
               "partition=%d leader=%d diverging_epoch=%d diverging_end_offset=%lld "
               "log_end=%lld truncate_to=%lld", t->name, fp->partition, l->id,
               pd->diverging_epoch.epoch, (long long)pd->diverging_epoch.end_offset,
               (long long)ks_log_end_offset(dlog), (long long)to);
        return kb_partition_log_truncate(b, t, fp->partition, to) == KP_ERR_NONE
                   ? KP_ERR_NONE : KP_ERR_KAFKA_STORAGE_ERROR;
    }
    size_t len = pd->records.p != NULL && pd->records.len > 0 ? (size_t)pd->records.len : 0;
    len = whole_batches(pd->records.p, len);
    ks_append_result res;
    if (len > 0 && kb_partition_log_append_replica(b, t, fp->partition, pd->records.p, len,
                                                   &res) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    kb_replica_follow_hw(t, fp->partition, pd->high_watermark);
    ks_log *log = t->partitions[fp->partition].log;
    if (log != NULL && pd->log_start_offset > ks_log_start_offset(log) &&
        pd->log_start_offset <= ks_log_high_watermark(log))
        (void)ks_log_advance_start(log, pd->log_start_offset, NULL);
    return KP_ERR_NONE;
}

/* The asked partition a response partition answers, or NULL. */
static const rf_part *asked_for(const rf_leader *l, const kp_uuid *id, int32_t p)
{
    for (int32_t i = 0; i < l->nasked; i++)
        if (same_part(&l->asked[i], id, p))
            return &l->asked[i];
    return NULL;
}

/* NONE: fetch again now; another error: after the backoff; __CORRUPT: the
 * connection is dropped too. */
static kp_err handle(rf_leader *l, kp_reader *body, kp_arena *a)
{
    kp_fetch_resp rs;
    if (kp_fetch_resp_decode(body, a, &rs, FETCH_VERSION) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    if (rs.error_code != 0)
        return (kp_err)rs.error_code;
    kp_err worst = KP_ERR_NONE;
    for (int32_t i = 0; i < rs.responses.n; i++) {
        const kp_fetch_resp_fetchable_topic_response *to = &rs.responses.v[i];
        for (int32_t j = 0; j < to->partitions.n; j++) {
            const kp_fetch_resp_partition_data *pd = &to->partitions.v[j];
            const rf_part *asked = asked_for(l, &to->topic_id, pd->partition_index);
            if (asked == NULL)
                return KP_ERR__CORRUPT; /* never asked for */
            const rf_part *now = find_part(l->rf, &asked->topic_id, asked->partition);
            if (now == NULL || now->leader != l->id || now->epoch != asked->epoch)
                continue; /* moved on since the request went out */
            kp_err e = take_partition(l, asked, pd);
            if (e == KP_ERR__CORRUPT)
                return e;
            worst = e != KP_ERR_NONE ? e : worst;
        }
    }
    return worst;
}

static void on_fetch(void *arg, kp_reader *body)
{
    rf_leader *l = arg;
    l->in_flight = false;
    if (body == NULL) {
        KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"replica fetch failed; retrying\" leader=%d",
               l->id);
        retry_later(l);
        return;
    }
    kp_arena a;
    kp_arena_init(&a);
    kp_err e = handle(l, body, &a);
    kp_arena_fini(&a);
    if (e == KP_ERR_NONE) {
        send_fetch(l);
        return;
    }
    if (e == KP_ERR__CORRUPT) {
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"malformed replica fetch response; reconnecting\" "
               "leader=%d", l->id);
        kb_ctrl_conn_close(l->conn);
    }
    retry_later(l);
}
