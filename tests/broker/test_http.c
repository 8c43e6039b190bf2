/* Unit tests of kb_http_parse: limits, answers, paths, keep-alive. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_http_parse.h"

static kb_http_request req;
static char buf[KB_HTTP_REQUEST_MAX + 1024];

static kb_http_result parse_text(const char *text)
{
    kb_http_request_reset(&req);
    size_t n = strlen(text);
    memcpy(buf, text, n + 1);
    return kb_http_parse(buf, n, &req);
}

static int status_of(const char *text)
{
    kb_http_result r = parse_text(text);
    return r == KB_HTTP_ERROR ? req.error_status : r == KB_HTTP_DONE ? 200 : 0;
}

START_TEST(test_http_parse_simple_get)
{
    ck_assert_int_eq(parse_text("GET /metrics?a=1&b=x%20y HTTP/1.1\r\nHost: h\r\n"
                                "Accept: text/plain\r\n\r\n"),
                     KB_HTTP_DONE);
    ck_assert_int_eq(req.method, KB_HTTP_GET);
    ck_assert_str_eq(req.path, "/metrics");
    ck_assert_str_eq(req.query, "a=1&b=x%20y");
    ck_assert_str_eq(kb_http_header_get(&req, "host"), "h");
    ck_assert_str_eq(kb_http_header_get(&req, "ACCEPT"), "text/plain");
    ck_assert_ptr_null(kb_http_header_get(&req, "cookie"));
    char v[32];
    ck_assert(kb_http_query_get(&req, "b", v, sizeof v));
    ck_assert_str_eq(v, "x y");
    ck_assert(!kb_http_query_get(&req, "c", v, sizeof v));
    ck_assert(req.keep_alive);
    ck_assert_uint_eq(req.body_len, 0);
}
END_TEST

START_TEST(test_http_parse_incremental_and_body)
{
    const char *text = "POST /api HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n";
    size_t n = strlen(text);
    memcpy(buf, text, n + 1);
    kb_http_request_reset(&req);
    size_t whole = strlen("POST /api HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    for (size_t i = 0; i < whole; i++) {
        ck_assert_int_eq(kb_http_parse(buf, i, &req), KB_HTTP_MORE);
        ck_assert_int_eq(memcmp(buf, text, n), 0); /* untouched while MORE */
    }
    ck_assert_int_eq(kb_http_parse(buf, n, &req), KB_HTTP_DONE);
    ck_assert_int_eq(req.method, KB_HTTP_POST);
    ck_assert_uint_eq(req.body_len, 5);
    ck_assert_int_eq(memcmp(req.body, "hello", 5), 0);
    ck_assert_uint_eq(req.consumed, whole);
}
END_TEST

START_TEST(test_http_parse_limits)
{
    char *line = malloc(KB_HTTP_LINE_MAX + 64);
    memset(line, 'a', KB_HTTP_LINE_MAX + 63);
    memcpy(line, "GET /", 5);
    line[KB_HTTP_LINE_MAX + 63] = '\0';
    ck_assert_int_eq(status_of(line), 414); /* no line end yet, already too long */
    free(line);

    static char many[200 * 16];
    strcpy(many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++) {
        strcat(many, "X-A: b\r\n");
    }
    ck_assert_int_eq(status_of(many), 431);

    static char big[KB_HTTP_HEAD_MAX + 200];
    strcpy(big, "GET / HTTP/1.1\r\nX-Big: ");
    memset(big + strlen(big), 'v', KB_HTTP_HEAD_MAX);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(status_of(big), 431);

    ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nContent-Length: 65537\r\n\r\n"), 413);
    ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nContent-Length: 65536\r\n\r\n"), 0);
}
END_TEST

