#include "kb_forward.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_conn.h"
#include "kb_ctrl_conn.h"
#include "kb_forward_errors.h"
#include "kb_log.h"
#include "kp_msg.h"

#define ENVELOPE_API_KEY 58
#define ENVELOPE_VERSION 0
#define RETRY_BACKOFF_MS 100 /* Kafka's retry.backoff.ms */
#define TICK_MS 100
#define RESOURCE_BROKER_LOGGER 8
#define PRINCIPAL_MAX 600
#define CREATE_TOPICS_VERSION 7
#define CREATE_TIMEOUT_MS 30000 /* Kafka's request.timeout.ms, as its broker sends */

/* One forwarded request, or one topic creation the broker asks for. It
 * stays allocated while the controller connection owes it a callback
 * (sent), even after its client is gone. */
typedef struct fwd_item {
    struct fwd_item *next, *prev;
    kb_forward *f;
    bool live;      /* still owed: its client's answer, or its topic's creation */
    kb_req *req;    /* a client's request; NULL for a creation */
    bool enveloped; /* sent in an Envelope (else a plain CreateTopics) */
    kp_slice frame; /* enveloped: the request header and body; else the body */
    uint8_t *owned; /* a creation's request bytes (frame points here) */
    char topic[256];
    uint8_t principal[PRINCIPAL_MAX];
    size_t principal_len;
    uint8_t addr[16];
    int32_t addr_len;
    int64_t deadline_ms;
    int64_t retry_at_ms;
    bool sent;
} fwd_item;

struct kb_forward {
    kb_loop *loop;
    kb_quorum *q;
    kb_ctrl_conn *conn;
    int target; /* the node conn talks to, -1: none */
    fwd_item *head, *tail;
    size_t n;
    kb_timer tick;
};

static void pump(kb_forward *f);

/* ---- which requests ------------------------------------------------------ */

static bool all_broker_logger(const int8_t *types, size_t stride, int32_t n)
{
    if (n <= 0)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (*(const int8_t *)((const uint8_t *)types + (size_t)i * stride) != RESOURCE_BROKER_LOGGER)
            return false;
    return true;
}

bool kb_forward_wants(int16_t api_key, const void *request)
{
    switch (api_key) {
    case KP_API_CREATE_TOPICS:
    case KP_API_DELETE_TOPICS:
    case KP_API_CREATE_PARTITIONS:
    case KP_API_CREATE_ACLS:
    case KP_API_DELETE_ACLS:
    case KP_API_ALTER_USER_SCRAM_CREDENTIALS:
    case KP_API_ALTER_CLIENT_QUOTAS:
    case KP_API_ELECT_LEADERS:
    case KP_API_ALTER_PARTITION_REASSIGNMENTS:
    case KP_API_UPDATE_FEATURES:
    case KP_API_UNREGISTER_BROKER:
        return true;
    case KP_API_ALTER_CONFIGS: {
        const kp_alter_configs_req *rq = request;
        return rq->resources.n <= 0 ||
               !all_broker_logger(&rq->resources.v[0].resource_type, sizeof(*rq->resources.v),
                                  rq->resources.n);
    }
    case KP_API_INCREMENTAL_ALTER_CONFIGS: {
        const kp_incremental_alter_configs_req *rq = request;
        return rq->resources.n <= 0 ||
               !all_broker_logger(&rq->resources.v[0].resource_type, sizeof(*rq->resources.v),
                                  rq->resources.n);
    }
    default:
        return false;
    }
}

/* ---- the envelope --------------------------------------------------------- */

size_t kb_forward_principal(const char *principal, uint8_t *out, size_t cap)
{
    const char *colon = strchr(principal, ':');
    kp_default_principal_data p;
    kp_default_principal_data_defaults(&p);
    char type[64];
    snprintf(type, sizeof type, "%.*s", colon ? (int)(colon - principal) : 4,
             colon ? principal : "User");
    p.type = kp_str_from(type);
    p.name = kp_str_from(colon ? colon + 1 : principal);
    p.token_authenticated = false;
    kp_writer w;
    kp_writer_init(&w, 128);
    kp_write_i16(&w, 0);
    kp_default_principal_data_encode(&w, &p, 0);
    size_t n = w.err == KP_ERR_NONE && w.len <= cap ? w.len : 0;
    if (n > 0)
        memcpy(out, w.buf, n);
    kp_writer_fini(&w);
    return n;
}

/* The client's address as InetAddress.getAddress gives it: 4 or 16 bytes. */
static int32_t client_address(const char *peer, uint8_t out[16])
{
    char host[64];
    const char *colon = strrchr(peer, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - peer) : (int)strlen(peer), peer);
    if (inet_pton(AF_INET, host, out) == 1)
        return 4;
    if (inet_pton(AF_INET6, host, out) == 1)
        return 16;
    return 0;
}

