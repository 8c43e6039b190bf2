/* kb_topics and kb_topic_conf: the topic registry's answers and the topic config
 * keys, as Kafka 4.1 gives them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_partition_dirs.h"
#include "kb_replica.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"
#include "ks_log.h"

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

/* The controller's image may hold an empty ISR as a NULL list (count 0
 * or -1): the partition then has no ISR to copy, and nothing is read. */
START_TEST(test_topics_replica_assign_empty_isr)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("solo"), 1, NULL, 0, false, &t, &msg),
                     KP_ERR_NONE);
    kb_broker b = {0};
    b.node_id = 3;
    const int32_t replicas[] = {3};
    for (int32_t n = -1; n <= 0; n++) {
        kb_replica_assignment a = {.leader = 3, .leader_epoch = 7, .replicas = replicas,
                                   .nreplicas = 1, .isr = NULL, .nisr = n};
        ck_assert_int_eq(kb_replica_assign(&b, t, 0, &a), KP_ERR_NONE);
        ck_assert(kb_replica_is_leader(t->partitions[0].repl));
        ck_assert(!kb_replica_in_set(t->partitions[0].repl, 1));
    }
    kb_replica_assignment none = {.leader = -1, .leader_epoch = 8, .replicas = NULL,
                                  .nreplicas = -1, .isr = NULL, .nisr = -1};
    ck_assert_int_eq(kb_replica_assign(&b, t, 0, &none), KP_ERR_NONE);
    ck_assert(!kb_replica_is_leader(t->partitions[0].repl));
}
END_TEST

static int isr_calls;

static void count_isr_call(void *arg, kb_topic *t, int32_t p)
{
    (void)arg;
    (void)t;
    (void)p;
    isr_calls++;
}

static bool all_eligible(void *arg, int32_t id)
{
    (void)id;
    return *(bool *)arg;
}

/* The leader's ISR proposals: a follower behind the log end for longer than
 * the lag leaves, the HW counts it until the image commits the shrink, and
 * one that reached the HW again is proposed back when eligible. */
START_TEST(test_topics_replica_isr_shrink_and_expand)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("isr"), 1, NULL, 0, false, &t, &msg),
                     KP_ERR_NONE);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/isr-log", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ks_io io = ks_io_posix();
    ks_log_config lc;
    ks_log_config_default(&lc);
    ks_log_open_args args = {-1, -1, false, 1000};
    ks_log *log;
    ck_assert_int_eq(ks_log_open(&io, dir, "isr", 0, &lc, &args, &log, NULL, NULL), KP_ERR_NONE);
    ks_log_set_replicated(log, true);
    t->partitions[0].log = log;
    kb_broker b = {0};
    b.node_id = 1;
    const int32_t replicas[] = {1, 2, 3}, two[] = {1, 2};
    kb_replica_assignment a = {.leader = 1, .leader_epoch = 5, .replicas = replicas,
                               .nreplicas = 3, .isr = replicas, .nisr = 3,
                               .partition_epoch = 2, .on_isr = count_isr_call};
    ck_assert_int_eq(kb_replica_assign(&b, t, 0, &a), KP_ERR_NONE);
    kb_replica *r = t->partitions[0].repl;
    append_idempotent(log, -1, -1, -1, 3);
    (void)kb_replica_follower_fetched(&b, t, 0, 2, 3, 100);
    (void)kb_replica_follower_fetched(&b, t, 0, 3, 0, 100);
    ck_assert_int_eq(ks_log_high_watermark(log), 0);
    bool ok = true;
    int32_t out[4];
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 1000, 2000, all_eligible, &ok, out, 4), 0);
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 2500, 2000, all_eligible, &ok, out, 4), 2);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(kb_replica_isr_pending(r, out, 2), KP_ERR_NONE);
    /* pending: the ISR is still 3 and the HW still waits for 3 */
    ck_assert_int_eq(r->nisr, 3);
    ck_assert(!kb_replica_advance_hw(&b, t, 0));
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 3000, 2000, all_eligible, &ok, out, 4), 0);
    /* the image commits it: the HW moves over {1, 2} */
    a.isr = two;
    a.nisr = 2;
    a.partition_epoch = 3;
    ck_assert_int_eq(kb_replica_assign(&b, t, 0, &a), KP_ERR_NONE);
    ck_assert(!r->pending);
    ck_assert_int_eq(ks_log_high_watermark(log), 3);
    /* 3 reaches the HW: the hook hears it, and it is proposed back */
    ck_assert_int_eq(isr_calls, 0);
    (void)kb_replica_follower_fetched(&b, t, 0, 3, 3, 3100);
    ck_assert_int_eq(isr_calls, 1);
    ok = false;
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 3100, 2000, all_eligible, &ok, out, 4), 0);
    ok = true;
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 3100, 2000, all_eligible, &ok, out, 4), 3);
    /* refused: nothing more until the image moves */
    kb_replica_isr_drop(r, true, 0);
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 3200, 2000, all_eligible, &ok, out, 4), 0);
    a.partition_epoch = 4;
    ck_assert_int_eq(kb_replica_assign(&b, t, 0, &a), KP_ERR_NONE);
    ck_assert_int_eq(kb_replica_isr_propose(r, log, 3200, 2000, all_eligible, &ok, out, 4), 3);
    t->partitions[0].log = NULL;
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
}
END_TEST

