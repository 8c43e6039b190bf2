"""A config change takes effect on the next produce: a topic's own
max.message.bytes and message.timestamp.type, and the dynamic broker
broker config a topic key derives from (log.message.timestamp.type), set and
removed with IncrementalAlterConfigs. Both targets: Kafka applies them the
same way."""

import time
import uuid

import pytest

from conftest import require_module

ck = require_module("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def new_topic(broker):
    name = "cfg-effect-" + uuid.uuid4().hex[:8]
    a = admin(broker)  # kept alive until the future is done
    a.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


def alter(broker, restype, name, key, value):
    """Sets key (value None: deletes it) with IncrementalAlterConfigs."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    res = ConfigResource(restype, name, incremental_configs=[
        ConfigEntry(key, value or "", incremental_operation=op)])
    a = admin(broker)
    a.incremental_alter_configs([res])[res].result(timeout=30)


def produce(broker, topic, size, timestamp=0):
    """The delivery error code of one record of size bytes (0 when stored)."""
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10 << 20,
                     "retries": 0, "linger.ms": 0})
    got = []
    p.produce(topic, b"x" * size, timestamp=timestamp,
              on_delivery=lambda err, msg: got.append(err.code() if err else 0))
    p.flush(30)
    assert len(got) == 1
    return got[0]


def until(check, timeout=15.0):
    """Polls check() until it returns a true value (a broker may apply a
    dynamic change a moment after answering); returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.3)


def last_timestamp(broker, topic):
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        last, deadline = None, time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None and last is not None:
                break
            if m is not None and m.error() is None:
                last = m.timestamp()
        return last
    finally:
        c.close()


def test_topic_max_message_bytes_applies_at_once(broker):
    topic = new_topic(broker)
    assert produce(broker, topic, 2000) == 0
    alter(broker, "TOPIC", topic, "max.message.bytes", "1000")
    assert until(lambda: produce(broker, topic, 2000) == ck.KafkaError.MSG_SIZE_TOO_LARGE)
    assert produce(broker, topic, 500) == 0
    alter(broker, "TOPIC", topic, "max.message.bytes", None)
    assert until(lambda: produce(broker, topic, 2000) == 0)


def test_topic_timestamp_type_applies_at_once(broker):
    topic = new_topic(broker)
    old = int(time.time() * 1000) - 3600_000
    assert produce(broker, topic, 10, timestamp=old) == 0
    assert last_timestamp(broker, topic) == (ck.TIMESTAMP_CREATE_TIME, old)
    alter(broker, "TOPIC", topic, "message.timestamp.type", "LogAppendTime")
    before = int(time.time() * 1000)
    assert produce(broker, topic, 10, timestamp=old) == 0
    kind, ts = last_timestamp(broker, topic)
    assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and ts >= before - 1000


def test_dynamic_broker_config_reaches_the_topic(broker):
    """log.message.timestamp.type set on the broker (dynamically) changes a
    topic that has no setting of its own; removing it restores CreateTime."""
    topic = new_topic(broker)
    old = int(time.time() * 1000) - 7200_000
    node = str(next(iter(admin(broker).list_topics(timeout=30).brokers)))
    alter(broker, "BROKER", node, "log.message.timestamp.type", "LogAppendTime")
    try:
        def appended():
            assert produce(broker, topic, 10, timestamp=old) == 0
            kind, _ = last_timestamp(broker, topic)
            return kind == ck.TIMESTAMP_LOG_APPEND_TIME
        assert until(appended, timeout=20)
    finally:
        alter(broker, "BROKER", node, "log.message.timestamp.type", None)

    def created():
        assert produce(broker, topic, 10, timestamp=old) == 0
        return last_timestamp(broker, topic) == (ck.TIMESTAMP_CREATE_TIME, old)
    assert until(created, timeout=20)
