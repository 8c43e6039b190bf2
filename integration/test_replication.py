"""Replication (issue 15): one Apache Kafka 4.4.0 KRaft controller and three
Runnel brokers (real binaries), an RF=3 topic created through a broker.
Followers fetch from the leader with Kafka's Fetch (ReplicaState), the leader
moves the high watermark over the ISR, acks=all is answered once the ISR
has the batch, every replica's segment holds the same batches byte for
byte, and a kill -9 of the leader during an idempotent acks=all stream
loses nothing that was acknowledged.

Ports: 19720-19799.
"""

import os
import signal
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import kraft
from test_cluster_join import ClusterBroker, need_jars, wait_for  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 19721
BROKER_PORTS = {1: 19731, 2: 19732, 3: 19733}
SESSION_MS = 3000
TIMES = {}


def note(name, seconds):
    TIMES[name] = seconds
    print("\n[replication] %s: %.2f s" % (name, seconds))


class NodeBroker(ClusterBroker):
    def __init__(self, datadir, quorum, node, ports=None):
        super().__init__(datadir, quorum, port=(ports or BROKER_PORTS)[node],
                         extra={"node.id": str(node),
                                "broker.session.timeout.ms": str(SESSION_MS),
                                "broker.heartbeat.interval.ms": "500"})
        self.node = node


def start_quorum(tmp_path, port, session_ms=SESSION_MS, extra=None):
    """One Kafka controller that fences a silent broker after session_ms;
    extra: more controller properties."""
    q = kraft.KraftQuorum(tmp_path / "kraft", [port])
    for c in q.controllers:
        c.properties = (lambda orig: lambda: dict(orig(), **{
            "broker.session.timeout.ms": str(session_ms),
            "broker.heartbeat.interval.ms": "500"}, **(extra or {})))(c.properties)
    q.start()
    return q


def start_brokers(quorum, tmp_path, ports, make=None, into=None):
    """A Runnel broker per {node: port}, each serving once unfenced:
    make(datadir, quorum, node) (NodeBroker on ports by default), each put
    into the dict into as it starts, so a caller's cleanup sees every one
    started even when a later one fails."""
    brokers = {} if into is None else into
    for n in sorted(ports):
        datadir = tmp_path / ("b%d" % n)
        b = make(datadir, quorum, n) if make else NodeBroker(datadir, quorum, n, ports)
        b.format(quorum.cluster_id)
        b.start()
        brokers[n] = b
    for b in brokers.values():
        wait_for("broker %d unfenced" % b.node,
                 lambda b=b: "unfenced: serving in the cluster" in b.log_text(), 30)
    return brokers