START_TEST(test_topics_partition_count_errors)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("orders"), 2, NULL, 0, false, &t, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_topics_check_add_partitions(topics, t, 1, &msg),
                     KP_ERR_INVALID_PARTITIONS);
    ck_assert_str_eq(msg.text,
                     "The topic orders currently has 2 partition(s); 1 would not be an increase.");
    ck_assert_int_eq(kb_topics_check_add_partitions(topics, t, 2, &msg),
                     KP_ERR_INVALID_PARTITIONS);
    ck_assert_str_eq(msg.text, "Topic already has 2 partition(s).");
    ck_assert_int_eq(kb_topics_check_add_partitions(topics, t, 3, &msg), KP_ERR_NONE);
    ck_assert_int_eq(t->npartitions, 2);
    ck_assert_int_eq(kb_topics_end_add_partitions(topics, t, 3), KP_ERR_NONE);
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

START_TEST(test_topics_removed_config_keys_refused)
{
    static const char *const removed[] = {"message.format.version",
                                          "message.downconversion.enable",
                                          "message.timestamp.difference.max.ms"};
    open_with(NULL);
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        kb_msgbuf msg = {{0}}, want = {{0}};
        kb_topic_config c = {(char *)removed[i], "1"};
        kb_topic *t = NULL;
        kb_msgf(&want, "Unknown topic config name: %s", removed[i]);
        ck_assert_int_eq(kb_topics_create(topics, kp_str_from("t"), 1, &c, 1, true, &t, &msg),
                         KP_ERR_INVALID_CONFIG);
        ck_assert_str_eq(msg.text, want.text);
    }
}
END_TEST

/* LogConfig's names in Kafka 4.1.1, less the internal internal.segment.bytes. */
static const char *const kafka_keys[] = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
};

START_TEST(test_tconf_keys_types_and_defaults_as_kafka)
{
    size_t n = sizeof kafka_keys / sizeof kafka_keys[0];
    ck_assert_uint_eq(kb_topic_conf_count(), n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(kb_topic_conf_key(i), kafka_keys[i]);
        bool list = strcmp(kafka_keys[i], "cleanup.policy") == 0 ||
                    strstr(kafka_keys[i], ".throttled.replicas") != NULL;
        if (list)
            ck_assert_int_eq(kb_topic_conf_type(i), KB_CT_LIST);
        else
            ck_assert_int_ne(kb_topic_conf_type(i), KB_CT_LIST);
    }
    ck_assert_str_eq(kb_topic_conf_default("message.timestamp.after.max.ms"), "3600000");
    ck_assert_str_eq(kb_topic_conf_default("message.timestamp.before.max.ms"), "9223372036854775807");
}
END_TEST

