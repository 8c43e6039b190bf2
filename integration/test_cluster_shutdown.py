"""Controlled shutdown (issues 14 and 15): one Apache Kafka 4.4.0 KRaft
controller and three Runnel brokers, a 6-partition RF=3 topic with
min.insync.replicas=2. An idempotent acks=all producer (confluent-kafka)
writes to every partition while a broker that leads some of them gets
SIGTERM: the broker keeps serving and heartbeats WantShutDown until the
controller has moved its leaderships and answers ShouldShutDown, then exits
cleanly, well inside the session timeout (no fencing by timeout). The
application sees no error (nor does a consumer reading throughout), every
record is read back once, in order per partition. For comparison, a kill -9 of a leader is measured too: its
partitions wait for the session timeout.

Ports: ephemeral.
"""

import os
import re
import signal
import threading
import time

import pytest

import kraft
from procs import free_port
from test_cluster_join import controller_log, need_jars, wait_for  # noqa: F401 (fixture)
from test_replication import (bootstrap, consume_all, create_topic, describe, note, producer,
                              start_brokers, start_quorum, stop_brokers, wait_isr)

pytestmark = pytest.mark.usefixtures("runnel_only")

SESSION_MS = 6000
PARTS = 6


@pytest.fixture
def cluster(tmp_path, need_jars):
    q = start_quorum(tmp_path, free_port(), session_ms=SESSION_MS)
    brokers = {}
    try:
        start_brokers(q, tmp_path, {n: free_port() for n in (1, 2, 3)}, into=brokers)
        yield q, brokers
    finally:
        stop_brokers(brokers)
        q.stop()


def led_by(brokers, topic, node):
    return sorted(p for p, (leader, _) in describe(brokers, topic).items() if leader == node)


class Writer:
    """An idempotent acks=all producer writing r-<n> round robin over the
    partitions until stopped; what it was told is kept."""

    def __init__(self, brokers, topic):
        self.p = producer(brokers, **{"error_cb": self.on_error})
        self.topic = topic
        self.lock = threading.Lock()
        self.acked, self.failed, self.fatal, self.ack_times = {}, [], [], []
        self.sent = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_error(self, err):
        if err.fatal():
            self.fatal.append(str(err))

    def on_delivery(self, err, m):
        with self.lock:
            if err is None:
                self.acked.setdefault(m.partition(), []).append(m.value())
                self.ack_times.append(time.monotonic())
            else:
                self.failed.append((m.value(), str(err)))

    def run(self):
        while not self.halt.is_set():
            self.p.produce(self.topic, value=b"r-%06d" % self.sent, partition=self.sent % PARTS,
                           on_delivery=self.on_delivery)
            self.sent += 1
            self.p.poll(0.002)

    def count(self):
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    def stop(self):
        self.halt.set()
        self.thread.join(30)
        assert self.p.flush(60) == 0
        self.p = None  # the producer goes (it holds our callbacks, we held it)

    def longest_gap_after(self, t0):
        with self.lock:
            ts = sorted(t for t in self.ack_times if t > t0 - 1)
        return max((b - a for a, b in zip(ts, ts[1:])), default=0.0)


class Reader:
    """A consumer reading every partition from the start while the broker
    stops; what it read and any error it was handed are kept."""

    def __init__(self, brokers, topic):
        import confluent_kafka
        self.c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(brokers),
                                           "group.id": "live", "enable.auto.commit": False,
                                           "error_cb": self.on_error})
        self.c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                       for p in range(PARTS)])
        self.got, self.errors = [], []
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_error(self, err):
        if err.fatal():
            self.errors.append(str(err))

    def run(self):
        while not self.halt.is_set():
            m = self.c.poll(0.2)
            if m is not None and m.error() is None:
                self.got.append(m.value())
            elif m is not None:
                self.errors.append(str(m.error()))

    def stop_when(self, n, timeout=60):
        wait_for("the live reader has %d records" % n, lambda: len(self.got) >= n, timeout,
                 interval=0.1)
        self.halt.set()
        self.thread.join(30)
        self.c.close()


def shutdowns_granted(quorum, node):
    return len(re.findall(r"The request from broker %d to shut down has been granted" % node,
                          controller_log(quorum)))


def check_everything_read(brokers, topic, w):
    assert not w.failed, w.failed[:5]
    assert not w.fatal, w.fatal
    errors = []
    got = consume_all(brokers, topic, w.count(), partitions=range(PARTS), errors=errors)
    assert len(got) == len(set(got)), "duplicates"
    assert not errors, errors[:5]
    for p, values in w.acked.items():
        mine = [v for v in got if int(v[2:]) % PARTS == p]
        assert mine == sorted(mine), "partition %d out of order" % p
        assert mine == values, "partition %d: acknowledged %d, read %d" % (p, len(values),
                                                                          len(mine))
    assert len(got) == w.sent


