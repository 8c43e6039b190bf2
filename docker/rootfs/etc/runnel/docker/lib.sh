# Shared by the image's start scripts (/etc/kafka/docker/run, the
# /etc/confluent/docker/* scripts): POSIX sh, run by busybox ash.
#
# The two Kafka image contracts differ only in how a KAFKA_* variable names a
# key; everything else (listener defaults, the data-directory check, the
# readiness lines) is here, so both behave the same.
#
#   apache/kafka   KAFKA_ stripped, then ___ -> '-', __ -> '_', _ -> '.'
#                  (the broker reads these variables itself)
#   Confluent      KAFKA_ stripped, then ___ -> '_', __ -> '-', _ -> '.'
#                  (configure writes /etc/kafka/kafka.properties)

RUNNEL_BIN=/usr/local/bin/runnel
RUNNEL_DATA=/var/lib/runnel/data
RUNNEL_LISTENERS_FILE=/tmp/runnel-listeners

# KAFKA_* variables that configure Kafka's JVM or launcher, not the broker.
RUNNEL_SKIP_VARS=" KAFKA_HEAP_OPTS KAFKA_OPTS KAFKA_JVM_PERFORMANCE_OPTS KAFKA_LOG4J_OPTS
 KAFKA_DEBUG KAFKA_GC_LOG_OPTS KAFKA_JMX_OPTS KAFKA_JMX_PORT KAFKA_JMX_HOSTNAME
 KAFKA_LOG4J_LOGGERS KAFKA_VERSION KAFKA_LOG4J_ROOT_LOGLEVEL KAFKA_HOME
 KAFKA_DEBUG_SUSPEND_FLAG KAFKA_TOOLS_LOG4J_LOGLEVEL "

rn_die() {
    echo "runnel: $*" >&2
    exit 1
}

# The names of the KAFKA_* variables set, one a line.
rn_kafka_vars() {
    env | sed -n 's/^\(KAFKA_[A-Za-z0-9_]*\)=.*/\1/p' | sort -u
}

rn_skipped() {
    case "$RUNNEL_SKIP_VARS" in
    *[[:space:]]"$1"[[:space:]]*) return 0 ;;
    esac
    return 1
}

# The value of the variable named $1 (a name rn_kafka_vars gave: safe to eval).
rn_value() {
    eval "printf '%s' \"\${$1-}\""
}

# Listeners inside the container: KAFKA_LISTENERS as given; else every
# advertised listener's port on 0.0.0.0 (apache/kafka and Confluent derive
# them the same way); else PLAINTEXT on 9092, advertised as localhost:9092.
rn_listener_defaults() {
    if [ -z "${KAFKA_LISTENERS:-}" ]; then
        if [ -n "${KAFKA_ADVERTISED_LISTENERS:-}" ]; then
            KAFKA_LISTENERS="$(printf '%s' "$KAFKA_ADVERTISED_LISTENERS" |
                sed 's#://[^,]*:\([0-9][0-9]*\)#://0.0.0.0:\1#g')"
        else
            KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092
            KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
        fi
    fi
    export KAFKA_LISTENERS
    [ -n "${KAFKA_ADVERTISED_LISTENERS:-}" ] && export KAFKA_ADVERTISED_LISTENERS
    # For the HEALTHCHECK: the ports a ready broker listens on.
    printf '%s\n' "$KAFKA_LISTENERS" >"$RUNNEL_LISTENERS_FILE" 2>/dev/null || true
}

# One line naming the directory and the fix when a data directory (a
# comma-separated list in $1) cannot be written by this user.
rn_check_dirs() {
    old_ifs="$IFS"
    IFS=,
    for d in $1; do
        IFS="$old_ifs"
        t="$d"
        [ -e "$t" ] || t="$(dirname "$d")"
        if [ ! -w "$t" ] || [ ! -x "$t" ]; then
            rn_die "data directory $d is not writable by uid $(id -u); give the volume to" \
                "that uid (chown -R $(id -u) on it) or run the container with --user set" \
                "to the volume's owner"
        fi
    done
    IFS="$old_ifs"
}

# Cluster mode (process.roles=broker, docs/cluster.md): the first log dir is
# formatted for CLUSTER_ID on the first start, as apache/kafka's image runs
# its storage tool; $1 is the properties file the broker will read, if any.
# A single node (no process.roles, or broker,controller) needs no format.
rn_cluster_format() {
    roles="${KAFKA_PROCESS_ROLES:-}"
    [ -n "$roles" ] || roles="$(sed -n 's/^[[:space:]]*process\.roles[[:space:]]*[=:][[:space:]]*//p' \
        "${1:-/dev/null}" 2>/dev/null | tail -n 1)"
    [ "$roles" = broker ] || return 0
    dir="${KAFKA_LOG_DIRS:-${KAFKA_LOG_DIR:-$RUNNEL_DATA}}"
    [ -f "${dir%%,*}/meta.properties" ] && return 0
    [ -n "${CLUSTER_ID:-}" ] || rn_die "process.roles=broker needs CLUSTER_ID, the controllers' cluster id"
    if [ -n "${1:-}" ]; then
        "$RUNNEL_BIN" format -t "$CLUSTER_ID" -c "$1" >&2
    else
        "$RUNNEL_BIN" format -t "$CLUSTER_ID" >&2
    fi
}

# The lines tools written for Kafka wait for (testcontainers' Kafka modules,
# compose healthchecks that grep the log): the broker prints them right after
# its own ready line, once every listener accepts. RUNNEL_READY_LINES= (set
# and empty) prints none.
rn_ready_lines() {
    id="${KAFKA_NODE_ID:-${KAFKA_BROKER_ID:-1}}"
    if [ -z "${RUNNEL_READY_LINES+set}" ]; then
        RUNNEL_READY_LINES="runnel: [KafkaServer id=$id] started (kafka.server.KafkaServer)
runnel: [KafkaRaftServer nodeId=$id] Kafka Server started (kafka.server.KafkaRaftServer)
runnel: [BrokerLifecycleManager id=$id] The broker has been unfenced. Transitioning from RECOVERY to RUNNING."
    fi
    export RUNNEL_READY_LINES
}
