"""Consuming from a timestamp: ListOffsets by timestamp finds the first record
whose timestamp is at or after the one asked for, also inside a batch.

Records are produced with explicit timestamps (CreateTime), several records
per batch, rising by a fixed step: partition 0 holds 40 records at T0 + 1000*i,
partition 1 ten records at T0 + 500 + 2000*j.
"""

import time

import pytest

import procs
import wire_data
from conftest import require_module
from roundtrip import create_topic, read_all

P0 = 40
P1 = 10


def stamps(t0):
    return {0: [t0 + 1000 * i for i in range(P0)], 1: [t0 + 500 + 2000 * j for j in range(P1)]}


def first_at_or_after(ts_list, target):
    """(offset, timestamp) of the first record with timestamp >= target, or None."""
    for off, ts in enumerate(ts_list):
        if ts >= target:
            return off, ts
    return None


@pytest.fixture(scope="module")
def data(broker):
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, "it-timestamps", 2)
    t0 = (int(time.time() * 1000) // 1000 - 1800) * 1000  # half an hour ago, whole second
    ts = stamps(t0)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "acks": "all"})
    errors = []

    def cb(err, _msg):
        if err is not None:
            errors.append(err)

    for part, lst in ts.items():
        for i, t in enumerate(lst):
            p.produce(topic, key=b"k%d" % i, value=b"p%d-%d" % (part, i), partition=part,
                      timestamp=t, on_delivery=cb)
            if i % 8 == 7:
                p.flush(30)  # batches of 8 records
    assert p.flush(30) == 0 and not errors, errors
    got = read_all(broker.bootstrap, topic, [0, 1])
    assert {(g.partition, g.offset): g.timestamp for g in got} == {
        (part, off): t for part, lst in ts.items() for off, t in enumerate(lst)}
    # Lookups must find records inside batches, not only batch starts.
    batches = wire_data.fetch_all_batches(broker.host, broker.port, topic, 0, P0)
    assert max(b.count for b in batches) > 1, [b.count for b in batches]
    return topic, t0, ts


def targets(t0):
    return [t0 - 5000, t0, t0 + 1, t0 + 12000, t0 + 12500, t0 + 19999, t0 + 39000, t0 + 39001,
            t0 + 10 ** 9]


def kcat_from(kcat, broker, topic, spec, *extra):
    res = procs.run([kcat, "-b", broker.bootstrap, "-m", "15", "-C", "-t", topic, "-o", spec,
                     "-e", "-q", "-f", "%p %o %T %s\\n"] + list(extra), timeout=60)
    assert res.returncode == 0, procs.describe(res)
    return [tuple(int(x) if n < 3 else x for n, x in enumerate(line.split(" ")))
            for line in res.stdout.splitlines()]


@pytest.mark.parametrize("offset", [12000, 12500])
def test_kcat_start_at_timestamp(kcat, broker, data, offset):
    topic, t0, ts = data
    target = t0 + offset
    got = kcat_from(kcat, broker, topic, "s@%d" % target)
    for part in (0, 1):
        first, _ = first_at_or_after(ts[part], target)
        want = [(part, o, ts[part][o], "p%d-%d" % (part, o)) for o in range(first, len(ts[part]))]
        assert [g for g in got if g[0] == part] == want


def test_kcat_one_partition_from_timestamp(kcat, broker, data):
    topic, t0, ts = data
    got = kcat_from(kcat, broker, topic, "s@%d" % (t0 + 30001), "-p", "0")
    assert [g[1] for g in got] == list(range(31, P0))


def test_kafka_python_offsets_for_times(broker, data):
    require_module("kafka")
    from kafka import KafkaConsumer, TopicPartition

    topic, t0, ts = data
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, request_timeout_ms=30000)
    try:
        for part in (0, 1):
            tp = TopicPartition(topic, part)
            for target in targets(t0):
                res = c.offsets_for_times({tp: target})[tp]
                want = first_at_or_after(ts[part], target)
                got = None if res is None else (res.offset, res.timestamp)
                assert got == want, "p%d at %d (T0%+d): got %s, want %s" % (
                    part, target, target - t0, got, want)
    finally:
        c.close()


def test_confluent_offsets_for_times(broker, data):
    ck = require_module("confluent_kafka")
    topic, t0, ts = data
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "runnel-it-ts",
                     "enable.auto.commit": False})
    try:
        for target in targets(t0):
            res = c.offsets_for_times([ck.TopicPartition(topic, p, target) for p in (0, 1)],
                                      timeout=30)
            for r in res:
                assert r.error is None, r
                want = first_at_or_after(ts[r.partition], target)
                # librdkafka reports "no such record" as the end offset (-1).
                want_off = want[0] if want else -1
                assert r.offset == want_off, "p%d at T0%+d: got %d, want %d" % (
                    r.partition, target - t0, r.offset, want_off)
    finally:
        c.close()


def test_java_offsets_for_times(java_runner, broker, data):
    topic, t0, ts = data
    for part in (0, 1):
        res = java_runner("RecordsTool", "times", broker.bootstrap, topic, part,
                          *targets(t0), timeout=60)
        assert res.returncode == 0, procs.describe(res)
        lines = [ln.split() for ln in res.stdout.splitlines()]
        assert ["begin", "0"] in lines and ["end", str(len(ts[part]))] in lines, lines
        for f in (f for f in lines if f[0] == "oft"):
            target, off, stamp = int(f[1]), int(f[2]), int(f[3])
            want = first_at_or_after(ts[part], target) or (-1, -1)
            assert (off, stamp) == want, "p%d at T0%+d: got %s, want %s" % (
                part, target - t0, (off, stamp), want)


def segment_files(broker, topic):
    """The .log files of partition 0 in the broker's data directory (Runnel
    and Kafka lay it out alike)."""
    return sorted(p.name for p in (broker.datadir / ("%s-0" % topic)).glob("*.log"))


def test_segment_ms_counts_record_time(broker, topic_name):
    """Kafka measures segment.ms in record time: from the timestamp of a
    segment's first batch to the newest one appended, not by the wall clock
    against record timestamps. A backfill of ten-day-old records, one
    request at a time, stays in one segment until its record time spans
    more than segment.ms."""
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, topic_name(), 1,
                         {"segment.ms": "3600000", "retention.ms": "-1"})
    old = (int(time.time()) - 10 * 86400) * 1000
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, ts in enumerate([old + 1000 * i for i in range(20)] + [old + 3600000]):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
        assert p.flush(30) == 0
    assert len(segment_files(broker, topic)) == 1
    p.produce(topic, value=b"later", partition=0, timestamp=old + 3600001)
    assert p.flush(30) == 0
    assert segment_files(broker, topic) == ["%020d.log" % 0, "%020d.log" % 21]
