/* kb_log: line format, filtering, escaping, rate limiting, assertions. */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_log.h"

static size_t format_line(char *buf, size_t cap, kb_log_level level, unsigned subsys,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static size_t format_line(char *buf, size_t cap, kb_log_level level, unsigned subsys,
                          const char *fmt, ...)
{
    /* 2026-11-29T10:00:00.123Z */
    struct timespec ts = {.tv_sec = 1795946400, .tv_nsec = 123456789};
    va_list ap;

    va_start(ap, fmt);
    size_t n = kb_log_format(buf, cap, &ts, level, subsys, fmt, ap);
    va_end(ap);
    return n;
}

const char *capture_stderr(void (*fn)(void))
{
    static char out[8192];
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    fn();
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return out;
}

static void teardown_level(void)
{
    kb_log_set_level(KB_LL_INFO);
    kb_log_set_subsystems(KB_SUB_ALL);
}

START_TEST(test_log_format_line)
{
    char buf[256];
    size_t n = format_line(buf, sizeof buf, KB_LL_INFO, KB_SUB_CONFIG, "msg=\"%s\" key=%d",
                           "hello", 7);
    ck_assert_str_eq(buf, "2026-11-29T10:00:00.123Z INFO config msg=\"hello\" key=7\n");
    ck_assert_uint_eq(n, strlen(buf));

    format_line(buf, sizeof buf, KB_LL_WARN, KB_SUB_NET, "msg=\"x\"");
    ck_assert_str_eq(buf, "2026-11-29T10:00:00.123Z WARN net msg=\"x\"\n");
    format_line(buf, sizeof buf, KB_LL_DEBUG, KB_SUB_STORAGE | KB_SUB_NET, "a=1");
    ck_assert_str_eq(buf, "2026-11-29T10:00:00.123Z DEBUG - a=1\n");
}
END_TEST

START_TEST(test_log_format_one_line_and_bounded)
{
    char buf[128], big[1000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';

    size_t n = format_line(buf, sizeof buf, KB_LL_ERROR, KB_SUB_MAIN, "msg=\"%s\"", big);
    ck_assert_uint_eq(n, sizeof buf - 1);
    ck_assert_uint_eq(strlen(buf), n);
    ck_assert_str_eq(buf + n - 4, "...\n");

    format_line(buf, sizeof buf, KB_LL_ERROR, KB_SUB_MAIN, "a=1\nb=2\rc=3");
    ck_assert_ptr_eq(strchr(buf, '\n'), buf + strlen(buf) - 1);
    ck_assert_ptr_null(strchr(buf, '\r'));
    ck_assert_ptr_nonnull(strstr(buf, "a=1 b=2 c=3\n"));
}
END_TEST

static void write_some_lines(void)
{
    KB_LOG(KB_LL_INFO, KB_SUB_CONFIG, "msg=\"shown\" n=%d", 1);
    KB_LOG(KB_LL_DEBUG, KB_SUB_CONFIG, "msg=\"hidden at INFO\"");
    KB_LOG(KB_LL_ERROR, KB_SUB_NET, "msg=\"bad\" conn=%d", 9);
}

START_TEST(test_log_write_to_stderr)
{
    const char *out = capture_stderr(write_some_lines);
    char date[5];

    ck_assert_ptr_nonnull(strstr(out, "Z INFO config msg=\"shown\" n=1\n"));
    ck_assert_ptr_nonnull(strstr(out, "Z ERROR net msg=\"bad\" conn=9\n"));
    ck_assert_ptr_null(strstr(out, "hidden"));
    /* the line opens with an ISO-8601 UTC timestamp */
    ck_assert_int_eq(sscanf(out, "%4[0-9]-", date), 1);
    ck_assert_int_eq(out[10], 'T');
    ck_assert_int_eq(out[23], 'Z');
}
END_TEST

START_TEST(test_log_level_and_mask_filter)
{
    ck_assert(kb_log_enabled(KB_LL_INFO, KB_SUB_NET));
    ck_assert(!kb_log_enabled(KB_LL_DEBUG, KB_SUB_NET));

    kb_log_set_level(KB_LL_WARN);
    ck_assert_int_eq(kb_log_get_level(), KB_LL_WARN);
    ck_assert(kb_log_enabled(KB_LL_ERROR, KB_SUB_NET));
    ck_assert(kb_log_enabled(KB_LL_WARN, KB_SUB_NET));
    ck_assert(!kb_log_enabled(KB_LL_INFO, KB_SUB_NET));

    kb_log_set_level(KB_LL_DEBUG);
    kb_log_set_subsystems(KB_SUB_NET | KB_SUB_GROUP);
    ck_assert_uint_eq(kb_log_get_subsystems(), KB_SUB_NET | KB_SUB_GROUP);
    ck_assert(kb_log_enabled(KB_LL_DEBUG, KB_SUB_GROUP));
    ck_assert(!kb_log_enabled(KB_LL_DEBUG, KB_SUB_STORAGE));
    /* the mask filters only DEBUG and TRACE */
    ck_assert(kb_log_enabled(KB_LL_INFO, KB_SUB_STORAGE));
}
END_TEST

START_TEST(test_log_trace_compiled_out)
{
    int evaluated = 0;

    kb_log_set_level(KB_LL_TRACE);
    kb_log_set_subsystems(0); /* no line is written either way */
    KB_LOG(KB_LL_TRACE, KB_SUB_NET, "n=%d", evaluated++);
    ck_assert_int_eq(evaluated, 0);
    kb_log_set_subsystems(KB_SUB_ALL);
    kb_log_set_level(KB_LL_INFO);
    KB_LOG(KB_LL_TRACE, KB_SUB_NET, "n=%d", evaluated++);
    ck_assert_int_eq(evaluated, 0);
#if !KB_LOG_TRACE_COMPILED
    kb_log_set_level(KB_LL_TRACE);
    KB_LOG(KB_LL_TRACE, KB_SUB_NET, "n=%d", evaluated++);
    ck_assert_int_eq(evaluated, 0);
#endif
}
END_TEST

START_TEST(test_log_names)
{
    ck_assert_str_eq(kb_log_level_name(KB_LL_ERROR), "ERROR");
    ck_assert_str_eq(kb_log_level_name(KB_LL_TRACE), "TRACE");
    ck_assert_str_eq(kb_log_level_name((kb_log_level)99), "?");
    ck_assert_str_eq(kb_log_subsys_name(KB_SUB_PROTO), "proto");
    ck_assert_str_eq(kb_log_subsys_name(KB_SUB_MAIN), "main");
    ck_assert_str_eq(kb_log_subsys_name(0), "-");
}
END_TEST

START_TEST(test_log_escape)
{
    char buf[64];

    ck_assert_str_eq(kb_log_escape(buf, sizeof buf, "plain text", 10), "plain text");
    ck_assert_str_eq(kb_log_escape(buf, sizeof buf, "a\"b\\c", 5), "a\\x22b\\x5cc");
    ck_assert_str_eq(kb_log_escape(buf, sizeof buf, "\0\n\xff", 3), "\\x00\\x0a\\xff");
    ck_assert_str_eq(kb_log_escape(buf, sizeof buf, "", 0), "");

    /* exactly fits: 7 bytes + NUL in 8 */
    ck_assert_str_eq(kb_log_escape(buf, 8, "1234567", 7), "1234567");
    /* cut: ends in "...", never inside an escape, always NUL-terminated */
    ck_assert_str_eq(kb_log_escape(buf, 8, "12345678", 8), "1234...");
    ck_assert_str_eq(kb_log_escape(buf, 10, "ab\x01\x02", 4), "ab\\x01...");
    ck_assert_str_eq(kb_log_escape(buf, 9, "ab\x01\x02", 4), "ab...");
    ck_assert_str_eq(kb_log_escape(buf, 4, "abcdef", 6), "...");
}
END_TEST

START_TEST(test_log_escape_output_is_printable)
{
    unsigned char all[256];
    char buf[KB_LOG_ESC_SHORT];

    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    kb_log_escape(buf, sizeof buf, all, sizeof all);
    ck_assert_uint_lt(strlen(buf), sizeof buf);
    for (const char *p = buf; *p; p++) {
        ck_assert(*p >= 0x20 && *p < 0x7f);
        ck_assert(*p != '"');
    }
    ck_assert_str_eq(buf + strlen(buf) - 3, "...");
}
END_TEST

START_TEST(test_log_ratelimit_per_key)
{
    kb_log_ratelimit rl;
    uint32_t sup = 99;

    kb_log_ratelimit_init(&rl, 3, 1000);
    for (int i = 0; i < 3; i++) {
        ck_assert(kb_log_ratelimit_allow(&rl, 42, 10 + i, &sup));
        ck_assert_uint_eq(sup, 0);
    }
    ck_assert(!kb_log_ratelimit_allow(&rl, 42, 500, &sup));
    ck_assert(!kb_log_ratelimit_allow(&rl, 42, 1009, &sup));
    /* the next window opens at 10 + 1000 and reports what was refused */
    ck_assert(kb_log_ratelimit_allow(&rl, 42, 1010, &sup));
    ck_assert_uint_eq(sup, 2);
    ck_assert(kb_log_ratelimit_allow(&rl, 42, 1011, NULL));
    ck_assert(kb_log_ratelimit_allow(&rl, 42, 1012, &sup));
    ck_assert_uint_eq(sup, 0);
    ck_assert(!kb_log_ratelimit_allow(&rl, 42, 1013, &sup));
}
END_TEST

START_TEST(test_log_ratelimit_bounded_over_keys)
{
    kb_log_ratelimit rl;
    unsigned allowed = 0;

    kb_log_ratelimit_init(&rl, 2, 60000);
    for (uint64_t key = 0; key < 100000; key++)
        allowed += kb_log_ratelimit_allow(&rl, key, 5, NULL);
    ck_assert_uint_le(allowed, KB_LOG_RL_SLOTS * 2);
    ck_assert_uint_ge(allowed, 2);
}
END_TEST

START_TEST(test_log_assert_aborts_with_location)
{
    int fds[2];
    char out[16384];
    size_t n = 0;

    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        int zero = (int)(getpid() == 0);
        KB_ASSERT(zero == 1);
        _exit(0);
    }
    close(fds[1]);
    for (ssize_t r; (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0;)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(WTERMSIG(status), SIGABRT);
    ck_assert_ptr_nonnull(strstr(out, "ERROR main msg=\"assertion failed\" expr=\"zero == 1\""));
    ck_assert_ptr_nonnull(strstr(out, "test_log.c:"));
    ck_assert_ptr_nonnull(strstr(out, "func=test_log_assert_aborts_with_location"));
}
END_TEST

START_TEST(test_log_dcheck_and_never)
{
    int calls = 0;

    KB_DCHECK(++calls > 0);
#ifdef NDEBUG
    ck_assert_int_eq(calls, 0); /* not evaluated in release */
    ck_assert(KB_NEVER(calls == 0));
#else
    ck_assert_int_eq(calls, 1);
    ck_assert(!KB_NEVER(calls == 0));
#endif
    ck_assert(KB_ALWAYS(1 + 1 == 2));
}
END_TEST

Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");

    tcase_add_checked_fixture(tc, NULL, teardown_level);
    tcase_add_test(tc, test_log_format_line);
    tcase_add_test(tc, test_log_format_one_line_and_bounded);
    tcase_add_test(tc, test_log_write_to_stderr);
    tcase_add_test(tc, test_log_level_and_mask_filter);
    tcase_add_test(tc, test_log_trace_compiled_out);
    tcase_add_test(tc, test_log_names);
    tcase_add_test(tc, test_log_escape);
    tcase_add_test(tc, test_log_escape_output_is_printable);
    tcase_add_test(tc, test_log_ratelimit_per_key);
    tcase_add_test(tc, test_log_ratelimit_bounded_over_keys);
    tcase_add_test(tc, test_log_assert_aborts_with_location);
    tcase_add_test(tc, test_log_dcheck_and_never);
    suite_add_tcase(s, tc);
    return s;
}
