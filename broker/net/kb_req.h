/*
 * kb_req: one request in flight on a connection, and the way a handler
 * answers it (at once, later, or never for acks=0).
 *
 * Job: carry what a handler needs (the broker, the decoded header, an arena)
 * and turn the handler's response struct into an encoded frame queued on the
 * connection.
 *
 * Invariants:
 *   1. A connection has at most one kb_req in flight; responses therefore
 *      leave in request order.
 *   2. kb_req_finish() is called exactly once per dispatched request; after
 *      it the request, its arena and its frame are gone.
 *   3. If the connection closes while a request is parked, on_cancel runs
 *      (once) before the request is freed, and the handler must not touch
 *      the request afterwards.
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

#include "kp_msg.h"
#include "kp_types.h"

typedef struct kb_broker kb_broker;
typedef struct kb_conn kb_conn;
typedef struct kb_req kb_req;

/* Returned by a handler that will answer later through kb_req_finish(). */
#define KB_PARKED KP_ERR__AGAIN

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

/* Encodes req->response, queues it on the connection, and ends the request. */
void kb_req_finish(kb_req *req);

#endif
