/* The ACL store and StandardAuthorizer's decision (kb_acl): literal,
 * prefixed and wildcard patterns, DENY over ALLOW, super users, implied
 * operations, filters, the checks on new bindings, and the file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_acl.h"

static char tmpdir[64];

static void dir_setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/runnel-acl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void dir_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static kp_str s(const char *v)
{
    return v != NULL ? (kp_str){v, (int32_t)strlen(v)} : KP_STR_NULL;
}

static kb_acl_binding acl(int8_t res, const char *name, int8_t pat, const char *principal,
                          const char *host, int8_t op, int8_t perm)
{
    return (kb_acl_binding){res, pat, op, perm, s(name), s(principal), s(host)};
}

static void add(kb_acl_store *st, kb_acl_binding b)
{
    kb_msgbuf msg;
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_NONE);
    ck_assert_int_eq(kb_acl_add(st, &b), KP_ERR_NONE);
}

static bool can(const kb_acl_store *st, const char *who, int8_t op, int8_t res, const char *name)
{
    return kb_acl_authorize(st, who, "10.0.0.1", op, res, s(name));
}

START_TEST(test_acl_literal_prefixed_wildcard)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, NULL, false, &st), KP_ERR_NONE);
    add(st, acl(KB_RES_TOPIC, "orders", KB_PAT_LITERAL, "User:alice", "*", KB_OP_WRITE,
                KB_PERM_ALLOW));
    add(st, acl(KB_RES_TOPIC, "logs-", KB_PAT_PREFIXED, "User:bob", "*", KB_OP_READ,
                KB_PERM_ALLOW));
    add(st, acl(KB_RES_GROUP, "*", KB_PAT_LITERAL, "User:*", "*", KB_OP_READ, KB_PERM_ALLOW));
    ck_assert(can(st, "User:alice", KB_OP_WRITE, KB_RES_TOPIC, "orders"));
    ck_assert(!can(st, "User:alice", KB_OP_WRITE, KB_RES_TOPIC, "orders2"));
    ck_assert(!can(st, "User:alice", KB_OP_READ, KB_RES_TOPIC, "orders"));
    ck_assert(!can(st, "User:bob", KB_OP_WRITE, KB_RES_TOPIC, "orders"));
    ck_assert(can(st, "User:bob", KB_OP_READ, KB_RES_TOPIC, "logs-app"));
    ck_assert(can(st, "User:bob", KB_OP_READ, KB_RES_TOPIC, "logs-"));
    ck_assert(!can(st, "User:bob", KB_OP_READ, KB_RES_TOPIC, "logs"));
    /* wildcard resource and principal */
    ck_assert(can(st, "User:carol", KB_OP_READ, KB_RES_GROUP, "any-group"));
    ck_assert(!can(st, "User:carol", KB_OP_DELETE, KB_RES_GROUP, "any-group"));
    /* a literal "*" as a name only matches as the wildcard, a literal "o"
     * is not a prefix */
    add(st, acl(KB_RES_TOPIC, "o", KB_PAT_LITERAL, "User:dave", "*", KB_OP_READ,
                KB_PERM_ALLOW));
    ck_assert(!can(st, "User:dave", KB_OP_READ, KB_RES_TOPIC, "orders"));
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_deny_beats_allow_and_hosts)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, NULL, false, &st), KP_ERR_NONE);
    add(st, acl(KB_RES_TOPIC, "*", KB_PAT_LITERAL, "User:*", "*", KB_OP_ALL, KB_PERM_ALLOW));
    add(st, acl(KB_RES_TOPIC, "secret", KB_PAT_PREFIXED, "User:eve", "*", KB_OP_READ,
                KB_PERM_DENY));
    add(st, acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "User:mallory", "10.0.0.1", KB_OP_ALL,
                KB_PERM_DENY));
    ck_assert(can(st, "User:eve", KB_OP_READ, KB_RES_TOPIC, "public"));
    ck_assert(!can(st, "User:eve", KB_OP_READ, KB_RES_TOPIC, "secret-1"));
    /* a DENY for READ does not deny the DESCRIBE it would imply as ALLOW */
    ck_assert(can(st, "User:eve", KB_OP_DESCRIBE, KB_RES_TOPIC, "secret-1"));
    ck_assert(!can(st, "User:mallory", KB_OP_WRITE, KB_RES_TOPIC, "t"));
    ck_assert(kb_acl_authorize(st, "User:mallory", "10.0.0.2", KB_OP_WRITE, KB_RES_TOPIC,
                               s("t")));
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_implied_operations)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, NULL, false, &st), KP_ERR_NONE);
    const int8_t implies[] = {KB_OP_READ, KB_OP_WRITE, KB_OP_DELETE, KB_OP_ALTER};
    char who[32];
    for (size_t i = 0; i < sizeof implies; i++) {
        snprintf(who, sizeof who, "User:u%zu", i);
        add(st, acl(KB_RES_TOPIC, "x", KB_PAT_LITERAL, who, "*", implies[i], KB_PERM_ALLOW));
        ck_assert(can(st, who, KB_OP_DESCRIBE, KB_RES_TOPIC, "x"));
        ck_assert(!can(st, who, KB_OP_DESCRIBE_CONFIGS, KB_RES_TOPIC, "x"));
    }
    add(st, acl(KB_RES_TOPIC, "x", KB_PAT_LITERAL, "User:cfg", "*", KB_OP_ALTER_CONFIGS,
                KB_PERM_ALLOW));
    ck_assert(can(st, "User:cfg", KB_OP_DESCRIBE_CONFIGS, KB_RES_TOPIC, "x"));
    ck_assert(!can(st, "User:cfg", KB_OP_DESCRIBE, KB_RES_TOPIC, "x"));
    add(st, acl(KB_RES_TOPIC, "x", KB_PAT_LITERAL, "User:desc", "*", KB_OP_DESCRIBE,
                KB_PERM_ALLOW));
    ck_assert(!can(st, "User:desc", KB_OP_READ, KB_RES_TOPIC, "x"));
    add(st, acl(KB_RES_TOPIC, "x", KB_PAT_LITERAL, "User:all", "*", KB_OP_ALL, KB_PERM_ALLOW));
    ck_assert(can(st, "User:all", KB_OP_ALTER_CONFIGS, KB_RES_TOPIC, "x"));
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_super_users_and_default)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, " User:admin ; User:ops;", false, &st), KP_ERR_NONE);
    add(st, acl(KB_RES_TOPIC, "*", KB_PAT_LITERAL, "User:*", "*", KB_OP_ALL, KB_PERM_DENY));
    ck_assert(can(st, "User:admin", KB_OP_WRITE, KB_RES_TOPIC, "t"));
    ck_assert(can(st, "User:ops", KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
    ck_assert(!can(st, "User:alice", KB_OP_WRITE, KB_RES_TOPIC, "t"));
    /* no ACL for the resource: allow.everyone.if.no.acl.found decides */
    ck_assert(!can(st, "User:alice", KB_OP_READ, KB_RES_GROUP, "g"));
    kb_acl_free(st);
    ck_assert_int_eq(kb_acl_new(NULL, NULL, true, &st), KP_ERR_NONE);
    ck_assert(can(st, "User:alice", KB_OP_READ, KB_RES_GROUP, "g"));
    /* ... but any ACL on the resource, even another principal's, denies */
    add(st, acl(KB_RES_GROUP, "g", KB_PAT_LITERAL, "User:bob", "*", KB_OP_READ, KB_PERM_ALLOW));
    ck_assert(!can(st, "User:alice", KB_OP_READ, KB_RES_GROUP, "g"));
    ck_assert(can(st, "User:alice", KB_OP_READ, KB_RES_GROUP, "g2"));
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_by_resource_type)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, NULL, false, &st), KP_ERR_NONE);
    ck_assert(!kb_acl_authorize_any(st, "User:a", "h", KB_OP_WRITE, KB_RES_TOPIC));
    add(st, acl(KB_RES_TOPIC, "foo", KB_PAT_LITERAL, "User:a", "*", KB_OP_WRITE, KB_PERM_ALLOW));
    ck_assert(kb_acl_authorize_any(st, "User:a", "h", KB_OP_WRITE, KB_RES_TOPIC));
    add(st, acl(KB_RES_TOPIC, "f", KB_PAT_PREFIXED, "User:a", "*", KB_OP_WRITE, KB_PERM_DENY));
    ck_assert(!kb_acl_authorize_any(st, "User:a", "h", KB_OP_WRITE, KB_RES_TOPIC));
    add(st, acl(KB_RES_TOPIC, "bar", KB_PAT_PREFIXED, "User:a", "*", KB_OP_ALL, KB_PERM_ALLOW));
    ck_assert(kb_acl_authorize_any(st, "User:a", "h", KB_OP_WRITE, KB_RES_TOPIC));
    add(st, acl(KB_RES_TOPIC, "*", KB_PAT_LITERAL, "User:*", "*", KB_OP_WRITE, KB_PERM_DENY));
    ck_assert(!kb_acl_authorize_any(st, "User:a", "h", KB_OP_WRITE, KB_RES_TOPIC));
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_check_new)
{
    kb_msgbuf msg;
    kb_acl_binding b = acl(KB_RES_CLUSTER, "c", KB_PAT_LITERAL, "User:a", "*", KB_OP_ALTER,
                           KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "The only valid name for the CLUSTER resource is kafka-cluster");
    b = acl(KB_RES_TOPIC, "", KB_PAT_LITERAL, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid empty resource name");
    b = acl(KB_RES_ANY, "t", KB_PAT_LITERAL, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid resourceType ANY");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_MATCH, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid patternType MATCH");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "User:a", "*", KB_OP_ANY, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid operation ANY");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "User:a", "*", KB_OP_READ, KB_PERM_ANY);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid permissionType ANY");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "a", "*", KB_OP_READ, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Could not parse principal from `a` (no colon is present "
                               "separating the principal type from the principal name)");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "User:a", "*", 16, KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Invalid operation UNKNOWN");
    b = acl(KB_RES_TOPIC, "t", KB_PAT_LITERAL, "User:a", "*", KB_OP_TWO_PHASE_COMMIT,
            KB_PERM_ALLOW);
    ck_assert_int_eq(kb_acl_check_new(&b, &msg), KP_ERR_NONE);
    ck_assert(kb_acl_codes_known(&b) && kb_acl_buildable(&b));
    b.ab_pattern = KB_PAT_MATCH;
    ck_assert(kb_acl_codes_known(&b) && !kb_acl_buildable(&b));
    b.ab_pattern = KB_PAT_LITERAL;
    b.ab_perm = KB_PERM_UNKNOWN;
    ck_assert(!kb_acl_codes_known(&b));
}
END_TEST

