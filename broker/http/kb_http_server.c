/* kb_http_server: see kb_http_server.h. */
#include "kb_http_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RESP_HEADERS_MAX  4096u
#define RESP_HEAD_MAX     (RESP_HEADERS_MAX + 512u)
#define IN_INITIAL        4096u
#define ACCEPTS_PER_WAKE  64
#define CLOSE_GRACE_MS    2000
#define BODY_KEEP_MAX     65536u /* a body buffer larger than this is freed after use */
#define LINGER_MAX        (256u << 10) /* bytes discarded before closing anyway */

struct kb_http_response {
    int status;
    bool failed; /* over the cap or out of memory: sent as a 500 */
    char content_type[128];
    char headers[RESP_HEADERS_MAX];
    size_t headers_len;
    char *body;
    size_t body_len, body_cap, body_max;
};

typedef enum conn_state {
    HC_IDLE,    /* keep-alive, no byte of the next request yet */
    HC_READING, /* reading a request's head and body */
    HC_WRITING, /* writing a response; no reading */
    HC_LINGER,  /* answered and shut down for writing; discarding input */
} conn_state;

typedef struct http_conn {
    kb_http_server *srv;
    struct http_conn *prev, *next;
    int fd;
    conn_state state;
    bool close_after_write;
    kb_timer timer;
    char *in;
    size_t in_len, in_cap;
    kb_http_request req;
    kb_http_response resp;
    char head[RESP_HEAD_MAX];
    size_t head_len;
    size_t out_off; /* bytes of head + body already written */
    size_t lingered; /* bytes discarded in HC_LINGER */
    bool send_body; /* false for HEAD */
} http_conn;

struct kb_http_server {
    kb_loop *loop;
    int fd;
    uint16_t port;
    kb_http_server_opts opts;
    http_conn *conns;
    size_t n_conns;
};

/* --- the response --- */

static void resp_reset(kb_http_response *r, size_t body_max)
{
    r->status = 200;
    r->failed = false;
    snprintf(r->content_type, sizeof r->content_type, "text/plain; charset=utf-8");
    r->headers_len = 0;
    r->body_len = 0;
    r->body_max = body_max;
}

void kb_http_resp_status(kb_http_response *resp, int status)
{
    resp->status = status >= 100 && status <= 599 ? status : 500;
}

static bool has_crlf(const char *s)
{
    return strpbrk(s, "\r\n") != NULL;
}

void kb_http_resp_content_type(kb_http_response *resp, const char *type)
{
    if (!has_crlf(type)) {
        snprintf(resp->content_type, sizeof resp->content_type, "%s", type);
    }
}

void kb_http_resp_header(kb_http_response *resp, const char *name, const char *value)
{
    if (has_crlf(name) || has_crlf(value) || strchr(name, ':') != NULL) {
        return;
    }
    size_t room = sizeof resp->headers - resp->headers_len;
    int n = snprintf(resp->headers + resp->headers_len, room, "%s: %s\r\n", name, value);
    if (n > 0 && (size_t)n < room) {
        resp->headers_len += (size_t)n;
    } else {
        resp->headers[resp->headers_len] = '\0';
    }
}

static bool body_reserve(kb_http_response *r, size_t more)
{
    if (r->failed || more > r->body_max - r->body_len) {
        r->failed = true;
        return false;
    }
    size_t need = r->body_len + more;
    if (need <= r->body_cap) {
        return true;
    }
    size_t cap = r->body_cap ? r->body_cap : 4096;
    while (cap < need) {
        cap *= 2;
    }
    char *p = realloc(r->body, cap);
    if (p == NULL) {
        r->failed = true;
        return false;
    }
    r->body = p;
    r->body_cap = cap;
    return true;
}

bool kb_http_resp_append(kb_http_response *resp, const void *data, size_t len)
{
    if (len == 0) {
        return !resp->failed;
    }
    if (!body_reserve(resp, len)) {
        return false;
    }
    memcpy(resp->body + resp->body_len, data, len);
    resp->body_len += len;
    return true;
}

