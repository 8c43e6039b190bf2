/* kb_http_parse: see kb_http_parse.h. */
#include "kb_http_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const method_names[] = {
    [KB_HTTP_GET] = "GET",         [KB_HTTP_HEAD] = "HEAD",   [KB_HTTP_POST] = "POST",
    [KB_HTTP_PUT] = "PUT",         [KB_HTTP_DELETE] = "DELETE", [KB_HTTP_OPTIONS] = "OPTIONS",
    [KB_HTTP_PATCH] = "PATCH",
};

void kb_http_request_reset(kb_http_request *req)
{
    memset(req, 0, sizeof *req);
}

static kb_http_result fail(kb_http_request *req, int status)
{
    req->error_status = status;
    return KB_HTTP_ERROR;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const char *line, size_t len, const char *name)
{
    size_t n = strlen(name);
    return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

/* Parses a Content-Length value: digits only, optional surrounding blanks. */
static bool parse_length(const char *p, const char *end, size_t *out)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) {
        end--;
    }
    if (p == end || end - p > 12) {
        return false;
    }
    size_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return true;
}

/* Looks at one header line before the head is complete (no writes). */
static kb_http_result scan_header_line(kb_http_request *req, const char *line, size_t len)
{
    if (name_is(line, len, "transfer-encoding")) {
        return fail(req, 501);
    }
    if (!name_is(line, len, "content-length")) {
        return KB_HTTP_MORE;
    }
    size_t v;
    if (!parse_length(line + 15, line + len, &v)) {
        return fail(req, 400);
    }
    if (req->ps_have_length && v != req->ps_body_len) {
        return fail(req, 400);
    }
    if (v > KB_HTTP_BODY_MAX) {
        return fail(req, 413);
    }
    req->ps_have_length = true;
    req->ps_body_len = v;
    return KB_HTTP_MORE;
}

static bool is_empty_line(const char *line, size_t len)
{
    return len == 0 || (len == 1 && line[0] == '\r');
}

/* Scans newly arrived bytes for line ends until the empty line ending the
 * head; checks the limits of invariant 1 on the way. */
static kb_http_result scan_head(const char *buf, size_t len, kb_http_request *req)
{
    size_t line_start = req->ps_scanned;
    for (size_t i = req->ps_scanned; i < len; i++) {
        if (buf[i] == '\0') {
            return fail(req, 400);
        }
        if (buf[i] != '\n') {
            continue;
        }
        const char *line = buf + line_start;
        size_t line_len = i - line_start;
        req->ps_lines++;
        if (req->ps_lines > 1 && is_empty_line(line, line_len)) {
            req->ps_head_len = i + 1;
            return KB_HTTP_DONE;
        }
        if (req->ps_lines == 1 && i + 1 > KB_HTTP_LINE_MAX) {
            return fail(req, 414);
        }
        if (req->ps_lines == 1) {
            req->ps_line1_end = i + 1;
        }
        if (req->ps_lines > KB_HTTP_HEADERS_MAX + 1 ||
            i + 1 - req->ps_line1_end > KB_HTTP_HEAD_MAX) {
            return fail(req, 431);
        }
        if (req->ps_lines > 1) {
            kb_http_result r = scan_header_line(req, line, line_len);
            if (r == KB_HTTP_ERROR) {
                return r;
            }
        }
        line_start = i + 1;
        req->ps_scanned = line_start;
    }
    if (req->ps_lines == 0 && len >= KB_HTTP_LINE_MAX) {
        return fail(req, 414);
    }
    if (req->ps_lines > 0 && len - req->ps_line1_end > KB_HTTP_HEAD_MAX) {
        return fail(req, 431);
    }
    return KB_HTTP_MORE;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Percent-decodes [p, end) into out (NUL-terminated); false on a bad
 * escape or a NUL byte. out may be p (decoding only shrinks). */
static bool percent_decode(const char *p, const char *end, char *out, bool plus_is_space)
{
    char *w = out;
    while (p < end) {
        char c = *p++;
        if (c == '%') {
            int hi = end - p >= 2 ? hex_value(p[0]) : -1;
            int lo = end - p >= 2 ? hex_value(p[1]) : -1;
            if (hi < 0 || lo < 0) {
                return false;
            }
            c = (char)(hi * 16 + lo);
            p += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0') {
            return false;
        }
        *w++ = c;
    }
    *w = '\0';
    return true;
}

/* Normalises a decoded absolute path in place: collapses "//", drops "."
 * segments, refuses ".." segments and backslashes. */
static bool normalise_path(char *path)
{
    if (path[0] != '/' || strchr(path, '\\') != NULL) {
        return false;
    }
    char *r = path, *w = path;
    while (*r != '\0') {
        while (*r == '/') {
            r++;
        }
        size_t seg = strcspn(r, "/");
        if (seg == 2 && r[0] == '.' && r[1] == '.') {
            return false;
        }
        if (seg != 0 && !(seg == 1 && r[0] == '.')) {
            *w++ = '/';
            memmove(w, r, seg);
            w += seg;
        }
        r += seg;
    }
    if (w == path) {
        *w++ = '/';
    }
    *w = '\0';
    return true;
}

static int parse_method(kb_http_request *req, const char *m, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!is_tchar((unsigned char)m[i])) {
            return 400;
        }
    }
    for (size_t i = 0; i < sizeof method_names / sizeof method_names[0]; i++) {
        if (strlen(method_names[i]) == len && memcmp(method_names[i], m, len) == 0) {
            req->method = (kb_http_method)i;
            req->method_name = method_names[i];
            return 0;
        }
    }
    return 405;
}

