#include "kb_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kb_log.h"
#include "kb_req.h"
#include "kb_sasl.h"
#include "kb_tls.h"

#define KB_IDLE_SWEEP_MS 1000

typedef struct server_listener {
    int fd;
    uint16_t port;
    const kb_listener *cfg;
    struct kb_server *srv;
    kb_tls_ctx *tls;        /* SSL and SASL_SSL listeners */
    kb_sasl_listener *sasl; /* SASL_PLAINTEXT and SASL_SSL listeners */
} server_listener;

struct kb_server {
    kb_broker *broker;
    server_listener *listeners;
    size_t nlisteners;
    kb_conn *live;
    kb_conn *dead;
    kb_timer idle_timer;
    size_t nlive;       /* connections on the live list */
    bool accept_paused; /* max.connections reached: listeners muted */
};

/* Mutes or unmutes every listener. While muted, new connections wait in the
 * kernel's backlog, as Kafka's acceptor blocks at max.connections. */
static void pause_accept(kb_server *srv, bool paused)
{
    if (srv->accept_paused == paused)
        return;
    srv->accept_paused = paused;
    KB_LOG(KB_LL_INFO, KB_SUB_NET, "msg=\"%s\" connections=%zu max_connections=%d",
           paused ? "max.connections reached; accepting paused" : "accepting resumed",
           srv->nlive, srv->broker->cfg->max_connections);
    for (size_t i = 0; i < srv->nlisteners; i++)
        if (kb_loop_mod_fd(srv->broker->loop, srv->listeners[i].fd, paused ? 0 : KB_EV_READ) !=
            KP_ERR_NONE)
            KB_LOG(KB_LL_WARN, KB_SUB_NET, "msg=\"epoll_ctl on a listener failed\"");
}

/* Length of the address part of "host:port". */
static size_t peer_host_len(const char *peer)
{
    const char *colon = strrchr(peer, ':');
    return colon != NULL ? (size_t)(colon - peer) : strlen(peer);
}

/* Live connections from the host of peer (a walk of the live list: it only
 * runs when max.connections.per.ip is set). */
static size_t conns_from_host(const kb_server *srv, const char *peer)
{
    size_t len = peer_host_len(peer), n = 0;
    for (const kb_conn *c = srv->live; c != NULL; c = c->next)
        if (peer_host_len(c->peer) == len && memcmp(c->peer, peer, len) == 0)
            n++;
    return n;
}

static void list_remove(kb_conn **head, kb_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

static void list_push(kb_conn **head, kb_conn *c)
{
    c->prev = NULL;
    c->next = *head;
    if (*head != NULL)
        (*head)->prev = c;
    *head = c;
}

void kb_server_retire(kb_server *srv, kb_conn *c)
{
    list_remove(&srv->live, c);
    list_push(&srv->dead, c);
    srv->nlive--;
    if (srv->nlive < (size_t)srv->broker->cfg->max_connections)
        pause_accept(srv, false);
}

static void free_dead(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_server *srv = arg;
    while (srv->dead != NULL) {
        kb_conn *c = srv->dead;
        list_remove(&srv->dead, c);
        kb_conn_free(c);
    }
}

static void peer_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, cap, "%s:%u", host, port);
}

/* Makes a connection of a socket accepted on sl; NULL (fd closed) on failure. */
static kb_conn *adopt(server_listener *sl, int fd, const char *peer)
{
    kb_server *srv = sl->srv;
    kb_conn *c = kb_conn_new(srv, srv->broker, fd, sl->cfg, peer);
    if (c == NULL) {
        close(fd);
        return NULL;
    }
    if (sl->sasl != NULL)
        kb_conn_require_sasl(c, sl->sasl);
    if (sl->tls != NULL && kb_conn_start_tls(c, sl->tls) != KP_ERR_NONE) {
        kb_loop_del_fd(srv->broker->loop, fd);
        kb_conn_free(c);
        return NULL;
    }
    list_push(&srv->live, c);
    srv->nlive++;
    return c;
}

kb_conn *kb_server_adopt(kb_server *srv, size_t listener_index, int fd, const char *peer)
{
    if (listener_index >= srv->nlisteners) {
        close(fd);
        return NULL;
    }
    return adopt(&srv->listeners[listener_index], fd, peer);
}

