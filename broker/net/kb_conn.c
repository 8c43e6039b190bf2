#include "kb_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_log.h"
#include "kb_server.h"
#include "kb_tls.h"

#define KB_CONN_READ_CHUNK (64 * 1024)
#define KB_CONN_OUT_PAUSE (16 * 1024 * 1024) /* stop reading above this backlog */
/* ...or above this many queued responses: each costs its bookkeeping, so a
 * client pipelining tiny requests and never reading is bounded too. Kafka
 * keeps one response per connection; clients pipeline five at most. */
#define KB_CONN_OUT_MAX_QUEUED 128
#define KB_CONN_COPY_BUF (64 * 1024)
#define KB_CONN_TLS_READS 16 /* TLS records read per readable event, at most */

/* What a transport call did: bytes moved (> 0), or one of these. */
enum { IO_AGAIN = 0, IO_FAIL = -1, IO_EOF = -2 };

static void conn_on_event(kb_loop *loop, int fd, unsigned events, void *arg);
static void conn_process(kb_conn *c);
static void conn_read(kb_conn *c);
static void conn_kick(kb_loop *loop, void *arg);
static void conn_unmute(kb_loop *loop, void *arg);

/* ---- state ------------------------------------------------------------ */

static bool transition_allowed(kb_conn_state from, kb_conn_state to)
{
    switch (to) {
    case KB_CONN_HANDSHAKING:
        return from == KB_CONN_READING;
    case KB_CONN_READING:
        return from == KB_CONN_HANDSHAKING || from == KB_CONN_PROCESSING ||
               from == KB_CONN_MUTED;
    case KB_CONN_PROCESSING:
        return from == KB_CONN_READING;
    case KB_CONN_MUTED:
        return from == KB_CONN_PROCESSING;
    case KB_CONN_DRAINING:
        return from == KB_CONN_READING || from == KB_CONN_PROCESSING || from == KB_CONN_MUTED;
    case KB_CONN_CLOSED:
        return from != KB_CONN_CLOSED;
    }
    return false;
}

bool kb_conn_in_flight(const kb_conn *c)
{
    return c->req.conn != NULL;
}

bool kb_conn_is_closing(const kb_conn *c)
{
    return c->state == KB_CONN_CLOSED;
}

/* The one place a connection changes state (kb_conn.h, States). */
static void conn_set_state(kb_conn *c, kb_conn_state to)
{
    KB_DCHECK(transition_allowed(c->state, to));
    c->state = to;
    /* Invariant 2: a request is in flight in PROCESSING, never while reading. */
    KB_DCHECK(to != KB_CONN_PROCESSING || kb_conn_in_flight(c));
    KB_DCHECK((to != KB_CONN_READING && to != KB_CONN_MUTED && to != KB_CONN_HANDSHAKING) ||
              !kb_conn_in_flight(c));
    /* Invariant 6: muted exactly while the mute timer runs. */
    KB_DCHECK(to == KB_CONN_CLOSED || to == KB_CONN_DRAINING ||
              (to == KB_CONN_MUTED) == kb_timer_armed(&c->mute_timer));
}

kb_conn *kb_conn_new(kb_server *srv, kb_broker *b, int fd, const kb_listener *l,
                     const char *peer)
{
    static uint64_t next_id = 1;
    kb_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->server = srv;
    c->broker = b;
    c->listener = l;
    c->fd = fd;
    c->id = next_id++;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    snprintf(c->principal, sizeof(c->principal), "User:ANONYMOUS");
    kb_timer_init(&c->tls_kick, conn_kick, c);
    kb_timer_init(&c->mute_timer, conn_unmute, c);
    c->last_active_ms = kb_loop_now_ms(b->loop);
    if (kb_loop_add_fd(b->loop, fd, KB_EV_READ, conn_on_event, c) != KP_ERR_NONE) {
        free(c);
        return NULL;
    }
    KB_LOG(KB_LL_DEBUG, KB_SUB_NET, "msg=\"connection accepted\" conn=%llu peer=%s",
           (unsigned long long)c->id, c->peer);
    return c;
}

static void out_free(kb_out *o)
{
    if (o->release != NULL)
        o->release(o->release_arg);
    free(o->mem);
    free(o->chunks);
    free(o);
}