bool kb_http_resp_vprintf(kb_http_response *resp, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    bool ok;
    if (n < 0) {
        ok = false;
    } else if ((size_t)n < sizeof small) {
        ok = kb_http_resp_append(resp, small, (size_t)n);
    } else if ((ok = body_reserve(resp, (size_t)n + 1))) {
        vsnprintf(resp->body + resp->body_len, (size_t)n + 1, fmt, ap2);
        resp->body_len += (size_t)n;
    }
    va_end(ap2);
    return ok;
}

bool kb_http_resp_printf(kb_http_response *resp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = kb_http_resp_vprintf(resp, fmt, ap);
    va_end(ap);
    return ok;
}

size_t kb_http_resp_body_len(const kb_http_response *resp)
{
    return resp->body_len;
}

/* --- connections --- */

static void conn_close(http_conn *c)
{
    kb_http_server *srv = c->srv;
    kb_timer_disarm(srv->loop, &c->timer);
    kb_loop_del_fd(srv->loop, c->fd);
    close(c->fd);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        srv->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    srv->n_conns--;
    free(c->resp.body);
    free(c->in);
    free(c);
}

static void arm(http_conn *c, int64_t ms)
{
    if (kb_timer_arm(c->srv->loop, &c->timer, ms) != KP_ERR_NONE) {
        kb_timer_disarm(c->srv->loop, &c->timer);
    }
}

/* Formats the status line and headers of c->resp into c->head. */
static void build_head(http_conn *c)
{
    kb_http_response *r = &c->resp;
    if (r->failed) {
        r->status = 500;
        r->body_len = 0;
        r->headers_len = 0;
        snprintf(r->content_type, sizeof r->content_type, "text/plain; charset=utf-8");
    }
    r->headers[r->headers_len] = '\0';
    int n = snprintf(c->head, sizeof c->head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: %s\r\n\r\n",
                     r->status, kb_http_reason(r->status), r->content_type, r->body_len,
                     r->headers, c->close_after_write ? "close" : "keep-alive");
    c->head_len = n > 0 && (size_t)n < sizeof c->head ? (size_t)n : 0;
    c->out_off = 0;
}

static size_t out_total(const http_conn *c)
{
    return c->head_len + (c->send_body ? c->resp.body_len : 0);
}

/* Writes what the socket takes; false if the connection was closed. */
static bool flush_out(http_conn *c);

static bool start_response(http_conn *c)
{
    build_head(c);
    c->state = HC_WRITING;
    arm(c, c->srv->opts.idle_timeout_ms);
    return flush_out(c);
}

/* A canned error answer; the connection closes after it. */
static bool respond_error(http_conn *c, int status)
{
    resp_reset(&c->resp, c->srv->opts.max_response_bytes);
    kb_http_resp_status(&c->resp, status);
    if (status == 405) {
        kb_http_resp_header(&c->resp, "Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH");
    }
    kb_http_resp_printf(&c->resp, "%d %s\n", status, kb_http_reason(status));
    c->close_after_write = true;
    c->send_body = true;
    return start_response(c);
}

static bool serve_request(http_conn *c)
{
    kb_timer_disarm(c->srv->loop, &c->timer);
    resp_reset(&c->resp, c->srv->opts.max_response_bytes);
    c->close_after_write = !c->req.keep_alive;
    c->send_body = c->req.method != KB_HTTP_HEAD;
    c->srv->opts.handler(&c->req, &c->resp, c->srv->opts.arg);
    return start_response(c);
}

/* Parses what is buffered; answers a whole request. False if closed. */
static bool try_parse(http_conn *c)
{
    kb_http_result r = kb_http_parse(c->in, c->in_len, &c->req);
    if (r == KB_HTTP_ERROR) {
        return respond_error(c, c->req.error_status);
    }
    if (r == KB_HTTP_DONE) {
        return serve_request(c);
    }
    if (c->in_len >= KB_HTTP_REQUEST_MAX) {
        return respond_error(c, 400); /* unreachable by kb_http_parse's limits */
    }
    return true;
}

/* The response is written: close, or go back to reading. */
/* Closing at once with unread input would reset the connection and could
 * lose the answer at the peer: shut down writing and discard input a while. */