static void on_accept(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)fd;
    (void)events;
    server_listener *sl = arg;
    kb_server *srv = sl->srv;
    const kb_config *cfg = srv->broker->cfg;
    for (int i = 0; i < 64; i++) { /* bounded: other fds get their turn */
        if (srv->nlive >= (size_t)cfg->max_connections) {
            pause_accept(srv, true);
            return;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int cfd = accept4(sl->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                KB_LOG(KB_LL_WARN, KB_SUB_NET, "msg=\"accept failed\" errno=%d", errno);
            return;
        }
        int one = 1;
        (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (cfg->socket_send_buffer_bytes != -1) /* Kafka's socket.send.buffer.bytes */
            (void)setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &cfg->socket_send_buffer_bytes,
                             sizeof(cfg->socket_send_buffer_bytes));
        char peer[64];
        peer_name(&ss, peer, sizeof(peer));
        if (cfg->max_connections_per_ip < INT32_MAX &&
            conns_from_host(srv, peer) >= (size_t)cfg->max_connections_per_ip) {
            /* Kafka closes the new connection (TooManyConnectionsException). */
            KB_LOG(KB_LL_DEBUG, KB_SUB_NET,
                   "msg=\"max.connections.per.ip reached; closing\" peer=%s max=%d", peer,
                   cfg->max_connections_per_ip);
            close(cfd);
            continue;
        }
        (void)adopt(sl, cfd, peer);
    }
}

static void on_idle_sweep(kb_loop *loop, void *arg)
{
    kb_server *srv = arg;
    int64_t idle_ms = srv->broker->cfg->connections_max_idle_ms;
    int64_t now = kb_loop_now_ms(loop);
    kb_conn *c = srv->live;
    while (c != NULL) {
        kb_conn *next = c->next;
        if (idle_ms >= 0 && !kb_conn_in_flight(c) && c->out_head == NULL &&
            now - c->last_active_ms > idle_ms)
            kb_conn_close(c, "idle");
        c = next;
    }
    (void)kb_timer_arm(loop, &srv->idle_timer, KB_IDLE_SWEEP_MS);
}

/* Opens a listening socket on the first address that binds; 0 or errno.
 * rcvbuf (socket.receive.buffer.bytes, -1 for the OS default) is set before
 * listen(2) so accepted sockets inherit it, as Kafka's acceptor does. */
static int listen_on(struct addrinfo *ai, int32_t rcvbuf, int *out_fd)
{
    int saved = EADDRNOTAVAIL;
    for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1, zero = 0;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (a->ai_family == AF_INET6) /* dual stack for the any-address */
            (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (rcvbuf != -1)
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 511) == 0) {
            *out_fd = fd;
            return 0;
        }
        saved = errno;
        close(fd);
    }
    return saved;
}

