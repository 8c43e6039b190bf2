/*
 * kb_config: the broker's configuration, built once at startup, then frozen.
 *
 * Job: merge, in increasing priority, built-in defaults (Kafka's), a Kafka
 * `server.properties` file (Java Properties syntax), environment variables in
 * the convention of the Kafka container images (KAFKA_LOG_DIRS -> log.dirs)
 * and `--override key=value` arguments; check every known key against its
 * type and range; hand back typed fields plus every raw key=value.
 *
 * Command line: runnel [server.properties] [--override key=value ...]
 *               [--override=key=value ...] [--version] [--help]
 *
 * Environment: KAFKA_<NAME> (or bitnami's KAFKA_CFG_<NAME>) sets the key
 * kb_properties_env_key() makes of it (KAFKA_LOG_DIRS -> log.dirs, `___` -> `-`,
 * `__` -> `_`, `_` -> `.`); the JVM and launcher variables (KAFKA_HEAP_OPTS,
 * KAFKA_OPTS, ...) are skipped. CLUSTER_ID (the apache/kafka image's
 * variable) sets cluster.id unless KAFKA_CLUSTER_ID does. Among variables
 * naming the same key, the later one in envp wins.
 *
 * Derived values (Kafka's rules, applied after merging all sources):
 *   node_id           node.id if set and not -1, else broker.id if set and
 *                     not -1, else 1.
 *   log_dirs          log.dirs if set, else log.dir (default /tmp/runnel-logs).
 *   log_retention_ms  log.retention.ms, else .minutes, else .hours (168);
 *                     -1 = no time limit.
 *   log_roll_ms       log.roll.ms, else log.roll.hours (168).
 *   log_flush_interval_ms  log.flush.interval.ms, else
 *                     log.flush.scheduler.interval.ms.
 *   advertised_listeners  advertised.listeners; every listener it does not
 *                     name is advertised as itself, with an empty host (or
 *                     0.0.0.0 / ::) replaced by `localhost`: Kafka would use
 *                     the machine's canonical host name, but `localhost` is
 *                     what a development broker's clients can always reach.
 *                     A port 0 (listen on any free port) stays 0: the
 *                     server advertises the port it actually bound.
 *   log_roll_jitter_ms  log.roll.jitter.ms, else log.roll.jitter.hours (0).
 *   li_protocol       from listener.security.protocol.map; while that key is
 *                     left at its default, controller.listener.names map to
 *                     PLAINTEXT (as Kafka does).
 *
 * Key classes: keys in the table (kb_config.c) are typed and range-checked,
 * including those that do not apply to a single node (num.*.threads,
 * replication factors, zookeeper.*, controller.quorum.*, replica.*,
 * process.roles, ...), which are reported in ignored_keys; in cluster mode
 * (kb_config_cluster_mode) the keys cluster mode uses (KB_KD_CLUSTER) are not. ssl.*, sasl.* and
 * listener.name.* are kept as strings for the security work. Any other key
 * is accepted and reported in unknown_keys.
 *
 * Invariants:
 *   1. After kb_config_load() returns KP_ERR_NONE with action KB_CONFIG_RUN,
 *      every typed field holds a value inside its key's valid range, and
 *      listeners.n >= 1 with distinct names.
 *   2. Every listener and advertised listener has a security protocol from
 *      the (effective) listener.security.protocol.map.
 *   3. advertised_listeners has one entry per listener, same names, same
 *      order.
 *   4. raw[] is sorted by key, keys are unique, and holds exactly the keys
 *      set by the file, the environment or --override (last source wins).
 *   5. unknown_keys and ignored_keys are subsets of raw[]'s keys, each once.
 *
 * Ownership: kb_config_load() allocates the config and everything it points
 * to; kb_config_free() releases it all. Every pointer reachable from a
 * kb_config (and every string the lookup functions return) stays valid until
 * kb_config_free(). Nothing keeps a pointer into argv or envp.
 *
 * Threading: kb_config_load()/kb_config_free() run on the main thread at
 * startup and shutdown. In between the config is read-only (pass
 * `const kb_config *`) and may be read from any thread.
 *
 * Errors: kb_config_load() returns KP_ERR__INVAL for a bad argument, a bad
 * file line or a bad value, KP_ERR__NOENT / KP_ERR__IO when the properties
 * file cannot be read, KP_ERR__NOMEM. It then writes one line into err, e.g.
 *     config: num.partitions=abc: expected an integer >= 1
 * and *out is NULL. Loading logs nothing; main calls kb_config_log_start()
 * once the config is in hand.
 */
#ifndef KB_CONFIG_H
#define KB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_log.h"
#include "kp_err.h"