static bool linger(http_conn *c)
{
    if (shutdown(c->fd, SHUT_WR) != 0 ||
        kb_loop_mod_fd(c->srv->loop, c->fd, KB_EV_READ) != KP_ERR_NONE) {
        conn_close(c);
        return false;
    }
    c->state = HC_LINGER;
    arm(c, CLOSE_GRACE_MS);
    return true;
}

static void discard_in(http_conn *c)
{
    char sink[4096];
    ssize_t n = read(c->fd, sink, sizeof sink);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
    }
    c->lingered += n > 0 ? (size_t)n : 0;
    if (n <= 0 || c->lingered > LINGER_MAX) {
        conn_close(c);
    }
}

static bool response_done(http_conn *c)
{
    if (c->close_after_write) {
        return linger(c);
    }
    if (c->resp.body_cap > BODY_KEEP_MAX) {
        free(c->resp.body);
        c->resp.body = NULL;
        c->resp.body_cap = 0;
    }
    size_t used = c->req.consumed;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    kb_http_request_reset(&c->req);
    if (kb_loop_mod_fd(c->srv->loop, c->fd, KB_EV_READ) != KP_ERR_NONE) {
        conn_close(c);
        return false;
    }
    if (c->in_len == 0) {
        c->state = HC_IDLE;
        arm(c, c->srv->opts.idle_timeout_ms);
        return true;
    }
    c->state = HC_READING;
    arm(c, c->srv->opts.head_timeout_ms);
    return try_parse(c);
}

static bool flush_out(http_conn *c)
{
    for (;;) {
        size_t total = out_total(c);
        if (c->out_off >= total) {
            return response_done(c);
        }
        struct iovec iov[2];
        int n = 0;
        if (c->out_off < c->head_len) {
            iov[n++] = (struct iovec){c->head + c->out_off, c->head_len - c->out_off};
        }
        size_t body_off = c->out_off > c->head_len ? c->out_off - c->head_len : 0;
        if (c->send_body && body_off < c->resp.body_len) {
            iov[n++] = (struct iovec){c->resp.body + body_off, c->resp.body_len - body_off};
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EINTR)) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            kb_loop_mod_fd(c->srv->loop, c->fd, KB_EV_WRITE) == KP_ERR_NONE) {
            return true;
        }
        conn_close(c);
        return false;
    }
}

/* Reads what the socket has (bounded by the request cap). False if closed. */
static bool read_in(http_conn *c)
{
    if (c->in_len == c->in_cap) {
        size_t cap = c->in_cap * 2 > KB_HTTP_REQUEST_MAX ? KB_HTTP_REQUEST_MAX : c->in_cap * 2;
        char *p = cap > c->in_cap ? realloc(c->in, cap + 1) : NULL;
        if (p == NULL) {
            conn_close(c);
            return false;
        }
        c->in = p;
        c->in_cap = cap;
    }
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        conn_close(c);
        return false;
    }
    if (c->state == HC_IDLE) {
        c->state = HC_READING;
        arm(c, c->srv->opts.head_timeout_ms);
    }
    c->in_len += (size_t)n;
    c->in[c->in_len] = '\0';
    return try_parse(c);
}

static void on_conn_io(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)fd;
    http_conn *c = arg;
    if (c->state == HC_LINGER) {
        discard_in(c);
        return;
    }
    if (c->state == HC_WRITING) {
        if (events & KB_EV_WRITE) {
            flush_out(c);
        }
        return;
    }
    if (events & KB_EV_READ) {
        read_in(c);
    }
}

static void on_conn_timer(kb_loop *loop, void *arg)
{
    (void)loop;
    http_conn *c = arg;
    if (c->state == HC_READING) {
        if (respond_error(c, 408) && c->state == HC_WRITING) {
            arm(c, CLOSE_GRACE_MS);
        }
        return;
    }
    conn_close(c);
}