/* Binds one listener; host "" means every interface (IPv6 dual stack first). */
static kp_err bind_listener(server_listener *sl, char *err, size_t errlen)
{
    const kb_listener *l = sl->cfg;
    char port[8];
    snprintf(port, sizeof(port), "%u", l->li_port);
    static const int families[] = {AF_INET6, AF_INET};
    int fd = -1, saved = 0;
    for (size_t i = 0; i < 2 && fd < 0; i++) {
        struct addrinfo hints = {.ai_family = l->li_host[0] ? AF_UNSPEC : families[i],
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        int rc = getaddrinfo(l->li_host[0] ? l->li_host : NULL, port, &hints, &ai);
        if (rc != 0) {
            snprintf(err, errlen, "config: listeners=%s://%s:%u: cannot resolve host: %s",
                     l->li_name, l->li_host, l->li_port, gai_strerror(rc));
            return KP_ERR__INVAL;
        }
        saved = listen_on(ai, sl->srv->broker->cfg->socket_receive_buffer_bytes, &fd);
        freeaddrinfo(ai);
        if (l->li_host[0])
            break;
    }
    if (fd < 0) {
        snprintf(err, errlen,
                 "config: listeners=%s://%s:%u: cannot listen: %s; stop whatever holds the "
                 "port or choose another (--override listeners=%s://HOST:PORT)",
                 l->li_name, l->li_host, l->li_port, strerror(saved), l->li_name);
        return KP_ERR__IO;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    sl->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    sl->fd = fd;
    return KP_ERR_NONE;
}

/* The TLS context and SASL settings a listener's protocol calls for. */
static kp_err secure_listener(kb_server *srv, server_listener *sl, char *err, size_t errlen)
{
    static int ktls = -1; /* probed once per process */
    kb_security_protocol p = sl->cfg->li_protocol;
    kp_err e = KP_ERR_NONE;
    if (p == KB_SEC_SSL || p == KB_SEC_SASL_SSL) {
        if (ktls < 0) {
            char why[128];
            ktls = kb_tls_ktls_probe(why, sizeof(why));
            KB_LOG(KB_LL_INFO, KB_SUB_NET, "msg=\"TLS fetch path\" path=%s reason=\"%s\"",
                   ktls ? "ktls-sendfile (per connection, when the kernel takes the keys)"
                        : "pread+SSL_write",
                   why);
        }
        e = kb_tls_ctx_new(srv->broker->cfg, sl->cfg, ktls == 1, &sl->tls, err, errlen);
    }
    if (e == KP_ERR_NONE && (p == KB_SEC_SASL_PLAINTEXT || p == KB_SEC_SASL_SSL))
        e = kb_sasl_listener_new(srv->broker->cfg, sl->cfg, &sl->sasl, err, errlen);
    return e;
}

kp_err kb_server_start(kb_broker *b, kb_server **out, char *err, size_t errlen)
{
    kb_server *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return KP_ERR__NOMEM;
    srv->broker = b;
    /* Initialised first: a failed start still runs kb_server_stop, which
     * disarms it. */
    kb_timer_init(&srv->idle_timer, on_idle_sweep, srv);
    *out = srv;
    const kb_listener_list *ls = &b->cfg->listeners;
    srv->listeners = calloc(ls->n, sizeof(*srv->listeners));
    if (srv->listeners == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->v[i].li_controller)
            continue; /* a single node has no controller quorum to serve */
        server_listener *sl = &srv->listeners[srv->nlisteners];
        sl->cfg = &ls->v[i];
        sl->srv = srv;
        sl->fd = -1;
        kp_err e = secure_listener(srv, sl, err, errlen);
        if (e != KP_ERR_NONE) {
            kb_tls_ctx_free(sl->tls);
            kb_sasl_listener_free(sl->sasl);
            return e;
        }
        e = bind_listener(sl, err, errlen);
        if (e != KP_ERR_NONE) {
            kb_tls_ctx_free(sl->tls);
            kb_sasl_listener_free(sl->sasl);
            return e;
        }
        srv->nlisteners++;
        if (kb_loop_add_fd(b->loop, sl->fd, KB_EV_READ, on_accept, sl) != KP_ERR_NONE)
            return KP_ERR__IO;
        KB_LOG(KB_LL_INFO, KB_SUB_NET,
               "msg=\"listening\" listener=%s protocol=%s host=%s port=%u", sl->cfg->li_name,
               kb_security_protocol_name(sl->cfg->li_protocol),
               sl->cfg->li_host[0] ? sl->cfg->li_host : "*", sl->port);
    }
    (void)kb_timer_arm(b->loop, &srv->idle_timer, KB_IDLE_SWEEP_MS);
    kb_loop_set_before_sleep(b->loop, free_dead, srv);
    return KP_ERR_NONE;
}

size_t kb_server_conn_count(const kb_server *srv, size_t listener_index)
{
    size_t n = 0;
    const kb_listener *l = srv->listeners[listener_index].cfg;
    for (const kb_conn *c = srv->live; c != NULL; c = c->next) {
        n += c->listener == l;
    }
    return n;
}

uint16_t kb_server_port(const kb_server *srv, size_t listener_index)
{
    return listener_index < srv->nlisteners ? srv->listeners[listener_index].port : 0;
}

void kb_server_stop(kb_server *srv)
{
    if (srv == NULL)
        return;
    kb_loop *loop = srv->broker->loop;
    while (srv->live != NULL)
        kb_conn_close(srv->live, "shutdown");
    free_dead(loop, srv);
    for (size_t i = 0; i < srv->nlisteners; i++) {
        kb_loop_del_fd(loop, srv->listeners[i].fd);
        close(srv->listeners[i].fd);
        kb_tls_ctx_free(srv->listeners[i].tls);
        kb_sasl_listener_free(srv->listeners[i].sasl);
    }
    kb_timer_disarm(loop, &srv->idle_timer);
    free(srv->listeners);
    free(srv);
}

/* runnel.advertise.dialled.address: the address this connection reached
 * (its local end); false for a socket that has none (a socketpair). */
static bool dialled_address(kb_req *req, kp_str *host, int32_t *port)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char text[INET6_ADDRSTRLEN];
    if (req->conn == NULL || getsockname(req->conn->fd, (struct sockaddr *)&ss, &len) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
        *port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
        *port = ntohs(a->sin6_port);
    } else {
        return false;
    }
    *host = kb_req_str(req, text);
    return true;
}

void kb_server_advertised(kb_req *req, kp_str *host, int32_t *port)
{
    const kb_config *cfg = req->broker->cfg;
    if (cfg->advertise_dialled && dialled_address(req, host, port))
        return;
    const kb_listener *adv = kb_config_advertised(cfg, req->listener->li_name);
    if (adv == NULL)
        adv = req->listener;
    *host = kb_req_str(req, adv->li_host[0] ? adv->li_host : "localhost");
    *port = adv->li_port;
    if (*port == 0) {
        /* an ephemeral listener port: advertise the one actually bound */
        for (size_t i = 0; i < cfg->listeners.n; i++)
            if (&cfg->listeners.v[i] == req->listener)
                *port = kb_server_port(req->broker->server, i);
    }
}