/* What main should do after a successful load. */
typedef enum kb_config_action {
    KB_CONFIG_RUN = 0,  /* start the broker */
    KB_CONFIG_HELP,     /* print kb_config_usage() (kb_config_doc.h) to stdout, exit 0 */
    KB_CONFIG_VERSION,  /* print the version to stdout, exit 0 */
} kb_config_action;

/* Kafka's SecurityProtocol names, in this order. */
typedef enum kb_security_protocol {
    KB_SEC_PLAINTEXT = 0,
    KB_SEC_SSL,
    KB_SEC_SASL_PLAINTEXT,
    KB_SEC_SASL_SSL,
} kb_security_protocol;

typedef enum kb_flush_mode {
    KB_FLUSH_FSYNC = 0,      /* acks=-1 answered after fdatasync (default) */
    KB_FLUSH_PAGE_CACHE = 1, /* acks=-1 answered once in the page cache (Kafka) */
} kb_flush_mode;

typedef enum kb_guard_mode {
    KB_GUARD_OFF = 0,  /* retention deletes as Kafka does */
    KB_GUARD_WARN = 1, /* ... and says which group loses what (default) */
    KB_GUARD_HOLD = 2, /* keeps unread segments, within the guard's bounds */
} kb_guard_mode;

typedef enum kb_timestamp_type {
    KB_TS_CREATE_TIME = 0,
    KB_TS_LOG_APPEND_TIME = 1,
} kb_timestamp_type;

/* Broker-level compression.type, in Kafka's spelling. */
typedef enum kb_compression {
    KB_COMP_PRODUCER = 0,
    KB_COMP_UNCOMPRESSED,
    KB_COMP_GZIP,
    KB_COMP_SNAPPY,
    KB_COMP_LZ4,
    KB_COMP_ZSTD,
} kb_compression;

typedef struct kb_strlist {
    size_t n;
    char **v;
} kb_strlist;

typedef struct kb_listener {
    char *li_name;  /* upper-case, e.g. "PLAINTEXT", "CONTROLLER" */
    char *li_host;  /* "" = all interfaces; IPv6 without brackets */
    uint16_t li_port; /* 0 = any free port */
    kb_security_protocol li_protocol;
    bool li_controller; /* named in controller.listener.names */
} kb_listener;

typedef struct kb_listener_list {
    size_t n;
    kb_listener *v;
} kb_listener_list;

typedef enum kb_config_source {
    KB_SRC_UNSET = 0, /* no value at all (a key whose default is null) */
    KB_SRC_DEFAULT,
    KB_SRC_FILE,
    KB_SRC_ENV,
    KB_SRC_OVERRIDE,
} kb_config_source;

typedef struct kb_config_entry {
    char *ce_key;
    char *ce_value;
    kb_config_source ce_source;
} kb_config_entry;

/* A topic-level config default derived from a broker key (for CreateTopics
 * and DescribeConfigs); ce_source says whether the broker key was set. */
typedef struct kb_topic_default {
    const char *td_name;       /* topic key, e.g. "retention.ms" (static) */
    const char *td_broker_key; /* its broker synonym, e.g. "log.retention.ms" (static) */
    char *td_value;            /* canonical string, e.g. "604800000" */
    kb_config_source td_source;
} kb_topic_default;

typedef struct kb_config_priv kb_config_priv;

