/* The request pipeline's finish step and the request helpers (kb_req.h). */
#include "kb_req.h"

#include <stdlib.h>
#include <string.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_conn.h"
#include "kb_log.h"
#include "kb_quota.h"
#include "kb_req_metrics.h"

kp_str kb_req_str(kb_req *req, const char *s)
{
    size_t len = strlen(s);
    char *p = kp_arena_strdup(&req->arena, s, len);
    return p != NULL ? (kp_str){p, (int32_t)len} : (kp_str){"", 0};
}

kp_str kb_req_client_host(kb_req *req)
{
    const char *peer = req->conn->peer;
    const char *colon = strrchr(peer, ':');
    int len = colon != NULL ? (int)(colon - peer) : (int)strlen(peer);
    char *s = kp_arena_printf(&req->arena, "/%.*s", len, peer);
    return s != NULL ? kp_str_from(s) : KP_STR_LIT("");
}

bool kb_req_flexible(const kp_api_info *api, int16_t version)
{
    return api->first_flexible >= 0 && version >= api->first_flexible;
}

/* Frames w's bytes as a kb_out, taking its buffer and chunks. */
static kb_out *out_from_writer(kp_writer *w)
{
    kb_out *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    kp_writer_patch_i32(w, 0, (int32_t)(w->total - 4));
    o->mem_len = w->len;
    o->total = w->total;
    o->mem = kp_writer_steal(w);
    o->chunks = w->chunks;
    o->nchunks = w->nchunks;
    w->chunks = NULL;
    w->nchunks = 0;
    return o;
}

void kb_req_send_encoded(kb_conn *c, kp_writer *w, void (*release)(void *), void *arg)
{
    kb_out *o = w->err == KP_ERR_NONE ? out_from_writer(w) : NULL;
    if (o == NULL) {
        if (release != NULL)
            release(arg);
        kb_conn_close(c, "out of memory encoding a response");
        return;
    }
    o->release = release;
    o->release_arg = arg;
    kb_conn_send(c, o);
}

void kb_req_begin(kb_req *req, kb_req_quota quota)
{
    req->quota = quota;
    req->quota_bytes = 0;
    req->policy_done = false;
    req->start_ms = kb_loop_now_ms(req->broker->loop);
    kb_timer_init(&req->delay, NULL, req);
}

/* ---- policy: client quotas ------------------------------------------------- */

/* Where the response carries its throttle time; NULL for APIs without a
 * byte-rate quota. */
static int32_t *throttle_field(kb_req *req)
{
    switch (req->quota) {
    case KB_REQ_QUOTA_PRODUCE:
        return &((kp_produce_resp *)req->response)->throttle_time_ms;
    case KB_REQ_QUOTA_FETCH:
        return &((kp_fetch_resp *)req->response)->throttle_time_ms;
    default:
        return NULL;
    }
}

/* The quota's user: the principal's name, "ANONYMOUS" until SASL says otherwise. */
static const char *quota_user(const kb_req *req)
{
    const char *principal = req->conn->principal;
    return strncmp(principal, "User:", 5) == 0 ? principal + 5 : principal;
}

static kb_quota_kind quota_kind(const kb_req *req)
{
    return req->quota == KB_REQ_QUOTA_PRODUCE ? KB_QUOTA_PRODUCE : KB_QUOTA_FETCH;
}

int64_t kb_req_quota_window_bytes(kb_req *req)
{
    if (req->quota != KB_REQ_QUOTA_PRODUCE && req->quota != KB_REQ_QUOTA_FETCH)
        return INT64_MAX;
    return kb_quotas_window_bytes(req->broker->quotas, quota_kind(req), quota_user(req),
                                  kb_req_cstr(req, req->client_id));
}

/* Records the request's bytes against its byte-rate quota; the throttle
 * time in ms (0 when none applies), also written into the response. */
static int64_t quota_record(kb_req *req)
{
    int32_t *field = throttle_field(req);
    if (field == NULL)
        return 0;
    int64_t ms = kb_quotas_record(req->broker->quotas, quota_kind(req), quota_user(req),
                                  kb_req_cstr(req, req->client_id), req->quota_bytes,
                                  kb_loop_now_ms(req->broker->loop));
    if (ms <= 0)
        return 0;
    if (ms > INT32_MAX)
        ms = INT32_MAX;
    *field = (int32_t)ms;
    return ms;
}

