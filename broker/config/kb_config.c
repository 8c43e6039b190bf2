#include "kb_config.h"
#include "kb_config_load.h"
#include "kb_keydef.h"

#include "kb_properties.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Load context, allocation pool, error line
 * ------------------------------------------------------------------------ */

struct kb_config_priv {
    void **ptrs; /* every pool allocation, freed by kb_config_free */
    size_t ptrs_n, ptrs_cap;
    size_t raw_cap;
    bool raw_sorted;
};

#define CONFIG_FILE_MAX (16u << 20) /* a properties file larger than this is refused */
#define ESC_VALUE_MAX   200         /* bytes of a bad value quoted in the error line */

kp_err kbc_failf(load_ctx *lc, kp_err rc, const char *fmt, ...)
{
    va_list ap;

    if (lc->err == NULL || lc->errlen == 0)
        return rc;
    int n = snprintf(lc->err, lc->errlen, "config: ");
    if (n > 0 && (size_t)n < lc->errlen) {
        va_start(ap, fmt);
        vsnprintf(lc->err + n, lc->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

kp_err kbc_oom(load_ctx *lc)
{
    return kbc_failf(lc, KP_ERR__NOMEM, "out of memory");
}

/* " (from KAFKA_NUM_PARTITIONS)" when key was set by the environment, so the
 * error names the variable to fix (the inverse of kb_properties_env_key); else "". */
static void env_origin(const load_ctx *lc, const char *key, char *out, size_t cap)
{
    kb_config_source src;
    size_t n;

    out[0] = '\0';
    if (kbc_effective(lc->cfg, key, &src) == NULL || src != KB_SRC_ENV)
        return;
    n = (size_t)snprintf(out, cap, " (from KAFKA_");
    for (const char *c = key; *c != '\0' && n + 4 < cap; c++) {
        const char *s = *c == '.' ? "_" : *c == '_' ? "__" : *c == '-' ? "___" : NULL;
        if (s != NULL)
            n += (size_t)snprintf(out + n, cap - n, "%s", s);
        else
            out[n++] = (char)toupper((unsigned char)*c);
    }
    snprintf(out + n, cap - n, ")");
}

/* "config: key=value: expected ...", the value escaped and bounded. */
kp_err kbc_bad_value(load_ctx *lc, const char *key, const char *value, const char *fmt, ...)
{
    char esc[ESC_VALUE_MAX * 4 + 4], expect[256], origin[128];
    va_list ap;

    kb_log_escape(esc, sizeof esc, value, strlen(value));
    va_start(ap, fmt);
    vsnprintf(expect, sizeof expect, fmt, ap);
    va_end(ap);
    env_origin(lc, key, origin, sizeof origin);
    return kbc_failf(lc, KP_ERR__INVAL, "%s=%s%s: %s", key, esc, origin, expect);
}

void *kbc_pool_alloc(load_ctx *lc, size_t size)
{
    kb_config_priv *pv = lc->cfg->priv;

    if (pv->ptrs_n == pv->ptrs_cap) {
        size_t cap = pv->ptrs_cap ? pv->ptrs_cap * 2 : 64;
        void **p = realloc(pv->ptrs, cap * sizeof *p);
        if (p == NULL)
            return NULL;
        pv->ptrs = p;
        pv->ptrs_cap = cap;
    }
    void *mem = calloc(1, size ? size : 1);
    if (mem != NULL)
        pv->ptrs[pv->ptrs_n++] = mem;
    return mem;
}

char *kbc_pool_strndup(load_ctx *lc, const char *s, size_t n)
{
    char *d = kbc_pool_alloc(lc, n + 1);

    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *kbc_pool_strdup(load_ctx *lc, const char *s)
{
    return kbc_pool_strndup(lc, s, strlen(s));
}

static bool is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\n' || c == '\r' || c == '\v';
}

/* Bounds of s without leading and trailing whitespace. */
static void trim(const char **s, size_t *n)
{
    while (*n > 0 && is_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && is_space((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* ------------------------------------------------------------------------
 * The table of known keys
 * ------------------------------------------------------------------------ */

#define NOF KB_KD_NO_FIELD
/* offsetof with a compile-time check that the field has type T. */
#define FLD(f, T) (offsetof(kb_config, f) + 0 * sizeof(_Generic(((kb_config *)0)->f, T: 1)))
#define FI32(f)   FLD(f, int32_t)
#define FI64(f)   FLD(f, int64_t)
#define FBOOL(f)  FLD(f, bool)
#define FDBL(f)   FLD(f, double)
#define FSTR(f)   FLD(f, char *)
#define FLIST(f)  FLD(f, kb_strlist)
#define FENUM(f)  (offsetof(kb_config, f) + 0 * sizeof(char[sizeof(((kb_config *)0)->f) == sizeof(int) ? 1 : -1]))

#define I32MAX INT32_MAX
#define I64MAX INT64_MAX
#define KI(n, d, lo, hi, off, fl) {n, KB_KT_INT, d, lo, hi, NULL, fl, off}
#define KL(n, d, lo, hi, off, fl) {n, KB_KT_LONG, d, lo, hi, NULL, fl, off}
#define KB(n, d, off, fl)         {n, KB_KT_BOOL, d, 0, 1, NULL, fl, off}
#define KD(n, d, lo, hi, off, fl) {n, KB_KT_DOUBLE, d, lo, hi, NULL, fl, off}
#define KS(n, d, off, fl)         {n, KB_KT_STRING, d, 0, 0, NULL, fl, off}
#define KLS(n, d, ch, off, fl)    {n, KB_KT_LIST, d, 0, 0, ch, fl, off}
#define KSH(n, d, fl)             {n, KB_KT_SHORT, d, INT16_MIN, INT16_MAX, NULL, fl, NOF}
#define KDI(n, d, fl) \
    {n, KB_KT_DOUBLE, d, 0, 0, NULL, KB_KD_IGNORED | KB_KD_ANY_NUMBER | (fl), NOF}
#define KE(n, d, ch, off, fl)     {n, KB_KT_ENUM, d, 0, 0, ch, fl, off}

#define LONG_MAX_S "9223372036854775807"
/* Kafka's dynamic broker keys: cluster-wide and per broker, or per broker only. */
#define DYN      KB_KD_DYNAMIC
#define DYN_NODE (KB_KD_DYNAMIC | KB_KD_PER_BROKER)
/* Ignored on a single node, used in cluster mode. */
#define CLU      (KB_KD_IGNORED | KB_KD_CLUSTER)

static const kb_keydef key_defs[] = {
    KS("advertised.listeners", NULL, NOF, KB_KD_DERIVED),
    KB("allow.everyone.if.no.acl.found", "false", NOF, 0),
    KS("authorizer.class.name", "", NOF, 0),
    KB("auto.create.topics.enable", "true", FBOOL(auto_create_topics_enable), 0),
    KB("auto.leader.rebalance.enable", "true", NOF, KB_KD_IGNORED),
    KI("background.threads", "10", 1, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KI("broker.heartbeat.interval.ms", "2000", 1, I32MAX, FI32(broker_heartbeat_interval_ms), CLU),
    KI("broker.id", "-1", -1, I32MAX, NOF, KB_KD_DERIVED),
    KS("broker.rack", NULL, FSTR(broker_rack), CLU),
    KI("broker.session.timeout.ms", "9000", 1, I32MAX, FI32(broker_session_timeout_ms), CLU),
    KS("cluster.id", NULL, FSTR(cluster_id), 0),
    KI("compression.gzip.level", "-1", -1, 9, NOF, DYN),
    KI("compression.lz4.level", "9", 1, 17, NOF, DYN),
    KE("compression.type", "producer", "producer|uncompressed|gzip|snappy|lz4|zstd",
       FENUM(compression_type), DYN),
    KI("compression.zstd.level", "3", -131072, 22, NOF, DYN),
    KL("connections.max.idle.ms", "600000", -1, I64MAX, FI64(connections_max_idle_ms), 0),
    KB("controlled.shutdown.enable", "true", FBOOL(controlled_shutdown_enable), CLU),
    KLS("controller.listener.names", "", NULL, FLIST(controller_listener_names), 0),
    KLS("controller.quorum.bootstrap.servers", "", NULL, FLIST(quorum_bootstrap_servers), CLU),
    KI("controller.quorum.election.timeout.ms", "1000", 0, I32MAX, NOF, KB_KD_IGNORED),
    KI("controller.quorum.fetch.timeout.ms", "2000", 0, I32MAX, NOF, KB_KD_IGNORED),
    KLS("controller.quorum.voters", "", NULL, FLIST(quorum_voters), CLU),
    KI("default.replication.factor", "1", 1, I32MAX, FI32(default_replication_factor), 0),
    KB("delete.topic.enable", "true", FBOOL(delete_topic_enable), 0),
    KL("follower.replication.throttled.rate", LONG_MAX_S, 0, I64MAX, NOF, KB_KD_IGNORED | DYN),
    KLS("group.consumer.assignors", "uniform,range", NULL, FLIST(group_consumer_assignors), 0),
    KI("group.consumer.heartbeat.interval.ms", "5000", 1, I32MAX,
       FI32(group_consumer_heartbeat_interval_ms), 0),
    KI("group.consumer.max.heartbeat.interval.ms", "15000", 1, I32MAX,
       FI32(group_consumer_max_heartbeat_interval_ms), 0),
    KI("group.consumer.max.session.timeout.ms", "60000", 1, I32MAX,
       FI32(group_consumer_max_session_timeout_ms), 0),
    KI("group.consumer.max.size", "2147483647", 1, I32MAX, FI32(group_consumer_max_size), 0),
    KI("group.consumer.min.heartbeat.interval.ms", "5000", 1, I32MAX,
       FI32(group_consumer_min_heartbeat_interval_ms), 0),
    KI("group.consumer.min.session.timeout.ms", "45000", 1, I32MAX,
       FI32(group_consumer_min_session_timeout_ms), 0),
    KI("group.consumer.session.timeout.ms", "45000", 1, I32MAX,
       FI32(group_consumer_session_timeout_ms), 0),
    KI("group.initial.rebalance.delay.ms", "3000", 0, I32MAX,
       FI32(group_initial_rebalance_delay_ms), 0),
    KI("group.max.session.timeout.ms", "1800000", 1, I32MAX, FI32(group_max_session_timeout_ms), 0),
    KI("group.max.size", "2147483647", 1, I32MAX, FI32(group_max_size), 0),
    KI("group.min.session.timeout.ms", "6000", 1, I32MAX, FI32(group_min_session_timeout_ms), 0),
    KI("group.share.delivery.count.limit", "5", 2, 10, FI32(group_share_delivery_count_limit), 0),
    KI("group.share.heartbeat.interval.ms", "5000", 1, I32MAX,
       FI32(group_share_heartbeat_interval_ms), 0),
    KI("group.share.max.size", "200", 1, 1000, FI32(group_share_max_size), 0),
    KI("group.share.partition.max.record.locks", "2000", 100, 10000,
       FI32(group_share_partition_max_record_locks), 0),
    KI("group.share.record.lock.duration.ms", "30000", 1000, 3600000,
       FI32(group_share_record_lock_duration_ms), 0),
    KI("group.share.session.timeout.ms", "45000", 1, I32MAX,
       FI32(group_share_session_timeout_ms), 0),
    KI("group.streams.heartbeat.interval.ms", "5000", 1, I32MAX,
       FI32(group_streams_heartbeat_interval_ms), 0),
    KI("group.streams.initial.rebalance.delay.ms", "3000", 0, I32MAX,
       FI32(group_streams_initial_rebalance_delay_ms), 0),
    KI("group.streams.num.standby.replicas", "0", 0, I32MAX,
       FI32(group_streams_num_standby_replicas), 0),
    KI("group.streams.session.timeout.ms", "45000", 1, I32MAX,
       FI32(group_streams_session_timeout_ms), 0),
    KS("inter.broker.listener.name", NULL, FSTR(inter_broker_listener_name), CLU),
    KI("leader.imbalance.check.interval.seconds", "300", 1, I32MAX, NOF, KB_KD_IGNORED),
    KI("leader.imbalance.per.broker.percentage", "10", 0, I32MAX, NOF, KB_KD_IGNORED),
    KL("leader.replication.throttled.rate", LONG_MAX_S, 0, I64MAX, NOF, KB_KD_IGNORED | DYN),
    KS("listener.security.protocol.map",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", NOF,
       KB_KD_DERIVED),
    KS("listeners", "PLAINTEXT://:9092", NOF, KB_KD_DERIVED),
    KL("log.cleaner.backoff.ms", "15000", 0, I64MAX, FI64(log_cleaner_backoff_ms), DYN),
    KL("log.cleaner.dedupe.buffer.size", "134217728", 1024, I64MAX,
       FI64(log_cleaner_dedupe_buffer_size), DYN),
    KL("log.cleaner.delete.retention.ms", "86400000", 0, I64MAX,
       FI64(log_cleaner_delete_retention_ms), DYN),
    KB("log.cleaner.enable", "true", FBOOL(log_cleaner_enable), 0),
    KDI("log.cleaner.io.buffer.load.factor", "0.9", DYN),
    KI("log.cleaner.io.buffer.size", "524288", 0, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KDI("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", DYN),
    KL("log.cleaner.max.compaction.lag.ms", LONG_MAX_S, 1, I64MAX,
       FI64(log_cleaner_max_compaction_lag_ms), DYN),
    KD("log.cleaner.min.cleanable.ratio", "0.5", 0, 1, FDBL(log_cleaner_min_cleanable_ratio), DYN),
    KL("log.cleaner.min.compaction.lag.ms", "0", 0, I64MAX,
       FI64(log_cleaner_min_compaction_lag_ms), DYN),
    KI("log.cleaner.threads", "1", 0, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KLS("log.cleanup.policy", "delete", "delete|compact", FLIST(log_cleanup_policy), DYN),
    KS("log.dir", "/tmp/runnel-logs", NOF, KB_KD_DERIVED),
    KLS("log.dirs", NULL, NULL, NOF, KB_KD_DERIVED),
    KL("log.flush.interval.messages", LONG_MAX_S, 1, I64MAX, FI64(log_flush_interval_messages),
       DYN),
    KL("log.flush.interval.ms", NULL, 0, I64MAX, FI64(log_flush_interval_ms), KB_KD_DERIVED | DYN),
    KL("log.flush.offset.checkpoint.interval.ms", "60000", 0, I32MAX,
       FI64(log_flush_offset_checkpoint_interval_ms), 0),
    KL("log.flush.scheduler.interval.ms", LONG_MAX_S, 0, I64MAX,
       FI64(log_flush_scheduler_interval_ms), 0),
    KI("log.index.interval.bytes", "4096", 0, I32MAX, FI32(log_index_interval_bytes), DYN),
    KI("log.index.size.max.bytes", "10485760", 4, I32MAX, FI32(log_index_size_max_bytes), DYN),
    KL("log.message.timestamp.after.max.ms", "3600000", 0, I64MAX,
       FI64(log_message_timestamp_after_max_ms), DYN),
    KL("log.message.timestamp.before.max.ms", LONG_MAX_S, 0, I64MAX,
       FI64(log_message_timestamp_before_max_ms), DYN),
    KE("log.message.timestamp.type", "CreateTime", "CreateTime|LogAppendTime",
       FENUM(log_message_timestamp_type), DYN),
    KB("log.preallocate", "false", FBOOL(log_preallocate), DYN),
    KL("log.retention.bytes", "-1", -1, I64MAX, FI64(log_retention_bytes), DYN),
    KL("log.retention.check.interval.ms", "300000", 1, I64MAX,
       FI64(log_retention_check_interval_ms), 0),
    KI("log.retention.hours", "168", -1, I32MAX, NOF, KB_KD_DERIVED | DYN),
    KI("log.retention.minutes", NULL, -1, I32MAX, NOF, KB_KD_DERIVED | DYN),
    KL("log.retention.ms", NULL, -1, I64MAX, FI64(log_retention_ms), KB_KD_DERIVED | DYN),
    KI("log.roll.hours", "168", 1, I32MAX, NOF, KB_KD_DERIVED | DYN),
    KI("log.roll.jitter.hours", "0", 0, I32MAX, NOF, KB_KD_DERIVED | DYN),
    KL("log.roll.jitter.ms", NULL, 0, I64MAX, FI64(log_roll_jitter_ms), KB_KD_DERIVED | DYN),
    KL("log.roll.ms", NULL, 1, I64MAX, FI64(log_roll_ms), KB_KD_DERIVED | DYN),
    KI("log.segment.bytes", "1073741824", 14, I32MAX, FI32(log_segment_bytes), DYN),
    KL("log.segment.delete.delay.ms", "60000", 0, I64MAX, FI64(log_segment_delete_delay_ms), DYN),
    KI("max.connection.creation.rate", "2147483647", 0, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KI("max.connections", "2147483647", 0, I32MAX, FI32(max_connections), DYN),
    KI("max.connections.per.ip", "2147483647", 0, I32MAX, FI32(max_connections_per_ip), DYN),
    KS("max.connections.per.ip.overrides", "", NOF, KB_KD_IGNORED | DYN),
    KI("message.max.bytes", "1048588", 0, I32MAX, FI32(message_max_bytes), DYN),
    KS("metadata.log.dir", NULL, FSTR(metadata_log_dir), CLU),
    KI("min.insync.replicas", "1", 1, I32MAX, FI32(min_insync_replicas), DYN),
    KI("node.id", "-1", -1, I32MAX, NOF, KB_KD_DERIVED),
    KI("num.io.threads", "8", 1, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KI("num.network.threads", "3", 1, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KI("num.partitions", "1", 1, I32MAX, FI32(num_partitions), 0),
    KI("num.recovery.threads.per.data.dir", "2", 1, I32MAX, FI32(num_recovery_threads), DYN),
    KI("num.replica.fetchers", "1", 1, I32MAX, FI32(num_replica_fetchers), CLU),
    KI("offsets.commit.timeout.ms", "5000", 1, I32MAX, FI32(offsets_commit_timeout_ms), 0),
    KI("offsets.retention.minutes", "10080", 1, I32MAX, FI32(offsets_retention_minutes), 0),
    KI("offsets.topic.num.partitions", "50", 1, I32MAX, FI32(offsets_topic_num_partitions), 0),
    KI("offsets.topic.replication.factor", "3", 1, 32767, FI32(offsets_topic_replication_factor),
       KB_KD_IGNORED),
    KS("principal.builder.class", NULL, NOF, 0),
    KLS("process.roles", "", "broker|controller", FLIST(process_roles), CLU),
    KI("producer.id.expiration.ms", "86400000", 1, I32MAX, NOF, KB_KD_IGNORED | DYN),
    KI("quota.window.num", "11", 1, I32MAX, NOF, 0),
    KI("quota.window.size.seconds", "1", 1, I32MAX, NOF, 0),
    KL("replica.alter.log.dirs.io.max.bytes.per.second", LONG_MAX_S, 0, I64MAX, NOF,
       KB_KD_IGNORED | DYN),
    KI("replica.fetch.backoff.ms", "1000", 0, I32MAX, FI32(replica_fetch_backoff_ms), CLU),
    KI("replica.fetch.max.bytes", "1048576", 0, I32MAX, FI32(replica_fetch_max_bytes), CLU),
    KI("replica.fetch.min.bytes", "1", 1, I32MAX, FI32(replica_fetch_min_bytes), CLU),
    KI("replica.fetch.response.max.bytes", "10485760", 0, I32MAX,
       FI32(replica_fetch_response_max_bytes), CLU),
    KI("replica.fetch.wait.max.ms", "500", 0, I32MAX, FI32(replica_fetch_wait_max_ms), CLU),
    KL("replica.lag.time.max.ms", "30000", 0, I64MAX, FI64(replica_lag_time_max_ms), CLU),
    KB("runnel.advertise.dialled.address", "false", FBOOL(advertise_dialled), 0),
    KS("runnel.console.listener", "", FSTR(console_listener), 0),
    KB("runnel.console.write.enable", "false", FBOOL(console_write_enable), 0),
    KB("runnel.fetch.zerocopy", "true", FBOOL(fetch_zerocopy), 0),
    KE("runnel.flush.acks.all", "fsync", "fsync|page-cache", FENUM(flush_acks_all), 0),
    KL("runnel.lag.check.interval.ms", "5000", 1, I64MAX, FI64(lag_check_interval_ms), 0),
    KI("runnel.lag.window.commits", "10", 2, 100, FI32(lag_window_commits), 0),
    KL("runnel.lag.window.min.stop.ms", "60000", 0, I64MAX, FI64(lag_window_min_stop_ms), 0),
    KE("runnel.log.level", "INFO", "ERROR|WARN|INFO|DEBUG|TRACE", FENUM(log_level), 0),
    KLS("runnel.log.subsystems", "all", "all|net|proto|storage|group|config|main", NOF,
        KB_KD_DERIVED),
    KI("runnel.max.partitions", "200000", 1, I32MAX, FI32(max_partitions), 0),
    KS("runnel.metrics.listener", NULL, FSTR(metrics_listener), 0),
    KI("runnel.metrics.max.series", "10000", 1, I32MAX, FI32(metrics_max_series), 0),
    KE("runnel.retention.guard", "warn", "off|warn|hold", FENUM(retention_guard), 0),
    KL("runnel.retention.guard.max.bytes", "1073741824", -1, I64MAX,
       FI64(retention_guard_max_bytes), 0),
    KL("runnel.retention.guard.max.ms", "86400000", -1, I64MAX, FI64(retention_guard_max_ms), 0),
    /* Kerberos and OAUTHBEARER login settings: no such mechanism here, but
     * Kafka lets each broker change them at run time. */
    KS("sasl.kerberos.kinit.cmd", "/usr/bin/kinit", NOF, KB_KD_IGNORED | DYN_NODE),
    KL("sasl.kerberos.min.time.before.relogin", "60000", INT64_MIN, I64MAX, NOF,
       KB_KD_IGNORED | DYN_NODE),
    KLS("sasl.kerberos.principal.to.local.rules", "DEFAULT", NULL, NOF, KB_KD_IGNORED | DYN_NODE),
    KS("sasl.kerberos.service.name", NULL, NOF, KB_KD_IGNORED | DYN_NODE),
    KDI("sasl.kerberos.ticket.renew.jitter", "0.05", DYN_NODE),
    KDI("sasl.kerberos.ticket.renew.window.factor", "0.8", DYN_NODE),
    KSH("sasl.login.refresh.buffer.seconds", "300", KB_KD_IGNORED | DYN_NODE),
    KSH("sasl.login.refresh.min.period.seconds", "60", KB_KD_IGNORED | DYN_NODE),
    KDI("sasl.login.refresh.window.factor", "0.8", DYN_NODE),
    KDI("sasl.login.refresh.window.jitter", "0.05", DYN_NODE),
    KE("security.inter.broker.protocol", "PLAINTEXT", KBC_PROTOCOLS, NOF, 0),
    KI("share.coordinator.snapshot.update.records.per.snapshot", "500", 0, 500,
       FI32(share_coordinator_snapshot_update_records_per_snapshot), 0),
    KI("share.coordinator.state.topic.min.isr", "2", 1, I32MAX, NOF, KB_KD_IGNORED),
    KI("share.coordinator.state.topic.num.partitions", "50", 1, I32MAX,
       FI32(share_coordinator_state_topic_num_partitions), 0),
    KI("share.coordinator.state.topic.replication.factor", "3", 1, 32767, NOF, KB_KD_IGNORED),
    KI("share.coordinator.state.topic.segment.bytes", "104857600", 14, I32MAX,
       FI32(share_coordinator_state_topic_segment_bytes), 0),
    /* -1 (OS autotuning) where Kafka has 102400: the one loop thread reads a
     * request only between others, and a fixed 100 KiB window stalls the
     * producer meanwhile (docs/operations.md, "Socket buffers"). */
    KI("socket.receive.buffer.bytes", "-1", -1, I32MAX, FI32(socket_receive_buffer_bytes), 0),
    KI("socket.request.max.bytes", "104857600", 1, I32MAX, FI32(socket_request_max_bytes), 0),
    KI("socket.send.buffer.bytes", "102400", -1, I32MAX, FI32(socket_send_buffer_bytes), 0),
    KS("super.users", NULL, NOF, 0),
    KI("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", 1, I32MAX,
       FI32(transaction_abort_timed_out_transaction_cleanup_interval_ms), 0),
    KI("transaction.max.timeout.ms", "900000", 1, I32MAX, FI32(transaction_max_timeout_ms), 0),
    KI("transaction.state.log.min.isr", "2", 1, I32MAX, FI32(transaction_state_log_min_isr),
       KB_KD_IGNORED),
    KI("transaction.state.log.num.partitions", "50", 1, I32MAX,
       FI32(transaction_state_log_num_partitions), 0),
    KI("transaction.state.log.replication.factor", "3", 1, 32767,
       FI32(transaction_state_log_replication_factor), KB_KD_IGNORED),
    KL("transactional.id.expiration.ms", "604800000", 1, I64MAX,
       FI64(transactional_id_expiration_ms), 0),
    KB("unclean.leader.election.enable", "false", FBOOL(unclean_leader_election_enable),
       KB_KD_IGNORED | DYN),
    KS("zookeeper.connect", NULL, NOF, KB_KD_IGNORED),
};

#define N_KEY_DEFS (sizeof key_defs / sizeof key_defs[0])

/* Keys under these prefixes are kept as strings for later work (TLS, SASL). */
static const char *const known_prefixes[] = {"ssl.", "sasl.", "listener.name."};
/* Keys under these prefixes are multi-node features: accepted, ignored. */
static const char *const ignored_prefixes[] = {"zookeeper.", "replica.", "controller.quorum.",
                                               "remote.log.", "leader.imbalance."};

static const kb_keydef *find_key_def(const char *key)
{
    return kb_keydef_find(key_defs, N_KEY_DEFS, key);
}

static bool has_prefix_in(const char *key, const char *const *prefixes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------------
 * Raw key=value entries
 * ------------------------------------------------------------------------ */

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const kb_config_entry *)a)->ce_key, ((const kb_config_entry *)b)->ce_key);
}

static int entry_key_cmp(const void *k, const void *e)
{
    return strcmp(k, ((const kb_config_entry *)e)->ce_key);
}

/* The index of key in cfg->raw, or cfg->raw_n if it was not set. */
static size_t raw_index(const kb_config *cfg, const char *key)
{
    if (cfg->raw_n == 0)
        return 0;
    if (cfg->priv != NULL && cfg->priv->raw_sorted) {
        const kb_config_entry *e =
            bsearch(key, cfg->raw, cfg->raw_n, sizeof cfg->raw[0], entry_key_cmp);
        return e != NULL ? (size_t)(e - cfg->raw) : cfg->raw_n;
    }
    size_t i = 0;
    while (i < cfg->raw_n && strcmp(cfg->raw[i].ce_key, key) != 0)
        i++;
    return i;
}

static const kb_config_entry *raw_find(const kb_config *cfg, const char *key)
{
    size_t i = raw_index(cfg, key);

    return i < cfg->raw_n ? &cfg->raw[i] : NULL;
}

/* Sets key to value (both copied) from src; a later source replaces an earlier one. */
static kp_err raw_set(load_ctx *lc, const char *key, size_t keylen, const char *value,
                      size_t valuelen, kb_config_source src)
{
    kb_config *cfg = lc->cfg;
    char *k = kbc_pool_strndup(lc, key, keylen), *v = kbc_pool_strndup(lc, value, valuelen);

    if (k == NULL || v == NULL)
        return kbc_oom(lc);
    size_t i = raw_index(cfg, k);
    if (i == cfg->raw_n) {
        if (cfg->raw_n == cfg->priv->raw_cap) {
            size_t cap = cfg->priv->raw_cap ? cfg->priv->raw_cap * 2 : 32;
            kb_config_entry *r = realloc(cfg->raw, cap * sizeof *r);
            if (r == NULL)
                return kbc_oom(lc);
            cfg->raw = r;
            cfg->priv->raw_cap = cap;
        }
        cfg->raw[cfg->raw_n++].ce_key = k;
    }
    cfg->raw[i].ce_value = v;
    cfg->raw[i].ce_source = src;
    return KP_ERR_NONE;
}

/* The value of key: set by a source, else its default, else NULL. */
const char *kbc_effective(const kb_config *cfg, const char *key, kb_config_source *src)
{
    const kb_config_entry *e = raw_find(cfg, key);

    if (e != NULL) {
        *src = e->ce_source;
        return e->ce_value;
    }
    const kb_keydef *kd = find_key_def(key);
    *src = kd != NULL && kd->def != NULL ? KB_SRC_DEFAULT : KB_SRC_UNSET;
    return *src == KB_SRC_DEFAULT ? kd->def : NULL;
}

static bool is_set(const kb_config *cfg, const char *key)
{
    return raw_find(cfg, key) != NULL;
}

/* ------------------------------------------------------------------------
 * Sources: the properties file, the environment, --override
 * ------------------------------------------------------------------------ */

static kp_err file_property(void *arg, const char *key, const char *value, int line)
{
    (void)line;
    return raw_set(arg, key, strlen(key), value, strlen(value), KB_SRC_FILE);
}

static kp_err load_file(load_ctx *lc, const char *path)
{
    struct stat st;
    kp_err rc = KP_ERR_NONE;
    char *text = NULL;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return kbc_failf(lc, errno == ENOENT ? KP_ERR__NOENT : KP_ERR__IO,
                         "%s: cannot open the properties file: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)CONFIG_FILE_MAX) {
        rc = kbc_failf(lc, KP_ERR__IO, "%s: expected a regular file of at most %u bytes", path,
                       CONFIG_FILE_MAX);
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        rc = kbc_oom(lc);
        goto out;
    }
    while (len < (size_t)st.st_size) {
        ssize_t r = read(fd, text + len, (size_t)st.st_size - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = kbc_failf(lc, KP_ERR__IO, "%s: read failed: %s", path,
                           r < 0 ? strerror(errno) : "file shrank");
            goto out;
        }
        len += (size_t)r;
    }
    kb_properties_error perr = {0, ""};
    rc = kb_properties_parse(text, len, file_property, lc, &perr);
    if (rc == KP_ERR__NOMEM)
        rc = kbc_oom(lc);
    else if (rc == KP_ERR__INVAL && perr.pe_line > 0)
        rc = kbc_failf(lc, rc, "%s:%d: %s", path, perr.pe_line, perr.pe_what);
out:
    free(text);
    close(fd);
    return rc;
}

static kp_err load_env(load_ctx *lc, char **envp)
{
    const char *cluster_id = NULL;

    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        const char *var = envp[i], *eq = strchr(var, '=');
        if (eq == NULL)
            continue;
        size_t n = (size_t)(eq - var);
        if (n == 10 && memcmp(var, "CLUSTER_ID", 10) == 0)
            cluster_id = eq + 1;
        char *key = kbc_pool_alloc(lc, n + 1);
        if (key == NULL)
            return kbc_oom(lc);
        size_t keylen = kb_properties_env_key(var, n, key);
        if (keylen == 0)
            continue;
        kp_err rc = raw_set(lc, key, keylen, eq + 1, strlen(eq + 1), KB_SRC_ENV);
        if (rc != KP_ERR_NONE)
            return rc;
    }
    const kb_config_entry *e = raw_find(lc->cfg, "cluster.id");
    if (cluster_id != NULL && (e == NULL || e->ce_source != KB_SRC_ENV))
        return raw_set(lc, "cluster.id", 10, cluster_id, strlen(cluster_id), KB_SRC_ENV);
    return KP_ERR_NONE;
}

/* ------------------------------------------------------------------------
 * Typed values
 * ------------------------------------------------------------------------ */

static kp_err bad_key_value(load_ctx *lc, const kb_keydef *kd, const char *value)
{
    char expect[320];

    kb_keydef_expected(kd, expect, sizeof expect);
    return kbc_bad_value(lc, kd->name, value, "%s", expect);
}

/* Splits a comma list into out (items trimmed, checked against kd->choices). */
kp_err kbc_split_list(load_ctx *lc, const char *value, const char *choices, kb_strlist *out)
{
    const char *s = value;
    size_t n = strlen(value), items = 1;

    trim(&s, &n);
    *out = (kb_strlist){0, NULL};
    if (n == 0)
        return KP_ERR_NONE;
    for (size_t i = 0; i < n; i++)
        items += s[i] == ',';
    out->v = kbc_pool_alloc(lc, items * sizeof *out->v);
    if (out->v == NULL)
        return kbc_oom(lc);
    for (const char *end = s + n; s <= end; s++) {
        const char *item = s;
        while (s < end && *s != ',')
            s++;
        size_t len = (size_t)(s - item);
        trim(&item, &len);
        if (len == 0 || (choices != NULL && kb_keydef_choice_index(choices, item, len) < 0))
            return KP_ERR__INVAL;
        if (choices != NULL)
            item = kb_keydef_choice_at(choices, kb_keydef_choice_index(choices, item, len), &len);
        if ((out->v[out->n++] = kbc_pool_strndup(lc, item, len)) == NULL)
            return kbc_oom(lc);
    }
    return KP_ERR_NONE;
}

/* kbc_split_list for key kd, with its choices and its error line. */
static kp_err split_list(load_ctx *lc, const kb_keydef *kd, const char *value, kb_strlist *out)
{
    kp_err rc = kbc_split_list(lc, value, kd->choices, out);
    return rc == KP_ERR__INVAL ? bad_key_value(lc, kd, value) : rc;
}

/* Checks value against kd; stores it into kd's field, if it has one. */
static kp_err parse_value(load_ctx *lc, const kb_keydef *kd, const char *value)
{
    char *field = kd->field == NOF ? NULL : (char *)lc->cfg + kd->field;
    const char *s = value;
    size_t n = strlen(value);
    int64_t i64 = 0;
    int32_t i32;
    double d = 0;
    bool ok = true;

    trim(&s, &n);
    char *t = kbc_pool_strndup(lc, s, n);
    if (t == NULL)
        return kbc_oom(lc);
    switch (kd->type) {
    case KB_KT_SHORT: /* never stored in a field */
        ok = kb_keydef_parse_integer(t, &i64) && i64 >= kd->lo && i64 <= kd->hi;
        break;
    case KB_KT_INT:
    case KB_KT_LONG:
        ok = kb_keydef_parse_integer(t, &i64) && i64 >= kd->lo && i64 <= kd->hi;
        i32 = (int32_t)i64;
        if (ok && field != NULL)
            memcpy(field, kd->type == KB_KT_INT ? (void *)&i32 : (void *)&i64,
                   kd->type == KB_KT_INT ? sizeof i32 : sizeof i64);
        break;
    case KB_KT_BOOL:
        ok = strcasecmp(t, "true") == 0 || strcasecmp(t, "false") == 0;
        if (ok && field != NULL)
            *(bool *)field = strcasecmp(t, "true") == 0;
        break;
    case KB_KT_DOUBLE: {
        char *end;
        d = strtod(t, &end);
        ok = end != t && *end == '\0' && isfinite(d) &&
             ((kd->flags & KB_KD_ANY_NUMBER) || (d >= (double)kd->lo && d <= (double)kd->hi));
        if (ok && field != NULL)
            memcpy(field, &d, sizeof d);
        break;
    }
    case KB_KT_ENUM:
        i32 = kb_keydef_choice_index(kd->choices, t, n);
        ok = i32 >= 0;
        if (ok && field != NULL)
            memcpy(field, &i32, sizeof i32);
        break;
    case KB_KT_STRING:
        if (field != NULL)
            memcpy(field, &t, sizeof t);
        break;
    case KB_KT_LIST: {
        kb_strlist list;
        kp_err rc = split_list(lc, kd, value, &list);
        if (rc == KP_ERR_NONE && field != NULL)
            memcpy(field, &list, sizeof list);
        return rc;
    }
    }
    return ok ? KP_ERR_NONE : bad_key_value(lc, kd, value);
}

/* Parses every known key that has a value (set, or a non-null default). */
static kp_err parse_known(load_ctx *lc)
{
    for (size_t i = 0; i < N_KEY_DEFS; i++) {
        kb_config_source src;
        const char *v = kbc_effective(lc->cfg, key_defs[i].name, &src);
        if (v == NULL)
            continue;
        kp_err rc = parse_value(lc, &key_defs[i], v);
        if (rc != KP_ERR_NONE)
            return rc;
    }
    return KP_ERR_NONE;
}

bool kb_config_cluster_mode(const kb_config *cfg)
{
    return cfg->process_roles.n == 1 && strcmp(cfg->process_roles.v[0], "broker") == 0;
}

/* Fills unknown_keys and ignored_keys from the keys that were set. */
static kp_err classify_keys(load_ctx *lc)
{
    kb_config *cfg = lc->cfg;
    size_t np = sizeof ignored_prefixes / sizeof ignored_prefixes[0];
    size_t nk = sizeof known_prefixes / sizeof known_prefixes[0];

    cfg->unknown_keys.v = kbc_pool_alloc(lc, (cfg->raw_n + 1) * sizeof(char *));
    cfg->ignored_keys.v = kbc_pool_alloc(lc, (cfg->raw_n + 1) * sizeof(char *));
    if (cfg->unknown_keys.v == NULL || cfg->ignored_keys.v == NULL)
        return kbc_oom(lc);
    for (size_t i = 0; i < cfg->raw_n; i++) {
        char *key = cfg->raw[i].ce_key;
        const kb_keydef *kd = find_key_def(key);
        bool used = kd != NULL && (kd->flags & KB_KD_CLUSTER) && kb_config_cluster_mode(cfg);
        if (used)
            continue;
        if (kd != NULL ? (kd->flags & KB_KD_IGNORED) != 0 : has_prefix_in(key, ignored_prefixes, np))
            cfg->ignored_keys.v[cfg->ignored_keys.n++] = key;
        else if (kd == NULL && !has_prefix_in(key, known_prefixes, nk))
            cfg->unknown_keys.v[cfg->unknown_keys.n++] = key;
    }
    return KP_ERR_NONE;
}

/* ------------------------------------------------------------------------
 * Derived values: ids, directories, times, logging
 * ------------------------------------------------------------------------ */

/* The integer value of a known key (already checked by parse_known). */
static int64_t int_of(const kb_config *cfg, const char *key)
{
    kb_config_source src;
    const char *v = kbc_effective(cfg, key, &src);
    int64_t out = 0;

    if (v != NULL) {
        size_t n = strlen(v);
        trim(&v, &n);
        char num[32];
        snprintf(num, sizeof num, "%.*s", (int)n, v);
        (void)kb_keydef_parse_integer(num, &out);
    }
    return out;
}

/* hours or minutes -> ms, keeping negative as -1 (no limit). */
static int64_t scale_ms(int64_t v, int64_t unit_ms)
{
    return v < 0 ? -1 : v * unit_ms;
}

static void resolve_times(kb_config *cfg)
{
    int64_t node = int_of(cfg, "node.id"), broker = int_of(cfg, "broker.id");

    cfg->node_id = (int32_t)(node != -1 ? node : broker != -1 ? broker : 1);
    if (!is_set(cfg, "log.retention.ms")) {
        if (is_set(cfg, "log.retention.minutes"))
            cfg->log_retention_ms = scale_ms(int_of(cfg, "log.retention.minutes"), 60000);
        else
            cfg->log_retention_ms = scale_ms(int_of(cfg, "log.retention.hours"), 3600000);
    }
    if (!is_set(cfg, "log.roll.ms"))
        cfg->log_roll_ms = scale_ms(int_of(cfg, "log.roll.hours"), 3600000);
    if (!is_set(cfg, "log.roll.jitter.ms"))
        cfg->log_roll_jitter_ms = scale_ms(int_of(cfg, "log.roll.jitter.hours"), 3600000);
    if (!is_set(cfg, "log.flush.interval.ms"))
        cfg->log_flush_interval_ms = cfg->log_flush_scheduler_interval_ms;
}

static kp_err resolve_dirs_and_logging(load_ctx *lc)
{
    kb_config *cfg = lc->cfg;
    kb_config_source src;
    const char *key = is_set(cfg, "log.dirs") ? "log.dirs" : "log.dir";
    const char *dirs = kbc_effective(cfg, key, &src);
    kb_strlist subs;

    kp_err rc = split_list(lc, find_key_def("log.dirs"), dirs, &cfg->log_dirs);
    if (rc != KP_ERR_NONE)
        return rc;
    if (cfg->log_dirs.n == 0)
        return kbc_bad_value(lc, key, dirs, "expected at least one directory");
    const kb_keydef *kd = find_key_def("runnel.log.subsystems");
    rc = split_list(lc, kd, kbc_effective(cfg, kd->name, &src), &subs);
    for (size_t i = 0; rc == KP_ERR_NONE && i < subs.n; i++) {
        int idx = kb_keydef_choice_index(kd->choices, subs.v[i], strlen(subs.v[i]));
        cfg->log_subsystems |= idx == 0 ? KB_SUB_ALL : 1u << (idx - 1);
    }
    return rc;
}

/* ------------------------------------------------------------------------
 * Topic-level defaults
 * ------------------------------------------------------------------------ */

/* Topic key, its broker key, and the broker keys it is derived from; sorted by topic key. */
static const struct topic_key {
    const char *topic, *broker, *alt1, *alt2;
} topic_keys[] = {
    {"cleanup.policy", "log.cleanup.policy", NULL, NULL},
    {"compression.type", "compression.type", NULL, NULL},
    {"delete.retention.ms", "log.cleaner.delete.retention.ms", NULL, NULL},
    {"file.delete.delay.ms", "log.segment.delete.delay.ms", NULL, NULL},
    {"flush.messages", "log.flush.interval.messages", NULL, NULL},
    {"flush.ms", "log.flush.interval.ms", "log.flush.scheduler.interval.ms", NULL},
    {"index.interval.bytes", "log.index.interval.bytes", NULL, NULL},
    {"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", NULL, NULL},
    {"max.message.bytes", "message.max.bytes", NULL, NULL},
    {"message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", NULL, NULL},
    {"message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", NULL, NULL},
    {"message.timestamp.type", "log.message.timestamp.type", NULL, NULL},
    {"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", NULL, NULL},
    {"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", NULL, NULL},
    {"min.insync.replicas", "min.insync.replicas", NULL, NULL},
    {"preallocate", "log.preallocate", NULL, NULL},
    {"retention.bytes", "log.retention.bytes", NULL, NULL},
    {"retention.ms", "log.retention.ms", "log.retention.minutes", "log.retention.hours"},
    {"segment.bytes", "log.segment.bytes", NULL, NULL},
    {"segment.index.bytes", "log.index.size.max.bytes", NULL, NULL},
    {"segment.jitter.ms", "log.roll.jitter.ms", "log.roll.jitter.hours", NULL},
    {"segment.ms", "log.roll.ms", "log.roll.hours", NULL},
    {"unclean.leader.election.enable", "unclean.leader.election.enable", NULL, NULL},
};

#define N_TOPIC_KEYS (sizeof topic_keys / sizeof topic_keys[0])

/* The typed field of kd as a canonical string. */
static char *format_field(load_ctx *lc, const kb_keydef *kd)
{
    const char *field = (const char *)lc->cfg + kd->field;
    char num[64] = "";
    int32_t i32;
    int64_t i64;
    double d;
    size_t len;

    switch (kd->type) {
    case KB_KT_INT:
        memcpy(&i32, field, sizeof i32);
        snprintf(num, sizeof num, "%d", i32);
        break;
    case KB_KT_LONG:
        memcpy(&i64, field, sizeof i64);
        snprintf(num, sizeof num, "%lld", (long long)i64);
        break;
    case KB_KT_SHORT: /* no field: not a topic default */
        break;
    case KB_KT_BOOL:
        snprintf(num, sizeof num, "%s", *(const bool *)field ? "true" : "false");
        break;
    case KB_KT_DOUBLE:
        memcpy(&d, field, sizeof d);
        snprintf(num, sizeof num, "%g", d);
        break;
    case KB_KT_ENUM:
        memcpy(&i32, field, sizeof i32);
        const char *c = kb_keydef_choice_at(kd->choices, i32, &len);
        snprintf(num, sizeof num, "%.*s", (int)len, c);
        break;
    case KB_KT_LIST: { /* only cleanup.policy: short */
        const kb_strlist *l = (const kb_strlist *)(const void *)field;
        for (size_t i = 0, o = 0; i < l->n && o < sizeof num; i++)
            o += (size_t)snprintf(num + o, sizeof num - o, "%s%s", i ? "," : "", l->v[i]);
        break;
    }
    case KB_KT_STRING:
        break;
    }
    return kbc_pool_strdup(lc, num);
}

static kp_err build_topic_defaults(load_ctx *lc)
{
    kb_config *cfg = lc->cfg;

    cfg->topic_defaults = kbc_pool_alloc(lc, N_TOPIC_KEYS * sizeof *cfg->topic_defaults);
    if (cfg->topic_defaults == NULL)
        return kbc_oom(lc);
    for (size_t i = 0; i < N_TOPIC_KEYS; i++) {
        const struct topic_key *tk = &topic_keys[i];
        const kb_keydef *kd = find_key_def(tk->broker);
        kb_topic_default *td = &cfg->topic_defaults[cfg->topic_defaults_n++];
        const char *synonyms[] = {tk->broker, tk->alt1, tk->alt2};

        KB_ASSERT(kd != NULL && kd->field != NOF);
        td->td_name = tk->topic;
        td->td_broker_key = tk->broker;
        td->td_source = KB_SRC_DEFAULT;
        for (size_t s = 0; s < 3 && td->td_source == KB_SRC_DEFAULT; s++) {
            const kb_config_entry *e = synonyms[s] ? raw_find(cfg, synonyms[s]) : NULL;
            if (e != NULL)
                td->td_source = e->ce_source;
        }
        if ((td->td_value = format_field(lc, kd)) == NULL)
            return kbc_oom(lc);
    }
    return KP_ERR_NONE;
}

/* ------------------------------------------------------------------------
 * Command line and the whole load
 * ------------------------------------------------------------------------ */

typedef struct cli {
    const char *path;
    const char **overrides;
    size_t n_overrides;
} cli;

/* --help / --version anywhere win over everything else. */
static kb_config_action scan_action(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--override") == 0)
            i++; /* its argument is a key=value, not an option */
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return KB_CONFIG_HELP;
        else if (strcmp(argv[i], "--version") == 0)
            return KB_CONFIG_VERSION;
    }
    return KB_CONFIG_RUN;
}

static kp_err parse_args(load_ctx *lc, int argc, char **argv, cli *c)
{
    c->overrides = kbc_pool_alloc(lc, (size_t)(argc > 0 ? argc : 1) * sizeof *c->overrides);
    if (c->overrides == NULL)
        return kbc_oom(lc);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--override") == 0) {
            if (i + 1 >= argc)
                return kbc_failf(lc, KP_ERR__INVAL, "--override: expected a key=value argument");
            c->overrides[c->n_overrides++] = argv[++i];
        } else if (strncmp(a, "--override=", 11) == 0) {
            c->overrides[c->n_overrides++] = a + 11;
        } else if (a[0] == '-' && a[1] != '\0') {
            return kbc_failf(lc, KP_ERR__INVAL, "unknown option %s (see --help)", a);
        } else if (c->path != NULL) {
            return kbc_failf(lc, KP_ERR__INVAL, "expected one properties file, got %s and %s",
                             c->path, a);
        } else {
            c->path = a;
        }
    }
    return KP_ERR_NONE;
}

static kp_err apply_overrides(load_ctx *lc, const cli *c)
{
    for (size_t i = 0; i < c->n_overrides; i++) {
        const char *kv = c->overrides[i], *eq = strchr(kv, '=');
        const char *key = kv;
        size_t keylen = eq != NULL ? (size_t)(eq - kv) : 0;

        trim(&key, &keylen);
        if (eq == NULL || keylen == 0)
            return kbc_bad_value(lc, "--override", kv, "expected key=value");
        kp_err rc = raw_set(lc, key, keylen, eq + 1, strlen(eq + 1), KB_SRC_OVERRIDE);
        if (rc != KP_ERR_NONE)
            return rc;
    }
    return KP_ERR_NONE;
}

/* Everything after the sources are merged: check, derive, classify. */
static kp_err build(load_ctx *lc)
{
    kb_config *cfg = lc->cfg;

    if (cfg->raw_n > 1)
        qsort(cfg->raw, cfg->raw_n, sizeof cfg->raw[0], entry_cmp);
    cfg->priv->raw_sorted = true;
    kp_err rc = parse_known(lc);
    if (rc == KP_ERR_NONE)
        rc = classify_keys(lc);
    if (rc == KP_ERR_NONE) {
        resolve_times(cfg);
        rc = resolve_dirs_and_logging(lc);
    }
    if (rc == KP_ERR_NONE)
        rc = kbc_resolve_listeners(lc);
    if (rc == KP_ERR_NONE)
        rc = build_topic_defaults(lc);
    return rc;
}

kp_err kb_config_load(int argc, char **argv, char **envp, kb_config **out, char *err,
                      size_t errlen)
{
    load_ctx lc = {.err = err, .errlen = errlen};
    cli c = {0};
    kp_err rc;

    *out = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    lc.cfg = calloc(1, sizeof *lc.cfg);
    if (lc.cfg == NULL || (lc.cfg->priv = calloc(1, sizeof *lc.cfg->priv)) == NULL) {
        free(lc.cfg);
        return kbc_oom(&lc);
    }
    lc.cfg->action = scan_action(argc, argv);
    if (lc.cfg->action != KB_CONFIG_RUN) {
        *out = lc.cfg;
        return KP_ERR_NONE;
    }
    rc = parse_args(&lc, argc, argv, &c);
    if (rc == KP_ERR_NONE && c.path != NULL) {
        lc.cfg->properties_path = kbc_pool_strdup(&lc, c.path);
        rc = lc.cfg->properties_path == NULL ? kbc_oom(&lc) : load_file(&lc, c.path);
    }
    if (rc == KP_ERR_NONE)
        rc = load_env(&lc, envp);
    if (rc == KP_ERR_NONE)
        rc = apply_overrides(&lc, &c);
    if (rc == KP_ERR_NONE)
        rc = build(&lc);
    if (rc != KP_ERR_NONE) {
        kb_config_free(lc.cfg);
        return rc;
    }
    *out = lc.cfg;
    return KP_ERR_NONE;
}

void kb_config_free(kb_config *cfg)
{
    if (cfg == NULL)
        return;
    if (cfg->priv != NULL) {
        for (size_t i = 0; i < cfg->priv->ptrs_n; i++)
            free(cfg->priv->ptrs[i]);
        free(cfg->priv->ptrs);
        free(cfg->priv);
    }
    free(cfg->raw);
    free(cfg);
}

/* ------------------------------------------------------------------------
 * Lookups
 * ------------------------------------------------------------------------ */

const char *kb_config_lookup(const kb_config *cfg, const char *key, kb_config_source *source)
{
    kb_config_source src;
    const char *v = kbc_effective(cfg, key, &src);

    if (source != NULL)
        *source = src;
    return v;
}

const char *kb_config_get_raw(const kb_config *cfg, const char *key)
{
    return kb_config_lookup(cfg, key, NULL);
}

const char *kb_config_listener_value(const kb_config *cfg, const char *listener, const char *key,
                                     bool fallback)
{
    char name[512];
    int n = snprintf(name, sizeof name, "listener.name.%s.%s", listener, key);
    if (n > 0 && (size_t)n < sizeof name) {
        for (size_t i = strlen("listener.name."); name[i] != '.' && name[i] != '\0'; i++)
            name[i] = (char)tolower((unsigned char)name[i]);
        const kb_config_entry *e = raw_find(cfg, name);
        if (e != NULL)
            return e->ce_value;
    }
    return fallback ? kb_config_get_raw(cfg, key) : NULL;
}

static int topic_default_cmp(const void *k, const void *td)
{
    return strcmp(k, ((const kb_topic_default *)td)->td_name);
}

const kb_topic_default *kb_config_topic_default(const kb_config *cfg, const char *topic_key)
{
    return bsearch(topic_key, cfg->topic_defaults, cfg->topic_defaults_n,
                   sizeof cfg->topic_defaults[0], topic_default_cmp);
}

static void log_keys(const kb_strlist *keys, kb_log_level level, const char *msg)
{
    char esc[KB_LOG_ESC_SHORT];

    for (size_t i = 0; i < keys->n; i++) {
        KB_LOG(level, KB_SUB_CONFIG, "msg=\"%s\" key=\"%s\"", msg,
               kb_log_escape(esc, sizeof esc, keys->v[i], strlen(keys->v[i])));
    }
}

void kb_config_log_start(const kb_config *cfg)
{
    kb_log_set_level(cfg->log_level);
    kb_log_set_subsystems(cfg->log_subsystems);
    log_keys(&cfg->unknown_keys, KB_LL_WARN, "unknown key, ignored");
    log_keys(&cfg->ignored_keys, KB_LL_INFO, "key does not apply to a single node, ignored");
}

const char *kb_config_key_at(size_t i, int8_t *wire_type)
{
    if (i >= N_KEY_DEFS)
        return NULL;
    *wire_type = kb_keydef_wire_type(&key_defs[i]);
    return key_defs[i].name;
}

kp_err kb_config_check_value(const char *key, const char *value, char *msg, size_t cap)
{
    const kb_keydef *kd = find_key_def(key);
    if (kd == NULL)
        return KP_ERR__NOENT;
    kb_msgbuf why;
    if (kb_keydef_check(kd, value, &why) == KP_ERR_NONE)
        return KP_ERR_NONE;
    snprintf(msg, cap, "%s", why.text);
    return KP_ERR_INVALID_REQUEST; /* Kafka's answer to a bad dynamic broker value */
}

unsigned kb_config_key_flags(const char *key)
{
    const kb_keydef *kd = find_key_def(key);
    return kd != NULL ? kd->flags : 0;
}

bool kb_config_key_sensitive(const char *key)
{
    return strstr(key, "password") != NULL || strstr(key, "secret") != NULL ||
           strstr(key, "jaas.config") != NULL || strstr(key, "keystore.key") != NULL ||
           strstr(key, "credential") != NULL;
}

const char *kb_config_source_name(kb_config_source src)
{
    static const char *const names[] = {"unset", "default", "file", "env", "override"};

    if ((unsigned)src >= sizeof names / sizeof names[0])
        return "?";
    return names[src];
}
