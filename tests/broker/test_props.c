/* kb_properties: Java Properties syntax and the container images' environment names. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_properties.h"

#define MAX_PAIRS 16

typedef struct pairs {
    int n;
    char key[MAX_PAIRS][64];
    char value[MAX_PAIRS][128];
    int line[MAX_PAIRS];
} pairs;

static kp_err collect(void *arg, const char *key, const char *value, int line)
{
    pairs *p = arg;

    ck_assert_int_lt(p->n, MAX_PAIRS);
    snprintf(p->key[p->n], sizeof p->key[0], "%s", key);
    snprintf(p->value[p->n], sizeof p->value[0], "%s", value);
    p->line[p->n++] = line;
    return KP_ERR_NONE;
}

static pairs parse_ok(const char *text)
{
    pairs p = {0};
    kb_properties_error perr = {0, NULL};

    ck_assert_int_eq(kb_properties_parse(text, strlen(text), collect, &p, &perr), KP_ERR_NONE);
    return p;
}

static void assert_pair(const pairs *p, int i, const char *key, const char *value)
{
    ck_assert_int_lt(i, p->n);
    ck_assert_str_eq(p->key[i], key);
    ck_assert_str_eq(p->value[i], value);
}

START_TEST(test_props_separators)
{
    pairs p = parse_ok("a=1\n"
                       "b: 2\n"
                       "c 3\n"
                       "   d   =   4\n"
                       "e\n"
                       "f=\n"
                       "g = keeps trailing  \n"
                       "h=x=y:z\n"
                       "i\t:\t5\n"
                       "j ==6\n");
    ck_assert_int_eq(p.n, 10);
    assert_pair(&p, 0, "a", "1");
    assert_pair(&p, 1, "b", "2");
    assert_pair(&p, 2, "c", "3");
    assert_pair(&p, 3, "d", "4");
    assert_pair(&p, 4, "e", "");
    assert_pair(&p, 5, "f", "");
    assert_pair(&p, 6, "g", "keeps trailing  ");
    assert_pair(&p, 7, "h", "x=y:z");
    assert_pair(&p, 8, "i", "5");
    assert_pair(&p, 9, "j", "=6"); /* only one separator is eaten */
}
END_TEST

START_TEST(test_props_comments_and_blanks)
{
    pairs p = parse_ok("# comment\n"
                       "! also a comment\n"
                       "   # indented comment\n"
                       "\n"
                       "   \t \n"
                       "# a comment ending in a backslash does not continue \\\n"
                       "k=v # not a comment\n");
    ck_assert_int_eq(p.n, 1);
    assert_pair(&p, 0, "k", "v # not a comment");
    ck_assert_int_eq(p.line[0], 7);
}
END_TEST

START_TEST(test_props_continuation)
{
    pairs p = parse_ok("listeners=PLAINTEXT://:9092,\\\n"
                       "          CONTROLLER://:9093\n"
                       "two=a\\\\\n"     /* even backslashes: no continuation */
                       "three=x\\\n"
                       "   # not a comment here\n"
                       "last=end\\");    /* continuation at EOF */
    ck_assert_int_eq(p.n, 4);
    assert_pair(&p, 0, "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093");
    assert_pair(&p, 1, "two", "a\\");
    assert_pair(&p, 2, "three", "x# not a comment here");
    assert_pair(&p, 3, "last", "end");
    ck_assert_int_eq(p.line[0], 1);
    ck_assert_int_eq(p.line[2], 4);
    ck_assert_int_eq(p.line[3], 6);
}
END_TEST

START_TEST(test_props_escapes)
{
    pairs p = parse_ok("tab=a\\tb\n"
                       "nl=a\\nb\\rc\\fd\n"
                       "u=\\u0041\\u00e9\\u20AC\n"
                       "pair=\\ud83d\\ude00\n"
                       "lone=\\ud83dx\n"
                       "key\\=with\\:seps\\ and\\ space=v\n"
                       "other=\\q\\\\\\#\n"
                       "\\#notcomment=1\n");
    ck_assert_int_eq(p.n, 8);
    assert_pair(&p, 0, "tab", "a\tb");
    assert_pair(&p, 1, "nl", "a\nb\rc\fd");
    assert_pair(&p, 2, "u", "A\xc3\xa9\xe2\x82\xac");
    assert_pair(&p, 3, "pair", "\xf0\x9f\x98\x80");
    assert_pair(&p, 4, "lone", "\xef\xbf\xbdx");
    assert_pair(&p, 5, "key=with:seps and space", "v");
    assert_pair(&p, 6, "other", "q\\#");
    assert_pair(&p, 7, "#notcomment", "1");
}
END_TEST

