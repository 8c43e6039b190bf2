/* The web console's pieces: JSON writer, query strings, listener URL, the
 * guard (Host, Origin, CSRF token, write.enable, HTTP Basic against SCRAM)
 * and reading records from a real log. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config.h"
#include "kb_console.h"
#include "kb_console_guard.h"
#include "kb_console_records.h"
#include "kb_json.h"
#include "kb_scram.h"
#include "kb_scram_store.h"
#include "kp_records.h"

static char *json_of(kb_json *j)
{
    size_t len;
    char *s = kb_json_take(j, &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(strlen(s), len);
    return s;
}

START_TEST(test_console_json_nests_and_escapes)
{
    kb_json j;
    kb_json_init(&j, 4096);
    kb_json_obj(&j);
    kb_json_kstr(&j, "a", "q\"\\\n\x01");
    kb_json_key(&j, "l");
    kb_json_arr(&j);
    kb_json_int(&j, -5);
    kb_json_bool(&j, true);
    kb_json_null(&j);
    kb_json_strn(&j, (const uint8_t *)"\xff" "ok", 3);
    kb_json_arr_end(&j);
    kb_json_key(&j, "b");
    kb_json_b64(&j, (const uint8_t *)"\x00\x01\xfe", 3);
    kb_json_obj_end(&j);
    char *s = json_of(&j);
    ck_assert_str_eq(s, "{\"a\":\"q\\\"\\\\\\u000a\\u0001\",\"l\":[-5,true,null,\"\\ufffdok\"],\"b\":\"AAH+\"}");
    free(s);
}
END_TEST

START_TEST(test_console_json_stays_bounded)
{
    kb_json j;
    kb_json_init(&j, 64);
    kb_json_arr(&j);
    for (int i = 0; i < 100; i++)
        kb_json_str(&j, "0123456789");
    kb_json_arr_end(&j);
    size_t len;
    ck_assert_int_eq(j.err, KP_ERR__NOMEM);
    ck_assert_ptr_null(kb_json_take(&j, &len));
}
END_TEST

START_TEST(test_console_json_tells_text_from_binary)
{
    ck_assert(kb_json_is_text((const uint8_t *)"h\xc3\xa9llo\n", 7));
    ck_assert(!kb_json_is_text((const uint8_t *)"\x00\x01\x02", 3));
    ck_assert(!kb_json_is_text((const uint8_t *)"\xc3", 1));         /* cut sequence */
    ck_assert(!kb_json_is_text((const uint8_t *)"\xed\xa0\x80", 3)); /* a surrogate */
    ck_assert(!kb_json_is_text((const uint8_t *)"\xc0\xaf", 2));     /* overlong */
}
END_TEST

START_TEST(test_console_query_decodes)
{
    char buf[16];
    size_t len;
    ck_assert(kb_console_query("a=1&key=h%C3%A9+x&to=earliest", "key", buf, sizeof(buf), &len));
    ck_assert_str_eq(buf, "h\xc3\xa9 x");
    ck_assert_uint_eq(len, 5);
    ck_assert(!kb_console_query("keys=1", "key", buf, sizeof(buf), &len));
    ck_assert(!kb_console_query("key=0123456789abcdefg", "key", buf, sizeof(buf), &len));
    ck_assert(kb_console_query("x=%zz", "x", buf, sizeof(buf), &len));
    ck_assert_str_eq(buf, "%zz");
}
END_TEST

START_TEST(test_console_listener_parses)
{
    char host[64], err[128];
    uint16_t port;
    ck_assert(kb_console_parse_listener("http://127.0.0.1:9645", host, sizeof(host), &port, err, sizeof(err)));
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 9645);
    ck_assert(kb_console_parse_listener("http://:0", host, sizeof(host), &port, err, sizeof(err)));
    ck_assert_str_eq(host, KB_CONSOLE_DEFAULT_HOST);
    ck_assert(kb_console_parse_listener("http://[::1]:80/", host, sizeof(host), &port, err, sizeof(err)));
    ck_assert_str_eq(host, "::1");
    ck_assert(!kb_console_parse_listener("https://x:1", host, sizeof(host), &port, err, sizeof(err)));
    ck_assert(!kb_console_parse_listener("http://x:70000", host, sizeof(host), &port, err, sizeof(err)));
    ck_assert(!kb_console_parse_listener("http://x", host, sizeof(host), &port, err, sizeof(err)));
}
END_TEST