static void encode_raw(kp_writer *w, const void *msg, int16_t version)
{
    const fwd_item *it = msg;
    (void)version;
    kp_write_raw(w, it->frame.p, (size_t)it->frame.len);
}

static void encode_envelope(kp_writer *w, const void *msg, int16_t version)
{
    const fwd_item *it = msg;
    (void)version;
    kp_write_bytes(w, true, it->frame);
    kp_write_bytes(w, true, (kp_slice){it->principal, (int32_t)it->principal_len});
    kp_write_bytes(w, true, (kp_slice){it->addr, it->addr_len});
    kp_write_uvarint(w, 0); /* no tagged fields */
}

/* ---- items ---------------------------------------------------------------- */

static void unlink_item(kb_forward *f, fwd_item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        f->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        f->tail = it->prev;
    f->n--;
    free(it->owned);
    free(it);
}

/* The item owes nothing more; freed now unless a callback is due. */
static void settle(fwd_item *it)
{
    it->live = false;
    it->req = NULL;
    if (!it->sent)
        unlink_item(it->f, it);
}

/* Takes the request away from the item: it is answered or closed now. */
static kb_req *detach(fwd_item *it)
{
    kb_req *req = it->req;
    req->on_cancel = NULL;
    req->park_state = NULL;
    settle(it);
    return req;
}

static void answer_error(fwd_item *it, int16_t code)
{
    kb_req *req = detach(it);
    kb_forward_fill_error(req, code);
    kb_req_finish(req);
}

static void on_cancel(kb_req *req)
{
    fwd_item *it = req->park_state;
    if (it != NULL)
        detach(it);
}

/* ---- the controller's answer ---------------------------------------------- */

/* Decodes the response header and body the controller wrapped; false when
 * they do not parse or answer another request. */
static bool decode_inner(kb_req *req, kp_slice data)
{
    uint8_t *copy = kp_arena_alloc(&req->arena, (size_t)data.len + 1);
    if (copy == NULL)
        return false;
    memcpy(copy, data.p, (size_t)data.len);
    kp_reader r = kp_reader_make(copy, (size_t)data.len);
    int32_t corr = kp_read_i32(&r);
    if (kb_req_flexible(req->api, req->api_version))
        kp_skip_tags(&r);
    if (r.err != KP_ERR_NONE || corr != req->correlation_id)
        return false;
    return req->api->response.decode(&r, &req->arena, req->response, req->api_version) ==
           KP_ERR_NONE;
}

static void retry(fwd_item *it, const char *why)
{
    kb_forward *f = it->f;
    char addr[300];
    KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"forwarding again\" why=\"%s\" controller=%s "
           "api_key=%d", why, kb_quorum_addr(f->q, f->target, addr, sizeof addr),
           it->req != NULL ? it->req->api_key : KP_API_CREATE_TOPICS);
    /* The leader the quorum named is not the active controller (any more):
     * leave it; the next pick rotates until a Fetch response names the new
     * one. A lost connection is closed already, and opened again by pump
     * (closing here would fail what pump sent on the new one). */
    if (strcmp(why, "NOT_CONTROLLER") == 0) {
        kb_quorum_forget_leader(f->q);
        kb_ctrl_conn_close(f->conn);
        f->target = -1;
    }
    it->retry_at_ms = kb_loop_now_ms(f->loop) + RETRY_BACKOFF_MS;
}

static void answered(fwd_item *it, kp_reader *body)
{
    kp_slice data = kp_read_bytes(body, true);
    int16_t error = kp_read_i16(body);
    kp_skip_tags(body);
    if (body->err != KP_ERR_NONE)
        return answer_error(it, KP_ERR_UNKNOWN_SERVER_ERROR);
    if (error == KP_ERR_NOT_CONTROLLER)
        return retry(it, "NOT_CONTROLLER");
    if (error == KP_ERR_UNSUPPORTED_VERSION) {
        kb_req *req = detach(it);
        kb_conn_close(req->conn, "the controller does not support this request version");
        return;
    }
    if (error != KP_ERR_NONE || data.len < 0)
        return answer_error(it, KP_ERR_UNKNOWN_SERVER_ERROR);
    if (!decode_inner(it->req, data)) {
        it->req->api->response.defaults(it->req->response);
        return answer_error(it, KP_ERR_UNKNOWN_SERVER_ERROR);
    }
    kb_req_finish(detach(it));
}

/* ---- topics the broker creates (AutoTopicCreationManager) ---------------- */