def stop_brokers(brokers, patience=10.0):
    """SIGTERM to every live broker at once, each beginning its controlled
    shutdown. One the controller still holds after patience seconds (it
    waits for every active broker's metadata offset, and a killed broker
    counts as active until its session times out) gets a second SIGTERM,
    which stops it at once. Each must exit cleanly."""
    live = [b for b in brokers.values() if b.alive()]
    for b in live:
        b.expect_running = False
        os.kill(b.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + patience
    for b in live:
        try:
            b.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.kill(b.proc.pid, signal.SIGTERM)
    for b in live:
        b.stop()  # gone already, or stopping: asserts the clean exit


@pytest.fixture
def quorum1(tmp_path, need_jars):
    q = start_quorum(tmp_path, CONTROLLER_PORT)
    yield q
    q.stop()


@pytest.fixture
def cluster3(quorum1, tmp_path):
    brokers = start_brokers(quorum1, tmp_path, BROKER_PORTS)
    yield brokers
    stop_brokers(brokers)


def bootstrap(brokers):
    return ",".join(b.bootstrap for b in brokers.values() if b.alive())


def create_topic(brokers, name, partitions=1, rf=3, configs=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    fut = admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[name]
    fut.result(30)


def describe(brokers, name):
    """{partition: (leader, isr)} as the cluster's Metadata says."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    md = admin.list_topics(name, timeout=10)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return {}
    return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}


def wait_isr(brokers, name, size, partitions=1):
    wait_for("ISR of %d everywhere" % size,
             lambda: len(describe(brokers, name)) == partitions and all(
                 l >= 0 and len(isr) == size for l, isr in describe(brokers, name).values()),
             30, interval=0.2)


def batches(path):
    """The record batches of a partition's segment files, as bytes."""
    out = []
    for seg in sorted(Path(path).glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            out.append(data[pos:pos + 12 + length])
            pos += 12 + length
    return out


def producer(brokers, **extra):
    import confluent_kafka
    conf = {"bootstrap.servers": bootstrap(brokers), "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100}
    conf.update(extra)
    return confluent_kafka.Producer(conf)


def consume_all(brokers, topic, expect, timeout=60, partitions=(0,), errors=None):
    """The values of partitions (in each partition's order, partitions read
    together); errors, a list: consumer errors are appended to it."""
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": "check",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
              for p in partitions])
    got = []

    def take(m):
        if m is not None and m.error() is None:
            got.append(m.value())
        elif m is not None and errors is not None:
            errors.append(m.error())
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        take(c.poll(0.5))
    # and nothing more after a pause
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        take(c.poll(0.3))
    c.close()
    return got


def test_acks_all_replicated_byte_identical(cluster3):
    pytest.importorskip("confluent_kafka")
    create_topic(cluster3, "rep")
    wait_isr(cluster3, "rep", 3)
    p = producer(cluster3)
    acked = []
    t0 = time.monotonic()
    for i in range(500):
        p.produce("rep", value=b"v-%d" % i, partition=0,
                  on_delivery=lambda err, m: acked.append(err is None and m.offset()))
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    note("500 idempotent acks=all records answered", time.monotonic() - t0)
    assert acked == list(range(500)), acked[:10]
    leader = describe(cluster3, "rep")[0][0]
    # every replica ends with the same batches, byte for byte
    wait_for("followers hold every batch",
             lambda: len({b"".join(batches(Path(b.datadir) / "rep-0"))
                          for b in cluster3.values()}) == 1, 30, interval=0.2)
    ref = batches(Path(cluster3[leader].datadir) / "rep-0")
    assert len(ref) > 0
    for b in cluster3.values():
        assert batches(Path(b.datadir) / "rep-0") == ref, b.node
    got = consume_all(cluster3, "rep", 500)
    assert got == [b"v-%d" % i for i in range(500)]


def test_kill9_leader_loses_nothing_acknowledged(cluster3):
    pytest.importorskip("confluent_kafka")
    create_topic(cluster3, "fo", configs={"min.insync.replicas": "2"})
    wait_isr(cluster3, "fo", 3)
    p = producer(cluster3)
    acked = []
    failed = []
    ack_times = []
    lock = threading.Lock()

    def on_delivery(err, m):
        with lock:
            if err is None:
                acked.append(m.value())
                ack_times.append(time.monotonic())
            else:
                failed.append((m.value(), str(err)))

    leader = describe(cluster3, "fo")[0][0]
    n = 0
    t_kill = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        p.produce("fo", value=b"r-%06d" % n, partition=0, on_delivery=on_delivery)
        n += 1
        p.poll(0.002)
        if t_kill is None and len(acked) >= 300:
            cluster3[leader].kill9()
            t_kill = time.monotonic()
        if t_kill is not None:
            with lock:
                after = [t for t in ack_times if t > t_kill + 0.001]
            if len(after) >= 200:
                break
    assert t_kill is not None
    assert p.flush(60) == 0
    with lock:
        first_after = min(t for t in ack_times if t > t_kill)
    note("kill -9 of the leader -> first acks=all produce answered by the new leader",
         first_after - t_kill)
    new_leader = describe(cluster3, "fo")[0][0]
    assert new_leader not in (-1, leader)
    assert not failed, failed[:5]
    got = consume_all(cluster3, "fo", len(acked))
    # every acknowledged record once, in the order it was produced
    assert len(got) == len(set(got)), "duplicates"
    assert got == sorted(got)
    assert set(acked) <= set(got)


def test_not_enough_replicas_when_the_isr_is_below_min(cluster3):
    """A follower killed: the controller takes the fenced broker out of the
    ISR; with min.insync.replicas=3 an acks=all produce is then refused
    with NOT_ENOUGH_REPLICAS before the append, acks=1 still works."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create_topic(cluster3, "mi", configs={"min.insync.replicas": "3"})
    wait_isr(cluster3, "mi", 3)
    leader = describe(cluster3, "mi")[0][0]
    victim = [n for n in cluster3 if n != leader][0]
    cluster3[victim].kill9()
    wait_for("ISR of 2", lambda: len(describe(cluster3, "mi").get(0, (0, []))[1]) == 2, 30,
             interval=0.2)
    errs = []
    p = producer(cluster3, **{"enable.idempotence": False, "retries": 0,
                              "message.timeout.ms": 10000})
    p.produce("mi", value=b"x", partition=0, on_delivery=lambda err, m: errs.append(err))
    p.flush(20)
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS, errs[0]
    ok = []
    p1 = producer(cluster3, **{"acks": "1", "enable.idempotence": False})
    p1.produce("mi", value=b"y", partition=0, on_delivery=lambda err, m: ok.append(err))
    assert p1.flush(20) == 0 and ok == [None]


def test_restarted_follower_catches_up_byte_identical(cluster3):
    """A follower killed during acks=1 writes comes back and copies what it
    missed: its batches end byte-identical to the leader's."""
    pytest.importorskip("confluent_kafka")
    create_topic(cluster3, "cu")
    wait_isr(cluster3, "cu", 3)
    leader = describe(cluster3, "cu")[0][0]
    victim = [n for n in cluster3 if n != leader][0]
    p = producer(cluster3, **{"acks": "1", "enable.idempotence": False})
    for i in range(200):
        p.produce("cu", value=b"a-%d" % i, partition=0)
    assert p.flush(30) == 0
    cluster3[victim].kill9()
    for i in range(300):
        p.produce("cu", value=b"b-%d" % i, partition=0)
    assert p.flush(30) == 0
    t0 = time.monotonic()
    cluster3[victim].start()
    want = batches(Path(cluster3[leader].datadir) / "cu-0")
    wait_for("the follower caught up",
             lambda: batches(Path(cluster3[victim].datadir) / "cu-0") == want, 60, interval=0.2)
    note("follower restarted -> caught up byte-identical", time.monotonic() - t0)
