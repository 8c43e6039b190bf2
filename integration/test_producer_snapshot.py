"""Producer-state snapshots (<20-digit offset>.snapshot, Kafka's ProducerSnapshot
format) let a restart skip replaying the log to rebuild idempotent-producer state.

An idempotent confluent-kafka producer writes many batches over several
1 MiB segments, and a second producer sends batches by hand (InitProducerId
v0, Produce v3) so their sequences and offsets are known exactly. After a
clean stop the partition directory holds .snapshot files named by offset
(the newest at the log end) that decode, CRC checked, to the producers'
last batches. After the restart Runnel reports replaying no batch (a clean
stop) or only those of the last segment (kill -9: the snapshot of the last
roll); the producer goes on without OUT_OF_ORDER_SEQUENCE_NUMBER, a retry of
the last batch is deduplicated and, as in Kafka (whose snapshot keeps one
batch per producer, and which reloads one after a recovery too), a retry of
an earlier one is OUT_OF_ORDER. Aborted transactions stay hidden from
read_committed readers across a restart. Run with
--target=kafka the same assertions hold against Kafka's own files, which
the same decoder reads.
"""

import re
import struct
import time
from collections import namedtuple

import pytest

import wire
import wire_data
from conftest import require_module
from procs import wait_until
from roundtrip import create_topic, read_all

SEGMENT = 1 << 20  # Kafka's smallest segment.bytes
RECORDS = 3000
VALUE = 1000  # bytes: RECORDS * VALUE spans a few segments

Entry = namedtuple("Entry", "producer_id epoch last_seq last_offset offset_delta timestamp "
                            "coordinator_epoch txn_first_offset")
NAME = re.compile(r"^(\d{20})\.snapshot$")
LOADED = re.compile(r'msg="producer state loaded" topic=(\S+) partition=(\d+) '
                    r'snapshot_offset=(-?\d+) snapshot_producers=(\d+) batches_scanned=(\d+)')


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


@pytest.fixture(autouse=True)
def live(broker):
    if not broker.alive():
        broker.start()  # an earlier test failed while it was stopped


def decode_snapshot(data):
    """Kafka's ProducerSnapshot v1: version int16, crc32c uint32 of the rest,
    then an int32 count of 46-byte entries."""
    assert len(data) >= 10, len(data)
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert wire_data.crc32c(data[6:]) == crc, "crc"
    (n,) = struct.unpack_from(">i", data, 6)
    assert len(data) == 10 + 46 * n, (len(data), n)
    return [Entry(*struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)) for i in range(n)]


def snapshots(broker, topic):
    """{offset: [Entry]} of the partition's .snapshot files, and the segment bases."""
    d = broker.datadir / ("%s-0" % topic)
    out, bases = {}, set()
    for f in d.iterdir():
        m = NAME.match(f.name)
        if m:
            out[int(m.group(1))] = decode_snapshot(f.read_bytes())
        elif f.suffix == ".log":
            bases.add(int(f.stem))
    return out, bases


def init_producer_id(sock):
    deadline = time.monotonic() + 30
    for corr in range(100, 10_000):
        err, pid, epoch = wire_data.init_producer_id_v0(sock, corr)
        if err not in (14, 15, 16) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert err == 0 and pid >= 0, (err, pid, epoch)
    return pid, epoch


class HandProducer:
    """Idempotent batches of two records each, sent by hand."""

    def __init__(self, broker, topic):
        self.broker, self.topic = broker, topic
        self.ts = int(time.time() * 1000)
        self.corr = 1000
        with wire.connect(broker.host, broker.port) as s:
            self.pid, self.epoch = init_producer_id(s)
        self.sent = {}  # first seq -> base offset

    def batch(self, seq):
        return wire_data.build_batch([(None, b"h-%d" % (seq + i), ()) for i in range(2)], self.ts,
                                     producer_id=self.pid, producer_epoch=self.epoch,
                                     base_sequence=seq)

    def send(self, seq):
        self.corr += 1
        with wire.connect(self.broker.host, self.broker.port) as s:
            return wire_data.produce_v3(s, self.corr, self.topic, 0, self.batch(seq))

    def send_new(self, seq):
        err, base = self.send(seq)
        assert err == 0, err
        self.sent[seq] = base
        return base


def idempotent_producer(ck, broker):
    return ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                        "linger.ms": 2, "batch.num.messages": 10, "compression.type": "none",
                        "message.timeout.ms": 60000})