START_TEST(test_props_line_endings)
{
    pairs p = parse_ok("a=1\r\nb=2\rc=3\n\rd=4");
    ck_assert_int_eq(p.n, 4);
    assert_pair(&p, 0, "a", "1");
    assert_pair(&p, 1, "b", "2");
    assert_pair(&p, 2, "c", "3");
    assert_pair(&p, 3, "d", "4");
    ck_assert_int_eq(p.line[3], 5);

    pairs q = parse_ok("a=x\\\r\n   y\r\n");
    ck_assert_int_eq(q.n, 1);
    assert_pair(&q, 0, "a", "xy");
}
END_TEST

START_TEST(test_props_duplicates_in_order)
{
    pairs p = parse_ok("x=1\ny=2\nx=3\n");
    ck_assert_int_eq(p.n, 3);
    assert_pair(&p, 0, "x", "1");
    assert_pair(&p, 2, "x", "3");
}
END_TEST

static const struct {
    const char *text;
    size_t len;
    int line;
    const char *what;
} bad_props[] = {
    {"a=1\nb=\\u12\n", 0, 2, "malformed \\uxxxx escape"},
    {"a=\\u12zz\n", 0, 1, "malformed \\uxxxx escape"},
    {"a=1\nb=x\\u0000\n", 0, 2, "\\u0000 is not allowed"},
    {"a=1\n\nc=x\0y\n", 10, 3, "NUL byte"},
    {"a=1\n=value\n", 0, 2, "a line with a value but no key"},
};

START_TEST(test_props_errors_name_line)
{
    pairs p = {0};
    kb_properties_error perr = {0, NULL};
    size_t len = bad_props[_i].len ? bad_props[_i].len : strlen(bad_props[_i].text);

    ck_assert_int_eq(kb_properties_parse(bad_props[_i].text, len, collect, &p, &perr), KP_ERR__INVAL);
    ck_assert_int_eq(perr.pe_line, bad_props[_i].line);
    ck_assert_str_eq(perr.pe_what, bad_props[_i].what);
}
END_TEST

static kp_err refuse(void *arg, const char *key, const char *value, int line)
{
    (void)key;
    (void)value;
    (void)line;
    ++*(int *)arg;
    return KP_ERR__NOMEM;
}

START_TEST(test_props_callback_error_stops)
{
    int calls = 0;
    const char *text = "a=1\nb=2\n";

    ck_assert_int_eq(kb_properties_parse(text, strlen(text), refuse, &calls, NULL), KP_ERR__NOMEM);
    ck_assert_int_eq(calls, 1);
}
END_TEST

static const char *env_key(const char *var)
{
    static char out[128];

    if (kb_properties_env_key(var, strlen(var), out) == 0)
        return NULL;
    return out;
}

START_TEST(test_props_env_names)
{
    ck_assert_str_eq(env_key("KAFKA_LOG_DIRS"), "log.dirs");
    ck_assert_str_eq(env_key("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"),
                     "listener.security.protocol.map");
    ck_assert_str_eq(env_key("KAFKA_NODE_ID"), "node.id");
    ck_assert_str_eq(env_key("KAFKA_FOO__BAR"), "foo_bar");
    ck_assert_str_eq(env_key("KAFKA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG"),
                     "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config");
    ck_assert_str_eq(env_key("KAFKA_A____B"), "a-.b");
    ck_assert_str_eq(env_key("KAFKA_A_____B"), "a-_b");
    ck_assert_str_eq(env_key("KAFKA_CFG_NUM_PARTITIONS"), "num.partitions");
    ck_assert_str_eq(env_key("KAFKA_RUNNEL_LOG_LEVEL"), "runnel.log.level");
}
END_TEST

START_TEST(test_props_env_skips_launcher_vars)
{
    static const char *const skipped[] = {
        "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS",
        "KAFKA_DEBUG", "KAFKA_GC_LOG_OPTS", "KAFKA_JMX_OPTS", "KAFKA_JMX_PORT",
        "KAFKA_VERSION", "KAFKA_", "KAFKA", "PATH", "kafka_log_dirs", "XKAFKA_LOG_DIRS",
    };
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        ck_assert_msg(env_key(skipped[i]) == NULL, "%s was mapped", skipped[i]);
}
END_TEST

Suite *props_suite(void)
{
    Suite *s = suite_create("props");
    TCase *tc = tcase_create("props");

    tcase_add_test(tc, test_props_separators);
    tcase_add_test(tc, test_props_comments_and_blanks);
    tcase_add_test(tc, test_props_continuation);
    tcase_add_test(tc, test_props_escapes);
    tcase_add_test(tc, test_props_line_endings);
    tcase_add_test(tc, test_props_duplicates_in_order);
    tcase_add_loop_test(tc, test_props_errors_name_line, 0,
                        (int)(sizeof bad_props / sizeof bad_props[0]));
    tcase_add_test(tc, test_props_callback_error_stops);
    tcase_add_test(tc, test_props_env_names);
    tcase_add_test(tc, test_props_env_skips_launcher_vars);
    suite_add_tcase(s, tc);
    return s;
}
