"""ListOffsets (earliest, latest, max timestamp) and DeleteRecords through
confluent-kafka's AdminClient; the log start offset that DeleteRecords sets
bounds Fetch and survives a restart.

Partition 0 holds ten records in one batch whose largest timestamp is at
offset 6; partition 1 four records; partition 2 none.
"""

import time

import pytest

import wire
import wire_data
from conftest import require_module
from roundtrip import admin, create_topic, end_offsets, read_all

MAX_AT = 6


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


@pytest.fixture(scope="module")
def data(ck, broker):
    topic = create_topic(broker.bootstrap, "it-list-offsets", 3)
    t0 = (int(time.time()) - 3600) * 1000
    ts = [t0 + 1000 * i for i in range(10)]
    ts[MAX_AT] = t0 + 100_000
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "acks": "all"})
    for i, t in enumerate(ts):
        p.produce(topic, value=b"p0-%d" % i, partition=0, timestamp=t)
    assert p.flush(30) == 0
    for i in range(4):
        p.produce(topic, value=b"p1-%d" % i, partition=1)
    assert p.flush(30) == 0
    batches = wire_data.fetch_all_batches(broker.host, broker.port, topic, 0, 10)
    assert [b.count for b in batches] == [10], "partition 0 should be one batch: %s" % batches
    return topic, ts


def list_offsets(ck, broker, topic, spec, partitions=(0, 1, 2)):
    """{partition: (offset, timestamp)} for an OffsetSpec."""
    a = admin(broker.bootstrap)
    req = {ck.TopicPartition(topic, p): spec for p in partitions}
    res = a.list_offsets(req, request_timeout=15)
    return {tp.partition: (f.result(timeout=30).offset, f.result(timeout=30).timestamp)
            for tp, f in res.items()}


def delete_records(ck, broker, topic, partition, before):
    a = admin(broker.bootstrap)
    res = a.delete_records([ck.TopicPartition(topic, partition, before)], request_timeout=15)
    (fut,) = res.values()
    return fut.result(timeout=30).low_watermark


def fetch_error(broker, topic, partition, offset):
    with wire.connect(broker.host, broker.port) as s:
        return wire_data.fetch_v4(s, 1, topic, partition, offset, max_wait_ms=100).error


def test_earliest_and_latest(ck, broker, data):
    from confluent_kafka.admin import OffsetSpec

    topic, _ = data
    earliest = list_offsets(ck, broker, topic, OffsetSpec.earliest())
    latest = list_offsets(ck, broker, topic, OffsetSpec.latest())
    assert {p: o for p, (o, _) in earliest.items()} == {0: 0, 1: 0, 2: 0}
    assert {p: o for p, (o, _) in latest.items()} == {0: 10, 1: 4, 2: 0}


def test_max_timestamp(ck, broker, data):
    from confluent_kafka.admin import OffsetSpec

    topic, ts = data
    res = list_offsets(ck, broker, topic, OffsetSpec.max_timestamp(), partitions=(0,))
    assert res[0] == (MAX_AT, ts[MAX_AT])


def test_delete_records_moves_log_start(ck, broker, data):
    from confluent_kafka.admin import OffsetSpec

    topic, _ = data
    assert delete_records(ck, broker, topic, 0, 4) == 4
    earliest = list_offsets(ck, broker, topic, OffsetSpec.earliest())
    latest = list_offsets(ck, broker, topic, OffsetSpec.latest())
    assert earliest[0][0] == 4 and latest[0][0] == 10
    assert earliest[1][0] == 0 and latest[1][0] == 4
    got = read_all(broker.bootstrap, topic, [0])
    assert [(g.offset, g.value) for g in got] == [(i, b"p0-%d" % i) for i in range(4, 10)]
    # Below the log start and past the end: OFFSET_OUT_OF_RANGE; at the start: data.
    assert fetch_error(broker, topic, 0, 2) == wire_data.OFFSET_OUT_OF_RANGE
    assert fetch_error(broker, topic, 0, 11) == wire_data.OFFSET_OUT_OF_RANGE
    assert fetch_error(broker, topic, 0, 4) == wire_data.NONE


def test_delete_all_records_then_produce(ck, broker, data):
    """DeleteRecords to the high watermark (-1) empties a partition; new records
    continue the offsets."""
    from confluent_kafka.admin import OffsetSpec

    topic, _ = data
    assert delete_records(ck, broker, topic, 1, ck.OFFSET_END) == 4
    earliest = list_offsets(ck, broker, topic, OffsetSpec.earliest(), partitions=(1,))
    assert earliest[1][0] == 4
    assert read_all(broker.bootstrap, topic, [1]) == []
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    p.produce(topic, value=b"p1-4", partition=1)
    assert p.flush(30) == 0
    assert [(g.offset, g.value) for g in read_all(broker.bootstrap, topic, [1])] == [
        (4, b"p1-4")]


def test_delete_records_past_end_rejected(ck, broker, data):
    topic, _ = data
    with pytest.raises(ck.KafkaException) as e:
        delete_records(ck, broker, topic, 2, 5)
    assert e.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE, e.value


def test_log_start_survives_restart(ck, broker, data):
    topic, _ = data
    broker.restart()
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, request_timeout_ms=30000)
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1, 2)]
        begin = {tp.partition: o for tp, o in c.beginning_offsets(tps).items()}
    finally:
        c.close()
    assert begin == {0: 4, 1: 4, 2: 0}
    assert end_offsets(broker.bootstrap, topic, (0, 1, 2)) == {0: 10, 1: 5, 2: 0}
    assert [g.offset for g in read_all(broker.bootstrap, topic, [0])] == list(range(4, 10))
