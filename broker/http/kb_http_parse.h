/*
 * kb_http_parse: a resumable, bounded parser for one HTTP/1.1 request.
 *
 * Job: given the bytes a connection has received so far, say whether a
 * whole request (request line, headers, Content-Length body) is there, and
 * when it is, split it into a kb_http_request; or say which 4xx answer a
 * hostile or malformed request deserves. Pure: no I/O, no allocation.
 *
 * Invariants:
 *   1. The request line is at most KB_HTTP_LINE_MAX bytes (else 414), the
 *      header lines at most KB_HTTP_HEAD_MAX bytes in all (else 431) and
 *      KB_HTTP_HEADERS_MAX in number (else 431), the body at most
 *      KB_HTTP_BODY_MAX bytes (else 413). These are checked as the bytes
 *      arrive, so a caller never needs to hold more than
 *      KB_HTTP_REQUEST_MAX bytes for one request.
 *   2. While the result is KB_HTTP_MORE the buffer is not modified, so the
 *      caller may grow it (realloc) and call again with more bytes; bytes
 *      already scanned are not scanned again (the state remembers where it
 *      stopped).
 *   3. On KB_HTTP_DONE, req->path is percent-decoded and normalised: it
 *      starts with '/', has no empty, "." or ".." segments and no NUL byte.
 *      A target with a ".." segment (also written %2e%2e), a backslash, a
 *      NUL or bad percent escapes is refused with 400, never resolved.
 *   4. Methods other than GET HEAD POST PUT DELETE OPTIONS PATCH get 405;
 *      versions other than HTTP/1.0 and HTTP/1.1 get 505; Transfer-Encoding
 *      (chunked bodies) gets 501; a bad or conflicting Content-Length 400;
 *      header folding and malformed header lines 400.
 *
 * Ownership: on KB_HTTP_DONE the parser wrote NUL terminators into buf and
 * every pointer in *req points into buf: they stay valid while buf is
 * neither freed, moved nor overwritten (the server keeps them until the
 * response is sent). req->consumed bytes belong to this request; the rest
 * of buf is the next (pipelined) request.
 *
 * Threading: any thread; no shared state.
 *
 * Errors: KB_HTTP_ERROR with req->error_status set to the HTTP status to
 * answer (400, 405, 413, 414, 431, 501, 505); the connection is then closed.
 */
#ifndef KB_HTTP_PARSE_H
#define KB_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KB_HTTP_LINE_MAX    8192u  /* request line, CRLF included */
#define KB_HTTP_HEAD_MAX    16384u /* all header lines, CRLFs included */
#define KB_HTTP_HEADERS_MAX 100u
#define KB_HTTP_BODY_MAX    65536u
#define KB_HTTP_REQUEST_MAX (KB_HTTP_LINE_MAX + KB_HTTP_HEAD_MAX + 2u + KB_HTTP_BODY_MAX)

typedef enum kb_http_method {
    KB_HTTP_GET,
    KB_HTTP_HEAD,
    KB_HTTP_POST,
    KB_HTTP_PUT,
    KB_HTTP_DELETE,
    KB_HTTP_OPTIONS,
    KB_HTTP_PATCH,
} kb_http_method;

typedef enum kb_http_result {
    KB_HTTP_MORE,  /* not a whole request yet; call again with more bytes */
    KB_HTTP_DONE,  /* *req holds a whole request */
    KB_HTTP_ERROR, /* answer req->error_status and close */
} kb_http_result;

/* One header; name and value are NUL-terminated, the value trimmed. */
typedef struct kb_http_header {
    const char *name;
    const char *value;
} kb_http_header;

/* One parsed request. Fields below "parser state" are the parser's own. */
typedef struct kb_http_request {
    kb_http_method method;
    const char *method_name; /* "GET", ... (static) */
    const char *path;        /* decoded, normalised, NUL-terminated */
    const char *query;       /* raw text after '?' (not decoded); "" if none */
    bool http10;             /* HTTP/1.0 */
    bool keep_alive;         /* the connection may carry another request */
    size_t n_headers;
    kb_http_header headers[KB_HTTP_HEADERS_MAX];
    const uint8_t *body; /* body_len bytes (not NUL-terminated) */
    size_t body_len;
    size_t consumed;  /* bytes of buf this request used (head + body) */
    int error_status; /* on KB_HTTP_ERROR: 400, 405, 413, ... */
    /* parser state, kept between KB_HTTP_MORE calls */
    size_t ps_scanned;  /* bytes already scanned for line ends */
    size_t ps_lines;    /* complete lines seen (the request line is line 1) */
    size_t ps_line1_end; /* bytes of the request line, CRLF included */
    size_t ps_head_len; /* bytes up to and including the empty line, or 0 */
    size_t ps_body_len; /* Content-Length, once a header gave it */
    bool ps_have_length;
} kb_http_request;

/* Resets *req for a new request (call before the first kb_http_parse). */
void kb_http_request_reset(kb_http_request *req);

/* Parses buf[0..len) (bytes received so far for this request). */
kb_http_result kb_http_parse(char *buf, size_t len, kb_http_request *req);

/* The value of the first header named name (ASCII case-insensitive), or
 * NULL. Points into the request's buffer. */
const char *kb_http_header_get(const kb_http_request *req, const char *name);

/* The value of query parameter name, percent-decoded ('+' is a space) into
 * out (NUL-terminated, cut to cap-1 bytes). Returns false if absent. */
bool kb_http_query_get(const kb_http_request *req, const char *name, char *out, size_t cap);

/* The reason phrase of an HTTP status ("Not Found"), or "Unknown". */
const char *kb_http_reason(int status);

#endif
