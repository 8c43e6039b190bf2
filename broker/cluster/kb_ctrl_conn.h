/*
 * kb_ctrl_conn: one client connection from this broker to a KRaft
 * controller, on the event loop: a non-blocking connect, requests written
 * with a flexible (v2) request header, responses matched back to their
 * callbacks by correlation id.
 *
 * Invariants:
 *   1. Nothing blocks: connect, writes and reads are non-blocking, names are
 *      resolved on a helper thread; bytes that do not fit the socket (or
 *      are sent before it connected) wait in the output buffer.
 *   2. Every request sent gets exactly one callback: with the response body
 *      (a reader positioned after the response header), or with body NULL
 *      when the connection fails or is closed first.
 *   3. A response frame longer than KB_CTRL_MAX_FRAME, or one whose
 *      correlation id is not the oldest in flight, fails the connection
 *      (the controller answers in order).
 * Ownership: the caller owns the kb_ctrl_conn (kb_ctrl_conn_free); the body
 * handed to a callback lives until the callback returns.
 * Threading: the loop's thread only.
 * Errors: kb_ctrl_conn_open returns KP_ERR__INVAL for a name without a
 * helper pool, KP_ERR__IO when the socket cannot be made; a refused connect
 * or an unresolvable name shows as failed callbacks.
 */
#ifndef KB_CTRL_CONN_H
#define KB_CTRL_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_loop.h"
#include "kp_types.h"

#define KB_CTRL_MAX_FRAME (64 * 1024 * 1024)

typedef struct kb_ctrl_conn kb_ctrl_conn;

/* body NULL: the request failed (no connection, closed, malformed reply). */
typedef void kb_ctrl_resp_fn(void *arg, kp_reader *body);
/* Writes a request body with the codec's encode function. */
typedef void kb_ctrl_encode_fn(kp_writer *w, const void *msg, int16_t version);

/* work resolves host names off the loop (NULL: address literals only). */
kb_ctrl_conn *kb_ctrl_conn_new(kb_loop *loop, kb_work *work, const char *client_id);
/* Starts connecting to host:port (a name is resolved on a helper thread
 * first); any earlier connection is closed first. */
kp_err kb_ctrl_conn_open(kb_ctrl_conn *c, const char *host, uint16_t port);
/* True once open was called and no failure closed the connection since. */
bool kb_ctrl_conn_is_open(const kb_ctrl_conn *c);
/* Requests in flight (sent or queued, no answer yet). */
int kb_ctrl_conn_in_flight(const kb_ctrl_conn *c);
/* Queues one request; cb runs later (never from inside this call). */
kp_err kb_ctrl_conn_send(kb_ctrl_conn *c, int16_t api_key, int16_t version, kb_ctrl_encode_fn *enc,
                         const void *msg, kb_ctrl_resp_fn *cb, void *arg);
/* Closes the socket; pending callbacks run with body NULL (from a timer). */
void kb_ctrl_conn_close(kb_ctrl_conn *c);
/* Closes without running callbacks, and frees. */
void kb_ctrl_conn_free(kb_ctrl_conn *c);

#endif