static void conn_open(kb_http_server *srv, int fd)
{
    http_conn *c = calloc(1, sizeof *c);
    char *in = malloc(IN_INITIAL + 1);
    if (c == NULL || in == NULL ||
        kb_loop_add_fd(srv->loop, fd, KB_EV_READ, on_conn_io, c) != KP_ERR_NONE) {
        free(c);
        free(in);
        close(fd);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->srv = srv;
    c->fd = fd;
    c->in = in;
    c->in_cap = IN_INITIAL;
    c->state = HC_READING;
    kb_http_request_reset(&c->req);
    kb_timer_init(&c->timer, on_conn_timer, c);
    c->next = srv->conns;
    if (srv->conns != NULL) {
        srv->conns->prev = c;
    }
    srv->conns = c;
    srv->n_conns++;
    arm(c, srv->opts.head_timeout_ms);
}

static void on_accept(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)events;
    kb_http_server *srv = arg;
    for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            return; /* EAGAIN, or an error the next wakeup retries */
        }
        if (srv->n_conns >= srv->opts.max_conns) {
            close(cfd);
            continue;
        }
        conn_open(srv, cfd);
    }
}

/* --- the listener --- */

bool kb_http_url_split(const char *url, char *host, size_t host_cap, uint16_t *port)
{
    const char *p = strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
    if (p == NULL) {
        return false;
    }
    const char *colon;
    const char *h = p;
    size_t hlen;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (close == NULL || close[1] != ':') {
            return false;
        }
        h = p + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(p, ':');
        if (colon == NULL) {
            return false;
        }
        hlen = (size_t)(colon - p);
    }
    char *end;
    errno = 0;
    long v = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || (*end != '\0' && strcmp(end, "/") != 0) || errno != 0 || v < 0 ||
        v > 65535 || hlen >= host_cap || memchr(h, '/', hlen) != NULL) {
        return false;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)v;
    return true;
}

static int bind_first(struct addrinfo *ai)
{
    for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            return fd;
        }
        close(fd);
    }
    return -1;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return 0;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static kp_err open_listener(kb_http_server *srv, char *err, size_t errlen)
{
    char host[256], port[8];
    uint16_t p;
    if (!kb_http_url_split(srv->opts.url, host, sizeof host, &p)) {
        snprintf(err, errlen, "bad HTTP listener URL '%s' (want http://host:port)", srv->opts.url);
        return KP_ERR__INVAL;
    }
    snprintf(port, sizeof port, "%u", (unsigned)p);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", srv->opts.url, gai_strerror(rc));
        return KP_ERR__IO;
    }
    srv->fd = bind_first(ai);
    int saved = errno;
    freeaddrinfo(ai);
    if (srv->fd < 0) {
        snprintf(err, errlen, "cannot listen on '%s': %s", srv->opts.url, strerror(saved));
        return KP_ERR__IO;
    }
    srv->port = bound_port(srv->fd);
    return KP_ERR_NONE;
}

static void apply_defaults(kb_http_server_opts *o)
{
    o->max_conns = o->max_conns ? o->max_conns : 64;
    o->head_timeout_ms = o->head_timeout_ms > 0 ? o->head_timeout_ms : 10000;
    o->idle_timeout_ms = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : 60000;
    o->max_response_bytes = o->max_response_bytes ? o->max_response_bytes : 64u << 20;
}

kp_err kb_http_server_start(kb_loop *loop, const kb_http_server_opts *opts, kb_http_server **out,
                            char *err, size_t errlen)
{
    *out = NULL;
    kb_http_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        return KP_ERR__NOMEM;
    }
    srv->loop = loop;
    srv->opts = *opts;
    apply_defaults(&srv->opts);
    kp_err e = open_listener(srv, err, errlen);
    if (e == KP_ERR_NONE) {
        e = kb_loop_add_fd(loop, srv->fd, KB_EV_READ, on_accept, srv);
        if (e != KP_ERR_NONE) {
            snprintf(err, errlen, "cannot watch '%s'", opts->url);
            close(srv->fd);
        }
    }
    if (e != KP_ERR_NONE) {
        free(srv);
        return e;
    }
    *out = srv;
    return KP_ERR_NONE;
}

void kb_http_server_stop(kb_http_server *srv)
{
    if (srv == NULL) {
        return;
    }
    while (srv->conns != NULL) {
        conn_close(srv->conns);
    }
    kb_loop_del_fd(srv->loop, srv->fd);
    close(srv->fd);
    free(srv);
}

uint16_t kb_http_server_port(const kb_http_server *srv)
{
    return srv->port;
}

size_t kb_http_server_conn_count(const kb_http_server *srv)
{
    return srv->n_conns;
}