typedef struct kb_config {
    kb_config_action action;
    const char *properties_path; /* the file given, or NULL */

    /* identity and roles */
    int32_t node_id;
    char *cluster_id; /* cluster.id (Runnel extension), NULL = from the data dir */
    kb_strlist process_roles;

    /* listeners */
    kb_listener_list listeners;
    kb_listener_list advertised_listeners;
    kb_strlist controller_listener_names;

    /* cluster mode (process.roles=broker; kb_cluster.h) */
    kb_strlist quorum_bootstrap_servers; /* controller.quorum.bootstrap.servers: host:port */
    kb_strlist quorum_voters;            /* controller.quorum.voters: id@host:port */
    char *inter_broker_listener_name;    /* NULL: security.inter.broker.protocol's */
    char *broker_rack;                   /* NULL: no rack */
    char *metadata_log_dir;              /* NULL: the first log dir */
    int32_t broker_heartbeat_interval_ms;
    int32_t broker_session_timeout_ms;
    bool controlled_shutdown_enable; /* SIGTERM asks the controller first */
    /* replication (cluster mode): the replica fetchers, Kafka's keys */
    int32_t num_replica_fetchers;
    int32_t replica_fetch_backoff_ms;
    int32_t replica_fetch_max_bytes;
    int32_t replica_fetch_min_bytes;
    int32_t replica_fetch_response_max_bytes;
    int32_t replica_fetch_wait_max_ms;
    int64_t replica_lag_time_max_ms;

    /* requests and connections */
    int32_t message_max_bytes;
    int32_t socket_request_max_bytes;
    int32_t socket_send_buffer_bytes;    /* -1 = OS default */
    int32_t socket_receive_buffer_bytes; /* -1 = OS default */
    int64_t connections_max_idle_ms;     /* -1 = never close idle connections */
    int32_t max_connections;        /* accepting pauses at this many */
    int32_t max_connections_per_ip; /* a new one past this is closed */

    /* topics */
    int32_t num_partitions;
    int32_t num_recovery_threads;   /* helper threads opening logs at start-up */
    int32_t default_replication_factor;
    bool auto_create_topics_enable;
    bool delete_topic_enable;
    int32_t min_insync_replicas;
    bool unclean_leader_election_enable; /* accepted; only for topic defaults */

    /* the log */
    kb_strlist log_dirs;
    int32_t log_segment_bytes;
    int64_t log_roll_ms;
    int64_t log_roll_jitter_ms;
    int64_t log_retention_ms;    /* -1 = no time limit */
    int64_t log_retention_bytes; /* -1 = no size limit */
    int64_t log_retention_check_interval_ms;
    int32_t log_index_interval_bytes;
    int32_t log_index_size_max_bytes;
    int64_t log_flush_interval_messages;
    int64_t log_flush_interval_ms;
    int64_t log_flush_scheduler_interval_ms;
    int64_t log_flush_offset_checkpoint_interval_ms;
    int64_t log_segment_delete_delay_ms;
    bool log_preallocate;
    kb_strlist log_cleanup_policy; /* "delete" and/or "compact" */
    bool log_cleaner_enable;
    double log_cleaner_min_cleanable_ratio;
    int64_t log_cleaner_delete_retention_ms;
    int64_t log_cleaner_min_compaction_lag_ms;
    int64_t log_cleaner_max_compaction_lag_ms;
    int64_t log_cleaner_backoff_ms;         /* pause between cleaner passes */
    int64_t log_cleaner_dedupe_buffer_size; /* bytes for the cleaner's offset map */
    kb_timestamp_type log_message_timestamp_type;
    int64_t log_message_timestamp_after_max_ms;  /* how far ahead of the broker's clock */
    int64_t log_message_timestamp_before_max_ms; /* how far behind it */
    kb_compression compression_type;

    /* coordinators */
    int32_t offsets_topic_num_partitions;
    int32_t offsets_topic_replication_factor; /* accepted; a single node uses 1 */
    int32_t offsets_retention_minutes;
    int32_t offsets_commit_timeout_ms;
    int32_t transaction_state_log_num_partitions;
    int32_t transaction_state_log_replication_factor; /* cluster mode: __transaction_state */
    int32_t transaction_state_log_min_isr;            /* cluster mode: its min.insync.replicas */
    int32_t transaction_max_timeout_ms;
    int32_t transaction_abort_timed_out_transaction_cleanup_interval_ms;
    int64_t transactional_id_expiration_ms;
    int32_t share_coordinator_state_topic_num_partitions; /* __share_group_state */
    int32_t share_coordinator_state_topic_segment_bytes;
    int32_t share_coordinator_snapshot_update_records_per_snapshot;
    int32_t group_initial_rebalance_delay_ms;
    int32_t group_min_session_timeout_ms;
    int32_t group_max_session_timeout_ms;
    int32_t group_max_size;
    kb_strlist group_consumer_assignors;        /* KIP-848 server assignors, default first */
    int32_t group_consumer_heartbeat_interval_ms;
    int32_t group_consumer_session_timeout_ms;
    int32_t group_consumer_max_size;
    int32_t group_share_delivery_count_limit; /* KIP-932 share groups */
    int32_t group_share_heartbeat_interval_ms;
    int32_t group_share_max_size;
    int32_t group_share_partition_max_record_locks;
    int32_t group_share_record_lock_duration_ms;
    int32_t group_share_session_timeout_ms;
    int32_t group_streams_heartbeat_interval_ms; /* KIP-1071 streams groups */
    int32_t group_streams_initial_rebalance_delay_ms;
    int32_t group_streams_num_standby_replicas;
    int32_t group_streams_session_timeout_ms;
    int32_t group_consumer_min_heartbeat_interval_ms; /* bounds of the group configs */
    int32_t group_consumer_max_heartbeat_interval_ms;
    int32_t group_consumer_min_session_timeout_ms;
    int32_t group_consumer_max_session_timeout_ms;

    /* Runnel's own keys */
    kb_log_level log_level;      /* runnel.log.level (INFO) */
    unsigned log_subsystems;     /* runnel.log.subsystems (all): KB_SUB_* mask */
    kb_flush_mode flush_acks_all; /* runnel.flush.acks.all (fsync) */
    bool fetch_zerocopy;         /* runnel.fetch.zerocopy (true) */
    bool advertise_dialled;      /* runnel.advertise.dialled.address (false) */
    char *console_listener;      /* runnel.console.listener (""): the web console, off when empty */
    bool console_write_enable;   /* runnel.console.write.enable (false) */
    int32_t max_partitions;      /* runnel.max.partitions (200000): all topics together */
    char *metrics_listener;      /* runnel.metrics.listener: http://host:port, NULL = off */
    int32_t metrics_max_series;  /* runnel.metrics.max.series (10000) */
    int32_t lag_window_commits;  /* runnel.lag.window.commits (10) */
    int64_t lag_window_min_stop_ms; /* runnel.lag.window.min.stop.ms (60000) */
    int64_t lag_check_interval_ms;  /* runnel.lag.check.interval.ms (5000) */
    kb_guard_mode retention_guard;   /* runnel.retention.guard (warn) */
    int64_t retention_guard_max_ms;     /* runnel.retention.guard.max.ms (86400000) */
    int64_t retention_guard_max_bytes;  /* runnel.retention.guard.max.bytes (1073741824) */

    /* every key set by a source, sorted by key (see kb_config_get_raw) */
    size_t raw_n;
    kb_config_entry *raw;

    /* for main to log once logging is up: keys Runnel does not know (WARN),
     * and known keys that do not apply to a single node (INFO) */
    kb_strlist unknown_keys;
    kb_strlist ignored_keys;

    /* topic-level defaults, sorted by td_name */
    size_t topic_defaults_n;
    kb_topic_default *topic_defaults;

    kb_config_priv *priv; /* allocation pool; not for other modules */
} kb_config;