/* KIP-219: from Produce v6 and Fetch v8 the response goes out at once and
 * the connection is muted (the client backs off by itself too); before,
 * the response itself waits. acks=0 has no response to hold. */
static bool mutes(const kb_req *req)
{
    int16_t muting_version = req->quota == KB_REQ_QUOTA_PRODUCE ? 6 : 8;
    return req->api_version >= muting_version || req->no_response;
}

static void on_delay_done(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_req *req = arg;
    req->on_cancel = NULL;
    kb_req_finish(req);
}

static void on_delay_cancel(kb_req *req)
{
    kb_timer_disarm(req->broker->loop, &req->delay);
    if (req->release != NULL)
        req->release(req->release_arg); /* what the response would have released */
    req->release = NULL;
}

/* Holds the response ms milliseconds; false if it cannot (answer now). */
static bool delay_response(kb_req *req, int64_t ms)
{
    kb_timer_init(&req->delay, on_delay_done, req);
    if (kb_timer_arm(req->broker->loop, &req->delay, ms) != KP_ERR_NONE)
        return false;
    req->park_state = NULL;
    req->on_cancel = on_delay_cancel;
    return true;
}

/* ---- the finish step ------------------------------------------------------- */

static void send_response(kb_req *req)
{
    kb_conn *c = req->conn;
    if (req->no_response || kb_conn_is_closing(c)) {
        if (req->release != NULL)
            req->release(req->release_arg);
        return;
    }
    kp_writer w;
    kp_writer_init(&w, 512);
    kp_write_i32(&w, 0); /* size, patched */
    kp_write_i32(&w, req->correlation_id);
    /* ApiVersions answers with header v0 at every version (KIP-511). */
    if (req->api_key != KP_API_API_VERSIONS && kb_req_flexible(req->api, req->api_version))
        kp_write_uvarint(&w, 0);
    req->api->response.encode(&w, req->response, req->api_version);
    kb_req_send_encoded(c, &w, req->release, req->release_arg);
    kp_writer_fini(&w);
}

/* Request accounting: one DEBUG line per completed request, as Kafka's
 * kafka.request.logger (total time includes a held response's throttle). */
static void account(kb_req *req, int64_t throttle_ms)
{
    if (!kb_log_enabled(KB_LL_DEBUG, KB_SUB_PROTO))
        return;
    char client[KB_LOG_ESC_SHORT], principal[KB_LOG_ESC_SHORT];
    kb_log_escape(client, sizeof(client), req->client_id.p,
                  req->client_id.len > 0 ? (size_t)req->client_id.len : 0);
    kb_log_escape(principal, sizeof(principal), req->conn->principal,
                  strlen(req->conn->principal));
    KB_LOG(KB_LL_DEBUG, KB_SUB_PROTO,
           "msg=\"request completed\" conn=%llu api_key=%d api_version=%d correlation_id=%d "
           "client_id=\"%s\" principal=\"%s\" quota_bytes=%lld throttle_ms=%lld total_ms=%lld",
           (unsigned long long)req->conn->id, req->api_key, req->api_version, req->correlation_id,
           client, principal, (long long)req->quota_bytes, (long long)throttle_ms,
           (long long)(kb_loop_now_ms(req->broker->loop) - req->start_ms));
}

void kb_req_finish(kb_req *req)
{
    kb_conn *c = req->conn;
    KB_DCHECK(!kb_timer_armed(&req->delay));
    bool parked = req->on_cancel != NULL;
    req->on_cancel = NULL; /* finishing ends any parking */
    int64_t mute_ms = 0;
    if (!req->policy_done) {
        req->policy_done = true;
        req->throttle_ms = quota_record(req);
        if (req->throttle_ms > 0 && !mutes(req) && !kb_conn_is_closing(c) &&
            delay_response(req, req->throttle_ms))
            return; /* on_delay_done finishes */
        mute_ms = req->throttle_ms;
    }
    account(req, req->throttle_ms);
    kb_req_metrics_finish(req, parked, req->throttle_ms);
    send_response(req);
    kb_conn_request_done(c, mute_ms);
}

const char *kb_req_cstr(kb_req *req, kp_str s)
{
    char *c = kp_arena_strdup(&req->arena, s.len > 0 ? s.p : "", s.len > 0 ? (size_t)s.len : 0);
    return c != NULL ? c : "";
}
