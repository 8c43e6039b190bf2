/* kb_config: sources and their priority, derived values, listeners, errors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config_doc.h"
#include "kb_config.h"

#define MAX_ARGS 16

static char tmpdir[64];
static char errbuf[512];
static kb_config *cfg;

static void setup_dir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/runnel-test-config-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    cfg = NULL;
    errbuf[0] = '\0';
}

static void teardown_dir(void)
{
    char cmd[128];

    kb_config_free(cfg);
    cfg = NULL;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes a file under the test's directory; returns its path (static, one at a time). */
static const char *write_props(const char *text)
{
    static char path[128];

    snprintf(path, sizeof path, "%s/server.properties", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Loads with argv = runnel + args (NULL-terminated) and env (NULL-terminated or NULL). */
static kp_err load(const char *const *args, const char *const *env)
{
    char *argv[MAX_ARGS] = {"runnel"};
    int argc = 1;

    for (; args != NULL && args[argc - 1] != NULL; argc++) {
        ck_assert_int_lt(argc, MAX_ARGS);
        argv[argc] = (char *)args[argc - 1];
    }
    kb_config_free(cfg);
    cfg = NULL;
    return kb_config_load(argc, argv, (char **)env, &cfg, errbuf, sizeof errbuf);
}

static void load_ok(const char *const *args, const char *const *env)
{
    kp_err rc = load(args, env);
    ck_assert_msg(rc == KP_ERR_NONE, "load failed (%d): %s", rc, errbuf);
    ck_assert_ptr_nonnull(cfg);
}

static bool list_has(const kb_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->v[i], s) == 0)
            return true;
    }
    return false;
}

START_TEST(test_config_defaults)
{
    load_ok(NULL, NULL);
    ck_assert_int_eq(cfg->action, KB_CONFIG_RUN);
    ck_assert_ptr_null(cfg->properties_path);
    ck_assert_int_eq(cfg->node_id, 1);
    ck_assert_uint_eq(cfg->listeners.n, 1);
    ck_assert_str_eq(cfg->listeners.v[0].li_name, "PLAINTEXT");
    ck_assert_str_eq(cfg->listeners.v[0].li_host, "");
    ck_assert_uint_eq(cfg->listeners.v[0].li_port, 9092);
    ck_assert_int_eq(cfg->listeners.v[0].li_protocol, KB_SEC_PLAINTEXT);
    ck_assert_str_eq(cfg->advertised_listeners.v[0].li_host, "localhost");
    ck_assert_uint_eq(cfg->log_dirs.n, 1);
    ck_assert_str_eq(cfg->log_dirs.v[0], "/tmp/runnel-logs");
    ck_assert_int_eq(cfg->num_partitions, 1);
    ck_assert_int_eq(cfg->default_replication_factor, 1);
    ck_assert(cfg->auto_create_topics_enable && cfg->delete_topic_enable);
    ck_assert_int_eq(cfg->message_max_bytes, 1048588);
    ck_assert_int_eq(cfg->socket_request_max_bytes, 104857600);
    ck_assert_int_eq(cfg->connections_max_idle_ms, 600000);
    ck_assert_int_eq(cfg->log_segment_bytes, 1073741824);
    ck_assert_int_eq(cfg->log_retention_ms, 168LL * 3600000);
    ck_assert_int_eq(cfg->log_roll_ms, 168LL * 3600000);
    ck_assert_int_eq(cfg->log_retention_bytes, -1);
    ck_assert_int_eq(cfg->log_retention_check_interval_ms, 300000);
    ck_assert_int_eq(cfg->log_index_interval_bytes, 4096);
    ck_assert_int_eq(cfg->log_index_size_max_bytes, 10485760);
    ck_assert(cfg->log_flush_interval_messages == INT64_MAX);
    ck_assert(cfg->log_flush_interval_ms == INT64_MAX);
    ck_assert_uint_eq(cfg->log_cleanup_policy.n, 1);
    ck_assert_str_eq(cfg->log_cleanup_policy.v[0], "delete");
    ck_assert_int_eq(cfg->log_message_timestamp_type, KB_TS_CREATE_TIME);
    ck_assert(cfg->log_message_timestamp_after_max_ms == 3600000); /* Kafka 4's hour */
    ck_assert(cfg->log_message_timestamp_before_max_ms == INT64_MAX);
    ck_assert_int_eq(cfg->compression_type, KB_COMP_PRODUCER);
    ck_assert_int_eq(cfg->offsets_topic_num_partitions, 50);
    ck_assert_int_eq(cfg->offsets_topic_replication_factor, 3);
    ck_assert_int_eq(cfg->offsets_retention_minutes, 10080);
    ck_assert_int_eq(cfg->transaction_state_log_num_partitions, 50);
    ck_assert_int_eq(cfg->group_initial_rebalance_delay_ms, 3000);
    ck_assert_int_eq(cfg->group_min_session_timeout_ms, 6000);
    ck_assert_int_eq(cfg->group_max_session_timeout_ms, 1800000);
    ck_assert_int_eq(cfg->min_insync_replicas, 1);
    ck_assert_int_eq(cfg->log_level, KB_LL_INFO);
    ck_assert_uint_eq(cfg->log_subsystems, KB_SUB_ALL);
    ck_assert_int_eq(cfg->flush_acks_all, KB_FLUSH_FSYNC);
    ck_assert(cfg->fetch_zerocopy);
    ck_assert_ptr_null(cfg->cluster_id);
    ck_assert_uint_eq(cfg->raw_n, 0);
    ck_assert_uint_eq(cfg->unknown_keys.n + cfg->ignored_keys.n, 0);
}
END_TEST

