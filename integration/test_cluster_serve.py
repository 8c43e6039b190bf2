"""Cluster mode, the metadata acted on: one Apache Kafka 4.4.0 KRaft
controller and three Runnel brokers (real binaries). A topic created on the
controller (CreateTopics sent to it, until forwarding lands)
reaches every broker through __cluster_metadata; each broker makes the
replicas it hosts, with the controller's topic id; a RemoveTopicRecord
removes them; a record of an unknown type stops a broker with one line.

Ports: 19500-19599.
"""

import struct
import time
from pathlib import Path

import pytest

import kraft
import wire
from test_cluster_join import ClusterBroker, wait_for

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 19501
BROKER_PORTS = {1: 19511, 2: 19512, 3: 19513}
TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def need_jars():
    if not kraft.jars_present():
        from conftest import missing
        missing("Kafka 4.4.0 jars in %s" % kraft.JARS_44)


def note(name, seconds):
    TIMES[name] = seconds
    print("\n[cluster-serve] %s: %.2f s" % (name, seconds))


class NodeBroker(ClusterBroker):
    """A cluster broker with its own node id."""

    def __init__(self, datadir, quorum, node):
        super().__init__(datadir, quorum, port=BROKER_PORTS[node],
                         extra={"node.id": str(node), "broker.rack": "rack-%d" % node})
        self.node = node


@pytest.fixture
def quorum1(tmp_path):
    q = kraft.KraftQuorum(tmp_path / "kraft", [CONTROLLER_PORT]).start()
    yield q
    q.stop()


def start_brokers(quorum, tmp_path, nodes=(1, 2, 3)):
    brokers = {}
    for n in nodes:
        b = NodeBroker(tmp_path / ("b%d" % n), quorum, n)
        b.format(quorum.cluster_id)
        b.start()
        brokers[n] = b
    return brokers


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def controller_topics(quorum, op, name, partitions=1, rf=1):
    """Creates (CreateTopics v4) or deletes (DeleteTopics v3) a topic straight
    on the controller, which serves both on its listener; Kafka 4.4's
    kafka-topics has no --bootstrap-controller and its Admin refuses these
    calls with bootstrap.controllers. Until brokers forward them."""
    c = quorum.controllers[0]
    sock = wire.connect(c.host, c.port)
    try:
        if op == "create":
            body = (struct.pack(">i", 1) + _str(name) + struct.pack(">ihii", partitions, rf, 0, 0)
                    + struct.pack(">ib", 30000, 0))
            sock.sendall(wire.frame(wire.request_header(19, 4, 7) + body))
        else:
            body = struct.pack(">i", 1) + _str(name) + struct.pack(">i", 30000)
            sock.sendall(wire.frame(wire.request_header(20, 3, 7) + body))
        resp = wire.recv_frame(sock)
    finally:
        sock.close()
    # correlation id, throttle, one topic: name, error code
    (n,) = struct.unpack_from(">i", resp, 8)
    (nlen,) = struct.unpack_from(">h", resp, 12)
    (err,) = struct.unpack_from(">h", resp, 14 + nlen)
    assert n == 1 and err == 0, (op, name, err)


def partition_dirs(b, topic):
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in Path(b.datadir).glob(topic + "-*")
                  if p.is_dir())


def registry_line(b, topic):
    reg = Path(b.datadir) / "runnel-topics.properties"
    if not reg.exists():
        return None
    for line in reg.read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["topic", topic]:
            return parts
    return None


def stop_all(brokers):
    for b in brokers.values():
        b.stop()


def test_topic_from_controller_reaches_hosting_brokers(quorum1, tmp_path):
    brokers = start_brokers(quorum1, tmp_path)
    try:
        for b in brokers.values():
            wait_for("broker %d caught up" % b.node,
                     lambda b=b: "caught up with the metadata log" in b.log_text(), 30)
        t0 = time.monotonic()
        controller_topics(quorum1, "create", "orders", 6, 1)
        wait_for("every broker holds the topic",
                 lambda: all(len(registry_line(b, "orders") or []) == 4
                             for b in brokers.values()),
                 30)
        note("topic created on the controller -> on every broker's disk", time.monotonic() - t0)
        ids = {tuple(registry_line(b, "orders")[2:4]) for b in brokers.values()}
        assert len(ids) == 1, ids  # one id (the controller's) and 6 partitions everywhere
        assert list(ids)[0][1] == "6"
        for b in brokers.values():
            assert b.alive()
            assert "stopping: cannot apply" not in b.log_text()

        controller_topics(quorum1, "delete", "orders")
        wait_for("every broker removed it",
                 lambda: all(registry_line(b, "orders") is None and not partition_dirs(b, "orders")
                             for b in brokers.values()), 30)
    finally:
        stop_all(brokers)
