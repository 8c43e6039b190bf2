"""Fetch long poll (max_wait_ms / min_bytes), timed with raw Fetch v4 requests
on one connection, so no client's own timers blur the measure.

- a fetch waiting at the end of the log answers as soon as a record arrives,
  long before max_wait_ms;
- an idle fetch answers at about max_wait_ms, empty, and never hangs;
- min_bytes not reached: the answer comes at max_wait_ms, with what there is;
- data already there: the answer is immediate;
- a fetch past the end is OFFSET_OUT_OF_RANGE at once.
"""

import threading
import time

import pytest

import wire
import wire_data
from conftest import require_module
from roundtrip import create_topic


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


@pytest.fixture
def topic(broker, topic_name):
    return create_topic(broker.bootstrap, topic_name(), 1)


def produce_one(ck, broker, topic, value):
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0})
    p.produce(topic, value=value, partition=0)
    assert p.flush(15) == 0


def timed_fetch(broker, topic, offset, **kw):
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        t = time.monotonic()
        res = wire_data.fetch_v4(s, 7, topic, 0, offset, **kw)
        return res, time.monotonic() - t


def values(res):
    return [r[3] for b in wire_data.parse_batches(res.records) for r in b.records]


def test_fetch_returns_when_data_arrives(ck, broker, topic):
    produce_one(ck, broker, topic, b"first")
    # Warm up the producer's path so the timed produce below is quick.
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0})
    assert p.list_topics(topic, timeout=10).topics[topic].error is None

    with wire.connect(broker.host, broker.port, timeout=30) as s:
        t_sent = time.monotonic()
        wire_data.fetch_v4_send(s, 11, topic, 0, 1, max_wait_ms=5000, min_bytes=1)
        acked = {}

        def produce_later():
            time.sleep(1.0)
            acked["start"] = time.monotonic()
            p.produce(topic, value=b"second", partition=0)
            p.flush(10)
            acked["done"] = time.monotonic()

        th = threading.Thread(target=produce_later)
        th.start()
        res = wire_data.fetch_v4_recv(s, 11, topic, 0)
        t_resp = time.monotonic()
        th.join(15)
    assert res.error == wire_data.NONE
    assert values(res) == [b"second"], values(res)
    assert res.high_watermark == 2
    # The answer follows the produce, not the 5 s timeout.
    assert t_resp >= acked["start"], "fetch answered before the record was produced"
    assert t_resp - acked["start"] < 1.5, (
        "fetch answered %.2fs after the produce started (max_wait 5 s)"
        % (t_resp - acked["start"]))
    assert t_resp - t_sent < 3.0, "fetch took %.2fs in all" % (t_resp - t_sent)


def test_idle_fetch_waits_max_wait(broker, topic):
    res, took = timed_fetch(broker, topic, 0, max_wait_ms=1500, min_bytes=1)
    assert res.error == wire_data.NONE
    assert res.records == b"" and res.high_watermark == 0
    assert 1.3 <= took <= 4.0, "idle fetch with max_wait_ms=1500 took %.2fs" % took


def test_min_bytes_not_reached_waits_then_returns_data(ck, broker, topic):
    produce_one(ck, broker, topic, b"small")
    res, took = timed_fetch(broker, topic, 0, max_wait_ms=1500, min_bytes=100_000)
    assert res.error == wire_data.NONE
    assert values(res) == [b"small"]
    assert 1.3 <= took <= 4.0, "fetch short of min_bytes took %.2fs" % took


def test_data_present_answers_at_once(ck, broker, topic):
    produce_one(ck, broker, topic, b"here")
    res, took = timed_fetch(broker, topic, 0, max_wait_ms=5000, min_bytes=1)
    assert values(res) == [b"here"]
    assert took < 1.0, "fetch with data available took %.2fs" % took


def test_fetch_past_end_is_out_of_range_at_once(ck, broker, topic):
    produce_one(ck, broker, topic, b"one")
    res, took = timed_fetch(broker, topic, 5, max_wait_ms=5000, min_bytes=1)
    assert res.error == wire_data.OFFSET_OUT_OF_RANGE
    assert took < 1.0, "out-of-range fetch took %.2fs" % took


def test_kafka_python_consumer_sees_record_promptly(broker, topic):
    """A kafka-python consumer (fetch_max_wait_ms=5000) parked at the end gets a
    new record well before its fetch wait ends."""
    require_module("kafka")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, fetch_max_wait_ms=5000, fetch_min_bytes=1,
                      request_timeout_ms=30000)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0)
    try:
        c.assign([tp])
        c.seek(tp, 0)
        assert not any(c.poll(timeout_ms=1000).values())  # now parked in a 5 s fetch
        time.sleep(0.5)
        t = time.monotonic()
        p.send(topic, value=b"wake", partition=0).get(timeout=10)
        got = []
        while not got and time.monotonic() - t < 10:
            for msgs in c.poll(timeout_ms=100).values():
                got += [m.value for m in msgs]
        took = time.monotonic() - t
        assert got == [b"wake"]
        assert took < 2.0, "consumer saw the record %.2fs after it was produced" % took
    finally:
        p.close(timeout=5)
        c.close()
