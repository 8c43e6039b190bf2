"""CreateTopics and CreatePartitions at the wire, field by field as Apache
Kafka 4.1.1 answers them.

Kafka Connect creates its internal topics with CreateTopics v7; comparing
its traffic with both brokers showed that a created topic's error message
was "" instead of null. A validate-only create gets a fresh topic id, and
CreatePartitions words its refusals as Kafka 4.1's controller does.
Everything also runs with --target=kafka.
"""

import struct

import wire
from wire import compact_array as carray
from wire import compact_string as cstr

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
INVALID_PARTITIONS, TOPIC_ALREADY_EXISTS = 37, 36
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
ZERO_ID = bytes(16)


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


def test_created_topic_answered_as_kafka(broker, topic_name):
    """What Connect's TopicAdmin sends for its config topic: one partition,
    compacted."""
    name = topic_name()
    with wire.connect(broker.host, broker.port) as s:
        res = create_topics(s, name, configs={"cleanup.policy": "compact"})
        assert (res["name"], res["error"], res["message"]) == (name, 0, None)
        assert res["id"] != ZERO_ID and (res["partitions"], res["replication"]) == (1, 1)
        assert res["configs"]["cleanup.policy"] == {"value": "compact",
                                                    "source": DYNAMIC_TOPIC_CONFIG}

        # validate_only: the same answer with an id of its own, nothing created
        res = create_topics(s, topic_name(), validate_only=True)
        assert (res["error"], res["message"]) == (0, None) and res["id"] != ZERO_ID
        assert res["configs"]["cleanup.policy"] == {"value": "delete", "source": DEFAULT_CONFIG}

        res = create_topics(s, name)
        assert (res["error"], res["message"]) == (
            TOPIC_ALREADY_EXISTS, "Topic '%s' already exists." % name)


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