typedef struct guard_fx {
    kb_config cfg;
    kb_broker b;
    kb_console_guard g;
} guard_fx;

static void guard_setup(guard_fx *fx, bool write_enable)
{
    char err[128];
    memset(fx, 0, sizeof(*fx));
    fx->b.cfg = &fx->cfg;
    ck_assert_int_eq(kb_console_guard_init(&fx->g, &fx->b, "127.0.0.1", 9645, write_enable, err,
                                           sizeof(err)),
                     KP_ERR_NONE);
    ck_assert_uint_eq(strlen(fx->g.token), KB_GUARD_TOKEN_HEX);
}

static int check(guard_fx *fx, kb_guard_view *v, const char **why)
{
    char principal[300];
    return kb_console_guard_check(&fx->g, v, 1000, principal, sizeof(principal), why);
}

START_TEST(test_console_guard_checks_writes)
{
    guard_fx fx;
    guard_setup(&fx, true);
    const char *why;
    kb_guard_view v = {.method = "POST", .host = "127.0.0.1:9645", .origin = "http://127.0.0.1:9645",
                       .sec_fetch_site = "same-origin", .csrf = fx.g.token, .write = true};
    ck_assert_int_eq(check(&fx, &v, &why), 0);
    v.host = "localhost:9645";
    v.origin = "http://localhost:9645";
    ck_assert_int_eq(check(&fx, &v, &why), 0);
    v.origin = "http://evil.example";
    ck_assert_int_eq(check(&fx, &v, &why), 403);
    v.origin = NULL;
    v.sec_fetch_site = "cross-site";
    ck_assert_int_eq(check(&fx, &v, &why), 403);
    v.sec_fetch_site = NULL;
    v.csrf = "00";
    ck_assert_int_eq(check(&fx, &v, &why), 403);
    v.csrf = NULL;
    ck_assert_int_eq(check(&fx, &v, &why), 403);
    v.csrf = fx.g.token;
    v.host = "evil.example:9645"; /* DNS rebinding */
    ck_assert_int_eq(check(&fx, &v, &why), 400);
    v.host = "127.0.0.1:9646";
    ck_assert_int_eq(check(&fx, &v, &why), 400);
    v.host = "127.0.0.1:9645";
    v.method = "GET";
    ck_assert_int_eq(check(&fx, &v, &why), 405);
    kb_console_guard_fini(&fx.g);

    guard_setup(&fx, false);
    kb_guard_view w = {.method = "POST", .host = "127.0.0.1:9645", .csrf = fx.g.token, .write = true};
    ck_assert_int_eq(check(&fx, &w, &why), 403);
    ck_assert(strstr(why, "read-only") != NULL);
    w.write = false;
    w.method = "GET";
    ck_assert_int_eq(check(&fx, &w, &why), 0);
    kb_console_guard_fini(&fx.g);
}
END_TEST

START_TEST(test_console_guard_logs_in_against_scram)
{
    guard_fx fx;
    char err[128];
    kb_scram_store *st;
    ck_assert_int_eq(kb_scram_store_open(NULL, &st, err, sizeof err), KP_ERR_NONE);
    guard_setup(&fx, false);
    fx.b.scram = st;
    kb_guard_view v = {.method = "GET", .host = "127.0.0.1:9645"};
    const char *why;
    ck_assert(!kb_console_guard_needs_login(&fx.g));
    ck_assert_int_eq(check(&fx, &v, &why), 0);

    kb_scram_cred c;
    const uint8_t salt[16] = "0123456789abcdef";
    ck_assert_int_eq(kb_scram_cred_from_password(KB_SCRAM_SHA_256, "s3cret", salt, 16, 4096, &c), KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, "alice", 5, &c), KP_ERR_NONE);
    ck_assert(kb_console_guard_needs_login(&fx.g));
    ck_assert_int_eq(check(&fx, &v, &why), 401);
    v.authorization = "Basic YWxpY2U6d3Jvbmc="; /* alice:wrong */
    ck_assert_int_eq(check(&fx, &v, &why), 401);
    v.authorization = "Basic YWxpY2U6czNjcmV0"; /* alice:s3cret */
    char principal[300];
    ck_assert_int_eq(kb_console_guard_check(&fx.g, &v, 1000, principal, sizeof(principal), &why), 0);
    ck_assert_str_eq(principal, "User:alice");
    /* remembered: still accepted, from the cache */
    ck_assert_int_eq(kb_console_guard_check(&fx.g, &v, 2000, principal, sizeof(principal), &why), 0);
    v.authorization = "Basic !!!";
    ck_assert_int_eq(check(&fx, &v, &why), 401);
    kb_console_guard_fini(&fx.g);
    kb_scram_store_free(st);
}
END_TEST