def test_sigterm_moves_leaderships_before_exit(cluster):
    pytest.importorskip("confluent_kafka")
    quorum, brokers = cluster
    create_topic(brokers, "cs", partitions=PARTS, configs={"min.insync.replicas": "2"})
    wait_isr(brokers, "cs", 3, partitions=PARTS)
    victim = max((n for n in brokers), key=lambda n: len(led_by(brokers, "cs", n)))
    led = led_by(brokers, "cs", victim)
    assert led, describe(brokers, "cs")
    granted_before = shutdowns_granted(quorum, victim)
    w = Writer(brokers, "cs")
    r = Reader(brokers, "cs")
    w.thread.start()
    r.thread.start()
    wait_for("300 acknowledged", lambda: w.count() >= 300, 60, interval=0.05)
    b = brokers[victim]
    t0 = time.monotonic()
    os.kill(b.proc.pid, signal.SIGTERM)
    code = b.proc.wait(60)
    stop_s = time.monotonic() - t0
    b.expect_running = False
    acked_at_exit = w.count()
    wait_for("300 more acknowledged", lambda: w.count() >= acked_at_exit + 300, 60,
             interval=0.05)
    w.stop()
    survivors = {n: x for n, x in brokers.items() if n != victim}
    note("SIGTERM of a broker leading %d of %d partitions -> process exited" % (len(led), PARTS),
         stop_s)
    note("... longest pause between two acks=all answers", w.longest_gap_after(t0))
    assert code == 0, b.log_tail()
    log = b.log_text()
    assert "beginning the controlled shutdown" in log, b.log_tail()
    # the controller approved it once the broker led nothing any more
    assert re.search(r'the controller approved the controlled shutdown" waited_ms=\d+ '
                     r'leaderships=0 ', log), b.log_tail()
    assert stop_s < SESSION_MS / 1000.0, "as slow as a fencing by session timeout"
    md = describe(survivors, "cs")
    assert len(md) == PARTS and all(l not in (-1, victim) for l, _ in md.values()), md
    assert all(victim not in isr for _, isr in md.values()), md
    check_everything_read(survivors, "cs", w)
    # a consumer reading throughout was handed no error and read it all
    r.stop_when(w.sent)
    assert not r.errors, r.errors[:5]
    assert sorted(r.got) == sorted(set(r.got)) and len(r.got) == w.sent
    # meanwhile it followed the metadata: a follower of what it had led
    tail = log[log.index("beginning the controlled shutdown"):]
    assert tail.count('msg="following a leader" topic=cs') >= len(led), b.log_tail()
    # the controller let it go (and fenced it then), not a timed-out session
    assert shutdowns_granted(quorum, victim) == granted_before + 1

    # for comparison: the same broker back, then a kill -9 of a leader
    b.start()
    wait_for("broker %d unfenced again" % victim,
             lambda: b.log_text().count("unfenced: serving in the cluster") >= 2, 30)
    wait_isr(brokers, "cs", 3, partitions=PARTS)
    other = max((n for n in brokers), key=lambda n: len(led_by(brokers, "cs", n)))
    parts = led_by(brokers, "cs", other)
    rest = {n: x for n, x in brokers.items() if n != other}
    t0 = time.monotonic()
    brokers[other].kill9()
    wait_for("new leaders after kill -9",
             lambda: all(describe(rest, "cs").get(p, (-1, []))[0] not in (-1, other)
                         for p in parts), 60, interval=0.1)
    note("kill -9 of a broker leading %d partitions -> all of them led elsewhere" % len(parts),
         time.monotonic() - t0)


def test_sigterm_of_a_fenced_broker_stops_at_once(tmp_path, need_jars):
    """No controller to ask: a broker that never got unfenced stops on
    SIGTERM at once, as Kafka's skips the controlled shutdown outside
    RUNNING."""
    from test_replication import NodeBroker
    q = kraft.KraftQuorum(tmp_path / "kraft", [free_port()])  # never started
    b = NodeBroker(tmp_path / "b1", q, 1, {1: free_port()})
    try:
        b.format(q.cluster_id)
        b.start()
        wait_for("registration attempts", lambda: "retrying" in b.log_text(), 30)
        t0 = time.monotonic()
        b.stop()
        assert time.monotonic() - t0 < 5
        assert "skipping the controlled shutdown" in b.log_text(), b.log_tail()
    finally:
        if b.alive():
            b.kill9()
