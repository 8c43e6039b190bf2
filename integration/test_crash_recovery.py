"""Storage durability (issue 3): kill -9 the broker again and again during an
acks=-1 produce stream and restart it; every acknowledged record is there,
at the offset it was acknowledged with, in order.

The producer is confluent-kafka (librdkafka) with acks=all, idempotence off
and one request in flight, so a batch whose acknowledgement the kill cut off
is sent again and may legitimately be stored twice; everything else must
match exactly.
"""

import time

from conftest import require_module
from roundtrip import create_topic, read_all

PARTITIONS = 2
KILLS = 6
ROUND = 400
OUTSTANDING = 300


def test_kill9_during_acks_all_stream(broker, topic_name):
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    p = ck.Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1, "linger.ms": 2,
        "message.timeout.ms": 120000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
    })
    acked, errors = {}, {}

    def report(err, msg):
        n = int(msg.value()[4:])
        if err is not None:
            errors[n] = str(err)
        else:
            acked[n] = (msg.partition(), msg.offset())

    seq = 0
    deadline = time.monotonic() + 240
    for k in range(KILLS + 1):
        while len(acked) < (k + 1) * ROUND:
            assert time.monotonic() < deadline, "stream stalled at %d acks" % len(acked)
            assert not errors, sorted(errors.items())[:5]
            if len(p) < OUTSTANDING:
                p.produce(topic, value=b"seq-%08d" % seq, partition=seq % PARTITIONS,
                          on_delivery=report)
                seq += 1
            p.poll(0.0005 if len(p) < OUTSTANDING else 0.01)
        if k < KILLS:
            broker.kill9()  # with a request in flight: the stream never pauses
            broker.start()
    assert p.flush(150) == 0, "records still unsent after 150 s"
    assert not errors, "deliveries failed: %s" % sorted(errors.items())[:10]

    got = read_all(broker.bootstrap, topic, range(PARTITIONS))
    at = {(g.partition, g.offset): g.value for g in got}
    for n, (part, off) in sorted(acked.items()):
        assert at.get((part, off)) == b"seq-%08d" % n, (
            "record %d acknowledged at p%d@%d, the log holds %r there"
            % (n, part, off, at.get((part, off))))
    for part in range(PARTITIONS):
        seqs = [int(g.value[4:]) for g in sorted(got, key=lambda g: g.offset)
                if g.partition == part]
        assert all(n < seq and n % PARTITIONS == part for n in seqs), "foreign records"
        seen = set()
        first = [n for n in seqs if not (n in seen or seen.add(n))]
        assert first == sorted(first), (
            "partition %d: records out of order (first appearances %s...)" % (part, first[:20]))
        want = sorted(n for n in acked if n % PARTITIONS == part)
        assert set(want) <= set(seqs)