static int parse_target(kb_http_request *req, char *t, char *end)
{
    for (char *p = t; p < end; p++) {
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
            return 400;
        }
    }
    char *q = memchr(t, '?', (size_t)(end - t));
    char *path_end = q != NULL ? q : end;
    *end = '\0';
    req->query = q != NULL ? q + 1 : end;
    if (!percent_decode(t, path_end, t, false) || !normalise_path(t)) {
        return 400;
    }
    req->path = t;
    return 0;
}

/* "METHOD SP target SP HTTP/1.x", line NUL-terminated without CRLF. */
static int parse_request_line(kb_http_request *req, char *line)
{
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == line || sp2 == sp1 + 1) {
        return 400;
    }
    int st = parse_method(req, line, (size_t)(sp1 - line));
    if (st != 0) {
        return st;
    }
    const char *version = sp2 + 1;
    if (strcmp(version, "HTTP/1.1") == 0) {
        req->http10 = false;
    } else if (strcmp(version, "HTTP/1.0") == 0) {
        req->http10 = true;
    } else if (strncmp(version, "HTTP/", 5) == 0 && strchr(version, ' ') == NULL) {
        return 505;
    } else {
        return 400;
    }
    return parse_target(req, sp1 + 1, sp2);
}

static char *trim(char *p)
{
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
        p[--n] = '\0';
    }
    return p;
}

/* "name: value", NUL-terminated without CRLF. */
static int parse_header_line(kb_http_request *req, char *line)
{
    char *colon = strchr(line, ':');
    if (colon == NULL || colon == line) {
        return 400; /* also catches folded lines (leading blank) */
    }
    for (char *p = line; p < colon; p++) {
        if (!is_tchar((unsigned char)*p)) {
            return 400;
        }
    }
    *colon = '\0';
    char *value = trim(colon + 1);
    for (char *p = value; *p != '\0'; p++) {
        if ((unsigned char)*p < ' ' && *p != '\t') {
            return 400;
        }
    }
    kb_http_header *h = &req->headers[req->n_headers++];
    h->name = line;
    h->value = value;
    return 0;
}

/* Cuts the next line off *p (ending at '\n', the '\r' dropped). */
static char *next_line(char **p)
{
    char *line = *p;
    char *nl = strchr(line, '\n');
    *nl = '\0';
    if (nl > line && nl[-1] == '\r') {
        nl[-1] = '\0';
    }
    *p = nl + 1;
    return line;
}

static bool token_in_list(const char *list, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = list; *p != '\0';) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, " \t,");
        if (len == n && strncasecmp(p, token, n) == 0) {
            return true;
        }
        p += len;
    }
    return false;
}

static void decide_keep_alive(kb_http_request *req)
{
    const char *c = kb_http_header_get(req, "connection");
    if (req->http10) {
        req->keep_alive = c != NULL && token_in_list(c, "keep-alive");
    } else {
        req->keep_alive = c == NULL || !token_in_list(c, "close");
    }
}

/* The whole request is in buf: split it in place. */
static kb_http_result split_request(char *buf, kb_http_request *req)
{
    /* Every line up to the empty one ends in '\n' and holds no NUL
     * (scan_head checked), so next_line always finds its end. */
    char *p = buf;
    int st = parse_request_line(req, next_line(&p));
    while (st == 0) {
        char *line = next_line(&p);
        if (line[0] == '\0') {
            break;
        }
        st = parse_header_line(req, line);
    }
    if (st != 0) {
        return fail(req, st);
    }
    decide_keep_alive(req);
    req->body = (const uint8_t *)buf + req->ps_head_len;
    req->body_len = req->ps_body_len;
    req->consumed = req->ps_head_len + req->ps_body_len;
    return KB_HTTP_DONE;
}

kb_http_result kb_http_parse(char *buf, size_t len, kb_http_request *req)
{
    if (req->ps_head_len == 0) {
        kb_http_result r = scan_head(buf, len, req);
        if (r != KB_HTTP_DONE) {
            return r;
        }
    }
    if (len < req->ps_head_len + req->ps_body_len) {
        return KB_HTTP_MORE;
    }
    return split_request(buf, req);
}

const char *kb_http_header_get(const kb_http_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++) {
        if (strcasecmp(req->headers[i].name, name) == 0) {
            return req->headers[i].value;
        }
    }
    return NULL;
}

bool kb_http_query_get(const kb_http_request *req, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = req->query; *p != '\0';) {
        size_t len = strcspn(p, "&");
        if (len >= n && strncmp(p, name, n) == 0 && (len == n || p[n] == '=')) {
            const char *v = len == n ? p + n : p + n + 1;
            size_t vlen = (size_t)(p + len - v);
            char tmp[1024];
            if (cap == 0 || vlen >= sizeof tmp) {
                return false;
            }
            memcpy(tmp, v, vlen);
            if (!percent_decode(tmp, tmp + vlen, tmp, true)) {
                return false;
            }
            snprintf(out, cap, "%s", tmp);
            return true;
        }
        p += len;
        p += *p == '&';
    }
    return false;
}

const char *kb_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}
