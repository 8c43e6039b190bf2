"""CreateTopics, CreatePartitions and DescribeConfigs at the wire, field by
field as Apache Kafka 4.1.1 answers them, and the record timestamp bound
its topic configs imply.

Kafka Connect creates its internal topics with CreateTopics v7 and reads
cleanup.policy back with DescribeConfigs; comparing its traffic with both
brokers showed these differences: a created topic's error message was ""
instead of null; the topic config list still held the keys Kafka 4.0
removed (message.format.version, message.downconversion.enable,
message.timestamp.difference.max.ms, which Kafka now refuses as unknown);
the throttled-replica keys were typed STRING instead of LIST; and
message.timestamp.after.max.ms defaulted to Long.MAX_VALUE where Kafka 4
allows one hour, so a record timestamped two hours ahead was stored rather
than refused. A validate-only create gets a fresh topic id, and
CreatePartitions words its refusals as Kafka 4.1's controller does.
Everything also runs with --target=kafka.
"""

import struct
import time

import wire
import wire_data
from conftest import require_module
from roundtrip import create_topic
from wire import compact_array as carray
from wire import compact_string as cstr

CREATE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS = 19, 32, 37
INVALID_PARTITIONS, TOPIC_ALREADY_EXISTS, INVALID_CONFIG = 37, 36, 40
TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
TYPE_LIST = 7
ZERO_ID = bytes(16)
HOUR_MS = 3600 * 1000

# LogConfig.configNames() of Kafka 4.1.1 but the internal internal.segment.bytes.
KAFKA_TOPIC_KEYS = {
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
}
REMOVED_IN_KAFKA_4 = ("message.format.version", "message.downconversion.enable",
                      "message.timestamp.difference.max.ms")


def create_topics(sock, name, partitions=1, configs=None, validate_only=False):
    """CreateTopics v7 for one topic; its CreatableTopicResult as a dict."""
    topic = (cstr(name) + struct.pack(">ih", partitions, 1) + carray([])
             + carray([cstr(k) + cstr(v) + b"\0" for k, v in (configs or {}).items()]) + b"\0")
    body = carray([topic]) + struct.pack(">i?", 15000, validate_only) + b"\0"
    r = wire.flex_call(sock, CREATE_TOPICS, 7, body, 1)
    r.take(">i")  # throttle

    def result(x):
        out = {"name": x.string(), "id": x.uuid(), "error": x.take(">h"), "message": x.string(),
               "partitions": x.take(">i"), "replication": x.take(">h")}

        def config(y):
            c = (y.string(), y.string(), y.take(">?"), y.take(">b"), y.take(">?"))
            y.skip_tags()
            return c[0], {"value": c[1], "source": c[3]}

        configs = x.array(config)
        out["configs"] = None if configs is None else dict(configs)
        x.skip_tags()
        return out

    (res,) = r.array(result)
    return res


def create_partitions(sock, name, count):
    """CreatePartitions v3 for one topic: (error code, error message)."""
    body = (carray([cstr(name) + struct.pack(">i", count) + carray(None) + b"\0"])
            + struct.pack(">i?", 15000, False) + b"\0")
    r = wire.flex_call(sock, CREATE_PARTITIONS, 3, body, 2)
    r.take(">i")

    def result(x):
        out = (x.string(), x.take(">h"), x.string())
        x.skip_tags()
        return out

    ((got, err, msg),) = r.array(result)
    assert got == name
    return err, msg


def describe_topic_configs(sock, name):
    """DescribeConfigs v4 of every key of one topic: {key: (value, source, type)}."""
    body = (carray([struct.pack(">b", TOPIC_RESOURCE) + cstr(name) + carray(None) + b"\0"])
            + struct.pack(">??", False, False) + b"\0")
    r = wire.flex_call(sock, DESCRIBE_CONFIGS, 4, body, 3)
    r.take(">i")

    def entry(y):
        key, value, _ro, source, _sensitive = (y.string(), y.string(), y.take(">?"),
                                               y.take(">b"), y.take(">?"))
        y.array(lambda z: (z.string(), z.string(), z.take(">b"), z.skip_tags()))  # synonyms
        ctype, _doc = y.take(">b"), y.string()
        y.skip_tags()
        return key, (value, source, ctype)

    def result(x):
        err, msg, _rtype, _rname = x.take(">h"), x.string(), x.take(">b"), x.string()
        configs = dict(x.array(entry))
        x.skip_tags()
        return err, msg, configs

    ((err, msg, configs),) = r.array(result)
    assert err == 0, (err, msg)
    return configs


