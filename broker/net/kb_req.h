/*
 * kb_req: one request in flight on a connection, and the way a handler
 * answers it (at once, later, or never for acks=0).
 *
 * Job: carry what a handler needs (the broker, the decoded header, an arena)
 * and finish it: the pipeline's one finish step applies every per-request
 * policy (the produce or fetch client quota with KIP-219 throttling; request
 * accounting, a DEBUG line per request), turns the handler's response
 * struct into an encoded frame queued on the connection, and releases the
 * request, whichever path completes it (at once, after a helper thread,
 * after a flush, after a parked long poll wakes). Handlers record what the
 * policy needs (quota_bytes) and never apply it themselves.
 *
 * Throttling, as Kafka does it: the bytes are recorded against the quota of
 * the connection's user and client id; a throttled Produce v6+ or Fetch v8+
 * (and an acks=0 produce) is answered at once with throttle_time_ms and the
 * connection is muted for that time; older versions get their response
 * delayed by it, the connection reading nothing meanwhile.
 *
 * Invariants:
 *   1. A connection has at most one kb_req in flight; responses therefore
 *      leave in request order.
 *   2. kb_req_finish() is called exactly once per dispatched request; after
 *      it the request, its arena and its frame are gone.
 *   3. If the connection closes while a request is parked, on_cancel runs
 *      (once) before the request is freed, and the handler must not touch
 *      the request afterwards.
 *   4. The policy runs exactly once per request, in kb_req_finish(), on
 *      every path that completes it (policy_done); a held response has its
 *      delay timer armed and is finished by the pipeline itself.
 *
 * Ownership: the request owns its arena; request and response structs and
 * every slice of the frame live in it. The frame belongs to the connection
 * and stays valid until kb_req_finish().
 *
 * Threading: loop thread only.
 */
#ifndef KB_REQ_H
#define KB_REQ_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_loop.h"
#include "kp_msg.h"
#include "kp_types.h"

typedef struct kb_broker kb_broker;
typedef struct kb_conn kb_conn;
typedef struct kb_req kb_req;

/* Returned by a handler that will answer later through kb_req_finish(). */
#define KB_PARKED KP_ERR__AGAIN

/* The per-API policy kinds of kb_dispatch.def. */
typedef enum kb_req_quota {
    KB_REQ_QUOTA_NONE = 0,
    KB_REQ_QUOTA_REQUEST, /* request_percentage: not enforced yet */
    KB_REQ_QUOTA_PRODUCE, /* producer_byte_rate on quota_bytes */
    KB_REQ_QUOTA_FETCH,   /* consumer_byte_rate on quota_bytes */
} kb_req_quota;

typedef enum kb_req_auth {
    KB_REQ_AUTHENTICATED = 0, /* only once SASL authentication completed */
    KB_REQ_PRE_AUTH,          /* may arrive before (ApiVersions, the SASL APIs) */
} kb_req_auth;

typedef void kb_req_cancel_cb(kb_req *req);

struct kb_req {
    kb_broker *broker;
    kb_conn *conn;
    const struct kb_listener *listener;
    kp_arena arena;
    const kp_api_info *api;
    int16_t api_key;
    int16_t api_version;
    int32_t correlation_id;
    kp_str client_id;
    void *request;  /* the decoded kp_<api>_req */
    void *response; /* the kp_<api>_resp being filled */
    bool no_response; /* acks=0: nothing is sent back */
    kb_req_cancel_cb *on_cancel;
    /* Runs once the response has been sent (or dropped): releases what
     * keeps its file ranges readable. */
    void (*release)(void *arg);
    void *release_arg;
    void *park_state; /* the handler's own state while parked */
    /* pipeline policy */
    kb_req_quota quota;  /* from kb_dispatch.def */
    int64_t quota_bytes; /* set by the handler: what its quota counts */
    bool policy_done;    /* the finish step applied the policy */
    int64_t start_ms;    /* dispatched at (request accounting) */
    int64_t throttle_ms; /* the quota's answer, once policy_done */
    kb_timer delay;      /* holds a throttled response (before KIP-219) */
};

/* Gives a generated array field (a struct with n and v) count zeroed
 * elements from the request's arena; false (and n = 0) on out of memory. */
#define KB_ARRAY_ALLOC(req, arr, count)                                                   \
    (((arr).v = kp_arena_calloc(&(req)->arena, (size_t)(count) + 1, sizeof(*(arr).v))) != \
             NULL                                                                         \
         ? ((arr).n = (int32_t)(count), true)                                             \
         : ((arr).n = 0, false))

/* Copies a C string into the request's arena as a kp_str. */
kp_str kb_req_str(kb_req *req, const char *s);

/* The peer's address as Kafka records a client host: "/<address>". */
kp_str kb_req_client_host(kb_req *req);

/* The finish step: applies the request's policy (quota; may hold the
 * response for its throttle time, then finishes by itself), encodes
 * req->response, queues it on the connection, and ends the request. */
void kb_req_finish(kb_req *req);

/* Whether an API version uses flexible (tagged) headers. */
bool kb_req_flexible(const kp_api_info *api, int16_t version);

/* Frames the response encoded in w (its size field at offset 0, patched
 * here) and queues it on c; release(arg) runs once it is sent or dropped.
 * Closes c when out of memory. */
void kb_req_send_encoded(kb_conn *c, kp_writer *w, void (*release)(void *), void *arg);

/* The most bytes one response may carry under the request's byte-rate
 * quota (Kafka caps a fetch's max bytes so); INT64_MAX when none applies. */
int64_t kb_req_quota_window_bytes(kb_req *req);

/* Sets the pipeline fields of a request about to be dispatched. */
void kb_req_begin(kb_req *req, kb_req_quota quota);

/* s as a NUL-terminated copy in the request arena ("" for null or
 * empty, or when the arena is out of memory). */
const char *kb_req_cstr(kb_req *req, kp_str s);

#endif