/* Requests a client must not get served, with the answer each gets. */
static const struct {
    const char *text;
    int status;
} refused[] = {
    {"BREW / HTTP/1.1\r\n\r\n", 405},
    {"G(T / HTTP/1.1\r\n\r\n", 400},
    {"GET / HTTP/2.0\r\n\r\n", 505},
    {"GET / FOO\r\n\r\n", 400},
    {"GET /\r\n\r\n", 400},
    {"GET http://x/ HTTP/1.1\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
    /* path traversal, raw and percent-encoded, and bad escapes */
    {"GET /../etc/passwd HTTP/1.1\r\n\r\n", 400},
    {"GET /a/%2e%2e/b HTTP/1.1\r\n\r\n", 400},
    {"GET /a/%2E%2e HTTP/1.1\r\n\r\n", 400},
    {"GET /a/..%2fb HTTP/1.1\r\n\r\n", 400},
    {"GET /a\\..\\b HTTP/1.1\r\n\r\n", 400},
    {"GET /a%00b HTTP/1.1\r\n\r\n", 400},
    {"GET /a%zz HTTP/1.1\r\n\r\n", 400},
    {"GET /a%2 HTTP/1.1\r\n\r\n", 400},
};

START_TEST(test_http_parse_refused)
{
    ck_assert_msg(status_of(refused[_i].text) == refused[_i].status, "%s: got %d, want %d",
                  refused[_i].text, req.error_status, refused[_i].status);
}
END_TEST

START_TEST(test_http_parse_nul_byte)
{
    kb_http_request_reset(&req);
    memcpy(buf, "GET /\0 HTTP/1.1\r\n\r\n", 20);
    ck_assert_int_eq(kb_http_parse(buf, 20, &req), KB_HTTP_ERROR);
    ck_assert_int_eq(req.error_status, 400);
}
END_TEST

START_TEST(test_http_parse_path_normalised)
{
    ck_assert_int_eq(parse_text("GET //a/./b//c/ HTTP/1.1\r\n\r\n"), KB_HTTP_DONE);
    ck_assert_str_eq(req.path, "/a/b/c");
    ck_assert_int_eq(parse_text("GET /%61..b/x%20y HTTP/1.1\r\n\r\n"), KB_HTTP_DONE);
    ck_assert_str_eq(req.path, "/a..b/x y");
    ck_assert_int_eq(parse_text("GET /./ HTTP/1.1\r\n\r\n"), KB_HTTP_DONE);
    ck_assert_str_eq(req.path, "/");
}
END_TEST

START_TEST(test_http_parse_keep_alive)
{
    ck_assert_int_eq(parse_text("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"), KB_HTTP_DONE);
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(parse_text("GET / HTTP/1.0\r\n\r\n"), KB_HTTP_DONE);
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(parse_text("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
                     KB_HTTP_DONE);
    ck_assert(req.keep_alive);
    ck_assert_int_eq(parse_text("GET / HTTP/1.1\nHost: x\n\n"), KB_HTTP_DONE); /* bare LF */
    ck_assert_str_eq(kb_http_header_get(&req, "host"), "x");
}
END_TEST

/* --- the server over a real loopback socket --- */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kb_http_server.h"

static void hello_handler(const kb_http_request *r, kb_http_response *resp, void *arg)
{
    (void)arg;
    if (strcmp(r->path, "/hello") != 0) {
        kb_http_resp_status(resp, 404);
        return;
    }
    kb_http_resp_header(resp, "X-Test", "1");
    kb_http_resp_printf(resp, "hello %s", r->method_name);
}

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    return fd;
}

/* Steps the loop until the client has read something ending in want
 * (or the peer closed); want "never" just runs a few steps. */
static char *exchange(kb_loop *loop, int fd, const char *send_text, const char *want)
{
    static char got[8192];
    size_t len = 0;
    if (send_text != NULL) {
        for (int i = 0; i < 50 && write(fd, send_text, strlen(send_text)) < 0; i++) {
            kb_loop_step(loop, 10);
        }
    }
    int steps = want != NULL && strcmp(want, "never") == 0 ? 10 : 200;
    for (int i = 0; i < steps; i++) {
        kb_loop_step(loop, 5);
        ssize_t n = read(fd, got + len, sizeof got - 1 - len);
        if (n == 0) {
            break;
        }
        if (n > 0) {
            len += (size_t)n;
            got[len] = '\0';
            if (want != NULL && strstr(got, want) != NULL) {
                break;
            }
        }
    }
    got[len] = '\0';
    return got;
}

START_TEST(test_http_server_keep_alive_and_errors)
{
    kb_loop *loop = kb_loop_new();
    kb_http_server *srv;
    char err[256];
    kb_http_server_opts o = {.url = "http://127.0.0.1:0", .handler = hello_handler};
    ck_assert_int_eq(kb_http_server_start(loop, &o, &srv, err, sizeof err), KP_ERR_NONE);
    int fd = connect_to(kb_http_server_port(srv));
    char *got = exchange(loop, fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", "hello GET");
    ck_assert_msg(strncmp(got, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", got);
    ck_assert_ptr_nonnull(strstr(got, "X-Test: 1\r\n"));
    ck_assert_ptr_nonnull(strstr(got, "Content-Length: 9\r\n"));
    got = exchange(loop, fd, "GET /nope HTTP/1.1\r\n\r\nHEAD /hello HTTP/1.1\r\n\r\n",
                   "Content-Length: 10\r\nConnection: keep-alive\r\n\r\n");
    ck_assert_msg(strstr(got, "HTTP/1.1 404 Not Found") != NULL, "%s", got);
    ck_assert_msg(strstr(got, "HTTP/1.1 200 OK") != NULL, "%s", got);
    ck_assert_uint_eq(kb_http_server_conn_count(srv), 1);
    got = exchange(loop, fd, "GET /../x HTTP/1.1\r\n\r\n", NULL);
    ck_assert_msg(strncmp(got, "HTTP/1.1 400 Bad Request", 24) == 0, "%s", got);
    ck_assert_ptr_nonnull(strstr(got, "Connection: close"));
    close(fd);
    for (int i = 0; i < 20; i++) {
        kb_loop_step(loop, 5);
    }
    ck_assert_uint_eq(kb_http_server_conn_count(srv), 0);
    kb_http_server_stop(srv);
    kb_loop_free(loop);
}
END_TEST

START_TEST(test_http_url_split)
{
    char host[64];
    uint16_t port;
    ck_assert(kb_http_url_split("http://127.0.0.1:9644", host, sizeof host, &port));
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 9644);
    ck_assert(kb_http_url_split("http://[::1]:0", host, sizeof host, &port));
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 0);
    ck_assert(kb_http_url_split("http://:80/", host, sizeof host, &port));
    ck_assert_str_eq(host, "");
    ck_assert(!kb_http_url_split("https://h:1", host, sizeof host, &port));
    ck_assert(!kb_http_url_split("http://h", host, sizeof host, &port));
    ck_assert(!kb_http_url_split("http://h:70000", host, sizeof host, &port));
    ck_assert(!kb_http_url_split("http://h:1x", host, sizeof host, &port));
    ck_assert(!kb_http_url_split("http://a/b:1", host, sizeof host, &port));
}
END_TEST

static int64_t fake_now;
static int64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

START_TEST(test_http_server_head_deadline)
{
    kb_loop *loop = kb_loop_new();
    kb_loop_set_clock(loop, fake_clock, NULL);
    kb_http_server *srv;
    char err[256];
    kb_http_server_opts o = {.url = "http://127.0.0.1:0", .handler = hello_handler,
                             .head_timeout_ms = 1000, .max_conns = 2};
    ck_assert_int_eq(kb_http_server_start(loop, &o, &srv, err, sizeof err), KP_ERR_NONE);
    int slow = connect_to(kb_http_server_port(srv));
    exchange(loop, slow, "GET /hel", "never");
    for (int i = 0; i < 5; i++) {
        fake_now += 100; /* bytes trickle in; the deadline does not move */
        exchange(loop, slow, "l", "never");
    }
    int third = connect_to(kb_http_server_port(srv));
    int fourth = connect_to(kb_http_server_port(srv));
    exchange(loop, fourth, NULL, "never");
    ck_assert_uint_eq(kb_http_server_conn_count(srv), 2); /* max_conns */
    fake_now += 600;
    char *got = exchange(loop, slow, NULL, "\r\n\r\n");
    ck_assert_msg(strncmp(got, "HTTP/1.1 408", 12) == 0, "%s", got);
    close(slow);
    close(third);
    close(fourth);
    kb_http_server_stop(srv);
    kb_loop_free(loop);
}
END_TEST

Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_http_parse_simple_get);
    tcase_add_test(tc, test_http_parse_incremental_and_body);
    tcase_add_test(tc, test_http_parse_limits);
    tcase_add_loop_test(tc, test_http_parse_refused, 0, (int)(sizeof refused / sizeof refused[0]));
    tcase_add_test(tc, test_http_parse_nul_byte);
    tcase_add_test(tc, test_http_parse_path_normalised);
    tcase_add_test(tc, test_http_parse_keep_alive);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("server");
    tcase_add_test(ts, test_http_server_keep_alive_and_errors);
    tcase_add_test(ts, test_http_server_head_deadline);
    tcase_add_test(ts, test_http_url_split);
    suite_add_tcase(s, ts);
    return s;
}
