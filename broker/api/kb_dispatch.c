#include "kb_dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "kb_cluster.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_log.h"

typedef kp_err handler_fn(kb_req *req, const void *rq, void *rs);

#define X(key, name, top, quota, auth, file)                                    \
    static kp_err name##_any(kb_req *req, const void *rq, void *rs)      \
    {                                                                    \
        return kb_h_##name(req, rq, rs);                                 \
    }
#include "kb_dispatch.def"
#undef X

static const struct {
    handler_fn *fn;
    int16_t top;
    kb_req_quota quota;
    kb_req_auth auth;
} handlers[KP_API_KEY_MAX + 1] = {
#define X(key, name, top, quota, auth, file) \
    [KP_API_##key] = {name##_any, top, KB_REQ_QUOTA_##quota, KB_REQ_##auth},
#include "kb_dispatch.def"
#undef X
};

/* Top versions the message definitions still mark unstable but Kafka 4.1
 * serves as stable: ConsumerGroupHeartbeat v1 (KIP-848 regexes, member ids
 * made by the client). */
static bool kafka41_stable_top(int key)
{
    return key == KP_API_CONSUMER_GROUP_HEARTBEAT;
}

bool kb_dispatch_versions(int key, int16_t *min_version, int16_t *max_version)
{
    const kp_api_info *api = kp_api_lookup(key);
    if (api == NULL || handlers[key].fn == NULL)
        return false;
    int16_t top = api->max_version;
    if (api->unstable_top && !kafka41_stable_top(key))
        top--;
    if (handlers[key].top < top)
        top = handlers[key].top;
    *min_version = api->min_version; /* Kafka 4.4's, and Produce v0 (kpgen.py) */
    *max_version = top;
    return true;
}

/* KIP-511: a too-new ApiVersions gets a v0 body with UNSUPPORTED_VERSION and
 * the ranges, so the client can retry with a version both sides know. */
static void answer_unsupported_api_versions(kb_conn *c, int32_t correlation_id)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_api_versions_resp rs;
    kp_api_versions_resp_defaults(&rs);
    rs.error_code = KP_ERR_UNSUPPORTED_VERSION;
    int16_t lo, hi;
    if (kb_dispatch_versions(KP_API_API_VERSIONS, &lo, &hi)) {
        rs.api_keys.v = kp_arena_calloc(&a, 1, sizeof(*rs.api_keys.v));
        if (rs.api_keys.v != NULL) {
            rs.api_keys.n = 1;
            rs.api_keys.v[0].api_key = KP_API_API_VERSIONS;
            rs.api_keys.v[0].min_version = lo;
            rs.api_keys.v[0].max_version = hi;
        }
    }
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_write_i32(&w, 0);
    kp_write_i32(&w, correlation_id);
    kp_api_versions_resp_encode(&w, &rs, 0);
    kb_req_send_encoded(c, &w, NULL, NULL);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}

/* Not a SASL listener, or its exchange completed. */
static bool authenticated(kb_sasl_phase phase)
{
    return phase == KB_SASL_OFF || phase == KB_SASL_DONE;
}

static void reject(kb_conn *c, const char *why, int16_t key, int16_t version)
{
    KB_LOG(KB_LL_WARN, KB_SUB_PROTO,
           "msg=\"%s; closing connection\" conn=%llu peer=%s api_key=%d api_version=%d", why,
           (unsigned long long)c->id, c->peer, key, version);
    kb_conn_close(c, why);
}

void kb_dispatch(kb_conn *c, const uint8_t *frame, size_t len)
{
    kb_req *req = &c->req;
    memset(req, 0, sizeof(*req));
    kp_arena_init(&req->arena);
    req->broker = c->broker;
    req->conn = c;
    req->listener = c->listener;

    if (c->sasl_phase == KB_SASL_RAW)
        return kb_h_sasl_raw(c, frame, len);
    kp_reader r = kp_reader_make(frame, len);
    int16_t key = kp_read_i16(&r);
    int16_t version = kp_read_i16(&r);
    if (r.err != KP_ERR_NONE)
        return reject(c, "frame too short for a request header", -1, -1);
    const kp_api_info *api = kp_api_lookup(key);
    int16_t lo, hi;
    bool known = api != NULL && kb_dispatch_versions(key, &lo, &hi);
    if (!kb_sasl_allows(c->sasl_phase, key) ||
        (!authenticated(c->sasl_phase) && (!known || handlers[key].auth != KB_REQ_PRE_AUTH)))
        return reject(c, "request not allowed before SASL authentication", key, version);
    if (!known)
        return reject(c, "unsupported api key", key, version);
    r = kp_reader_make(frame, len);
    kp_request_header hdr;
    int16_t header_version = kb_req_flexible(api, version) ? 2 : 1;
    if (kp_request_header_decode(&r, &req->arena, &hdr, header_version) != KP_ERR_NONE)
        return reject(c, "malformed request header", key, version);
    if (key == KP_API_API_VERSIONS && version > hi) {
        answer_unsupported_api_versions(c, hdr.correlation_id);
        return kb_conn_request_done(c, 0);
    }
    if (version < lo || version > hi)
        return reject(c, "unsupported api version", key, version);

    kb_req_begin(req, handlers[key].quota);
    req->api = api;
    req->api_key = key;
    req->api_version = version;
    req->correlation_id = hdr.correlation_id;
    req->client_id = hdr.client_id;
    req->request = kp_arena_alloc(&req->arena, api->request.size);
    req->response = kp_arena_alloc(&req->arena, api->response.size);
    if (req->request == NULL || req->response == NULL)
        return reject(c, "out of memory", key, version);
    if (api->request.decode(&r, &req->arena, req->request, version) != KP_ERR_NONE)
        return reject(c, "malformed request body", key, version);
    /* The response starts from its defaults, as Kafka's generated classes do. */
    api->response.defaults(req->response);
    kb_forward *fwd = kb_cluster_forwarder(c->broker->cluster);
    if (fwd != NULL && kb_forward_wants(key, req->request)) {
        kb_forward_request(fwd, req, frame, len);
        return;
    }
    kp_err err = handlers[key].fn(req, req->request, req->response);
    if (err == KB_PARKED)
        return;
    if (err != KP_ERR_NONE)
        return reject(c, kp_err_name(err), key, version);
    kb_req_finish(req);
}