void kb_conn_free(kb_conn *c)
{
    if (kb_conn_in_flight(c))
        kp_arena_fini(&c->req.arena);
    while (c->out_head != NULL) {
        kb_out *o = c->out_head;
        c->out_head = o->next;
        out_free(o);
    }
    kb_timer_disarm(c->broker->loop, &c->tls_kick);
    kb_timer_disarm(c->broker->loop, &c->mute_timer);
    kb_sasl_session_free(c->sasl);
    kb_tls_free(c->tls); /* before the fd closes: close_notify */
    if (c->fd >= 0)
        close(c->fd);
    free(c->rbuf);
    free(c->copy_buf);
    free(c);
}

void kb_conn_close(kb_conn *c, const char *reason)
{
    if (c->state == KB_CONN_CLOSED)
        return;
    conn_set_state(c, KB_CONN_CLOSED);
    KB_LOG(KB_LL_DEBUG, KB_SUB_NET,
           "msg=\"connection closed\" conn=%llu peer=%s reason=\"%s\" file_bytes_sendfile=%llu "
           "file_bytes_ktls=%llu file_bytes_copied=%llu",
           (unsigned long long)c->id, c->peer, reason, (unsigned long long)c->file_bytes_sendfile,
           (unsigned long long)c->file_bytes_ktls, (unsigned long long)c->file_bytes_copied);
    kb_loop_del_fd(c->broker->loop, c->fd);
    kb_timer_disarm(c->broker->loop, &c->tls_kick);
    kb_timer_disarm(c->broker->loop, &c->mute_timer);
    if (kb_conn_in_flight(c) && c->req.on_cancel != NULL) {
        kb_req_cancel_cb *cancel = c->req.on_cancel;
        c->req.on_cancel = NULL;
        cancel(&c->req);
    }
    kb_server_retire(c->server, c);
}

kp_err kb_conn_start_tls(kb_conn *c, kb_tls_ctx *ctx)
{
    c->tls = kb_tls_new(ctx, c->fd);
    if (c->tls == NULL)
        return KP_ERR__NOMEM;
    conn_set_state(c, KB_CONN_HANDSHAKING);
    return KP_ERR_NONE;
}

void kb_conn_require_sasl(kb_conn *c, const kb_sasl_listener *cfg)
{
    c->sasl_cfg = cfg;
    c->sasl_phase = KB_SASL_START;
}

static bool backlog_full(const kb_conn *c)
{
    return c->out_bytes >= KB_CONN_OUT_PAUSE || c->out_queued >= KB_CONN_OUT_MAX_QUEUED;
}

static bool conn_wants_read(const kb_conn *c)
{
    return c->state == KB_CONN_READING && !backlog_full(c);
}

/* Reading runs while no request is in flight and the backlog is small;
 * writing is armed only while output waits on a full socket. A TLS
 * handshake waits for whichever direction OpenSSL asked for. */
static void conn_update_events(kb_conn *c)
{
    if (c->state == KB_CONN_CLOSED)
        return;
    unsigned ev = 0;
    if (c->state == KB_CONN_HANDSHAKING) {
        ev = c->tls_hs_want_write ? KB_EV_WRITE : KB_EV_READ;
    } else {
        if (conn_wants_read(c) || c->tls_write_on_read)
            ev |= KB_EV_READ;
        if (c->write_blocked || c->tls_read_on_write)
            ev |= KB_EV_WRITE;
        if (c->tls != NULL && conn_wants_read(c) && kb_tls_pending(c->tls) > 0 &&
            kb_timer_arm(c->broker->loop, &c->tls_kick, 0) != KP_ERR_NONE)
            kb_conn_close(c, "cannot arm a timer");
    }
    if (kb_loop_mod_fd(c->broker->loop, c->fd, ev) != KP_ERR_NONE)
        kb_conn_close(c, "epoll_ctl failed");
}

static void conn_kick(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_conn *c = arg;
    if (c->state != KB_CONN_CLOSED && conn_wants_read(c))
        conn_read(c);
}

/* ---- transport: the socket itself, or TLS over it ------------------------ */

