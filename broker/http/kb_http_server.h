/*
 * kb_http_server: a small HTTP/1.1 server on the broker's event loop.
 *
 * Job: listen on one `http://host:port` URL, read requests with
 * kb_http_parse on non-blocking sockets, hand each whole request to the
 * owner's handler, and write its response; keep-alive and pipelining are
 * served in order, one request at a time per connection. Used by the
 * metrics endpoint (observe/) and the web console.
 *
 * Invariants:
 *   1. At most max_conns connections are open; a connection accepted past
 *      that is closed at once (it gets nothing).
 *   2. A connection holds at most KB_HTTP_REQUEST_MAX input bytes plus one
 *      response of at most max_response_bytes; reading stops while a
 *      response is being written.
 *   3. The head and body of a request must arrive within head_timeout_ms of
 *      its first byte (or of the accept), else the connection gets 408 and is
 *      closed (slowloris); an idle keep-alive connection is closed after
 *      idle_timeout_ms, and one whose peer does not read its response after
 *      idle_timeout_ms too. Timers never extend because bytes trickle in.
 *   4. A malformed or oversized request gets its 4xx/5xx (kb_http_parse.h)
 *      with `Connection: close`, and the connection is closed once it is
 *      written. The handler sees only well-formed requests.
 *   5. The handler runs on the loop's thread and must not block: it fills
 *      the response and returns; the server sends it after it returns.
 *
 * Ownership: the server owns its socket, connections and buffers. The
 * request passed to the handler and every pointer in it are valid only
 * during the call. The response is the server's: the handler writes to it
 * through the kb_http_resp_* calls only.
 *
 * Threading: the loop's thread only.
 *
 * Errors: kb_http_server_start returns KP_ERR__INVAL (bad URL), KP_ERR__IO
 * (cannot resolve or bind; text in err) or KP_ERR__NOMEM.
 */
#ifndef KB_HTTP_SERVER_H
#define KB_HTTP_SERVER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_http_parse.h"
#include "kb_loop.h"
#include "kp_err.h"

typedef struct kb_http_server kb_http_server;
typedef struct kb_http_response kb_http_response;

/* Fills resp for req. resp starts as status 200, Content-Type
 * "text/plain; charset=utf-8", no extra headers and an empty body. */
typedef void kb_http_handler(const kb_http_request *req, kb_http_response *resp, void *arg);

typedef struct kb_http_server_opts {
    const char *url;            /* "http://host:port"; port 0 picks one */
    kb_http_handler *handler;   /* required */
    void *arg;                  /* passed to handler */
    size_t max_conns;           /* 0: 64 */
    int64_t head_timeout_ms;    /* 0: 10000 */
    int64_t idle_timeout_ms;    /* 0: 60000 */
    size_t max_response_bytes;  /* 0: 64 MiB; more makes a 500 */
} kb_http_server_opts;

/* Binds the URL's address (host names are resolved here, at startup) and
 * starts accepting on loop. */
kp_err kb_http_server_start(kb_loop *loop, const kb_http_server_opts *opts, kb_http_server **out,
                            char *err, size_t errlen);
/* Closes the socket and every connection; NULL is a no-op. */
void kb_http_server_stop(kb_http_server *srv);

uint16_t kb_http_server_port(const kb_http_server *srv);
size_t kb_http_server_conn_count(const kb_http_server *srv);

/* Splits "http://host:port" into host (brackets of an IPv6 literal
 * dropped) and port; false if the URL is not of that form. */
bool kb_http_url_split(const char *url, char *host, size_t host_cap, uint16_t *port);

/* --- the response, for handlers --- */
void kb_http_resp_status(kb_http_response *resp, int status);
/* Copies type (cut to 127 bytes). */
void kb_http_resp_content_type(kb_http_response *resp, const char *type);
/* Adds "name: value\r\n"; names and values with CR or LF are dropped.
 * At most 4 KiB of extra headers in all. */
void kb_http_resp_header(kb_http_response *resp, const char *name, const char *value);
/* Appends to the body; false (and the response becomes a 500) past
 * max_response_bytes or out of memory. */
bool kb_http_resp_append(kb_http_response *resp, const void *data, size_t len);
bool kb_http_resp_printf(kb_http_response *resp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool kb_http_resp_vprintf(kb_http_response *resp, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* The body so far (for handlers that post-process it). */
size_t kb_http_resp_body_len(const kb_http_response *resp);

#endif
