/* kb_topics: the topic registry's answers, as Kafka 4.1 gives them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config.h"
#include "kb_topics.h"

static char tmpdir[64];
static char logdirs[96];
static char errbuf[256];
static kb_config *cfg;
static kb_topics *topics;

/* Loads a config with log.dirs in the test's directory plus one more
 * --override (or none), and opens the registry there. */
static void open_with(const char *override)
{
    char *argv[] = {"runnel", "--override", logdirs, "--override", (char *)override, NULL};
    int argc = override != NULL ? 5 : 3;
    ck_assert_msg(kb_config_load(argc, argv, NULL, &cfg, errbuf, sizeof errbuf) == KP_ERR_NONE,
                  "config: %s", errbuf);
    ck_assert_msg(kb_topics_open(cfg, &topics, errbuf, sizeof errbuf) == KP_ERR_NONE,
                  "topics: %s", errbuf);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/runnel-test-topics-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(logdirs, sizeof logdirs, "log.dirs=%s", tmpdir);
    cfg = NULL;
    topics = NULL;
}

static void teardown(void)
{
    char cmd[128];
    kb_topics_close(topics);
    kb_config_free(cfg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_topics_partition_count_errors)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("orders"), 2, NULL, 0, false, &t, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_topics_add_partitions(topics, t, 1, false, &msg),
                     KP_ERR_INVALID_PARTITIONS);
    ck_assert_str_eq(msg.text,
                     "The topic orders currently has 2 partition(s); 1 would not be an increase.");
    ck_assert_int_eq(kb_topics_add_partitions(topics, t, 2, true, &msg),
                     KP_ERR_INVALID_PARTITIONS);
    ck_assert_str_eq(msg.text, "Topic already has 2 partition(s).");
    ck_assert_int_eq(kb_topics_add_partitions(topics, t, 3, false, &msg), KP_ERR_NONE);
    ck_assert_int_eq(t->npartitions, 3);
}
END_TEST

START_TEST(test_topics_ids_never_print_with_a_dash_first)
{
    /* One random id in 64 would start with '-' (62 in base64url). */
    for (int i = 0; i < 20000; i++) {
        kp_uuid id;
        char s[23];
        kb_uuid_random(&id);
        kb_uuid_format(&id, s);
        ck_assert_msg(s[0] != '-', "id %s", s);
        ck_assert(!kp_uuid_is_zero(&id));
    }
}
END_TEST

Suite *topics_suite(void)
{
    Suite *s = suite_create("topics");
    TCase *tc = tcase_create("topics");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_topics_partition_count_errors);
    tcase_add_test(tc, test_topics_ids_never_print_with_a_dash_first);
    suite_add_tcase(s, tc);
    return s;
}
