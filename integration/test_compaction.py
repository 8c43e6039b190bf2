"""Log compaction: a topic with cleanup.policy=compact keeps the latest value
per key, and drops tombstoned keys once delete.retention.ms has passed.

Segments roll by time (segment.ms; Kafka 4 refuses a segment.bytes under
1 MiB), so each wave of updates lands in its own segment; the broker's
cleaner runs every log.cleaner.backoff.ms (200 ms here, a broker property
for both targets). Whatever the cleaner leaves, a consumer reading from the
beginning must see offsets that only increase, each record at the offset it
was produced at, and for every key nothing but its latest record (the
active segment, never cleaned, holds only the marker records produced to
roll the one before it). With transactions, what read_committed sees of the
compacted log is each key's latest committed value: records of aborted
transactions, and of a transaction still open, never supersede it.
"""

import time

from conftest import require_module
from procs import wait_until
from roundtrip import create_topic, read_all

BROKER_PROPS = {"log.cleaner.backoff.ms": "200"}

SEGMENT_MS = 300
DELETE_RETENTION_MS = 12000
LIVE = [b"k0", b"k2", b"k4"]
DOOMED = [b"k1", b"k3"]  # tombstoned in wave 4, never written again


def produce(bootstrap, topic, pairs):
    """Sends (key, value) pairs to partition 0 in order; returns their offsets."""
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                     "enable.idempotence": False})
    offsets, errors = [None] * len(pairs), []

    def cb(i):
        def done(err, msg):
            if err is not None:
                errors.append(err)
            else:
                offsets[i] = msg.offset()
        return done

    for i, (k, v) in enumerate(pairs):
        p.produce(topic, key=k, value=v, partition=0, on_delivery=cb(i))
    assert p.flush(30) == 0 and not errors, errors
    return offsets


class History:
    """Everything produced: (offset, key, value) in offset order."""

    def __init__(self, bootstrap, topic):
        self.bootstrap, self.topic, self.recs = bootstrap, topic, []

    def send(self, pairs):
        offs = produce(self.bootstrap, self.topic, pairs)
        self.recs += [(o, k, v) for o, (k, v) in zip(offs, pairs)]
        time.sleep(SEGMENT_MS * 1.5 / 1000)  # the next send rolls a new segment

    def latest(self):
        out = {}
        for o, k, v in self.recs:
            out[k] = (o, v)
        return out


def cleaned_state(h, want_tombstones):
    """None when the log reads as fully cleaned, else what differs."""
    got = read_all(h.bootstrap, h.topic, [0])
    offs = [g.offset for g in got]
    assert offs == sorted(set(offs)), "offsets must increase: %s" % offs
    produced = {o: (k, v) for o, k, v in h.recs}
    for g in got:  # every record sits at the offset it was produced at
        assert produced.get(g.offset) == (g.key, g.value), (g.offset, g.key, g.value)
    want = {k: ov for k, ov in h.latest().items() if want_tombstones or ov[1] is not None}
    have = {}
    for g in got:
        have.setdefault(g.key, []).append((g.offset, g.value))
    diff = {k: have.get(k) for k in set(want) | set(have) if have.get(k) != [want.get(k)]}
    return diff or None


def settle(h, want_tombstones, timeout):
    """Waits until the log reads as cleaned; returns None, or the last diff."""
    deadline = time.monotonic() + timeout
    while True:
        diff = cleaned_state(h, want_tombstones)
        if diff is None or time.monotonic() >= deadline:
            return diff
        time.sleep(0.5)


