"""kafka-python: KafkaProducer and KafkaConsumer.assign() (no group), keyed
records round trip byte for byte.

Codecs: kafka-python compresses gzip with the standard library, and snappy
(xerial framing), lz4 and zstd with python-snappy, lz4 and zstandard, pinned
in requirements.txt; every codec is covered.
Its default partitioner is the Java client's murmur2. KafkaProducer takes no
null header values and no record with neither key nor value, so its records
have none.
"""

import time

import pytest

from conftest import require_module
from roundtrip import Got, check_roundtrip, create_topic, make_records, produce_kafka_python

PARTITIONS = 3
COUNT = 250
KAFKA_PYTHON_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def kp():
    require_module("kafka")
    import kafka

    return kafka


def consume(kp, bootstrap, topic, partitions, count, timeout=60.0):
    from kafka import TopicPartition

    c = kp.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="none", fetch_max_wait_ms=100,
                         client_id="runnel-it-kafka-python")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, "consumed %d of %d records within %.0fs" % (
                len(got), count, timeout)
            for _tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    got.append(Got(m.partition, m.offset, m.key, m.value,
                                   tuple(m.headers or ()), m.timestamp))
        # Nothing beyond what was produced.
        assert not any(c.poll(timeout_ms=300).values())
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_roundtrip(kp, broker, topic_name, codec):
    topic = create_topic(broker.bootstrap, topic_name(codec), PARTITIONS)
    records = make_records("kp-" + codec, COUNT, null_header_values=False,
                           both_null=False)
    acks = produce_kafka_python(broker.bootstrap, topic, records,
                   compression_type=None if codec == "none" else codec)
    got = consume(kp, broker.bootstrap, topic, PARTITIONS, len(records))
    check_roundtrip(records, got, PARTITIONS, acks)


def test_explicit_timestamps_and_partitions(kp, broker, topic_name):
    """Records sent with a timestamp keep it (CreateTime)."""
    topic = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    base = int(time.time() * 1000) - 600_000
    records = [r._replace(timestamp=base + 997 * i)
               for i, r in enumerate(make_records("kp-ts", 80, null_keys=False,
                                                         null_header_values=False))]
    acks = produce_kafka_python(broker.bootstrap, topic, records)
    got = consume(kp, broker.bootstrap, topic, PARTITIONS, len(records))
    check_roundtrip(records, got, PARTITIONS, acks,
                    timestamps={i: r.timestamp for i, r in enumerate(records)})