START_TEST(test_acl_filters_and_delete)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(NULL, NULL, false, &st), KP_ERR_NONE);
    add(st, acl(KB_RES_TOPIC, "*", KB_PAT_LITERAL, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW));
    add(st, acl(KB_RES_TOPIC, "fo", KB_PAT_PREFIXED, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW));
    add(st, acl(KB_RES_TOPIC, "foo", KB_PAT_LITERAL, "User:b", "*", KB_OP_WRITE, KB_PERM_DENY));
    add(st, acl(KB_RES_GROUP, "foo", KB_PAT_LITERAL, "User:b", "*", KB_OP_READ, KB_PERM_ALLOW));
    /* adding the same binding again changes nothing */
    add(st, acl(KB_RES_GROUP, "foo", KB_PAT_LITERAL, "User:b", "*", KB_OP_READ, KB_PERM_ALLOW));
    ck_assert_uint_eq(kb_acl_count(st), 4);
    size_t n = 0;
    kb_acl_binding f = acl(KB_RES_TOPIC, "foo", KB_PAT_MATCH, NULL, NULL, KB_OP_ANY, KB_PERM_ANY);
    for (size_t i = 0; i < kb_acl_count(st); i++) {
        kb_acl_binding b;
        kb_acl_at(st, i, &b);
        n += kb_acl_filter_matches(&f, &b);
    }
    ck_assert_uint_eq(n, 3); /* "*", "fo" prefixed, "foo" literal */
    f = acl(KB_RES_ANY, "foo", KB_PAT_ANY, NULL, NULL, KB_OP_ANY, KB_PERM_ANY);
    ck_assert_uint_eq(kb_acl_delete(st, &f, NULL, NULL), 2); /* name equal, any pattern */
    f = acl(KB_RES_ANY, NULL, KB_PAT_ANY, "User:a", NULL, KB_OP_READ, KB_PERM_ALLOW);
    ck_assert_uint_eq(kb_acl_delete(st, &f, NULL, NULL), 2);
    ck_assert_uint_eq(kb_acl_count(st), 0);
    kb_msgbuf msg;
    f = acl(KB_RES_UNKNOWN, NULL, KB_PAT_ANY, NULL, NULL, KB_OP_ANY, KB_PERM_ANY);
    ck_assert_int_eq(kb_acl_check_filter(&f, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Unknown patternFilter.");
    f = acl(KB_RES_ANY, NULL, KB_PAT_ANY, NULL, NULL, KB_OP_UNKNOWN, KB_PERM_ANY);
    ck_assert_int_eq(kb_acl_check_filter(&f, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Unknown entryFilter.");
    kb_acl_free(st);
}
END_TEST

START_TEST(test_acl_persistence_round_trip)
{
    kb_acl_store *st;
    ck_assert_int_eq(kb_acl_new(tmpdir, NULL, false, &st), KP_ERR_NONE);
    static const char odd[] = "we ird%\n\x01name";
    kb_acl_binding b = {KB_RES_TOPIC, KB_PAT_PREFIXED, KB_OP_WRITE, KB_PERM_DENY,
                        {odd, (int32_t)sizeof odd}, s("User:CN=x, O=y"), s("::1")};
    add(st, b);
    add(st, acl(KB_RES_CLUSTER, "kafka-cluster", KB_PAT_LITERAL, "User:a", "*", KB_OP_ALTER,
                KB_PERM_ALLOW));
    ck_assert_int_eq(kb_acl_save(st), KP_ERR_NONE);
    kb_acl_free(st);
    ck_assert_int_eq(kb_acl_new(tmpdir, NULL, false, &st), KP_ERR_NONE);
    ck_assert_uint_eq(kb_acl_count(st), 2);
    kb_acl_binding got;
    kb_acl_at(st, 0, &got);
    ck_assert_int_eq(got.ab_name.len, (int32_t)sizeof odd); /* with its NUL byte */
    ck_assert_mem_eq(got.ab_name.p, odd, sizeof odd);
    ck_assert_int_eq(got.ab_principal.len, 14);
    ck_assert_int_eq(got.ab_perm, KB_PERM_DENY);
    ck_assert_int_eq(got.ab_pattern, KB_PAT_PREFIXED);
    ck_assert(kb_acl_authorize(st, "User:a", "h", KB_OP_ALTER, KB_RES_CLUSTER,
                               s("kafka-cluster")));
    kb_acl_free(st);
    /* a damaged file refuses to load */
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, KB_ACL_FILE);
    FILE *f = fopen(path, "a");
    ck_assert_ptr_nonnull(f);
    fputs("acl 2 3 4 3 t User:a\n", f);
    fclose(f);
    ck_assert_int_eq(kb_acl_new(tmpdir, NULL, false, &st), KP_ERR__CORRUPT);
}
END_TEST

Suite *acl_suite(void)
{
    Suite *su = suite_create("acl");
    TCase *tc = tcase_create("acl");
    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, test_acl_literal_prefixed_wildcard);
    tcase_add_test(tc, test_acl_deny_beats_allow_and_hosts);
    tcase_add_test(tc, test_acl_implied_operations);
    tcase_add_test(tc, test_acl_super_users_and_default);
    tcase_add_test(tc, test_acl_by_resource_type);
    tcase_add_test(tc, test_acl_check_new);
    tcase_add_test(tc, test_acl_filters_and_delete);
    tcase_add_test(tc, test_acl_persistence_round_trip);
    suite_add_tcase(su, tc);
    return su;
}