def produce(p, topic, start, n):
    """Sends c-<i> for i in [start, start + n); returns the delivery errors."""
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(start, start + n):
        value = (b"c-%d-" % i).ljust(VALUE, b"x")
        while True:
            try:
                p.produce(topic, value=value, partition=0, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    return errors


def loaded_lines(broker, mark, topic):
    text = broker.log_path.read_bytes()[mark:].decode(errors="replace")
    return [tuple(int(g) for g in m.groups()[2:]) for m in LOADED.finditer(text)
            if m.group(1) == topic and m.group(2) == "0"]


def write_phase(ck, broker, topic):
    """Confluent producer's RECORDS records then 5 hand batches; -> (p, hand, end)."""
    p = idempotent_producer(ck, broker)
    assert produce(p, topic, 0, RECORDS) == []
    hand = HandProducer(broker, topic)
    for seq in range(0, 10, 2):
        hand.send_new(seq)
    return p, hand, hand.sent[8] + 2


def check_after_restart(ck, broker, topic, p, hand, end):
    """Duplicates, out-of-order and the producer going on, after a restart."""
    assert hand.send(8) == (0, hand.sent[8]), "retry of the last batch is deduplicated"
    assert hand.send(6)[0] == wire_data.OUT_OF_ORDER_SEQUENCE_NUMBER, \
        "after a restart only a producer's last batch is known (as Kafka)"
    assert hand.send(12)[0] == wire_data.OUT_OF_ORDER_SEQUENCE_NUMBER, "a gap"
    assert hand.send_new(10) == end
    assert produce(p, topic, RECORDS, 200) == [], "the producer goes on after the restart"
    got = read_all(broker.bootstrap, topic, [0])
    values = [g.value[:g.value.index(b"-", 2)] if g.value.startswith(b"c-") else g.value
              for g in got]
    want = [b"c-%d" % i for i in range(RECORDS)] + [b"h-%d" % i for i in range(12)] + \
        [b"c-%d" % i for i in range(RECORDS, RECORDS + 200)]
    assert values == want, "every record once, in order"


def wait_fetchable(broker, topic):
    """Kafka serves a partition a moment after its port accepts."""
    def ok():
        with wire.connect(broker.host, broker.port) as s:
            return wire_data.fetch_v4(s, 7, topic, 0, 0, max_wait_ms=0).error == 0
    wait_until(ok, 60, interval=0.2, what="partition fetchable after the restart")


def start_and_check(ck, broker, topic, p, hand, end):
    """Starts the stopped broker, runs check_after_restart; -> Runnel's log
    lines about loading the partition's producer state."""
    mark = broker.log_path.stat().st_size
    broker.start()
    check_after_restart(ck, broker, topic, p, hand, end)
    return loaded_lines(broker, mark, topic)


def test_clean_stop_writes_snapshots_and_restart_replays_nothing(ck, broker, target,
                                                                 topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), 1, {"segment.bytes": str(SEGMENT)})
    p, hand, end = write_phase(ck, broker, topic)
    broker.stop()

    snaps, bases = snapshots(broker, topic)
    assert len(bases) >= 3, "several segments: %s" % sorted(bases)
    assert snaps, "no .snapshot file in the partition directory"
    assert max(snaps) == end, "the clean stop's snapshot is at the log end: %s" % sorted(snaps)
    assert set(snaps) <= bases | {end}, "snapshots sit at segment bases: %s vs %s" % (
        sorted(snaps), sorted(bases))
    last = {e.producer_id: e for e in snaps[end]}
    assert last[hand.pid] == Entry(hand.pid, hand.epoch, 9, end - 1, 1, hand.ts, -1, -1)
    others = [e for pid, e in last.items() if pid != hand.pid]
    assert len(others) == 1 and others[0].last_seq == RECORDS - 1
    assert others[0].last_offset == hand.sent[0] - 1

    lines = start_and_check(ck, broker, topic, p, hand, end)
    if target == "runnel":
        assert lines == [(end, 2, 0)], "loaded the log end's snapshot, replayed no batch"


def test_kill9_replays_only_the_last_segment(ck, broker, target, topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), 1, {"segment.bytes": str(SEGMENT)})
    p, hand, end = write_phase(ck, broker, topic)
    snaps, bases = snapshots(broker, topic)
    assert len(bases) >= 3
    roll = max(bases)
    assert roll in snaps, "a snapshot at the last roll: %s, segments %s" % (sorted(snaps),
                                                                          sorted(bases))
    batches = wire_data.fetch_all_batches(broker.host, broker.port, topic, 0, end)
    tail = sum(1 for b in batches if b.base_offset >= roll)
    assert 0 < tail < len(batches) / 2

    broker.kill9()
    lines = start_and_check(ck, broker, topic, p, hand, end)
    if target == "runnel":
        assert len(lines) == 1, lines
        snap_offset, _producers, scanned = lines[0]
        assert snap_offset == roll
        assert scanned == tail, "replayed %d batches, %d past the snapshot, %d in all" % (
            scanned, tail, len(batches))


def test_aborted_transactions_survive_a_restart(ck, broker, target, topic_name):
    """Aborted transactions below the snapshot stay hidden from read_committed
    readers after a clean restart (Runnel keeps them in <offset>.aborted)."""
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap,
                     "transactional.id": "it-snap-" + topic})
    p.init_transactions(30)
    for n in range(4):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"t%d-%d" % (n, i), partition=0)
        assert p.flush(30) == 0  # written before the abort, not purged
        if n % 2:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    del p
    committed = [b"t%d-%d" % (n, i) for n in (1, 3) for i in range(3)]
    got = read_all(broker.bootstrap, topic, [0], isolation="read_committed")
    assert [g.value for g in got] == committed
    broker.stop()

    snaps, _ = snapshots(broker, topic)
    end = max(snaps)
    (entry,) = snaps[end]
    assert entry.txn_first_offset == -1 and entry.coordinator_epoch >= 0
    if target == "runnel":
        assert (broker.datadir / ("%s-0" % topic) / ("%020d.aborted" % end)).is_file()

    mark = broker.log_path.stat().st_size
    broker.start()
    wait_fetchable(broker, topic)
    got = read_all(broker.bootstrap, topic, [0], isolation="read_committed")
    assert [g.value for g in got] == committed, "aborted records hidden after the restart"
    if target == "runnel":
        assert loaded_lines(broker, mark, topic) == [(end, 1, 0)]