static ssize_t io_tls_result(kb_conn *c, ssize_t n, bool reading)
{
    if (n > 0)
        return n;
    switch (n) {
    case KB_TLS_WANT_READ:
        if (!reading)
            c->tls_write_on_read = true;
        return IO_AGAIN;
    case KB_TLS_WANT_WRITE:
        if (reading)
            c->tls_read_on_write = true;
        return IO_AGAIN;
    case KB_TLS_CLOSED:
        return IO_EOF;
    default:
        KB_LOG(KB_LL_INFO, KB_SUB_NET, "msg=\"TLS error; closing\" conn=%llu peer=%s why=\"%s\"",
               (unsigned long long)c->id, c->peer, kb_tls_why(c->tls));
        return IO_FAIL;
    }
}

static ssize_t io_recv(kb_conn *c, void *buf, size_t len)
{
    if (c->tls != NULL)
        return io_tls_result(c, kb_tls_read(c->tls, buf, len), true);
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n > 0)
        return n;
    if (n == 0)
        return IO_EOF;
    return (errno == EAGAIN || errno == EINTR) ? IO_AGAIN : IO_FAIL;
}

/* Returns bytes sent, 0 when the socket is full, -1 on error. */
static ssize_t io_send(kb_conn *c, const void *buf, size_t len)
{
    ssize_t n;
    if (c->tls != NULL)
        n = io_tls_result(c, kb_tls_write(c->tls, buf, len), false);
    else if ((n = send(c->fd, buf, len, MSG_NOSIGNAL)) < 0)
        n = (errno == EAGAIN || errno == EINTR) ? IO_AGAIN : IO_FAIL;
    return n < 0 ? -1 : n;
}

/* Drives the TLS handshake one step per socket event. */
static void conn_handshake(kb_conn *c)
{
    int rc = kb_tls_handshake(c->tls);
    if (rc == KB_TLS_WANT_READ || rc == KB_TLS_WANT_WRITE) {
        c->tls_hs_want_write = rc == KB_TLS_WANT_WRITE;
        conn_update_events(c);
        return;
    }
    if (rc != KB_TLS_DONE) {
        if (rc == KB_TLS_FAILED)
            KB_LOG(KB_LL_INFO, KB_SUB_NET,
                   "msg=\"TLS handshake failed\" conn=%llu peer=%s listener=%s why=\"%s\"",
                   (unsigned long long)c->id, c->peer, c->listener->li_name, kb_tls_why(c->tls));
        kb_conn_close(c, "TLS handshake failed");
        return;
    }
    conn_set_state(c, KB_CONN_READING);
    kb_tls_principal(c->tls, c->principal, sizeof(c->principal));
    char desc[128];
    kb_tls_describe(c->tls, desc, sizeof(desc));
    KB_LOG(KB_LL_DEBUG, KB_SUB_NET,
           "msg=\"TLS established\" conn=%llu peer=%s tls=\"%s\" ktls_send=%d principal=\"%s\"",
           (unsigned long long)c->id, c->peer, desc, kb_tls_ktls_send(c->tls), c->principal);
    conn_update_events(c);
    conn_read(c); /* the first request may already be decrypted */
}

/* ---- output ------------------------------------------------------------- */

static void out_segment(const kb_out *o, int32_t seg, size_t *start, size_t *len)
{
    int32_t i = seg / 2;
    if (seg % 2 == 1) {
        *start = 0;
        *len = (size_t)o->chunks[i].file.len;
        return;
    }
    size_t from = i == 0 ? 0 : o->chunks[i - 1].mem_pos;
    size_t to = i < o->nchunks ? o->chunks[i].mem_pos : o->mem_len;
    *start = from;
    *len = to - from;
}

