/*
 * kb_conn: one client connection: framing, the request in flight, and the
 * output queue.
 *
 * Job: read size-prefixed frames, hand each to the dispatcher one at a time,
 * and write the responses back in order, memory pieces with send() and file
 * ranges with sendfile(2) (or pread + send when zero-copy is off). On a TLS
 * listener every byte goes through the connection's kb_tls session: the
 * handshake first (driven by socket events, never blocking), then memory
 * pieces with SSL_write and file ranges with SSL_sendfile where the kernel
 * encrypts (kTLS) or pread + SSL_write otherwise.
 *
 * States (kb_conn_state; every change goes through one transition function
 * that checks it is one of these arrows and asserts the invariants below):
 *
 *   READING     -> HANDSHAKING                 (a TLS listener, at accept)
 *   HANDSHAKING -> READING                     (TLS handshake done)
 *   READING     -> PROCESSING                  (a whole frame dispatched)
 *   PROCESSING  -> READING | MUTED             (request done; MUTED when
 *                                               throttled, KIP-219)
 *   MUTED       -> READING                     (the throttle time passed)
 *   READING | PROCESSING | MUTED -> DRAINING   (close once output is sent;
 *                                               a request in flight still
 *                                               finishes and is answered)
 *   any but CLOSED -> CLOSED                   (freed after the event batch)
 *
 * Output is written whenever the socket accepts it, in every state but
 * HANDSHAKING and CLOSED. The transport's wait flags (write_blocked, the
 * tls_* wants) say which socket event the transport needs next; they are
 * not connection states.
 *
 * Invariants:
 *   1. A frame is accepted only if 0 < size <= socket.request.max.bytes;
 *      otherwise the connection closes before anything is allocated for it.
 *   2. At most one request is in flight; the frame it borrows is not moved
 *      until kb_conn_request_done(). A request is in flight (req.conn set)
 *      in PROCESSING always, in READING, MUTED and HANDSHAKING never.
 *   6. MUTED holds exactly while mute_timer is armed (unless CLOSED).
 *   3. A closing connection is freed after the current event batch, never
 *      inside its own callback; its fd is closed at the same moment.
 *   4. No request is read before the TLS handshake completes; decrypted
 *      bytes OpenSSL holds are read through a zero-delay timer, since the
 *      socket will not signal them again.
 *   5. Frames before SASL authentication completes are capped at the
 *      listener's sasl.server.max.receive.size (kb_sasl_frame_limit).
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

#include "kb_loop.h"
#include "kb_req.h"
#include "kb_sasl.h"
#include "kp_types.h"

typedef struct kb_server kb_server;
typedef struct kb_listener kb_listener;
typedef struct kb_tls kb_tls;
typedef struct kb_tls_ctx kb_tls_ctx;

typedef enum kb_conn_state {
    KB_CONN_READING = 0, /* waiting for a whole frame */
    KB_CONN_HANDSHAKING, /* TLS handshake; no request read yet */
    KB_CONN_PROCESSING,  /* a request in flight; reading paused */
    KB_CONN_MUTED,       /* quota throttle: no request read until the timer */
    KB_CONN_DRAINING,    /* closes once the queued responses are written */
    KB_CONN_CLOSED,      /* retired: no more I/O; freed after the batch */
} kb_conn_state;

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
    kb_conn_state state; /* changed by conn_set_state() only */
    kb_req req;          /* in flight while req.conn is set */
    /* send side */
    kb_out *out_head;
    kb_out *out_tail;
    size_t out_bytes;
    size_t out_queued; /* responses in the out list */
    /* Record bytes sent from log files, by the path that carried them:
     * sendfile(2), SSL_sendfile over kernel TLS, or a read into a buffer
     * then a write. Logged when the connection closes (DEBUG). */
    uint64_t file_bytes_sendfile;
    uint64_t file_bytes_ktls;
    uint64_t file_bytes_copied;
    /* Copy path: bytes read from the current file chunk and not yet taken
     * by the socket. They stay at one address until taken, because a TLS
     * write retried over kernel TLS resends from its first pointer
     * (kb_tls.h invariant 3). Allocated on first use, freed whenever the
     * output queue drains (its bytes are all sent then). */
    uint8_t *copy_buf;
    size_t copy_len; /* bytes read into copy_buf */
    size_t copy_off; /* of those, bytes already sent */
    int64_t last_active_ms;
    bool write_blocked; /* the socket refused bytes; EPOLLOUT is armed */
    bool dispatching;   /* inside kb_dispatch for the frame at the front */
    /* TLS: NULL on PLAINTEXT and SASL_PLAINTEXT listeners */
    kb_tls *tls;
    bool tls_hs_want_write; /* the handshake waits for a writable socket */
    bool tls_read_on_write; /* SSL_read needs the socket writable first */
    bool tls_write_on_read; /* SSL_write needs the socket readable first */
    kb_timer tls_kick;      /* reads what OpenSSL already decrypted */
    kb_timer mute_timer;    /* ends a quota mute (state MUTED) */
    /* authentication */
    const kb_sasl_listener *sasl_cfg; /* NULL unless a SASL listener */
    kb_sasl_phase sasl_phase;
    kb_sasl_session *sasl;  /* the exchange in progress; owned */
    char principal[256];    /* "User:ANONYMOUS", "User:<name>", "User:CN=..." */
};

kb_conn *kb_conn_new(kb_server *srv, kb_broker *b, int fd, const kb_listener *l,
                     const char *peer);
/* Wraps the socket in TLS; the handshake starts with the next event.
 * KP_ERR__NOMEM on failure (the caller frees the connection). */
kp_err kb_conn_start_tls(kb_conn *c, kb_tls_ctx *ctx);
/* Makes the connection authenticate with SASL before anything else. */
void kb_conn_require_sasl(kb_conn *c, const kb_sasl_listener *cfg);
/* Closes once every queued response has been written; reads no more. */
void kb_conn_close_after_send(kb_conn *c, const char *reason);
/* Closes after the current event batch; reason is logged at debug. */
void kb_conn_close(kb_conn *c, const char *reason);
/* Frees a closed connection (the server calls this after the batch). */
void kb_conn_free(kb_conn *c);
/* Queues an encoded response (takes ownership) and tries to write it. */
void kb_conn_send(kb_conn *c, kb_out *out);
/* Ends the request in flight and resumes reading; with mute_ms > 0 (quota
 * throttling, KIP-219) reads no further request for that long, the
 * responses already queued going out meanwhile. */
void kb_conn_request_done(kb_conn *c, int64_t mute_ms);
/* The connection was closed (kb_conn_close); it does no more I/O. */
bool kb_conn_is_closing(const kb_conn *c);
/* A request is in flight (dispatched, not yet done). */
bool kb_conn_in_flight(const kb_conn *c);

#endif
