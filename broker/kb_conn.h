/*
 * kb_conn: one client connection: framing, the request in flight, and the
 * output queue.
 *
 * Job: read size-prefixed frames, hand each to the dispatcher one at a time,
 * and write the responses back in order, memory pieces with send() and file
 * ranges with sendfile(2) (or pread + send when zero-copy is off).
 *
 * States: READING (waiting for a whole frame) -> PROCESSING (a request in
 * flight; reading paused, as Kafka mutes the channel) -> READING, and
 * CLOSING from anywhere. Output is written whenever the socket accepts it.
 *
 * Invariants:
 *   1. A frame is accepted only if 0 < size <= socket.request.max.bytes;
 *      otherwise the connection closes before anything is allocated for it.
 *   2. At most one request is in flight; the frame it borrows is not moved
 *      until kb_conn_request_done().
 *   3. A closing connection is freed after the current event batch, never
 *      inside its own callback; its fd is closed at the same moment.
 *
 * Ownership: the connection owns its socket, receive buffer, output queue
 * and the request in flight. The server owns the connection.
 *
 * Threading: loop thread only.
 */
#ifndef KB_CONN_H
#define KB_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_req.h"
#include "kp_types.h"

typedef struct kb_server kb_server;
typedef struct kb_listener kb_listener;

/* A finished response: memory bytes with file ranges spliced in. */
typedef struct kb_out {
    struct kb_out *next;
    uint8_t *mem;
    size_t mem_len;
    kp_wchunk *chunks;
    int32_t nchunks;
    size_t total;
    /* cursor */
    int32_t seg;      /* 2*i = memory before chunk i, 2*i+1 = chunk i */
    size_t seg_off;   /* bytes of seg already sent */
    /* Releases whatever keeps the file ranges readable (segment refs). */
    void (*release)(void *arg);
    void *release_arg;
} kb_out;

struct kb_conn {
    struct kb_conn *next;
    struct kb_conn *prev;
    kb_server *server;
    kb_broker *broker;
    const kb_listener *listener;
    int fd;
    uint64_t id;
    char peer[64];
    /* receive side */
    uint8_t *rbuf;
    size_t rlen;
    size_t rcap;
    bool in_flight;
    kb_req req;
    /* send side */
    kb_out *out_head;
    kb_out *out_tail;
    size_t out_bytes;
    int64_t last_active_ms;
    bool write_blocked; /* the socket refused bytes; EPOLLOUT is armed */
    bool dispatching;   /* inside kb_dispatch for the frame at the front */
    bool closing;
};

kb_conn *kb_conn_new(kb_server *srv, kb_broker *b, int fd, const kb_listener *l,
                     const char *peer);
/* Closes after the current event batch; reason is logged at debug. */
void kb_conn_close(kb_conn *c, const char *reason);
/* Frees a closed connection (the server calls this after the batch). */
void kb_conn_free(kb_conn *c);
/* Queues an encoded response (takes ownership) and tries to write it. */
void kb_conn_send(kb_conn *c, kb_out *out);
/* Ends the request in flight and resumes reading. */
void kb_conn_request_done(kb_conn *c);

#endif