static void creation_result(fwd_item *it, kp_reader *r)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_create_topics_resp rs;
    bool one = kp_create_topics_resp_decode(r, &a, &rs, CREATE_TOPICS_VERSION) == KP_ERR_NONE &&
               rs.topics.n == 1;
    int16_t code = one ? rs.topics.v[0].error_code : KP_ERR_UNKNOWN_SERVER_ERROR;
    kp_str why = one ? rs.topics.v[0].error_message : KP_STR_NULL;
    if (code == KP_ERR_NOT_CONTROLLER) {
        kp_arena_fini(&a);
        return retry(it, "NOT_CONTROLLER");
    }
    if (code == KP_ERR_NONE)
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"topic created by the controller\" topic=%s",
               it->topic);
    else
        KB_LOG(code == KP_ERR_TOPIC_ALREADY_EXISTS ? KB_LL_DEBUG : KB_LL_WARN, KB_SUB_MAIN,
               "msg=\"the controller did not create the topic\" topic=%s error=%s message=\"%.*s\"",
               it->topic, kp_err_name(code), why.len > 0 ? (int)why.len : 0,
               why.len > 0 ? why.p : "");
    kp_arena_fini(&a);
    settle(it);
}

static void creation_answered(fwd_item *it, kp_reader *body)
{
    if (!it->enveloped)
        return creation_result(it, body);
    kp_slice data = kp_read_bytes(body, true);
    int16_t error = kp_read_i16(body);
    if (body->err == KP_ERR_NONE && error == KP_ERR_NOT_CONTROLLER)
        return retry(it, "NOT_CONTROLLER");
    if (body->err != KP_ERR_NONE || error != KP_ERR_NONE || data.len < 0) {
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"the controller did not create the topic\" "
               "topic=%s error=%s", it->topic, kp_err_name(error));
        return settle(it);
    }
    kp_reader r = kp_reader_make(data.p, (size_t)data.len);
    kp_read_i32(&r); /* the client's correlation id */
    kp_skip_tags(&r);
    creation_result(it, &r);
}

static void on_reply(void *arg, kp_reader *body)
{
    fwd_item *it = arg;
    kb_forward *f = it->f;
    it->sent = false;
    if (!it->live)
        unlink_item(f, it);
    else if (body == NULL)
        retry(it, "controller connection lost");
    else if (it->req == NULL)
        creation_answered(it, body);
    else
        answered(it, body);
    pump(f);
}

/* ---- sending -------------------------------------------------------------- */

static bool ensure_conn(kb_forward *f)
{
    if (kb_ctrl_conn_is_open(f->conn) && (f->q->leader < 0 || f->q->leader == f->target))
        return true;
    f->target = kb_quorum_pick(f->q);
    return kb_ctrl_conn_open(f->conn, f->q->v[f->target].host, f->q->v[f->target].port) ==
           KP_ERR_NONE;
}

static void expire(kb_forward *f, int64_t now)
{
    for (fwd_item *it = f->head, *next; it != NULL; it = next) {
        next = it->next;
        if (!it->live || now < it->deadline_ms)
            continue;
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"forwarded request timed out\" api_key=%d "
               "topic=%s timeout_ms=%d", it->req ? it->req->api_key : KP_API_CREATE_TOPICS,
               it->req ? "-" : it->topic, KB_FORWARD_TIMEOUT_MS);
        if (it->req != NULL)
            answer_error(it, KP_ERR_REQUEST_TIMED_OUT);
        else
            settle(it);
    }
}

static void pump(kb_forward *f)
{
    int64_t now = kb_loop_now_ms(f->loop);
    expire(f, now);
    for (fwd_item *it = f->head; it != NULL; it = it->next) {
        if (it->sent || !it->live || it->retry_at_ms > now)
            continue;
        if (kb_ctrl_conn_in_flight(f->conn) >= KB_FORWARD_MAX_IN_FLIGHT || !ensure_conn(f))
            break;
        if ((it->enveloped ? kb_ctrl_conn_send(f->conn, ENVELOPE_API_KEY, ENVELOPE_VERSION,
                                               encode_envelope, it, on_reply, it)
                           : kb_ctrl_conn_send(f->conn, KP_API_CREATE_TOPICS,
                                               CREATE_TOPICS_VERSION, encode_raw, it, on_reply,
                                               it)) != KP_ERR_NONE)
            break;
        it->sent = true;
    }
    if (f->n > 0 && !kb_timer_armed(&f->tick))
        kb_timer_arm(f->loop, &f->tick, TICK_MS);
}

static void on_tick(kb_loop *loop, void *arg)
{
    (void)loop;
    pump(arg);
}

/* A new live item at the queue's end, with the principal and address of
 * the client of ctx if given; NULL when the queue is full. */
