"""Requests pipelined on one connection are all answered, in order, whatever
the frames' sizes relative to the broker's receive buffer (a regression test:
a partial frame left behind after answering earlier ones once stalled the
connection)."""

import struct
import time

import pytest

import wire
import wire_data


def produce_frame(topic, correlation_id, value_size, acks):
    batch = wire_data.build_batch([(None, b"v" * value_size, ())], int(time.time() * 1000))
    body = struct.pack(">hhi", -1, acks, 10000)
    body += struct.pack(">i", 1) + wire_data._string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch)) + batch
    return wire.frame(wire.request_header(wire_data.PRODUCE, 3, correlation_id) + body)


@pytest.mark.parametrize("count,value_size,acks", [
    (5, 16000, 1), (8, 16000, 1), (3, 60000, 1), (20, 100000, 1), (12, 30000, -1),
])
def test_pipelined_produces_all_answered_in_order(broker, topic_name, count, value_size, acks):
    topic = topic_name()
    with wire.connect(broker.host, broker.port, timeout=15) as s:
        wire.metadata(s, 1, [topic], 1)
        deadline = time.time() + 10
        while time.time() < deadline:  # wait until the new topic takes writes
            err, _ = wire_data.produce_v3(s, 2, topic, 0, wire_data.build_batch(
                [(None, b"warm", ())], int(time.time() * 1000)), acks=1)
            if err == 0:
                break
            time.sleep(0.2)
        s.sendall(b"".join(produce_frame(topic, 100 + i, value_size, acks) for i in range(count)))
        bases = []
        for i in range(count):
            r = wire.Reader(wire.recv_frame(s))
            assert r.take(">i") == 100 + i
            topics = r.array(lambda r: (r.string(), r.array(lambda r: r.take(">ihqq"))))
            (_, ((_, err, base, _),)), = topics
            assert err == 0
            bases.append(base)
    assert bases == list(range(1, count + 1))
