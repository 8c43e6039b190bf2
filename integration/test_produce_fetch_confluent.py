"""confluent-kafka (its bundled librdkafka): keyed records with every codec
produced with Producer and read back with Consumer.assign(), byte for byte.

librdkafka's default partitioner is CRC32-based; the producer here sets
`partitioner=murmur2_random`, the Java client's, so keyed records must land
on murmur2(key) % partitions. librdkafka's Consumer cannot be created without
a group.id; it is given a unique one but only ever uses assign() and never
commits.
"""

import itertools
import time

import pytest

from conftest import require_module
from roundtrip import (CODECS, Ack, Got, assert_stored_codec, check_roundtrip, create_topic,
                       make_records)

PARTITIONS = 3
COUNT = 250
_groups = itertools.count(1)


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def produce(ck, bootstrap, topic, records, **conf):
    """Produce records in order; return {index: Ack}, failing on any delivery error."""
    cfg = {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 20,
           "acks": "all", "message.timeout.ms": 30000}
    cfg.update(conf)
    p = ck.Producer(cfg)
    acks, errors = {}, {}

    def report(i):
        def cb(err, msg):
            if err is not None:
                errors[i] = err
            else:
                acks[i] = Ack(msg.partition(), msg.offset(), msg.timestamp()[1])
        return cb

    for i, r in enumerate(records):
        kw = {"key": r.key, "value": r.value, "on_delivery": report(i)}
        if r.headers:
            kw["headers"] = list(r.headers)
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        p.produce(topic, **kw)
        p.poll(0)
    left = p.flush(60)
    assert left == 0, "%d messages still undelivered after 60 s" % left
    assert not errors, "delivery errors: %s" % sorted(errors.items())[:5]
    return acks


def consume(ck, bootstrap, topic, partitions, count, timeout=60.0, **conf):
    """Read `count` records from offset 0 of every partition with assign(); [Got]."""
    cfg = {"bootstrap.servers": bootstrap, "group.id": "runnel-it-assign-%d" % next(_groups),
           "enable.auto.commit": False, "enable.auto.offset.store": False,
           "auto.offset.reset": "error", "enable.partition.eof": True,
           "fetch.wait.max.ms": 100}
    cfg.update(conf)
    c = ck.Consumer(cfg)
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(got) < count or len(eof) < partitions:
            assert time.monotonic() < deadline, (
                "consumed %d of %d records (EOF on %s) within %.0fs"
                % (len(got), count, sorted(eof), timeout))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError("consumer error: %s" % m.error())
            eof.discard(m.partition())
            got.append(Got(m.partition(), m.offset(), m.key(), m.value(),
                           tuple(m.headers() or ()), m.timestamp()[1]))
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(ck, broker, topic_name, codec):
    topic = create_topic(broker.bootstrap, topic_name(codec), PARTITIONS)
    records = make_records("ck-" + codec, COUNT)
    acks = produce(ck, broker.bootstrap, topic, records, **{"compression.type": codec})
    got = consume(ck, broker.bootstrap, topic, PARTITIONS, len(records))
    check_roundtrip(records, got, PARTITIONS, acks)
    assert_stored_codec(broker, topic, got, codec)


def test_idempotent_producer_roundtrip(ck, broker, topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    records = make_records("ck-idempotent", COUNT)
    acks = produce(ck, broker.bootstrap, topic, records, **{
        "enable.idempotence": True, "compression.type": "lz4", "linger.ms": 5})
    got = consume(ck, broker.bootstrap, topic, PARTITIONS, len(records))
    check_roundtrip(records, got, PARTITIONS, acks)


def test_acks_zero_and_one(ck, broker, topic_name):
    """acks=0 gets no response yet the records are stored; acks=1 as usual."""
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    records = make_records("ck-acks", 60, null_keys=False)
    first = produce(ck, broker.bootstrap, topic, records[:30], acks="1")
    assert sorted(a.offset for a in first.values()) == list(range(30))
    produce(ck, broker.bootstrap, topic, records[30:], acks="0")
    got = consume(ck, broker.bootstrap, topic, 1, len(records))
    check_roundtrip(records, got, 1)
