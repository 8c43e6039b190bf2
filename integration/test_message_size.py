"""Topic max.message.bytes: a batch at the limit is accepted, one byte more is
rejected with MESSAGE_TOO_LARGE (10) and nothing of it is stored.

Kafka compares the whole record batch (61-byte header included) with
max.message.bytes. The raw-protocol test builds batches of exact sizes; the
client tests send one record a little under and one well over the limit
(each client puts one record in a batch of its own here) and expect each
client's own form of MESSAGE_TOO_LARGE.
"""

import time

import pytest

import procs
import wire
import wire_data
from conftest import require_module
from roundtrip import Rec, create_topic, end_offsets, parse_tool_output, read_all, write_lines

LIMIT = 2048


def batch_of_size(size, ts):
    """One uncompressed record with a null key whose batch is exactly `size` bytes."""
    n = size - 70  # header 61 + record framing 9 for values of 64..8191 bytes
    b = wire_data.build_batch([(None, b"v" * n, ())], ts)
    assert len(b) == size, (len(b), size)
    return b


@pytest.fixture
def small_topic(broker, topic_name):
    return create_topic(broker.bootstrap, topic_name(), 1, {"max.message.bytes": str(LIMIT)})


def test_batch_at_limit_accepted_one_byte_more_rejected(broker, small_topic):
    ts = int(time.time() * 1000)
    with wire.connect(broker.host, broker.port) as s:
        err, base = wire_data.produce_v3(s, 1, small_topic, 0, batch_of_size(LIMIT, ts))
        assert (err, base) == (wire_data.NONE, 0)
        err, _ = wire_data.produce_v3(s, 2, small_topic, 0, batch_of_size(LIMIT + 1, ts))
        assert err == wire_data.MESSAGE_TOO_LARGE
        err, _ = wire_data.produce_v3(s, 3, small_topic, 0, batch_of_size(LIMIT + 1000, ts),
                                      acks=1)
        assert err == wire_data.MESSAGE_TOO_LARGE
        err, base = wire_data.produce_v3(s, 4, small_topic, 0, batch_of_size(LIMIT - 1, ts))
        assert (err, base) == (wire_data.NONE, 1)
    got = read_all(broker.bootstrap, small_topic, [0])
    assert [(g.offset, len(g.value)) for g in got] == [(0, LIMIT - 70), (1, LIMIT - 71)]


def test_confluent_kafka(broker, small_topic):
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all",
                     "message.timeout.ms": 20000})
    results = {}

    def cb(name):
        return lambda err, msg: results.__setitem__(name, err.code() if err else msg.offset())

    p.produce(small_topic, value=b"u" * (LIMIT - 200), on_delivery=cb("under"))
    p.flush(30)
    p.produce(small_topic, value=b"o" * (LIMIT + 100), on_delivery=cb("over"))
    assert p.flush(30) == 0
    assert results == {"under": 0, "over": ck.KafkaError.MSG_SIZE_TOO_LARGE}, results
    assert end_offsets(broker.bootstrap, small_topic, [0]) == {0: 1}


def test_kafka_python(broker, small_topic):
    require_module("kafka")
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0,
                      request_timeout_ms=20000)
    try:
        md = p.send(small_topic, value=b"u" * (LIMIT - 200)).get(timeout=30)
        assert md.offset == 0
        fut = p.send(small_topic, value=b"o" * (LIMIT + 100))
        with pytest.raises(MessageSizeTooLargeError):
            fut.get(timeout=30)
    finally:
        p.close(timeout=10)
    assert end_offsets(broker.bootstrap, small_topic, [0]) == {0: 1}


def test_java_client(java_runner, broker, small_topic, tmp_path):
    # One send at a time: a batch holding the oversized record and a later one
    # would be split and retried by the Java producer rather than failed.
    path = tmp_path / "records.txt"
    write_lines(path, [Rec(None, b"u" * (LIMIT - 200)), Rec(None, b"o" * (LIMIT + 100)),
                       Rec(None, b"after")])
    res = java_runner("RecordsTool", "produce", broker.bootstrap, small_topic, path,
                      "sync=true", timeout=60)
    assert res.returncode == 0, procs.describe(res)
    acks, errors, _, _ = parse_tool_output(res.stdout)
    assert sorted(acks) == [0, 2] and acks[0].offset == 0 and acks[2].offset == 1, res.stdout
    assert list(errors) == [1] and errors[1][0] == "RecordTooLargeException", errors
    got = read_all(broker.bootstrap, small_topic, [0])
    assert [g.value for g in got] == [b"u" * (LIMIT - 200), b"after"]