START_TEST(test_tconf_timestamp_bounds_default_to_kafkas)
{
    int8_t source = 0;
    open_with(NULL);
    ck_assert_str_eq(kb_topic_conf_effective(cfg, NULL, "message.timestamp.after.max.ms", &source),
                     "3600000");
    ck_assert_int_eq(source, KB_CS_DEFAULT);
    ck_assert_int_eq(kb_topic_conf_long(cfg, NULL, "message.timestamp.before.max.ms", 0), INT64_MAX);
}
END_TEST

START_TEST(test_tconf_timestamp_bounds_from_server_properties)
{
    int8_t source = 0;
    open_with("log.message.timestamp.after.max.ms=1000");
    ck_assert_str_eq(kb_topic_conf_effective(cfg, NULL, "message.timestamp.after.max.ms", &source),
                     "1000");
    ck_assert_int_eq(source, KB_CS_STATIC_BROKER);
    kb_msgbuf msg = {{0}};
    kb_topic_config c = {"message.timestamp.after.max.ms", "5"};
    kb_topic *t = NULL;
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("t"), 1, &c, 1, false, &t, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_topic_conf_long(cfg, t, "message.timestamp.after.max.ms", 0), 5);
}
END_TEST

/* Reopens the registry from disk, as a restart does. */
static void reopen(void)
{
    kb_topics_close(topics);
    ck_assert_msg(kb_topics_open(cfg, &topics, errbuf, sizeof errbuf) == KP_ERR_NONE,
                  "topics: %s", errbuf);
}

static bool partition_dir_exists(const char *topic, int p)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s-%d/partition.metadata", tmpdir, topic, p);
    return access(path, F_OK) == 0;
}

START_TEST(test_topics_pending_create_hidden_and_persisted)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_begin_create(topics, kp_str_from("big"), 3, NULL, 0, false, &t,
                                            &msg), KP_ERR_NONE);
    ck_assert_int_eq(t->state, KB_TOPIC_CREATING);
    ck_assert_ptr_null(kb_topics_find(topics, kp_str_from("big")));
    ck_assert_uint_eq(kb_topics_count(topics), 0);
    ck_assert_ptr_eq(kb_topics_busy(topics, kp_str_from("big")), t);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("big"), 1, NULL, 0, true, NULL, &msg),
                     KP_ERR_TOPIC_ALREADY_EXISTS);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("b.g"), 1, NULL, 0, true, NULL, &msg),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("b_g"), 1, NULL, 0, true, NULL, &msg),
                     KP_ERR_NONE);
    /* A crash now: the restart finds it pending, still hidden. */
    reopen();
    t = kb_topics_busy(topics, kp_str_from("big"));
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->state, KB_TOPIC_CREATING);
    ck_assert_ptr_null(kb_topics_find(topics, kp_str_from("big")));
    ck_assert_int_eq(kb_partition_dirs_make(kb_topics_dir(topics), t->name, &t->id, 0, 3), KP_ERR_NONE);
    ck_assert(partition_dir_exists("big", 0) && partition_dir_exists("big", 2));
    ck_assert_int_eq(kb_topics_end_create(topics, t, true), KP_ERR_NONE);
    reopen();
    t = kb_topics_find(topics, kp_str_from("big"));
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->state, KB_TOPIC_READY);
    size_t nbusy;
    (void)kb_topics_busy_all(topics, &nbusy);
    ck_assert_uint_eq(nbusy, 0);
}
END_TEST