/* The keys of Kafka 4's stock config/server.properties (KRaft, combined mode). */
static const char kafka_server_properties[] =
    "# Licensed to the Apache Software Foundation (ASF)...\n"
    "process.roles=broker,controller\n"
    "node.id=1\n"
    "controller.quorum.bootstrap.servers=localhost:9093\n"
    "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
    "inter.broker.listener.name=PLAINTEXT\n"
    "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
    "controller.listener.names=CONTROLLER\n"
    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
    "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
    "num.network.threads=3\n"
    "num.io.threads=8\n"
    "socket.send.buffer.bytes=102400\n"
    "socket.receive.buffer.bytes=102400\n"
    "socket.request.max.bytes=104857600\n"
    "log.dirs=/tmp/kraft-combined-logs\n"
    "num.partitions=1\n"
    "num.recovery.threads.per.data.dir=1\n"
    "offsets.topic.replication.factor=1\n"
    "share.coordinator.state.topic.replication.factor=1\n"
    "share.coordinator.state.topic.min.isr=1\n"
    "transaction.state.log.replication.factor=1\n"
    "transaction.state.log.min.isr=1\n"
    "log.retention.hours=168\n"
    "log.segment.bytes=1073741824\n"
    "log.retention.check.interval.ms=300000\n";

START_TEST(test_config_kafka_stock_file)
{
    const char *path = write_props(kafka_server_properties);
    const char *args[] = {path, NULL};

    load_ok(args, NULL);
    ck_assert_str_eq(cfg->properties_path, path);
    ck_assert_uint_eq(cfg->unknown_keys.n, 0);
    ck_assert(list_has(&cfg->ignored_keys, "process.roles"));
    ck_assert(list_has(&cfg->ignored_keys, "num.network.threads"));
    ck_assert(list_has(&cfg->ignored_keys, "controller.quorum.bootstrap.servers"));
    ck_assert(list_has(&cfg->ignored_keys, "share.coordinator.state.topic.min.isr"));
    ck_assert(!list_has(&cfg->ignored_keys, "num.partitions"));
    ck_assert_str_eq(cfg->log_dirs.v[0], "/tmp/kraft-combined-logs");
    ck_assert_uint_eq(cfg->listeners.n, 2);
    ck_assert(!cfg->listeners.v[0].li_controller);
    ck_assert(cfg->listeners.v[1].li_controller);
    ck_assert_str_eq(cfg->listeners.v[1].li_name, "CONTROLLER");
    ck_assert_int_eq(cfg->offsets_topic_replication_factor, 1);
    const kb_listener *ad = kb_config_advertised(cfg, "plaintext");
    ck_assert_ptr_nonnull(ad);
    ck_assert_str_eq(ad->li_host, "localhost");
    ck_assert_uint_eq(ad->li_port, 9092);
}
END_TEST

START_TEST(test_config_priority_file_env_override)
{
    const char *path = write_props("num.partitions=2\nlog.segment.bytes=1000\nfoo.bar=1\n");
    const char *env[] = {"KAFKA_NUM_PARTITIONS=3", "KAFKA_LOG_RETENTION_BYTES=77",
                         "HOME=/root", NULL};
    const char *args[] = {path, "--override", "num.partitions=4", NULL};
    kb_config_source src;

    load_ok(args + 0, env);
    ck_assert_int_eq(cfg->num_partitions, 4);
    ck_assert_str_eq(kb_config_lookup(cfg, "num.partitions", &src), "4");
    ck_assert_int_eq(src, KB_SRC_OVERRIDE);
    ck_assert_int_eq(cfg->log_segment_bytes, 1000);
    ck_assert_int_eq(cfg->log_retention_bytes, 77);
    ck_assert_str_eq(kb_config_lookup(cfg, "log.retention.bytes", &src), "77");
    ck_assert_int_eq(src, KB_SRC_ENV);
    ck_assert_str_eq(kb_config_lookup(cfg, "log.segment.bytes", &src), "1000");
    ck_assert_int_eq(src, KB_SRC_FILE);
    ck_assert_str_eq(kb_config_lookup(cfg, "num.io.threads", &src), "8");
    ck_assert_int_eq(src, KB_SRC_DEFAULT);
    ck_assert_ptr_null(kb_config_lookup(cfg, "log.retention.ms", &src));
    ck_assert_int_eq(src, KB_SRC_UNSET);
    ck_assert_str_eq(kb_config_get_raw(cfg, "foo.bar"), "1");
    ck_assert_ptr_null(kb_config_get_raw(cfg, "no.such.key"));

    const char *args2[] = {path, NULL};
    load_ok(args2, env);
    ck_assert_int_eq(cfg->num_partitions, 3);
    load_ok(args2, NULL);
    ck_assert_int_eq(cfg->num_partitions, 2);
}
END_TEST

