#include "kb_ctrl_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kb_work.h"
#include "kp_batch.h"
#include "kp_msg.h"

#define MAX_IN_FLIGHT 16

/* A host name resolved on a helper thread (getaddrinfo may block). */
typedef struct resolve_job {
    kb_ctrl_conn *conn; /* NULL once the connection gave up on it */
    char host[256];
    uint16_t port;
    struct sockaddr_storage ss;
    socklen_t sl;
    bool ok;
} resolve_job;

typedef struct pending {
    int32_t corr;
    kb_ctrl_resp_fn *cb;
    void *arg;
} pending;

struct kb_ctrl_conn {
    kb_loop *loop;
    kb_work *work;       /* resolves names; NULL: addresses only */
    resolve_job *job;    /* the name being resolved, or NULL */
    char *client_id;
    int fd;
    bool connected;
    int32_t next_corr;
    pending q[MAX_IN_FLIGHT];
    int qhead, qlen;
    kp_writer out;     /* framed requests not yet written */
    size_t out_done;   /* bytes of out already written */
    uint8_t *in;       /* the response being read */
    size_t in_len, in_cap;
    kb_timer fail_timer; /* runs the failed callbacks off the caller's stack */
    pending failed[MAX_IN_FLIGHT];
    int nfailed;
};

kb_ctrl_conn *kb_ctrl_conn_new(kb_loop *loop, kb_work *work, const char *client_id)
{
    kb_ctrl_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->client_id = strdup(client_id);
    if (c->client_id == NULL) {
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->work = work;
    c->fd = -1;
    c->next_corr = 1;
    kp_writer_init(&c->out, 4096);
    kb_timer_init(&c->fail_timer, NULL, c);
    return c;
}

static void run_failed(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_ctrl_conn *c = arg;
    int n = c->nfailed;
    pending done[MAX_IN_FLIGHT];
    memcpy(done, c->failed, sizeof(done));
    c->nfailed = 0;
    for (int i = 0; i < n; i++)
        done[i].cb(done[i].arg, NULL);
}

static void drop_socket(kb_ctrl_conn *c)
{
    if (c->job != NULL)
        c->job->conn = NULL; /* its done() frees it */
    c->job = NULL;
    if (c->fd >= 0) {
        kb_loop_del_fd(c->loop, c->fd);
        close(c->fd);
    }
    c->fd = -1;
    c->connected = false;
    kp_writer_fini(&c->out);
    kp_writer_init(&c->out, 4096);
    c->out_done = 0;
    c->in_len = 0;
}

void kb_ctrl_conn_close(kb_ctrl_conn *c)
{
    drop_socket(c);
    for (; c->qlen > 0; c->qlen--, c->qhead = (c->qhead + 1) % MAX_IN_FLIGHT)
        c->failed[c->nfailed++] = c->q[c->qhead];
    c->qhead = 0;
    if (c->nfailed > 0) {
        c->fail_timer.cb = run_failed;
        kb_timer_arm(c->loop, &c->fail_timer, 0);
    }
}

void kb_ctrl_conn_free(kb_ctrl_conn *c)
{
    if (c == NULL)
        return;
    drop_socket(c);
    kb_timer_disarm(c->loop, &c->fail_timer);
    kp_writer_fini(&c->out);
    free(c->in);
    free(c->client_id);
    free(c);
}

bool kb_ctrl_conn_is_open(const kb_ctrl_conn *c)
{
    return c->fd >= 0 || c->job != NULL;
}

int kb_ctrl_conn_in_flight(const kb_ctrl_conn *c)
{
    return c->qlen;
}

static unsigned wanted_events(const kb_ctrl_conn *c)
{
    return KB_EV_READ | (!c->connected || c->out_done < c->out.len ? KB_EV_WRITE : 0u);
}

static bool flush_out(kb_ctrl_conn *c)
{
    while (c->out_done < c->out.len) {
        ssize_t n = send(c->fd, c->out.buf + c->out_done, c->out.len - c->out_done, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->out_done += (size_t)n;
    }
    kp_writer_fini(&c->out);
    kp_writer_init(&c->out, 4096);
    c->out_done = 0;
    return true;
}

/* One whole response frame in c->in: match it to the oldest request. */
static bool deliver(kb_ctrl_conn *c, size_t frame_len)
{
    kp_reader r = kp_reader_make(c->in + 4, frame_len);
    int32_t corr = kp_read_i32(&r);
    kp_skip_tags(&r); /* response header v1: every API here is flexible */
    if (r.err != KP_ERR_NONE || c->qlen == 0 || c->q[c->qhead].corr != corr)
        return false;
    pending p = c->q[c->qhead];
    c->qhead = (c->qhead + 1) % MAX_IN_FLIGHT;
    c->qlen--;
    p.cb(p.arg, &r);
    return true;
}

static bool grow_in(kb_ctrl_conn *c, size_t need)
{
    if (need <= c->in_cap)
        return true;
    size_t cap = c->in_cap ? c->in_cap : 65536;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(c->in, cap);
    if (p == NULL)
        return false;
    c->in = p;
    c->in_cap = cap;
    return true;
}

/* Reads what the socket has; false when the connection must fail. */
static bool read_in(kb_ctrl_conn *c)
{
    for (;;) {
        size_t want = 4;
        if (c->in_len >= 4) {
            int32_t n = kp_be32_get(c->in);
            if (n < 4 || n > KB_CTRL_MAX_FRAME)
                return false;
            want = 4 + (size_t)n;
            if (c->in_len == want) {
                c->in_len = 0;
                if (!deliver(c, want - 4))
                    return false;
                if (c->fd < 0)
                    return true; /* the callback closed us */
                continue;
            }
        }
        if (!grow_in(c, want))
            return false;
        ssize_t got = recv(c->fd, c->in + c->in_len, want - c->in_len, 0);
        if (got == 0)
            return false;
        if (got < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->in_len += (size_t)got;
    }
}

static void on_io(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)fd;
    kb_ctrl_conn *c = arg;
    if (!c->connected && (events & KB_EV_WRITE)) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            kb_ctrl_conn_close(c);
            return;
        }
        c->connected = true;
    }
    bool ok = !c->connected || flush_out(c);
    if (ok && (events & KB_EV_READ) && c->connected)
        ok = read_in(c);
    if (!ok) {
        kb_ctrl_conn_close(c);
        return;
    }
    if (c->fd >= 0)
        kb_loop_mod_fd(loop, c->fd, wanted_events(c));
}