/* Sends part of a file chunk; returns bytes sent, 0 on EAGAIN, -1 on error. */
static ssize_t send_file_part(kb_conn *c, const kp_wchunk *ch, size_t done)
{
    size_t left = (size_t)ch->file.len - done;
    off_t off = (off_t)(ch->file.off + (int64_t)done);
    if (c->broker->cfg->fetch_zerocopy && c->tls == NULL) {
        ssize_t n = sendfile(c->fd, ch->file.fd, &off, left);
        if (n < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        if (n == 0)
            return -1; /* the file shrank under us */
        c->file_bytes_sendfile += (uint64_t)n;
        return n;
    }
    if (c->broker->cfg->fetch_zerocopy && kb_tls_ktls_send(c->tls)) {
        ssize_t n = io_tls_result(c, kb_tls_sendfile(c->tls, ch->file.fd, off, left), false);
        if (n < 0)
            return -1;
        c->file_bytes_ktls += (uint64_t)n;
        return n;
    }
    /* copy_buf holds the bytes at off while a write of them is pending; a
     * retry after a full socket sends them again from the same address. */
    if (c->copy_off == c->copy_len) {
        if (c->copy_buf == NULL && (c->copy_buf = malloc(KB_CONN_COPY_BUF)) == NULL)
            return -1;
        size_t want = left < KB_CONN_COPY_BUF ? left : KB_CONN_COPY_BUF;
        ssize_t got = pread(ch->file.fd, c->copy_buf, want, off);
        if (got <= 0)
            return -1;
        c->copy_len = (size_t)got;
        c->copy_off = 0;
    }
    ssize_t n = io_send(c, c->copy_buf + c->copy_off, c->copy_len - c->copy_off);
    if (n > 0) {
        c->copy_off += (size_t)n;
        c->file_bytes_copied += (uint64_t)n;
    }
    return n;
}

/* Writes as much of o as the socket takes. Returns 1 when o is fully sent,
 * 0 when the socket is full, -1 on error. */
static int out_write(kb_conn *c, kb_out *o)
{
    while (o->seg <= 2 * o->nchunks) {
        size_t start, len;
        out_segment(o, o->seg, &start, &len);
        if (o->seg_off == len) {
            o->seg++;
            o->seg_off = 0;
            continue;
        }
        ssize_t n;
        if (o->seg % 2 == 1) {
            n = send_file_part(c, &o->chunks[o->seg / 2], o->seg_off);
        } else {
            n = io_send(c, o->mem + start + o->seg_off, len - o->seg_off);
        }
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        o->seg_off += (size_t)n;
        c->out_bytes -= (size_t)n;
    }
    return 1;
}

static void conn_flush(kb_conn *c)
{
    while (c->out_head != NULL && c->state != KB_CONN_CLOSED) {
        kb_out *o = c->out_head;
        int rc = out_write(c, o);
        if (rc < 0) {
            kb_conn_close(c, "write failed");
            return;
        }
        if (rc == 0) {
            /* A TLS write waiting for readable data must not arm EPOLLOUT:
             * the socket is writable and the loop would spin. */
            c->write_blocked = !c->tls_write_on_read;
            conn_update_events(c);
            return;
        }
        c->out_head = o->next;
        if (c->out_head == NULL)
            c->out_tail = NULL;
        c->out_queued--;
        out_free(o);
    }
    c->write_blocked = false;
    if (c->out_head == NULL) { /* all sent: an idle connection keeps no copy buffer */
        free(c->copy_buf);
        c->copy_buf = NULL;
        c->copy_len = c->copy_off = 0;
    }
    if (c->state == KB_CONN_DRAINING && c->out_head == NULL) {
        kb_conn_close(c, "closed after the last response");
        return;
    }
    /* The backlog drained: frames held back by it can go now. */
    if (!c->dispatching && c->state == KB_CONN_READING && c->rlen >= 4) {
        conn_process(c);
        return;
    }
    conn_update_events(c);
}

void kb_conn_close_after_send(kb_conn *c, const char *reason)
{
    if (c->state == KB_CONN_DRAINING || c->state == KB_CONN_CLOSED)
        return;
    KB_LOG(KB_LL_DEBUG, KB_SUB_NET, "msg=\"closing after the last response\" conn=%llu reason=\"%s\"",
           (unsigned long long)c->id, reason);
    kb_timer_disarm(c->broker->loop, &c->mute_timer);
    conn_set_state(c, KB_CONN_DRAINING);
}

void kb_conn_send(kb_conn *c, kb_out *out)
{
    if (c->state == KB_CONN_CLOSED) {
        out_free(out);
        return;
    }
    out->next = NULL;
    if (c->out_tail != NULL)
        c->out_tail->next = out;
    else
        c->out_head = out;
    c->out_tail = out;
    c->out_bytes += out->total;
    c->out_queued++;
    conn_flush(c);
}

/* ---- input -------------------------------------------------------------- */

static int32_t frame_size(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static bool conn_reserve(kb_conn *c, size_t need)
{
    if (need <= c->rcap)
        return true;
    uint8_t *b = realloc(c->rbuf, need);
    if (b == NULL)
        return false;
    c->rbuf = b;
    c->rcap = need;
    return true;
}

void kb_conn_request_done(kb_conn *c, int64_t mute_ms)
{
    KB_DCHECK(kb_conn_in_flight(c));
    size_t used = 4 + (size_t)frame_size(c->rbuf);
    kp_arena_fini(&c->req.arena);
    memset(&c->req, 0, sizeof(c->req));
    memmove(c->rbuf, c->rbuf + used, c->rlen - used);
    c->rlen -= used;
    if (c->state != KB_CONN_PROCESSING)
        return; /* DRAINING or CLOSED: no further request */
    if (mute_ms > 0 && kb_timer_arm(c->broker->loop, &c->mute_timer, mute_ms) == KP_ERR_NONE)
        conn_set_state(c, KB_CONN_MUTED);
    else
        conn_set_state(c, KB_CONN_READING);
    /* Inside the dispatch, conn_process's own loop picks up the next frame. */
    if (c->dispatching)
        return;
    conn_process(c);
}

static void conn_unmute(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_conn *c = arg;
    if (c->state != KB_CONN_MUTED)
        return;
    conn_set_state(c, KB_CONN_READING);
    conn_process(c); /* ends by re-arming reading */
}

/* Dispatches every whole frame at the front of the buffer, one at a time. */
static void conn_process(kb_conn *c)
{
    /* Frames already buffered wait while the output backlog is large, so a
     * client that pipelines requests and never reads cannot grow it further. */
    while (c->state == KB_CONN_READING && c->rlen >= 4 && !backlog_full(c)) {
        int32_t size = frame_size(c->rbuf);
        int32_t max = kb_sasl_frame_limit(c->sasl_cfg, c->sasl_phase,
                                          c->broker->cfg->socket_request_max_bytes);
        if (size <= 0 || size > max) {
            KB_LOG(KB_LL_WARN, KB_SUB_NET,
                   "msg=\"invalid frame size; closing\" conn=%llu peer=%s size=%d max=%d",
                   (unsigned long long)c->id, c->peer, size, max);
            kb_conn_close(c, "invalid frame size");
            return;
        }
        if (c->rlen < 4 + (size_t)size) {
            /* Wait for the rest; reading must be re-armed (a request just
             * answered in this loop may have paused it). */
            if (!conn_reserve(c, 4 + (size_t)size)) {
                kb_conn_close(c, "out of memory for a frame");
                return;
            }
            break;
        }
        c->req.conn = c; /* in flight; kb_dispatch fills the rest */
        conn_set_state(c, KB_CONN_PROCESSING);
        c->dispatching = true;
        c->broker->dispatch(c, c->rbuf + 4, (size_t)size);
        c->dispatching = false;
    }
    conn_update_events(c);
}

/* Reads what the socket holds into the buffer (one recv, or up to
 * KB_CONN_TLS_READS TLS records), then dispatches whole frames. */
static void conn_read(kb_conn *c)
{
    if (!conn_reserve(c, KB_CONN_READ_CHUNK)) {
        kb_conn_close(c, "out of memory");
        return;
    }
    c->tls_read_on_write = false;
    bool got = false;
    for (int i = 0; i < (c->tls != NULL ? KB_CONN_TLS_READS : 1); i++) {
        size_t room = c->rcap - c->rlen;
        if (room == 0)
            break;
        ssize_t n = io_recv(c, c->rbuf + c->rlen, room);
        if (n == IO_EOF || n == IO_FAIL) {
            kb_conn_close(c, n == IO_EOF ? "peer closed" : "read failed");
            return;
        }
        if (n == IO_AGAIN)
            break;
        c->rlen += (size_t)n;
        got = true;
    }
    if (got)
        c->last_active_ms = kb_loop_now_ms(c->broker->loop);
    conn_process(c);
}

static void conn_on_event(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)fd;
    kb_conn *c = arg;
    if (c->state == KB_CONN_HANDSHAKING) {
        conn_handshake(c);
        return;
    }
    if (c->state != KB_CONN_CLOSED && (events & KB_EV_WRITE) && c->tls_read_on_write && conn_wants_read(c))
        conn_read(c);
    if (c->state != KB_CONN_CLOSED && ((events & KB_EV_WRITE) || c->tls_write_on_read)) {
        c->tls_write_on_read = false;
        conn_flush(c);
    }
    if (c->state != KB_CONN_CLOSED && (events & KB_EV_READ) && conn_wants_read(c))
        conn_read(c);
}
