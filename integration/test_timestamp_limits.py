"""How far from the broker's clock a CreateTime record timestamp may be:
message.timestamp.after.max.ms (Kafka 4's default: one hour ahead) and
message.timestamp.before.max.ms (default: no limit), with their broker-wide
keys log.message.timestamp.{after,before}.max.ms. Kafka 4 dropped
message.timestamp.difference.max.ms and refuses it as an unknown topic config.

The broker here sets log.message.timestamp.before.max.ms to one day; the
after limit keeps its default.
"""

import time

from conftest import require_module
from roundtrip import admin as make_admin
from roundtrip import create_topic

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
LONG_MAX = str(2 ** 63 - 1)
BROKER_PROPS = {"log.message.timestamp.before.max.ms": str(DAY_MS)}


def describe(a, kind, name):
    r = require_module("confluent_kafka.admin").ConfigResource(kind, name)
    return a.describe_configs([r])[r].result(timeout=30)


def produce_at(ck, bootstrap, topic, timestamps):
    """One record per timestamp, each alone in its batch; returns their errors (None: ok)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                     "retries": 0, "enable.idempotence": False})
    errors = {}

    def report(ts):
        def done(err, _msg):
            errors[ts] = err.code() if err is not None else None
        return done

    for ts in timestamps:
        p.produce(topic, value=b"v", partition=0, timestamp=ts, on_delivery=report(ts))
        assert p.flush(30) == 0
    return [errors[ts] for ts in timestamps]


def test_limits_described(broker):
    a = make_admin(broker.bootstrap)
    topic = create_topic(broker.bootstrap, "ts-limits-describe", 1)
    t = describe(a, "topic", topic)
    assert t["message.timestamp.after.max.ms"].value == str(HOUR_MS)
    assert t["message.timestamp.after.max.ms"].is_default
    assert t["message.timestamp.before.max.ms"].value == str(DAY_MS)
    assert not t["message.timestamp.before.max.ms"].is_default
    assert "message.timestamp.difference.max.ms" not in t
    b = describe(a, "broker", "1")
    assert b["log.message.timestamp.after.max.ms"].value == str(HOUR_MS)
    assert b["log.message.timestamp.before.max.ms"].value == str(DAY_MS)


def test_difference_max_ms_is_unknown(broker):
    ck = require_module("confluent_kafka")
    a = make_admin(broker.bootstrap)
    fut = a.create_topics([ck.admin.NewTopic("ts-limits-difference", 1, 1,
                                             config={"message.timestamp.difference.max.ms":
                                                     "1000"})],
                          request_timeout=15)["ts-limits-difference"]
    try:
        fut.result(timeout=30)
        raise AssertionError("message.timestamp.difference.max.ms was accepted")
    except ck.KafkaException as e:
        err = e.args[0]
        assert err.code() == ck.KafkaError.INVALID_CONFIG
        assert err.str() == "Unknown topic config name: message.timestamp.difference.max.ms"


def test_records_outside_the_limits_are_refused(broker):
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, "ts-limits-produce", 1)
    now = int(time.time() * 1000)
    stamps = [now + HOUR_MS // 2, now + 2 * HOUR_MS, now - DAY_MS // 2, now - 2 * DAY_MS]
    assert produce_at(ck, broker.bootstrap, topic, stamps) == [
        None, ck.KafkaError.INVALID_TIMESTAMP, None, ck.KafkaError.INVALID_TIMESTAMP]


def test_topic_limit_overrides_the_broker(broker):
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, "ts-limits-topic", 1,
                         {"message.timestamp.after.max.ms": str(3 * HOUR_MS),
                          "message.timestamp.before.max.ms": LONG_MAX})
    now = int(time.time() * 1000)
    assert produce_at(ck, broker.bootstrap, topic,
                      [now + 2 * HOUR_MS, now - 2 * DAY_MS, now + 4 * HOUR_MS]) == [
        None, None, ck.KafkaError.INVALID_TIMESTAMP]
