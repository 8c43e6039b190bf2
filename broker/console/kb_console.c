#include "kb_console.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_config.h"
#include "kb_console_assets.h"
#include "kb_console_http.h"
#include "kb_http_server.h"
#include "kb_log.h"

bool kb_console_parse_listener(const char *value, char *host, size_t cap, uint16_t *port,
                               char *err, size_t errlen)
{
    if (!kb_http_url_split(value, host, cap, port)) {
        snprintf(err, errlen, "runnel.console.listener must be http://host:port (%s)", value);
        return false;
    }
    if (host[0] == '\0')
        snprintf(host, cap, "%s", KB_CONSOLE_DEFAULT_HOST); /* loopback unless a host is named */
    return true;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void serve_asset(const char *path, const char *method, kb_console_resp *out)
{
    const kb_console_asset *a = kb_console_asset_find(path);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        kb_console_error(out, 405, "method not allowed");
        return;
    }
    if (a == NULL) {
        kb_console_error(out, 404, "not found");
        return;
    }
    out->status = 200;
    out->content_type = a->content_type;
    out->body = (char *)(uintptr_t)a->data; /* constant: body_static */
    out->body_len = a->len;
    out->body_static = true;
}

/* Writes: every /api method but GET and HEAD. */
static bool is_write(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

void kb_console_handle(kb_console *c, const kb_console_http_req *rq, kb_console_resp *out,
                       const char **extra_header)
{
    const char *path = rq->path;
    memset(out, 0, sizeof(*out));
    *extra_header = NULL;
    bool api = strncmp(path, "/api/", 5) == 0;
    kb_guard_view v = {rq->method, rq->host, rq->origin, rq->sec_fetch_site, rq->csrf,
                       rq->authorization, api && is_write(rq->method)};
    char principal[KB_GUARD_USER_MAX + 8];
    const char *why = NULL;
    int status = kb_console_guard_check(&c->guard, &v, mono_ms(), principal, sizeof(principal), &why);
    if (status != 0) {
        if (status == 401)
            *extra_header = "WWW-Authenticate: Basic realm=\"Runnel console\", charset=\"UTF-8\"";
        kb_console_error(out, status, why);
        return;
    }
    if (!api) {
        serve_asset(path, rq->method, out);
        return;
    }
    kb_console_req arq = {rq->method, path, rq->query, rq->body, rq->body_len,
                          principal[0] ? principal : NULL, rq->peer_host};
    kb_console_api_handle(&c->api, &arq, out);
}

kp_err kb_console_start(kb_broker *b, char *err, size_t errlen)
{
    const kb_config *cfg = b->cfg;
    if (cfg->console_listener == NULL || cfg->console_listener[0] == '\0')
        return KP_ERR_NONE;
    kb_console *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return KP_ERR__NOMEM;
    c->b = b;
    if (!kb_console_parse_listener(cfg->console_listener, c->host, sizeof(c->host), &c->port, err,
                                   errlen)) {
        free(c);
        return KP_ERR__INVAL;
    }
    kp_err e = kb_console_serve_start(c, err, errlen);
    if (e == KP_ERR_NONE)
        e = kb_console_guard_init(&c->guard, b, c->host, c->port, cfg->console_write_enable, err,
                                  errlen);
    if (e == KP_ERR_NONE)
        e = kb_console_lag_start(b, &c->lag);
    b->console = c;
    if (e != KP_ERR_NONE)
        return e;
    c->api = (kb_console_api){b, &c->lag, c->guard.token, cfg->console_write_enable};
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN,
           "msg=\"console listening\" url=http://%s%s%s:%u writes=%s login=%s",
           strchr(c->host, ':') ? "[" : "", c->host, strchr(c->host, ':') ? "]" : "", c->port,
           cfg->console_write_enable ? "enabled" : "disabled",
           kb_console_guard_needs_login(&c->guard) ? "sasl-users" : "none");
    return KP_ERR_NONE;
}

void kb_console_stop(kb_broker *b)
{
    kb_console *c = b->console;
    if (c == NULL)
        return;
    kb_console_serve_stop(c);
    kb_console_lag_stop(&c->lag);
    kb_console_guard_fini(&c->guard);
    free(c);
    b->console = NULL;
}