def test_compaction_latest_value_per_key(broker, topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), 1, {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
        "min.compaction.lag.ms": "0",
    })
    h = History(broker.bootstrap, topic)
    for wave in range(7):
        keys = LIVE + (DOOMED if wave < 4 else [])
        pairs = [(k, b"%s-w%d-%d" % (k, wave, j)) for j in range(8) for k in keys]
        if wave == 4:
            pairs += [(k, None) for k in DOOMED]
        h.send(pairs)
    tombstones_at = time.monotonic()
    h.send([(b"roll-0", b"r")])  # rolls the last wave's segment
    assert len(h.recs) > 150

    # Phase 1: every key down to its latest record; the tombstones still there.
    diff = settle(h, True, DELETE_RETENTION_MS / 1000 * 0.6)
    assert diff is None, "not compacted to the latest record per key: %s" % diff
    assert time.monotonic() < tombstones_at + DELETE_RETENTION_MS / 1000, "test too slow"

    # Phase 2: past delete.retention.ms, a later cleaning (of new dirty data)
    # drops the tombstones; keep adding some until it happens.
    time.sleep(max(0.0, tombstones_at + DELETE_RETENTION_MS / 1000 + 0.5 - time.monotonic()))
    deadline = time.monotonic() + 60
    n = 0
    while True:
        n += 1
        h.send([(k, b"%s-late-%d" % (k, n)) for k in LIVE])
        h.send([(b"roll-%d" % n, b"r")])
        diff = settle(h, False, 4)
        if diff is None or time.monotonic() > deadline:
            break
    assert diff is None, "tombstones not removed after delete.retention.ms: %s" % diff
    keys = [g.key for g in read_all(broker.bootstrap, topic, [0])]
    assert not set(DOOMED) & set(keys), keys
    assert all(keys.count(k) == 1 for k in LIVE), keys


def sleep_past_segment():
    time.sleep(SEGMENT_MS * 1.5 / 1000)  # the next append rolls a new segment


def values(bootstrap, topic, isolation):
    """{key: [values in offset order]} of the whole partition, but for the
    records of key r that roll segments."""
    out = {}
    for g in read_all(bootstrap, topic, [0], isolation=isolation):
        if g.key != b"r":
            out.setdefault(g.key, []).append(g.value)
    return out


def test_compaction_with_transactions(broker, topic_name):
    """Kafka cleans no further than the last stable offset and drops the
    records of aborted transactions: neither they nor the records of a
    transaction still open may take the place of a key's committed value."""
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, topic_name(), 1, {
        "cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})

    def txn_producer(name):
        p = ck.Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": "it-compact-%s-%s" % (name, topic)})
        p.init_transactions(30)
        return p

    def filler(value):  # a plain record of key f in a segment of its own, sealed
        produce(broker.bootstrap, topic, [(b"f", value)])
        sleep_past_segment()
        produce(broker.bootstrap, topic, [(b"r", b"r")])
        sleep_past_segment()

    def settle_to(want, what):
        """Until the cleaner leaves exactly want, which read_committed sees too."""
        wait_until(lambda: values(broker.bootstrap, topic, "read_uncommitted") == want, 30,
                   interval=0.5, what=what)
        assert values(broker.bootstrap, topic, "read_committed") == want

    p = txn_producer("a")
    p.begin_transaction()
    p.produce(topic, key=b"a", value=b"a1", partition=0)
    p.produce(topic, key=b"b", value=b"b1", partition=0)
    p.commit_transaction(30)
    sleep_past_segment()
    p.begin_transaction()
    p.produce(topic, key=b"a", value=b"a2", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    sleep_past_segment()
    filler(b"f1")
    filler(b"f2")

    settle_to({b"a": [b"a1"], b"b": [b"b1"], b"f": [b"f2"]}, "f1 and the aborted a2 cleaned away")

    # b2 in a transaction left open while sealed segments follow it: the
    # cleaner must stop at its offset (it would otherwise drop b1 for it)
    q = txn_producer("open")
    q.begin_transaction()
    q.produce(topic, key=b"b", value=b"b2", partition=0)
    q.flush(30)
    sleep_past_segment()
    filler(b"f3")
    filler(b"f4")
    time.sleep(2)  # ten cleaner rounds
    assert values(broker.bootstrap, topic, "read_uncommitted") == {
        b"a": [b"a1"], b"b": [b"b1", b"b2"], b"f": [b"f2", b"f3", b"f4"]}
    q.abort_transaction(30)  # its marker seals the segment of f4

    settle_to({b"a": [b"a1"], b"b": [b"b1"], b"f": [b"f4"]},
              "f2, f3 and the aborted b2 cleaned away")