START_TEST(test_topics_deleting_hidden_until_dirs_gone)
{
    kb_msgbuf msg = {{0}};
    kb_topic *t = NULL;
    open_with(NULL);
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("gone"), 2, NULL, 0, false, &t, &msg),
                     KP_ERR_NONE);
    ck_assert(partition_dir_exists("gone", 1));
    ck_assert_int_eq(kb_topics_begin_delete(topics, t, &msg), KP_ERR_NONE);
    ck_assert_ptr_null(kb_topics_find(topics, kp_str_from("gone")));
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("gone"), 1, NULL, 0, false, NULL, &msg),
                     KP_ERR_TOPIC_ALREADY_EXISTS);
    ck_assert_str_eq(msg.text, "Topic 'gone' is marked for deletion.");
    reopen();
    t = kb_topics_busy(topics, kp_str_from("gone"));
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->state, KB_TOPIC_DELETING);
    ck_assert_int_eq(kb_partition_dirs_remove(kb_topics_dir(topics), t->name, 0, 2), KP_ERR_NONE);
    ck_assert(!partition_dir_exists("gone", 0) && !partition_dir_exists("gone", 1));
    ck_assert_int_eq(kb_topics_end_delete(topics, t), KP_ERR_NONE);
    reopen();
    ck_assert_ptr_null(kb_topics_busy(topics, kp_str_from("gone")));
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("gone"), 1, NULL, 0, false, NULL, &msg),
                     KP_ERR_NONE);
}
END_TEST

/* The registry's index: every topic by name and id, collisions by '.'/'_'. */
START_TEST(test_topics_index_by_name_id_and_collision)
{
    kb_msgbuf msg = {{0}};
    open_with(NULL);
    kb_topic *made[300];
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "t.%d", i);
        ck_assert_int_eq(kb_topics_create(topics, kp_str_from(name), 1, NULL, 0, false, &made[i],
                                          &msg), KP_ERR_NONE);
    }
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "t.%d", i);
        ck_assert_ptr_eq(kb_topics_find(topics, kp_str_from(name)), made[i]);
        ck_assert_ptr_eq(kb_topics_find_id(topics, &made[i]->id), made[i]);
        snprintf(name, sizeof name, "t_%d", i); /* same once '.' is '_': refused */
        ck_assert_ptr_null(kb_topics_find(topics, kp_str_from(name)));
        ck_assert_int_eq(kb_topics_create(topics, kp_str_from(name), 1, NULL, 0, true, NULL, &msg),
                         KP_ERR_INVALID_TOPIC_EXCEPTION);
    }
    char longname[400];
    memset(longname, 'x', sizeof longname);
    ck_assert_ptr_null(kb_topics_find(topics, (kp_str){longname, (int32_t)sizeof longname}));
    kp_uuid gone_id = made[7]->id;
    ck_assert_int_eq(kb_topics_begin_delete(topics, made[7], &msg), KP_ERR_NONE);
    ck_assert_ptr_null(kb_topics_find_id(topics, &gone_id));
    ck_assert_int_eq(kb_topics_end_delete(topics, made[7]), KP_ERR_NONE);
    ck_assert_ptr_null(kb_topics_find(topics, kp_str_from("t.7")));
    ck_assert_ptr_null(kb_topics_busy(topics, kp_str_from("t.7")));
    ck_assert_int_eq(kb_topics_create(topics, kp_str_from("t_7"), 1, NULL, 0, true, NULL, &msg),
                     KP_ERR_NONE);
    reopen();
    ck_assert_uint_eq(kb_topics_count(topics), 299);
    kb_topic *t = kb_topics_find(topics, kp_str_from("t.299"));
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(kb_topics_find_id(topics, &t->id), t);
}
END_TEST

Suite *topics_suite(void)
{
    Suite *s = suite_create("topics");
    TCase *tc = tcase_create("topics");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_topics_partition_count_errors);
    tcase_add_test(tc, test_topics_index_by_name_id_and_collision);
    tcase_add_test(tc, test_topics_ids_never_print_with_a_dash_first);
    tcase_add_test(tc, test_topics_removed_config_keys_refused);
    tcase_add_test(tc, test_tconf_keys_types_and_defaults_as_kafka);
    tcase_add_test(tc, test_tconf_timestamp_bounds_default_to_kafkas);
    tcase_add_test(tc, test_tconf_timestamp_bounds_from_server_properties);
    tcase_add_test(tc, test_topics_pending_create_hidden_and_persisted);
    tcase_add_test(tc, test_topics_deleting_hidden_until_dirs_gone);
    tcase_add_test(tc, test_topics_replica_assign_empty_isr);
    tcase_add_test(tc, test_topics_replica_isr_shrink_and_expand);
    suite_add_tcase(s, tc);
    return s;
}
