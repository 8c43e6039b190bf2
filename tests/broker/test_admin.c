/* Pure logic behind the admin APIs: incremental config operations, dynamic
 * broker config resolution, group config checks and storage, client quota
 * checks, precedence and rate math. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config_doc.h"
#include "kb_config_edit.h"
#include "kb_dynconf.h"
#include "kb_group_conf.h"
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
    ck_assert_ptr_nonnull(kb_config_doc("retention.ms"));
    ck_assert_ptr_nonnull(strstr(kb_config_doc("retention.ms"), "older"));
    ck_assert_ptr_nonnull(kb_config_doc("no.such.key"));
    ck_assert_ptr_nonnull(strstr(kb_config_doc("segment.ms"), "segment")); /* found by bsearch */
    ck_assert_ptr_nonnull(strstr(kb_config_doc("auto.create.topics.enable"), "topic"));
}
END_TEST

/* The broker settings group configs read: Kafka 4.1's defaults. */
static kb_config group_cfg(void)
{
    kb_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.group_consumer_heartbeat_interval_ms = 5000;
    cfg.group_consumer_session_timeout_ms = 45000;
    cfg.group_consumer_min_heartbeat_interval_ms = 5000;
    cfg.group_consumer_max_heartbeat_interval_ms = 15000;
    cfg.group_consumer_min_session_timeout_ms = 45000;
    cfg.group_consumer_max_session_timeout_ms = 60000;
    return cfg;
}

/* The text kb_group_conf_check gives for one key=value ("" when accepted). */
static const char *group_check(const kb_config *cfg, const char *key, const char *value)
{
    static kb_msgbuf msg;
    kb_cfgset s = {0, NULL};
    ck_assert_int_eq(kb_cfgset_put(&s, key, value), KP_ERR_NONE);
    kp_err e = kb_group_conf_check(cfg, &s, &msg);
    kb_cfgset_fini(&s);
    ck_assert(e == KP_ERR_NONE || e == KP_ERR_INVALID_CONFIG);
    return e == KP_ERR_NONE ? "" : msg.text;
}

