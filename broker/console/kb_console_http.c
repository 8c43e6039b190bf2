/* kb_console's HTTP listener on broker/http's server (kb_console_http.h). */
#include "kb_console_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_http_server.h"

static void on_request(const kb_http_request *req, kb_http_response *resp, void *arg)
{
    kb_console *c = arg;
    kb_console_http_req rq = {
        .method = req->method_name,
        .path = req->path,
        .query = req->query,
        .host = kb_http_header_get(req, "Host"),
        .origin = kb_http_header_get(req, "Origin"),
        .sec_fetch_site = kb_http_header_get(req, "Sec-Fetch-Site"),
        .csrf = kb_http_header_get(req, "X-Runnel-Csrf"),
        .authorization = kb_http_header_get(req, "Authorization"),
        .body = req->body,
        .body_len = req->body_len,
        .peer_host = NULL,
    };
    kb_console_resp out;
    const char *extra;
    kb_console_handle(c, &rq, &out, &extra);
    kb_http_resp_status(resp, out.status);
    kb_http_resp_content_type(resp, out.content_type ? out.content_type : "application/json");
    kb_http_resp_header(resp, "Cache-Control", "no-store");
    kb_http_resp_header(resp, "X-Content-Type-Options", "nosniff");
    kb_http_resp_header(resp, "X-Frame-Options", "DENY");
    kb_http_resp_header(resp, "Content-Security-Policy",
                        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    if (extra != NULL) {
        const char *colon = strchr(extra, ':');
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(colon - extra), extra);
        kb_http_resp_header(resp, name, colon + 2);
    }
    if (out.body != NULL) /* for HEAD too: the server sends its length, not the bytes */
        kb_http_resp_append(resp, out.body, out.body_len);
    if (!out.body_static)
        free(out.body);
}

kp_err kb_console_serve_start(kb_console *c, char *err, size_t errlen)
{
    char url[300];
    bool v6 = strchr(c->host, ':') != NULL;
    snprintf(url, sizeof(url), "http://%s%s%s:%u", v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
    kb_http_server_opts opts = {
        .url = url,
        .handler = on_request,
        .arg = c,
        .max_response_bytes = KB_CONSOLE_BODY_MAX + 4096,
    };
    kb_http_server *srv;
    kp_err e = kb_http_server_start(c->b->loop, &opts, &srv, err, errlen);
    if (e != KP_ERR_NONE)
        return e;
    c->server = srv;
    c->port = kb_http_server_port(srv);
    return KP_ERR_NONE;
}

void kb_console_serve_stop(kb_console *c)
{
    kb_http_server_stop(c->server);
    c->server = NULL;
}