def test_created_topic_answered_as_kafka(broker, topic_name):
    """What Connect's TopicAdmin sends for its config topic: one partition,
    compacted."""
    name = topic_name()
    with wire.connect(broker.host, broker.port) as s:
        res = create_topics(s, name, configs={"cleanup.policy": "compact"})
        assert (res["name"], res["error"], res["message"]) == (name, 0, None)
        assert res["id"] != ZERO_ID and (res["partitions"], res["replication"]) == (1, 1)
        assert set(res["configs"]) == KAFKA_TOPIC_KEYS
        assert res["configs"]["cleanup.policy"] == {"value": "compact",
                                                    "source": DYNAMIC_TOPIC_CONFIG}
        assert res["configs"]["message.timestamp.after.max.ms"] == {"value": "3600000",
                                                                    "source": DEFAULT_CONFIG}

        # validate_only: the same answer with an id of its own, nothing created
        res = create_topics(s, topic_name(), validate_only=True)
        assert (res["error"], res["message"]) == (0, None) and res["id"] != ZERO_ID
        assert res["configs"]["cleanup.policy"] == {"value": "delete", "source": DEFAULT_CONFIG}
        assert set(res["configs"]) == KAFKA_TOPIC_KEYS

        res = create_topics(s, name)
        assert (res["error"], res["message"]) == (
            TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)


def test_keys_kafka_4_removed_are_unknown(broker, topic_name):
    with wire.connect(broker.host, broker.port) as s:
        for key in REMOVED_IN_KAFKA_4:
            res = create_topics(s, topic_name(), configs={key: "1"})
            assert res == {"name": res["name"], "id": ZERO_ID, "error": INVALID_CONFIG,
                           "message": "Unknown topic config name: " + key, "partitions": -1,
                           "replication": -1, "configs": {}}


def test_describe_configs_keys_and_types_as_kafka(broker, topic_name):
    name = topic_name()
    with wire.connect(broker.host, broker.port) as s:
        assert create_topics(s, name)["error"] == 0
        configs = describe_topic_configs(s, name)
    assert set(configs) == KAFKA_TOPIC_KEYS
    lists = {k for k, (_v, _s, ctype) in configs.items() if ctype == TYPE_LIST}
    assert lists == {"cleanup.policy", "follower.replication.throttled.replicas",
                     "leader.replication.throttled.replicas"}
    assert configs["message.timestamp.after.max.ms"] == ("3600000", DEFAULT_CONFIG, 5)


def test_create_partitions_errors_as_kafka(broker, topic_name):
    name = topic_name()
    with wire.connect(broker.host, broker.port) as s:
        assert create_topics(s, name, 2)["error"] == 0
        assert create_partitions(s, name, 1) == (
            INVALID_PARTITIONS,
            "The topic %s currently has 2 partition(s); 1 would not be an increase." % name)
        assert create_partitions(s, name, 2) == (INVALID_PARTITIONS,
                                                 "Topic already has 2 partition(s).")
        assert create_partitions(s, name, 3) == (0, None)


def test_timestamp_more_than_an_hour_ahead_refused(broker, topic_name):
    """Kafka 4's message.timestamp.after.max.ms default: one hour."""
    require_module("confluent_kafka")
    name = create_topic(broker.bootstrap, topic_name(), 1)
    with wire.connect(broker.host, broker.port) as s:
        now = int(time.time() * 1000)
        ahead = wire_data.build_batch([(b"k", b"soon", ())], now + HOUR_MS // 2)
        assert wire_data.produce_v3(s, 4, name, 0, ahead) == (0, 0)
        too_far = wire_data.build_batch([(b"k", b"later", ())], now + 2 * HOUR_MS)
        err, _ = wire_data.produce_v3(s, 5, name, 0, too_far)
        assert err == 32  # INVALID_TIMESTAMP