/*
 * Builds the config from argv (argv[0] is the program name), envp (a
 * NULL-terminated "NAME=value" array; NULL for none) and the file named in
 * argv. On --help or --version, returns KP_ERR_NONE with (*out)->action set
 * and no file read; only `action` is meaningful then.
 */
kp_err kb_config_load(int argc, char **argv, char **envp, kb_config **out, char *err,
                      size_t errlen);

/* Frees cfg and everything it owns; NULL is fine. */
void kb_config_free(kb_config *cfg);

/*
 * The value of key: as set by a source, else its built-in default for a
 * known key (as a string, e.g. "168"), else NULL. *source (if non-NULL) says
 * which. Valid until kb_config_free().
 */
const char *kb_config_lookup(const kb_config *cfg, const char *key, kb_config_source *source);

/* kb_config_lookup() without the source. */
const char *kb_config_get_raw(const kb_config *cfg, const char *key);

/*
 * A per-listener security key as Kafka reads it: the value of
 * `listener.name.<listener in lower case>.<key>` if set, else (when
 * fallback is true) the value of the bare key, else NULL.
 */
const char *kb_config_listener_value(const kb_config *cfg, const char *listener, const char *key,
                                     bool fallback);

/* The default of a topic-level key (e.g. "retention.ms"), NULL if unknown. */
const kb_topic_default *kb_config_topic_default(const kb_config *cfg, const char *topic_key);

/* The listener named name (case-insensitive) and its advertised form. */
const kb_listener *kb_config_listener(const kb_config *cfg, const char *name);
const kb_listener *kb_config_advertised(const kb_config *cfg, const char *name);

/* The i-th known key in sorted order (NULL past the end); *wire_type gets
 * its Kafka ConfigType (1 boolean, 2 string, 3 int, 4 short, 5 long,
 * 6 double, 7 list). For DescribeConfigs on the broker. */
const char *kb_config_key_at(size_t i, int8_t *wire_type);

/* Checks a value for key as Kafka's ConfigDef parses it (its type, then its
 * range) for a dynamic broker config: KP_ERR_NONE, KP_ERR_INVALID_REQUEST
 * with Kafka's text in msg, or KP_ERR__NOENT for a key without a type here. */
kp_err kb_config_check_value(const char *key, const char *value, char *msg, size_t cap);

/* The KB_KD_* flags of a known broker key (kb_keydef.h), 0 for any other. */
unsigned kb_config_key_flags(const char *key);

/* True for keys whose values must never be logged or described
 * (passwords, keys, JAAS configs). */
bool kb_config_key_sensitive(const char *key);

/*
 * For main, once stderr is ready: sets the global log level and subsystem
 * mask from runnel.log.level / runnel.log.subsystems, then logs each unknown
 * key once (WARN) and each key that does not apply to a single node once
 * (INFO), subsystem config.
 */
void kb_config_log_start(const kb_config *cfg);

/* "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL". */
const char *kb_security_protocol_name(kb_security_protocol p);

/* "unset", "default", "file", "env", "override". */
const char *kb_config_source_name(kb_config_source src);

/* Cluster mode: process.roles is exactly `broker` (kb_cluster.h). A combined
 * broker,controller (Kafka's stock single-node file) stays a single node. */
bool kb_config_cluster_mode(const kb_config *cfg);

#endif