START_TEST(test_config_override_forms)
{
    const char *args[] = {"--override=num.partitions=5", "--override", " delete.topic.enable =FALSE",
                          "--override", "cluster.id=abc=def", NULL};

    load_ok(args, NULL);
    ck_assert_int_eq(cfg->num_partitions, 5);
    ck_assert(!cfg->delete_topic_enable);
    ck_assert_str_eq(cfg->cluster_id, "abc=def");
    ck_assert_str_eq(kb_config_get_raw(cfg, "delete.topic.enable"), "FALSE");
}
END_TEST

START_TEST(test_config_env_conventions)
{
    const char *env[] = {"KAFKA_LOG_DIRS=/a, /b", "KAFKA_HEAP_OPTS=-Xmx1G",
                         "KAFKA_CFG_AUTO_CREATE_TOPICS_ENABLE=false", "CLUSTER_ID=MkU3OEVBNTcwNTJENDM2Qk",
                         "KAFKA_RUNNEL_FLUSH_ACKS_ALL=page-cache", "KAFKA_OPTS=-Dx=y", NULL};

    load_ok(NULL, env);
    ck_assert_uint_eq(cfg->log_dirs.n, 2);
    ck_assert_str_eq(cfg->log_dirs.v[0], "/a");
    ck_assert_str_eq(cfg->log_dirs.v[1], "/b");
    ck_assert(!cfg->auto_create_topics_enable);
    ck_assert_str_eq(cfg->cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
    ck_assert_int_eq(cfg->flush_acks_all, KB_FLUSH_PAGE_CACHE);
    ck_assert_ptr_null(kb_config_get_raw(cfg, "heap.opts"));
    ck_assert_ptr_null(kb_config_get_raw(cfg, "opts"));
    ck_assert_uint_eq(cfg->unknown_keys.n, 0);

    const char *env2[] = {"CLUSTER_ID=fromimage", "KAFKA_CLUSTER_ID=fromkafka", NULL};
    load_ok(NULL, env2);
    ck_assert_str_eq(cfg->cluster_id, "fromkafka");
}
END_TEST

START_TEST(test_config_retention_precedence)
{
    const char *hours[] = {"--override", "log.retention.hours=2", NULL};
    load_ok(hours, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, 2 * 3600000LL);

    const char *minutes[] = {"--override", "log.retention.hours=2", "--override",
                             "log.retention.minutes=3", NULL};
    load_ok(minutes, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, 3 * 60000LL);

    const char *path = write_props("log.retention.ms=1234\nlog.retention.minutes=3\n");
    const char *ms[] = {path, "--override", "log.retention.hours=9", NULL};
    load_ok(ms, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, 1234);

    const char *inf_ms[] = {"--override", "log.retention.ms=-1", NULL};
    load_ok(inf_ms, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, -1);
    const char *inf_hours[] = {"--override", "log.retention.hours=-1", NULL};
    load_ok(inf_hours, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, -1);
    const char *inf_min[] = {"--override", "log.retention.minutes=-1", NULL};
    load_ok(inf_min, NULL);
    ck_assert_int_eq(cfg->log_retention_ms, -1);
}
END_TEST

START_TEST(test_config_roll_flush_ids_dirs)
{
    const char *a[] = {"--override", "log.roll.hours=1", "--override", "broker.id=7",
                       "--override", "log.dir=/x", "--override",
                       "log.flush.scheduler.interval.ms=500", NULL};
    load_ok(a, NULL);
    ck_assert_int_eq(cfg->log_roll_ms, 3600000);
    ck_assert_int_eq(cfg->node_id, 7);
    ck_assert_str_eq(cfg->log_dirs.v[0], "/x");
    ck_assert_int_eq(cfg->log_flush_interval_ms, 500);

    const char *b[] = {"--override", "log.roll.ms=10", "--override", "broker.id=7",
                       "--override", "node.id=3", "--override", "log.dir=/x", "--override",
                       "log.dirs=/y,/z", "--override", "log.flush.interval.ms=20", NULL};
    load_ok(b, NULL);
    ck_assert_int_eq(cfg->log_roll_ms, 10);
    ck_assert_int_eq(cfg->node_id, 3);
    ck_assert_uint_eq(cfg->log_dirs.n, 2);
    ck_assert_str_eq(cfg->log_dirs.v[1], "/z");
    ck_assert_int_eq(cfg->log_flush_interval_ms, 20);

    const char *c[] = {"--override", "broker.id=-1", NULL};
    load_ok(c, NULL);
    ck_assert_int_eq(cfg->node_id, 1);
    const char *d[] = {"--override", "node.id=0", "--override", "broker.id=4", NULL};
    load_ok(d, NULL);
    ck_assert_int_eq(cfg->node_id, 0);
}
END_TEST

START_TEST(test_config_listeners)
{
    const char *args[] = {
        "--override",
        "listeners=plaintext://0.0.0.0:9092, SECURE://[::1]:9093,INTERNAL://host-1.example:0",
        "--override",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,INTERNAL:ssl",
        "--override", "advertised.listeners=SECURE://broker.example:19093", NULL};

    load_ok(args, NULL);
    ck_assert_uint_eq(cfg->listeners.n, 3);
    const kb_listener *l = cfg->listeners.v;
    ck_assert_str_eq(l[0].li_name, "PLAINTEXT");
    ck_assert_str_eq(l[0].li_host, "0.0.0.0");
    ck_assert_str_eq(l[1].li_host, "::1");
    ck_assert_uint_eq(l[1].li_port, 9093);
    ck_assert_int_eq(l[1].li_protocol, KB_SEC_SASL_SSL);
    ck_assert_str_eq(l[2].li_host, "host-1.example");
    ck_assert_uint_eq(l[2].li_port, 0);
    ck_assert_int_eq(l[2].li_protocol, KB_SEC_SSL);

    const kb_listener *ad = cfg->advertised_listeners.v;
    ck_assert_uint_eq(cfg->advertised_listeners.n, 3);
    ck_assert_str_eq(ad[0].li_host, "localhost");
    ck_assert_uint_eq(ad[0].li_port, 9092);
    ck_assert_str_eq(ad[1].li_name, "SECURE");
    ck_assert_str_eq(ad[1].li_host, "broker.example");
    ck_assert_uint_eq(ad[1].li_port, 19093);
    ck_assert_int_eq(ad[1].li_protocol, KB_SEC_SASL_SSL);
    ck_assert_str_eq(ad[2].li_host, "host-1.example");
    ck_assert_ptr_eq(kb_config_listener(cfg, "secure"), &l[1]);
    ck_assert_ptr_null(kb_config_listener(cfg, "nope"));
    ck_assert_str_eq(kb_security_protocol_name(ad[1].li_protocol), "SASL_SSL");
}
END_TEST

START_TEST(test_config_controller_listener_default_map)
{
    const char *args[] = {"--override", "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
                          "--override", "controller.listener.names=CONTROLLER", NULL};

    load_ok(args, NULL);
    ck_assert_int_eq(cfg->listeners.v[1].li_protocol, KB_SEC_PLAINTEXT);
    ck_assert(cfg->listeners.v[1].li_controller);
}
END_TEST

START_TEST(test_config_unknown_and_ignored_once)
{
    const char *path = write_props("foo.bar=1\nzookeeper.connect=zk:2181\nnum.io.threads=4\n"
                                   "ssl.keystore.location=/k\nreplica.fetch.wait.max.ms=5\n"
                                   "runnel.typo=1\n");
    const char *env[] = {"KAFKA_FOO_BAR=2", "KAFKA_NUM_IO_THREADS=6", NULL};
    const char *args[] = {path, NULL};

    load_ok(args, env);
    ck_assert_uint_eq(cfg->unknown_keys.n, 2);
    ck_assert_str_eq(cfg->unknown_keys.v[0], "foo.bar");
    ck_assert_str_eq(cfg->unknown_keys.v[1], "runnel.typo");
    ck_assert_uint_eq(cfg->ignored_keys.n, 3);
    ck_assert(list_has(&cfg->ignored_keys, "zookeeper.connect"));
    ck_assert(list_has(&cfg->ignored_keys, "num.io.threads"));
    ck_assert(list_has(&cfg->ignored_keys, "replica.fetch.wait.max.ms"));
    ck_assert_str_eq(kb_config_get_raw(cfg, "ssl.keystore.location"), "/k");
    ck_assert_str_eq(kb_config_get_raw(cfg, "foo.bar"), "2");
}
END_TEST

/* controlled.shutdown.enable: read (true by default) for cluster mode, and
 * reported as having no effect on a single node. */
START_TEST(test_config_controlled_shutdown_enable)
{
    load_ok(NULL, NULL);
    ck_assert(cfg->controlled_shutdown_enable);
    const char *path = write_props("controlled.shutdown.enable=false\n");
    const char *args[] = {path, NULL};
    load_ok(args, NULL);
    ck_assert(!cfg->controlled_shutdown_enable);
    ck_assert(list_has(&cfg->ignored_keys, "controlled.shutdown.enable"));
}
END_TEST

START_TEST(test_config_topic_defaults)
{
    const char *args[] = {"--override", "log.retention.hours=1", "--override",
                          "log.cleanup.policy=Compact, delete", "--override",
                          "message.max.bytes=2000", "--override",
                          "log.message.timestamp.before.max.ms=86400000", NULL};
    const kb_topic_default *td;

    load_ok(args, NULL);
    td = kb_config_topic_default(cfg, "retention.ms");
    ck_assert_ptr_nonnull(td);
    ck_assert_str_eq(td->td_value, "3600000");
    ck_assert_str_eq(td->td_broker_key, "log.retention.ms");
    ck_assert_int_eq(td->td_source, KB_SRC_OVERRIDE);
    ck_assert_str_eq(kb_config_topic_default(cfg, "cleanup.policy")->td_value, "compact,delete");
    ck_assert_str_eq(kb_config_topic_default(cfg, "max.message.bytes")->td_value, "2000");
    td = kb_config_topic_default(cfg, "segment.bytes");
    ck_assert_str_eq(td->td_value, "1073741824");
    ck_assert_int_eq(td->td_source, KB_SRC_DEFAULT);
    ck_assert_str_eq(kb_config_topic_default(cfg, "segment.ms")->td_value, "604800000");
    ck_assert_str_eq(kb_config_topic_default(cfg, "message.timestamp.type")->td_value,
                     "CreateTime");
    td = kb_config_topic_default(cfg, "message.timestamp.before.max.ms");
    ck_assert_str_eq(td->td_value, "86400000");
    ck_assert_int_eq(td->td_source, KB_SRC_OVERRIDE);
    td = kb_config_topic_default(cfg, "message.timestamp.after.max.ms");
    ck_assert_str_eq(td->td_value, "3600000");
    ck_assert_int_eq(td->td_source, KB_SRC_DEFAULT);
    ck_assert_str_eq(kb_config_topic_default(cfg, "min.cleanable.dirty.ratio")->td_value, "0.5");
    ck_assert_str_eq(kb_config_topic_default(cfg, "compression.type")->td_value, "producer");
    ck_assert_str_eq(kb_config_topic_default(cfg, "unclean.leader.election.enable")->td_value,
                     "false");
    ck_assert_str_eq(kb_config_topic_default(cfg, "flush.messages")->td_value,
                     "9223372036854775807");
    ck_assert_ptr_null(kb_config_topic_default(cfg, "no.such.topic.key"));
    for (size_t i = 1; i < cfg->topic_defaults_n; i++)
        ck_assert_int_lt(strcmp(cfg->topic_defaults[i - 1].td_name, cfg->topic_defaults[i].td_name),
                         0);
}
END_TEST

START_TEST(test_config_runnel_keys)
{
    const char *args[] = {"--override", "runnel.log.level=debug", "--override",
                          "runnel.log.subsystems=net, storage", "--override",
                          "runnel.fetch.zerocopy=false", "--override",
                          "compression.type=ZSTD", NULL};

    load_ok(args, NULL);
    ck_assert_int_eq(cfg->log_level, KB_LL_DEBUG);
    ck_assert_uint_eq(cfg->log_subsystems, KB_SUB_NET | KB_SUB_STORAGE);
    ck_assert(!cfg->fetch_zerocopy);
    ck_assert_int_eq(cfg->compression_type, KB_COMP_ZSTD);
}
END_TEST

START_TEST(test_config_help_and_version)
{
    const char *help[] = {"--bogus", "--help", NULL};
    load_ok(help, NULL);
    ck_assert_int_eq(cfg->action, KB_CONFIG_HELP);
    const char *h[] = {"-h", NULL};
    load_ok(h, NULL);
    ck_assert_int_eq(cfg->action, KB_CONFIG_HELP);
    const char *version[] = {"/no/such/file", "--version", NULL};
    load_ok(version, NULL);
    ck_assert_int_eq(cfg->action, KB_CONFIG_VERSION);
    /* an override's argument is never taken for an option */
    const char *ov[] = {"--override", "--help", NULL};
    ck_assert_int_eq(load(ov, NULL), KP_ERR__INVAL);
    ck_assert_ptr_nonnull(strstr(kb_config_usage(), "--override key=value"));
}
END_TEST

START_TEST(test_config_sensitive_keys)
{
    ck_assert(kb_config_key_sensitive("ssl.keystore.password"));
    ck_assert(kb_config_key_sensitive("listener.name.sasl_ssl.plain.sasl.jaas.config"));
    ck_assert(kb_config_key_sensitive("ssl.keystore.key"));
    ck_assert(!kb_config_key_sensitive("ssl.keystore.location"));
    ck_assert(!kb_config_key_sensitive("log.dirs"));
}
END_TEST

static void log_start(void)
{
    kb_config_log_start(cfg);
}

START_TEST(test_config_log_start_reports_keys_once)
{
    const char *path = write_props("foo.bar=1\nnum.io.threads=2\nrunnel.log.level=debug\n"
                                   "runnel.log.subsystems=net\nzookeeper.\\u0001x=1\n");
    const char *env[] = {"KAFKA_FOO_BAR=2", NULL};
    const char *args[] = {path, NULL};

    load_ok(args, env);
    const char *out = capture_stderr(log_start);
    kb_log_level level = kb_log_get_level();
    unsigned mask = kb_log_get_subsystems();
    kb_log_set_level(KB_LL_INFO);
    kb_log_set_subsystems(KB_SUB_ALL);

    ck_assert_int_eq(level, KB_LL_DEBUG);
    ck_assert_uint_eq(mask, KB_SUB_NET);
    const char *w = strstr(out, "Z WARN config msg=\"unknown key, ignored\" key=\"foo.bar\"\n");
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_null(strstr(strchr(w, '\n'), "foo.bar"));
    ck_assert_ptr_nonnull(strstr(out, "Z INFO config msg=\"key does not apply to a single node, "
                                      "ignored\" key=\"num.io.threads\"\n"));
    ck_assert_ptr_nonnull(strstr(out, "key=\"zookeeper.\\x01x\"\n"));
}
END_TEST

/* One override each; the error line must be exactly this. */
static const struct {
    const char *kv;
    const char *want;
} bad_values[] = {
    {"num.partitions=abc", "config: num.partitions=abc: expected an integer >= 1"},
    {"num.partitions=0", "config: num.partitions=0: expected an integer >= 1"},
    {"num.partitions=1.5", "config: num.partitions=1.5: expected an integer >= 1"},
    {"num.partitions=99999999999", "config: num.partitions=99999999999: expected an integer >= 1"},
    {"offsets.topic.replication.factor=40000",
     "config: offsets.topic.replication.factor=40000: expected an integer between 1 and 32767"},
    {"node.id=-5", "config: node.id=-5: expected an integer >= -1"},
    {"log.retention.ms=-2", "config: log.retention.ms=-2: expected an integer >= -1"},
    {"log.retention.hours=", "config: log.retention.hours=: expected an integer >= -1"},
    {"num.io.threads=0", "config: num.io.threads=0: expected an integer >= 1"},
    {"auto.create.topics.enable=yes",
     "config: auto.create.topics.enable=yes: expected true or false"},
    {"log.cleaner.min.cleanable.ratio=2",
     "config: log.cleaner.min.cleanable.ratio=2: expected a number between 0 and 1"},
    {"compression.type=brotli", "config: compression.type=brotli: expected one of producer, "
                                "uncompressed, gzip, snappy, lz4, zstd"},
    {"log.cleanup.policy=delete,,compact", "config: log.cleanup.policy=delete,,compact: expected "
                                           "a comma-separated list of delete, compact without "
                                           "empty items"},
    {"log.cleanup.policy=archive", "config: log.cleanup.policy=archive: expected a "
                                   "comma-separated list of delete, compact without empty items"},
    {"runnel.flush.acks.all=sometimes",
     "config: runnel.flush.acks.all=sometimes: expected one of fsync, page-cache"},
    {"runnel.log.level=LOUD",
     "config: runnel.log.level=LOUD: expected one of ERROR, WARN, INFO, DEBUG, TRACE"},
    {"log.dirs=", "config: log.dirs=: expected at least one directory"},
    {"log.dirs= , ", "config: log.dirs= , : expected a comma-separated list without empty items"},
    {"listeners=", "config: listeners=: expected at least one listener"},
    {"listeners=PLAINTEXT//:9092",
     "config: listeners=PLAINTEXT//:9092: expected NAME://host:port entries (empty host = all "
     "interfaces, IPv6 in [brackets], port 0-65535)"},
    {"listeners=PLAINTEXT://:70000",
     "config: listeners=PLAINTEXT://:70000: expected NAME://host:port entries (empty host = all "
     "interfaces, IPv6 in [brackets], port 0-65535)"},
    {"listeners=PLAINTEXT://::1:9092",
     "config: listeners=PLAINTEXT://::1:9092: expected NAME://host:port entries (empty host = "
     "all interfaces, IPv6 in [brackets], port 0-65535)"},
    {"listeners=PLAINTEXT://h:",
     "config: listeners=PLAINTEXT://h:: expected NAME://host:port entries (empty host = all "
     "interfaces, IPv6 in [brackets], port 0-65535)"},
    {"listeners=FOO://:9092", "config: listeners=FOO://:9092: listener name FOO has no entry in "
                              "listener.security.protocol.map"},
    {"listeners=PLAINTEXT://:9092,plaintext://:9093",
     "config: listeners=PLAINTEXT://:9092,plaintext://:9093: listener name PLAINTEXT appears "
     "twice"},
    {"listeners=PLAINTEXT://:9092,SSL://h:9092",
     "config: listeners=PLAINTEXT://:9092,SSL://h:9092: port 9092 is used by two listeners"},
    {"listener.security.protocol.map=PLAINTEXT:FOO",
     "config: listener.security.protocol.map=PLAINTEXT:FOO: expected NAME:PROTOCOL pairs with "
     "PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
    {"listener.security.protocol.map=SSL:SSL",
     "config: listeners=PLAINTEXT://:9092: listener name PLAINTEXT has no entry in "
     "listener.security.protocol.map"},
    {"advertised.listeners=OTHER://h:1",
     "config: advertised.listeners=OTHER://h:1: listener name OTHER has no entry in "
     "listener.security.protocol.map"},
    {"advertised.listeners=SSL://h:1",
     "config: advertised.listeners=SSL://h:1: listener name SSL is not in listeners"},
    {"advertised.listeners=PLAINTEXT://0.0.0.0:9092",
     "config: advertised.listeners=PLAINTEXT://0.0.0.0:9092: expected a host clients can "
     "connect to, not 0.0.0.0"},
    {"cluster.id\x01=x", NULL}, /* accepted: unknown key, no error */
    {"foo", "config: --override=foo: expected key=value"},
    {"=1", "config: --override==1: expected key=value"},
    {"message.max.bytes=\x1b[31m", "config: message.max.bytes=\\x1b[31m: expected an integer >= 0"},
};

START_TEST(test_config_error_names_key_and_value)
{
    const char *args[] = {"--override", bad_values[_i].kv, NULL};
    kp_err rc = load(args, NULL);

    if (bad_values[_i].want == NULL) {
        ck_assert_int_eq(rc, KP_ERR_NONE);
        return;
    }
    ck_assert_int_eq(rc, KP_ERR__INVAL);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(errbuf, bad_values[_i].want);
    ck_assert_ptr_null(strchr(errbuf, '\n'));
}
END_TEST

START_TEST(test_config_error_from_env_and_file)
{
    const char *env[] = {"KAFKA_NUM_PARTITIONS=abc", NULL};
    ck_assert_int_eq(load(NULL, env), KP_ERR__INVAL);
    ck_assert_str_eq(errbuf, "config: num.partitions=abc (from KAFKA_NUM_PARTITIONS): "
                             "expected an integer >= 1");
    const char *env2[] = {"KAFKA_RUNNEL_MAX_PARTITIONS=x", NULL};
    ck_assert_int_eq(load(NULL, env2), KP_ERR__INVAL);
    ck_assert_ptr_nonnull(strstr(errbuf, " (from KAFKA_RUNNEL_MAX_PARTITIONS): "));

    const char *path = write_props("a=1\n\nbad=\\u00zz\n");
    const char *args[] = {path, NULL};
    char want[256];
    ck_assert_int_eq(load(args, NULL), KP_ERR__INVAL);
    snprintf(want, sizeof want, "config: %s:3: malformed \\uxxxx escape", path);
    ck_assert_str_eq(errbuf, want);

    path = write_props("message.max.bytes = lots\n");
    ck_assert_int_eq(load(args, NULL), KP_ERR__INVAL);
    ck_assert_str_eq(errbuf, "config: message.max.bytes=lots: expected an integer >= 0");
}
END_TEST

START_TEST(test_config_command_line_errors)
{
    const char *missing[] = {"/no/such/server.properties", NULL};
    ck_assert_int_eq(load(missing, NULL), KP_ERR__NOENT);
    ck_assert_str_eq(errbuf, "config: /no/such/server.properties: cannot open the properties "
                             "file: No such file or directory");

    const char *dir[] = {"/tmp", NULL};
    ck_assert_int_eq(load(dir, NULL), KP_ERR__IO);
    ck_assert_ptr_nonnull(strstr(errbuf, "config: /tmp: expected a regular file"));

    const char *unknown[] = {"--bogus", NULL};
    ck_assert_int_eq(load(unknown, NULL), KP_ERR__INVAL);
    ck_assert_str_eq(errbuf, "config: unknown option --bogus (see --help)");

    const char *two[] = {"a.properties", "b.properties", NULL};
    ck_assert_int_eq(load(two, NULL), KP_ERR__INVAL);
    ck_assert_str_eq(errbuf, "config: expected one properties file, got a.properties and "
                             "b.properties");

    const char *dangling[] = {"--override", NULL};
    ck_assert_int_eq(load(dangling, NULL), KP_ERR__INVAL);
    ck_assert_str_eq(errbuf, "config: --override: expected a key=value argument");
    ck_assert_ptr_null(cfg);
}
END_TEST

/* The known-key table is searched by bisection: it must stay sorted, and
 * every default must load (a key out of order once left its default unset). */
START_TEST(test_config_key_table_sorted)
{
    const char *prev = NULL;
    size_t n = 0;
    int8_t type;
    for (const char *k; (k = kb_config_key_at(n, &type)) != NULL; n++) {
        if (prev != NULL)
            ck_assert_msg(strcmp(prev, k) < 0, "key table out of order: %s before %s", prev, k);
        prev = k;
    }
    ck_assert_uint_gt(n, 90);
}
END_TEST

/* A dynamic value checked as Kafka's ConfigDef parses it, with its texts. */
START_TEST(test_config_check_value)
{
    static const struct {
        const char *key, *value;
        kp_err want;
        const char *text;
    } cases[] = {
        {"log.cleaner.backoff.ms", "100", KP_ERR_NONE, ""},
        {"log.cleaner.backoff.ms", " 100 ", KP_ERR_NONE, ""},
        {"log.cleaner.backoff.ms", "abc", KP_ERR_INVALID_REQUEST, "Not a number of type LONG"},
        {"log.cleaner.backoff.ms", "-1", KP_ERR_INVALID_REQUEST, "Value must be at least 0"},
        {"log.cleaner.backoff.ms", "99999999999999999999", KP_ERR_INVALID_REQUEST,
         "Not a number of type LONG"},
        {"message.max.bytes", "2147483648", KP_ERR_INVALID_REQUEST, "Not a number of type INT"},
        {"sasl.login.refresh.buffer.seconds", "32767", KP_ERR_NONE, ""},
        {"sasl.login.refresh.buffer.seconds", "40000", KP_ERR_INVALID_REQUEST,
         "Not a number of type SHORT"},
        {"sasl.kerberos.ticket.renew.jitter", "0.1", KP_ERR_NONE, ""},
        {"sasl.kerberos.ticket.renew.jitter", "x", KP_ERR_INVALID_REQUEST,
         "Not a number of type DOUBLE"},
        {"log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", KP_ERR_NONE, ""},
        {"log.preallocate", "TRUE", KP_ERR_NONE, ""},
        {"log.preallocate", "yes", KP_ERR_INVALID_REQUEST,
         "Expected value to be either true or false"},
        {"log.message.timestamp.type", "Other", KP_ERR_INVALID_REQUEST,
         "String must be one of: CreateTime, LogAppendTime"},
        {"max.connections.per.ip.overrides", "127.0.0.1:100", KP_ERR_NONE, ""},
        {"sasl.kerberos.kinit.cmd", "/opt/kinit", KP_ERR_NONE, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char msg[256] = "";
        kp_err e = kb_config_check_value(cases[i].key, cases[i].value, msg, sizeof(msg));
        ck_assert_msg(e == cases[i].want, "%s=%s: %s", cases[i].key, cases[i].value, msg);
        if (e == KP_ERR_NONE)
            continue;
        char want[256];
        snprintf(want, sizeof(want), "Invalid value %s for configuration %s: %s",
                 cases[i].value, cases[i].key, cases[i].text);
        ck_assert_str_eq(msg, want);
    }
    char msg[64];
    ck_assert_int_eq(kb_config_check_value("no.such.key", "1", msg, sizeof(msg)), KP_ERR__NOENT);
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");

    tcase_add_checked_fixture(tc, setup_dir, teardown_dir);
    tcase_add_test(tc, test_config_defaults);
    tcase_add_test(tc, test_config_key_table_sorted);
    tcase_add_test(tc, test_config_check_value);
    tcase_add_test(tc, test_config_kafka_stock_file);
    tcase_add_test(tc, test_config_priority_file_env_override);
    tcase_add_test(tc, test_config_override_forms);
    tcase_add_test(tc, test_config_env_conventions);
    tcase_add_test(tc, test_config_retention_precedence);
    tcase_add_test(tc, test_config_roll_flush_ids_dirs);
    tcase_add_test(tc, test_config_listeners);
    tcase_add_test(tc, test_config_controller_listener_default_map);
    tcase_add_test(tc, test_config_unknown_and_ignored_once);
    tcase_add_test(tc, test_config_controlled_shutdown_enable);
    tcase_add_test(tc, test_config_topic_defaults);
    tcase_add_test(tc, test_config_runnel_keys);
    tcase_add_test(tc, test_config_help_and_version);
    tcase_add_test(tc, test_config_sensitive_keys);
    tcase_add_test(tc, test_config_log_start_reports_keys_once);
    tcase_add_loop_test(tc, test_config_error_names_key_and_value, 0,
                        (int)(sizeof bad_values / sizeof bad_values[0]));
    tcase_add_test(tc, test_config_error_from_env_and_file);
    tcase_add_test(tc, test_config_command_line_errors);
    suite_add_tcase(s, tc);
    return s;
}