START_TEST(test_admin_group_config_checks)
{
    kb_config cfg = group_cfg();
    static const struct {
        const char *key, *value, *text;
    } cases[] = {
        {"consumer.session.timeout.ms", "45000", ""},
        {"consumer.session.timeout.ms", "60000", ""},
        {"consumer.session.timeout.ms", "44999",
         "consumer.session.timeout.ms must be greater than or equal to "
         "group.consumer.min.session.timeout.ms"},
        {"consumer.session.timeout.ms", "60001",
         "consumer.session.timeout.ms must be less than or equal to "
         "group.consumer.max.session.timeout.ms"},
        {"consumer.heartbeat.interval.ms", " 6000 ", ""},
        {"consumer.heartbeat.interval.ms", "2147483648",
         "Invalid value 2147483648 for configuration consumer.heartbeat.interval.ms: Not a number "
         "of type INT"},
        {"consumer.heartbeat.interval.ms", "0",
         "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at "
         "least 1"},
        {"share.record.lock.duration.ms", "1000",
         "share.record.lock.duration.ms must be greater than or equal to "
         "group.share.min.record.lock.duration.ms"},
        {"streams.num.standby.replicas", "2", ""},
        {"streams.num.standby.replicas", "3",
         "streams.num.standby.replicas must be less than or equal to "
         "group.streams.max.standby.replicas"},
        {"share.isolation.level", "read_committed", ""},
        {"share.isolation.level", "READ_COMMITTED",
         "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be "
         "one of: read_committed, read_uncommitted"},
        {"share.auto.offset.reset", "earliest", ""},
        {"share.auto.offset.reset", "by_duration:P1DT2H3M4.5S", ""},
        {"share.auto.offset.reset", "by_duration:PT", NULL},
        {"share.auto.offset.reset", "by_duration:-PT1H", NULL},
        {"share.auto.offset.reset", "by_duration:", NULL},
        {"no.such.key", "1", "Unknown group config name: no.such.key"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = group_check(&cfg, cases[i].key, cases[i].value);
        if (cases[i].text == NULL)
            ck_assert_msg(strstr(got, "The value must be either 'earliest', 'latest'") != NULL,
                          "%s=%s: %s", cases[i].key, cases[i].value, got);
        else
            ck_assert_msg(strcmp(got, cases[i].text) == 0, "%s=%s: %s", cases[i].key,
                          cases[i].value, got);
    }
    /* The bounds follow the broker's settings, and so do the defaults. */
    cfg.group_consumer_max_session_timeout_ms = 90000;
    ck_assert_str_eq(group_check(&cfg, "consumer.session.timeout.ms", "90000"), "");
    cfg.group_consumer_min_session_timeout_ms = 50000; /* the default 45000 is now too low */
    ck_assert_str_eq(group_check(&cfg, "share.isolation.level", "read_committed"),
                     "consumer.session.timeout.ms must be greater than or equal to "
                     "group.consumer.min.session.timeout.ms");
    char buf[16];
    cfg.group_consumer_heartbeat_interval_ms = 7000;
    ck_assert_str_eq(kb_group_conf_default(&cfg, "consumer.heartbeat.interval.ms", buf, sizeof(buf)),
                     "7000");
    ck_assert_str_eq(kb_group_conf_default(&cfg, "share.auto.offset.reset", buf, sizeof(buf)),
                     "latest");
    kb_msgbuf msg;
    ck_assert_int_eq(kb_group_conf_check_name(KP_STR_LIT(""), &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_str_eq(msg.text, "Default group resources are not allowed.");
    ck_assert_int_eq(kb_group_conf_check_name((kp_str){"a\0b", 3}, &msg), KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_group_conf_check_name(KP_STR_LIT("a b"), &msg), KP_ERR_NONE);
}
END_TEST

/* Values per group, persisted and read back; ids with spaces, '%' and
 * newlines; an emptied group is forgotten; the effective consumer values. */
START_TEST(test_admin_group_config_store)
{
    kb_config cfg = group_cfg();
    kb_group_conf *gc;
    kb_msgbuf msg;
    ck_assert_int_eq(kb_group_conf_open(tmpdir, &gc), KP_ERR_NONE);
    const kp_str a = KP_STR_LIT("orders app"), b = KP_STR_LIT("odd%id\nwith newline");
    const kp_str nl = {"x\ny", 3};
    kb_cfgset s = {0, NULL};
    ck_assert_int_eq(kb_cfgset_put(&s, "consumer.session.timeout.ms", "50000"), KP_ERR_NONE);
    ck_assert_int_eq(kb_cfgset_put(&s, "share.auto.offset.reset", "by_duration:PT1H"),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_group_conf_replace(gc, a, &s, &msg), KP_ERR_NONE);
    ck_assert_uint_eq(s.n, 0); /* taken */
    ck_assert_int_eq(kb_cfgset_put(&s, "consumer.heartbeat.interval.ms", "6000"), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_conf_replace(gc, b, &s, &msg), KP_ERR_NONE);
    ck_assert_int_eq(kb_cfgset_put(&s, "streams.num.standby.replicas", "1"), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_conf_replace(gc, nl, &s, &msg), KP_ERR_NONE);
    kb_group_conf_close(gc);

    ck_assert_int_eq(kb_group_conf_open(tmpdir, &gc), KP_ERR_NONE);
    ck_assert_str_eq(kb_cfgset_get(kb_group_conf_get(gc, a), "share.auto.offset.reset"),
                     "by_duration:PT1H");
    ck_assert_str_eq(kb_cfgset_get(kb_group_conf_get(gc, nl), "streams.num.standby.replicas"), "1");
    ck_assert_int_eq(kb_group_conf_session_timeout_ms(gc, &cfg, a), 50000);
    ck_assert_int_eq(kb_group_conf_heartbeat_interval_ms(gc, &cfg, a), 5000);
    ck_assert_int_eq(kb_group_conf_heartbeat_interval_ms(gc, &cfg, b), 6000);
    ck_assert_int_eq(kb_group_conf_session_timeout_ms(gc, &cfg, KP_STR_LIT("other")), 45000);
    ck_assert_ptr_null(kb_group_conf_get(gc, KP_STR_LIT("orders")));
    ck_assert_int_eq(kb_group_conf_replace(gc, a, &s, &msg), KP_ERR_NONE); /* empty: forgotten */
    ck_assert_ptr_null(kb_group_conf_get(gc, a));
    kb_group_conf_close(gc);
    ck_assert_int_eq(kb_group_conf_open(tmpdir, &gc), KP_ERR_NONE);
    ck_assert_ptr_null(kb_group_conf_get(gc, a));
    ck_assert_ptr_nonnull(kb_group_conf_get(gc, b));
    kb_group_conf_close(gc);
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
    tcase_add_test(tc, test_admin_group_config_checks);
    tcase_add_test(tc, test_admin_group_config_store);
    tcase_add_test(tc, test_admin_quota_precedence_and_persistence);
    tcase_add_test(tc, test_admin_rate_math);
    suite_add_tcase(s, tc);
    return s;
}