static fwd_item *enqueue(kb_forward *f, const kb_req *ctx)
{
    fwd_item *it = f->n < KB_FORWARD_MAX_QUEUED ? calloc(1, sizeof(*it)) : NULL;
    if (it == NULL)
        return NULL;
    it->f = f;
    it->live = true;
    if (ctx != NULL) {
        it->enveloped = true;
        it->principal_len = kb_forward_principal(ctx->conn->principal, it->principal,
                                                PRINCIPAL_MAX);
        it->addr_len = client_address(ctx->conn->peer, it->addr);
    }
    it->deadline_ms = kb_loop_now_ms(f->loop) + KB_FORWARD_TIMEOUT_MS;
    it->prev = f->tail;
    if (f->tail)
        f->tail->next = it;
    else
        f->head = it;
    f->tail = it;
    f->n++;
    return it;
}

kp_err kb_forward_request(kb_forward *f, kb_req *req, const uint8_t *frame, size_t len)
{
    fwd_item *it = len <= INT32_MAX ? enqueue(f, req) : NULL;
    if (it == NULL) {
        kb_forward_fill_error(req, KP_ERR_REQUEST_TIMED_OUT);
        kb_req_finish(req);
        return KB_PARKED;
    }
    it->req = req;
    it->frame = (kp_slice){frame, (int32_t)len};
    req->park_state = it;
    req->on_cancel = on_cancel;
    pump(f);
    return KB_PARKED;
}

static bool creating(const kb_forward *f, const char *name)
{
    for (const fwd_item *it = f->head; it != NULL; it = it->next)
        if (it->live && it->req == NULL && strcmp(it->topic, name) == 0)
            return true;
    return false;
}

/* The CreateTopics request for t, its header first when ctx is given. */
static kp_err encode_creation(const kb_forward_topic *t, const kb_req *ctx, kp_writer *w)
{
    kp_create_topics_req_creatable_topic_config cs[KB_FORWARD_MAX_TOPIC_CONFIGS];
    size_t nc = 0;
    for (; t->configs != NULL && t->configs[2 * nc] != NULL && nc < KB_FORWARD_MAX_TOPIC_CONFIGS;
         nc++)
        cs[nc] = (kp_create_topics_req_creatable_topic_config){
            kp_str_from(t->configs[2 * nc]), kp_str_from(t->configs[2 * nc + 1])};
    kp_create_topics_req_creatable_topic topic = {
        kp_str_from(t->name), t->partitions, t->replication_factor, {0, NULL},
        {(int32_t)nc, cs}};
    kp_create_topics_req rq = {{1, &topic}, CREATE_TIMEOUT_MS, false};
    if (ctx != NULL) {
        kp_request_header h = {KP_API_CREATE_TOPICS, CREATE_TOPICS_VERSION, ctx->correlation_id,
                               ctx->client_id};
        kp_request_header_encode(w, &h, 2);
    }
    kp_create_topics_req_encode(w, &rq, CREATE_TOPICS_VERSION);
    return w->err;
}

void kb_forward_create_topic(kb_forward *f, const kb_forward_topic *t, const kb_req *ctx)
{
    if (strlen(t->name) >= sizeof(((fwd_item *)0)->topic) || creating(f, t->name))
        return;
    kp_writer w;
    kp_writer_init(&w, 256);
    fwd_item *it = encode_creation(t, ctx, &w) == KP_ERR_NONE ? enqueue(f, ctx) : NULL;
    if (it == NULL) {
        kp_writer_fini(&w);
        return;
    }
    snprintf(it->topic, sizeof it->topic, "%s", t->name);
    it->frame.len = (int32_t)w.len;
    it->owned = kp_writer_steal(&w);
    it->frame.p = it->owned;
    kp_writer_fini(&w);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"asking the controller to create a topic\" topic=%s "
           "partitions=%d replication_factor=%d", t->name, t->partitions, t->replication_factor);
    pump(f);
}

size_t kb_forward_pending(const kb_forward *f)
{
    return f != NULL ? f->n : 0;
}

kb_forward *kb_forward_new(kb_loop *loop, kb_work *work, kb_quorum *q, int32_t node_id)
{
    kb_forward *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    char client_id[64];
    snprintf(client_id, sizeof client_id, "runnel-broker-%d-forwarding", node_id);
    f->conn = kb_ctrl_conn_new(loop, work, client_id);
    if (f->conn == NULL) {
        free(f);
        return NULL;
    }
    f->loop = loop;
    f->q = q;
    f->target = -1;
    kb_timer_init(&f->tick, on_tick, f);
    return f;
}

void kb_forward_free(kb_forward *f)
{
    if (f == NULL)
        return;
    kb_timer_disarm(f->loop, &f->tick);
    kb_ctrl_conn_free(f->conn);
    while (f->head != NULL) {
        fwd_item *it = f->head;
        if (it->live && it->req != NULL) {
            it->req->on_cancel = NULL;
            it->req->park_state = NULL;
        }
        unlink_item(f, it);
    }
    free(f);
}
