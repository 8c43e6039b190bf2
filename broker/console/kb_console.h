/*
 * kb_console: the built-in web console: its listener, its page and its API
 * put together.
 *
 * Job: when runnel.console.listener is set (http://host:port; loopback is
 * the default host, see docs/console.md), serve on it the page's embedded
 * files (kb_console_assets) and the JSON API (kb_console_api), behind the
 * guard (kb_console_guard: Host, login, CSRF, write.enable). Keep the lag
 * history (kb_console_lag) while it runs.
 *
 * Invariants:
 *   1. Off unless the key is set: no socket, no timer.
 *   2. Every request is answered from the loop in one step: a records read
 *      is bounded (kb_console_api.h), nothing waits on I/O.
 *   3. Only GET and HEAD reach the page files; anything else under /api is
 *      guarded as a write (POST only).
 *
 * Ownership: kb_console_start sets b->console; kb_console_stop frees it.
 * Threading: loop thread only.
 */
#ifndef KB_CONSOLE_H
#define KB_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_console_api.h"
#include "kb_console_guard.h"
#include "kb_console_lag.h"
#include "kb_context.h"

#define KB_CONSOLE_DEFAULT_HOST "127.0.0.1"
#define KB_CONSOLE_BODY_IN_MAX  (1 << 20) /* a produced test value */

/* One request as the HTTP layer parsed it (headers NULL when absent). */
typedef struct kb_console_http_req {
    const char *method;
    const char *path;   /* decoded and normalised by kb_http_parse */
    const char *query;  /* raw, without '?' */
    const char *host;
    const char *origin;
    const char *sec_fetch_site;
    const char *csrf;
    const char *authorization;
    const uint8_t *body;
    size_t body_len;
    const char *peer_host;
} kb_console_http_req;

typedef struct kb_console {
    kb_broker *b;
    char host[256];
    uint16_t port; /* as configured; 0 = any, then the bound one */
    kb_console_lag lag;
    kb_console_guard guard;
    kb_console_api api;
    void *server; /* the HTTP listener */
} kb_console;

/* Parses "http://host:port" ("http://:port" takes the loopback default):
 * false with err filled when malformed. */
bool kb_console_parse_listener(const char *value, char *host, size_t cap, uint16_t *port,
                               char *err, size_t errlen);

kp_err kb_console_start(kb_broker *b, char *err, size_t errlen);
void kb_console_stop(kb_broker *b);

/* Answers one request (a page file, or the API behind the guard). Extra
 * headers to send (WWW-Authenticate) are in *extra_header, or NULL. */
void kb_console_handle(kb_console *c, const kb_console_http_req *rq, kb_console_resp *out,
                       const char **extra_header);

#endif