static bool resolve(const char *host, uint16_t port, int flags, struct sockaddr_storage *ss,
                    socklen_t *sl)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = flags}, *res = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", port);
    if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL)
        return false;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sl = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

static kp_err connect_to(kb_ctrl_conn *c, const struct sockaddr_storage *ss, socklen_t sl)
{
    c->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return KP_ERR__IO;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if ((connect(c->fd, (const struct sockaddr *)ss, sl) != 0 && errno != EINPROGRESS) ||
        kb_loop_add_fd(c->loop, c->fd, KB_EV_READ | KB_EV_WRITE, on_io, c) != KP_ERR_NONE) {
        close(c->fd);
        c->fd = -1;
        return KP_ERR__IO;
    }
    return KP_ERR_NONE;
}

static void resolve_on_helper(void *arg)
{
    resolve_job *j = arg;
    j->ok = resolve(j->host, j->port, 0, &j->ss, &j->sl);
}

static void resolved(void *arg)
{
    resolve_job *j = arg;
    kb_ctrl_conn *c = j->conn;
    if (c != NULL) {
        c->job = NULL;
        if (!j->ok || connect_to(c, &j->ss, j->sl) != KP_ERR_NONE)
            kb_ctrl_conn_close(c); /* queued requests fail */
    }
    free(j);
}

/* A name (not an address literal): resolved on a helper thread, requests
 * queued meanwhile. */
static kp_err resolve_later(kb_ctrl_conn *c, const char *host, uint16_t port)
{
    if (c->work == NULL || strlen(host) >= sizeof(c->job->host))
        return KP_ERR__INVAL;
    resolve_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return KP_ERR__NOMEM;
    j->conn = c;
    snprintf(j->host, sizeof(j->host), "%s", host);
    j->port = port;
    if (kb_work_post(c->work, resolve_on_helper, resolved, j) != KP_ERR_NONE) {
        free(j);
        return KP_ERR__IO;
    }
    c->job = j;
    return KP_ERR_NONE;
}

kp_err kb_ctrl_conn_open(kb_ctrl_conn *c, const char *host, uint16_t port)
{
    kb_ctrl_conn_close(c);
    struct sockaddr_storage ss;
    socklen_t sl;
    if (resolve(host, port, AI_NUMERICHOST, &ss, &sl))
        return connect_to(c, &ss, sl);
    return resolve_later(c, host, port);
}

kp_err kb_ctrl_conn_send(kb_ctrl_conn *c, int16_t api_key, int16_t version, kb_ctrl_encode_fn *enc,
                         const void *msg, kb_ctrl_resp_fn *cb, void *arg)
{
    if (!kb_ctrl_conn_is_open(c) || c->qlen == MAX_IN_FLIGHT)
        return KP_ERR__INVAL;
    kp_request_header h = {api_key, version, c->next_corr, kp_str_from(c->client_id)};
    size_t start = c->out.len;
    kp_write_i32(&c->out, 0);
    kp_request_header_encode(&c->out, &h, 2);
    enc(&c->out, msg, version);
    if (c->out.err != KP_ERR_NONE)
        return c->out.err;
    kp_be32_put(c->out.buf + start, (int32_t)(c->out.len - start - 4));
    c->q[(c->qhead + c->qlen) % MAX_IN_FLIGHT] = (pending){c->next_corr++, cb, arg};
    c->qlen++;
    if (c->connected && !flush_out(c)) {
        kb_ctrl_conn_close(c);
        return KP_ERR_NONE; /* the callback reports the failure */
    }
    if (c->fd >= 0)
        kb_loop_mod_fd(c->loop, c->fd, wanted_events(c));
    return KP_ERR_NONE;
}
