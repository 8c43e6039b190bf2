/* Pure logic behind the admin APIs: incremental config operations, dynamic
 * broker config resolution, client quota checks, precedence and rate math. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_cdoc.h"
#include "kb_cfgops.h"
#include "kb_dynconf.h"
#include "kb_quota.h"

static char tmpdir[64];

static void dir_setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/runnel-admin-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void dir_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_admin_set_delete)
{
    kb_cfgset s = {0, NULL};
    kb_msgbuf msg;
    ck_assert_int_eq(kb_cfgset_apply(&s, "retention.ms", KB_CFG_OP_SET, "100", false, NULL, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_cfgset_apply(&s, "a.key", KB_CFG_OP_SET, "1", false, NULL, &msg),
                     KP_ERR_NONE);
    ck_assert_str_eq(s.v[0].key, "a.key"); /* sorted */
    ck_assert_str_eq(kb_cfgset_get(&s, "retention.ms"), "100");
    ck_assert_int_eq(kb_cfgset_apply(&s, "retention.ms", KB_CFG_OP_DELETE, NULL, false, NULL, &msg),
                     KP_ERR_NONE);
    ck_assert_ptr_null(kb_cfgset_get(&s, "retention.ms"));
    /* deleting what is not set is fine */
    ck_assert_int_eq(kb_cfgset_apply(&s, "nope", KB_CFG_OP_DELETE, NULL, false, NULL, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_cfgset_apply(&s, "x", KB_CFG_OP_SET, NULL, false, NULL, &msg),
                     KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_cfgset_apply(&s, "x", 9, "1", false, NULL, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_uint_eq(s.n, 1);
    kb_cfgset_fini(&s);
}
END_TEST

START_TEST(test_admin_append_subtract)
{
    kb_cfgset s = {0, NULL};
    kb_msgbuf msg;
    /* APPEND starts from the key's default when unset */
    ck_assert_int_eq(kb_cfgset_apply(&s, "cleanup.policy", KB_CFG_OP_APPEND, "compact", true,
                                     "delete", &msg),
                     KP_ERR_NONE);
    ck_assert_str_eq(kb_cfgset_get(&s, "cleanup.policy"), "delete,compact");
    /* no duplicates */
    kb_cfgset_apply(&s, "cleanup.policy", KB_CFG_OP_APPEND, "compact,delete", true, NULL, &msg);
    ck_assert_str_eq(kb_cfgset_get(&s, "cleanup.policy"), "delete,compact");
    kb_cfgset_apply(&s, "cleanup.policy", KB_CFG_OP_SUBTRACT, "delete", true, NULL, &msg);
    ck_assert_str_eq(kb_cfgset_get(&s, "cleanup.policy"), "compact");
    kb_cfgset_apply(&s, "cleanup.policy", KB_CFG_OP_SUBTRACT, "compact,other", true, NULL, &msg);
    ck_assert_str_eq(kb_cfgset_get(&s, "cleanup.policy"), "");
    /* not a list key */
    ck_assert_int_eq(kb_cfgset_apply(&s, "retention.ms", KB_CFG_OP_APPEND, "1", false, NULL, &msg),
                     KP_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(msg.text, "retention.ms"));
    kb_cfgset_fini(&s);
}
END_TEST

START_TEST(test_admin_duplicate_keys)
{
    kp_str names[3] = {KP_STR_LIT("a"), KP_STR_LIT("b"), KP_STR_LIT("a")};
    kp_str dup;
    ck_assert(kb_cfg_has_duplicate(names, sizeof(names[0]), 3, &dup));
    ck_assert(kp_str_eq_c(dup, "a"));
    ck_assert(!kb_cfg_has_duplicate(names, sizeof(names[0]), 2, &dup));
}
END_TEST

START_TEST(test_admin_dynconf_scaled_synonyms)
{
    kb_dynconf *d;
    ck_assert_int_eq(kb_dynconf_open(tmpdir, &d), KP_ERR_NONE);
    ck_assert(kb_dynconf_key_dynamic("log.retention.ms"));
    ck_assert(!kb_dynconf_key_dynamic("log.dirs"));
    kb_cfgset s = {0, NULL};
    kb_cfgset_put(&s, "log.retention.hours", "2");
    ck_assert_int_eq(kb_dynconf_replace(d, KB_DYN_CLUSTER, &s), KP_ERR_NONE);
    kb_dyn_level level;
    ck_assert_str_eq(kb_dynconf_topic_default(d, "retention.ms", &level), "7200000");
    ck_assert_int_eq(level, KB_DYN_CLUSTER);
    kb_cfgset_put(&s, "log.retention.ms", "5000");
    ck_assert_int_eq(kb_dynconf_replace(d, KB_DYN_NODE, &s), KP_ERR_NONE);
    ck_assert_str_eq(kb_dynconf_topic_default(d, "retention.ms", &level), "5000");
    ck_assert_int_eq(level, KB_DYN_NODE);
    kb_dynconf_close(d);
    /* persisted */
    ck_assert_int_eq(kb_dynconf_open(tmpdir, &d), KP_ERR_NONE);
    ck_assert_str_eq(kb_dynconf_get(d, "log.retention.ms", &level), "5000");
    ck_assert_str_eq(kb_dynconf_get(d, "log.retention.hours", &level), "2");
    kb_dynconf_close(d);
}
END_TEST

/* kafka-reassign-partitions --verify clears these three on the broker (Kafka's
 * DynamicConfig.Broker quota keys); a refusal failed the tool. */
START_TEST(test_admin_dynconf_replication_throttles)
{
    ck_assert(kb_dynconf_key_dynamic("leader.replication.throttled.rate"));
    ck_assert(kb_dynconf_key_dynamic("follower.replication.throttled.rate"));
    ck_assert(kb_dynconf_key_dynamic("replica.alter.log.dirs.io.max.bytes.per.second"));
    ck_assert(!kb_dynconf_key_dynamic("replica.alter.log.dirs"));
}
END_TEST

START_TEST(test_admin_rate_math)
{
    kb_rate r;
    kb_rate_init(&r, 1000, 11, 0);
    /* the first windows count as ten seconds: 1000 bytes over 10 s */
    kb_rate_record(&r, 1000, 0);
    ck_assert_double_eq_tol(kb_rate_measure(&r, 0), 100.0, 0.01);
    ck_assert_int_eq(kb_rate_throttle_ms(&r, 100.0, 0), 0);
    kb_rate_record(&r, 1000, 500);
    /* 2000 bytes / 10 s = 200/s against a quota of 100/s: wait until the
     * average is back at the quota: (200 - 100) / 100 * 10 s */
    ck_assert_int_eq(kb_rate_throttle_ms(&r, 100.0, 500), 10000);
    /* windows older than samples * window no longer count */
    kb_rate_record(&r, 10, 30000);
    ck_assert_double_eq_tol(kb_rate_measure(&r, 30000), 1.0, 0.01);
    /* a steady 100/s for 20 s measures 100/s */
    kb_rate_init(&r, 1000, 11, 0);
    for (int64_t t = 0; t < 20000; t += 100)
        kb_rate_record(&r, 10, t);
    ck_assert_double_eq_tol(kb_rate_measure(&r, 20000), 100.0, 10.0);
}
END_TEST

START_TEST(test_admin_quota_check)
{
    kb_msgbuf msg;
    kb_quota_entity user = {"user", "alice"}, ip = {"ip", "1.2.3.4"}, bad = {"group", "x"};
    kb_quota_entity both[2] = {{"client-id", "c"}, {"ip", NULL}};
    kb_quota_op rate = {"producer_byte_rate", 1024, false};
    kb_quota_op frac = {"producer_byte_rate", 10.5, false};
    kb_quota_op conn = {"connection_creation_rate", 5, false};
    ck_assert_int_eq(kb_quotas_check(&user, 1, &rate, 1, &msg), KP_ERR_NONE);
    ck_assert_int_eq(kb_quotas_check(&user, 1, &frac, 1, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_quotas_check(&user, 1, &conn, 1, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_quotas_check(&ip, 1, &conn, 1, &msg), KP_ERR_NONE);
    ck_assert_int_eq(kb_quotas_check(&bad, 1, &rate, 1, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_quotas_check(both, 2, &rate, 1, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_quotas_check(&user, 0, &rate, 1, &msg), KP_ERR_INVALID_REQUEST);
}
END_TEST

START_TEST(test_admin_quota_precedence_and_persistence)
{
    kb_quotas *q;
    ck_assert_int_eq(kb_quotas_open(tmpdir, NULL, &q), KP_ERR_NONE);
    kb_quota_entity client_default = {"client-id", NULL};
    kb_quota_entity user_client[2] = {{"client-id", "c1"}, {"user", "ANONYMOUS"}};
    kb_quota_op small = {"producer_byte_rate", 100, false};
    kb_quota_op big = {"producer_byte_rate", 1000000, false};
    ck_assert_int_eq(kb_quotas_alter(q, &client_default, 1, &small, 1), KP_ERR_NONE);
    ck_assert_int_eq(kb_quotas_alter(q, user_client, 2, &big, 1), KP_ERR_NONE);
    /* c1 as ANONYMOUS gets the big quota; any other client the default one */
    ck_assert_int_eq(kb_quotas_record(q, KB_QUOTA_PRODUCE, "ANONYMOUS", "c1", 5000, 0), 0);
    ck_assert_int_gt(kb_quotas_record(q, KB_QUOTA_PRODUCE, "ANONYMOUS", "c2", 5000, 0), 0);
    /* fetch has no quota */
    ck_assert_int_eq(kb_quotas_record(q, KB_QUOTA_FETCH, "ANONYMOUS", "c2", 5000000, 0), 0);
    kb_quotas_close(q);
    ck_assert_int_eq(kb_quotas_open(tmpdir, NULL, &q), KP_ERR_NONE);
    ck_assert_uint_eq(kb_quotas_count(q), 2);
    kb_quota_op remove = {"producer_byte_rate", 0, true};
    ck_assert_int_eq(kb_quotas_alter(q, &client_default, 1, &remove, 1), KP_ERR_NONE);
    ck_assert_uint_eq(kb_quotas_count(q), 1); /* an entry without values is gone */
    ck_assert_int_eq(kb_quotas_record(q, KB_QUOTA_PRODUCE, "ANONYMOUS", "c2", 5000000, 0), 0);
    kb_quotas_close(q);
}
END_TEST

START_TEST(test_admin_docs_for_every_key)
{
    ck_assert_ptr_nonnull(kb_cdoc("retention.ms"));
    ck_assert_ptr_nonnull(strstr(kb_cdoc("retention.ms"), "older"));
    ck_assert_ptr_nonnull(kb_cdoc("no.such.key"));
    ck_assert_ptr_nonnull(strstr(kb_cdoc("segment.ms"), "segment")); /* found by bsearch */
    ck_assert_ptr_nonnull(strstr(kb_cdoc("auto.create.topics.enable"), "topic"));
}
END_TEST

Suite *admin_suite(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("cfgops");
    tcase_add_test(tc, test_admin_set_delete);
    tcase_add_test(tc, test_admin_append_subtract);
    tcase_add_test(tc, test_admin_duplicate_keys);
    tcase_add_test(tc, test_admin_docs_for_every_key);
    suite_add_tcase(s, tc);
    tc = tcase_create("stores");
    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, test_admin_dynconf_scaled_synonyms);
    tcase_add_test(tc, test_admin_dynconf_replication_throttles);
    tcase_add_test(tc, test_admin_quota_check);
    tcase_add_test(tc, test_admin_quota_precedence_and_persistence);
    tcase_add_test(tc, test_admin_rate_math);
    suite_add_tcase(s, tc);
    return s;
}
