"""Per-record errors in Produce responses (KIP-467): when records of a batch
fail the broker's per-record checks, the whole batch is refused and the
response lists every refused record by its index in the batch, with Kafka's
text for each, so a client can fail those records with the error and the
others with "a different record in the batch was invalid".

The checks exercised: a keyless record on a compacted topic (INVALID_RECORD)
and a CreateTime timestamp outside message.timestamp.before.max.ms
(INVALID_TIMESTAMP, which wins when both occur). A refused partition answers
base offset -1 and the partition's log start offset.
"""

import struct
import time

import wire
import wire_data
from conftest import require_module
from roundtrip import create_topic

PRODUCE = 0
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
HOUR_MS = 3600 * 1000


def produce_v8(host, port, topic, batch):
    """One batch to partition 0 with Produce v8 (the first version carrying
    record errors). Returns (error, base_offset, log_start_offset,
    [(batch_index, message)], error_message)."""
    body = struct.pack(">hhi", -1, -1, 10000) + struct.pack(">i", 1)
    body += struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">iii", 1, 0, len(batch)) + batch
    with wire.connect(host, port) as s:
        s.sendall(wire.frame(wire.request_header(PRODUCE, 8, 11) + body))
        r = wire.Reader(wire.recv_frame(s))
    assert r.take(">i") == 11

    def partition(r):
        index, err, base, _append_time, lso = r.take(">ihqqq")
        record_errors = r.array(lambda r: (r.take(">i"), r.string()))
        return index, err, base, lso, record_errors, r.string()

    (name, parts), = r.array(lambda r: (r.string(), r.array(partition)))
    assert name == topic
    (index, err, base, lso, record_errors, message), = parts
    assert index == 0
    return err, base, lso, record_errors, message


def batch_of(records, now):
    """records: [(key, timestamp)] with value b"v"."""
    return wire_data.build_batch([(k, b"v", ()) for k, _ in records], now,
                                 timestamps=[ts for _, ts in records])


def test_every_keyless_record_is_listed(broker):
    topic = create_topic(broker.bootstrap, "re-compacted", 1, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keys = [b"k0", None, b"k2", None, None, b"k5"]
    err, base, lso, record_errors, message = produce_v8(
        broker.host, broker.port, topic, batch_of([(k, now) for k in keys], now))
    text = "Compacted topic cannot accept message without key in topic partition %s-0" % topic
    assert (err, base, lso) == (INVALID_RECORD, -1, 0)
    assert record_errors == [(1, text), (3, text), (4, text)]
    assert message == (
        "One or more records have been rejected due to 3 record errors in total, and only "
        "showing the first three errors at most: [%s]"
        % ", ".join("RecordError(batchIndex=%d, message='%s')" % (i, text) for i in (1, 3, 4)))
    # Nothing of the refused batch was written: a good batch lands at offset 0.
    err, base, _, record_errors, _ = produce_v8(
        broker.host, broker.port, topic, batch_of([(b"k", now)], now))
    assert (err, base, record_errors) == (0, 0, [])


def test_timestamp_and_key_faults_together(broker):
    topic = create_topic(broker.bootstrap, "re-both", 1,
                         {"cleanup.policy": "compact",
                          "message.timestamp.before.max.ms": str(HOUR_MS),
                          "message.timestamp.after.max.ms": str(2 * HOUR_MS)})
    now = int(time.time() * 1000)
    # Record 1 is keyless and too old: only its key is reported, as Kafka checks
    # a record's timestamp once its key passed. Record 2 is too old.
    records = [(b"k0", now), (None, 1000), (b"k2", 1000), (b"k3", now)]
    err, base, lso, record_errors, message = produce_v8(
        broker.host, broker.port, topic, batch_of(records, now))
    assert (err, base, lso) == (INVALID_TIMESTAMP, -1, 0)
    assert [i for i, _ in record_errors] == [1, 2]
    assert record_errors[0][1] == (
        "Compacted topic cannot accept message without key in topic partition %s-0" % topic)
    ts_text = record_errors[1][1]
    prefix = "Timestamp 1000 of message with offset 2 is out of range. The timestamp should be within ["
    assert ts_text.startswith(prefix) and ts_text.endswith("]"), ts_text
    lo, hi = (int(x) for x in ts_text[len(prefix):-1].split(", "))
    assert hi - lo == 3 * HOUR_MS
    assert abs(lo + HOUR_MS - now) < 60000, (lo, now)
    assert message == "One or more records have been rejected due to invalid timestamp"


def test_librdkafka_fails_only_the_keyless_records(broker):
    """confluent-kafka (librdkafka) reads the record errors: the keyless records
    fail with INVALID_RECORD, the rest of their batch with _INVALID_DIFFERENT_RECORD."""
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, "re-librdkafka", 1, {"cleanup.policy": "compact"})
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "acks": "all",
                     "enable.idempotence": False, "retries": 0})
    results = {}

    def report(i):
        def done(err, _msg):
            results[i] = err.code() if err is not None else None
        return done

    for i in range(10):
        p.produce(topic, key=None if i % 4 == 1 else b"k%d" % i, value=b"v", partition=0,
                  on_delivery=report(i))
    assert p.flush(30) == 0
    assert results == {i: ck.KafkaError.INVALID_RECORD if i % 4 == 1
                       else ck.KafkaError._INVALID_DIFFERENT_RECORD for i in range(10)}