static void append_record(ks_log *log, kp_slice key, kp_slice value, const kp_record_header *hd,
                          int32_t nh)
{
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, -1, -1, -1);
    kp_batch_builder_add(&bb, 1700000000000, key, value, hd, nh);
    size_t len;
    uint8_t *batch = kp_batch_builder_finish(&bb, &len);
    kp_batch_builder_fini(&bb);
    ck_assert_ptr_nonnull(batch);
    ks_append_result res;
    ck_assert_int_eq(ks_log_append(log, batch, len, 0, 1000, &res, NULL), KP_ERR_NONE);
    ks_log_set_high_watermark(log, res.last_offset + 1);
    free(batch);
}

START_TEST(test_console_records_reads_binary_values)
{
    char dir[] = "/tmp/kb-console-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ks_io io = ks_io_posix();
    ks_log_config cfg;
    ks_log_config_default(&cfg);
    ks_log_open_args args = {-1, -1, false, 1000};
    ks_log *log;
    ck_assert_int_eq(ks_log_open(&io, dir, "t", 0, &cfg, &args, &log, NULL, NULL), KP_ERR_NONE);
    const uint8_t bin[] = {0x00, 0xff, 0x10};
    kp_record_header hd = {{(const uint8_t *)"h", 1}, {(const uint8_t *)"v", 1}};
    append_record(log, (kp_slice){(const uint8_t *)"k1", 2}, (kp_slice){bin, 3}, &hd, 1);
    append_record(log, (kp_slice){NULL, -1}, (kp_slice){(const uint8_t *)"{\"a\":1}", 7}, NULL, 0);
    append_record(log, (kp_slice){NULL, -1}, (kp_slice){(const uint8_t *)"third", 5}, NULL, 0);

    kb_json j;
    kb_json_init(&j, 1 << 20);
    kb_json_obj(&j);
    ck_assert_int_eq(kb_console_records_read(log, 0, 2, &j), KP_ERR_NONE);
    kb_json_obj_end(&j);
    char *s = json_of(&j);
    ck_assert_ptr_nonnull(strstr(s, "\"offset\":0,\"timestamp\":1700000000000"));
    ck_assert_ptr_nonnull(strstr(s, "\"value\":{\"b64\":\"AP8Q\",\"text\":false,\"size\":3}"));
    ck_assert_ptr_nonnull(strstr(s, "\"headers\":[{\"key\":\"h\",\"value\":{\"b64\":\"dg==\""));
    ck_assert_ptr_nonnull(strstr(s, "\"key\":null"));
    ck_assert_ptr_null(strstr(s, "\"offset\":2"));
    ck_assert_ptr_nonnull(strstr(s, "\"nextOffset\":2"));
    free(s);

    kb_json_init(&j, 1 << 20);
    kb_json_obj(&j);
    ck_assert_int_eq(kb_console_records_read(log, 2, 100, &j), KP_ERR_NONE);
    kb_json_obj_end(&j);
    s = json_of(&j);
    ck_assert_ptr_nonnull(strstr(s, "\"offset\":2"));
    ck_assert_ptr_null(strstr(s, "\"offset\":1,"));
    ck_assert_ptr_nonnull(strstr(s, "\"nextOffset\":3"));
    free(s);
    ck_assert_int_eq(ks_log_delete(log, NULL), KP_ERR_NONE);
    rmdir(dir);
}
END_TEST

Suite *console_suite(void)
{
    Suite *s = suite_create("console");
    TCase *tc = tcase_create("console");
    tcase_add_test(tc, test_console_json_nests_and_escapes);
    tcase_add_test(tc, test_console_json_stays_bounded);
    tcase_add_test(tc, test_console_json_tells_text_from_binary);
    tcase_add_test(tc, test_console_query_decodes);
    tcase_add_test(tc, test_console_listener_parses);
    tcase_add_test(tc, test_console_guard_checks_writes);
    tcase_add_test(tc, test_console_guard_logs_in_against_scram);
    tcase_add_test(tc, test_console_records_reads_binary_values);
    suite_add_tcase(s, tc);
    return s;
}
