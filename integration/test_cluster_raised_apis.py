"""AlterPartitionReassignments v1 (KIP-860) and UnregisterBroker through a
Runnel broker in cluster mode: both are forwarded to Apache Kafka 4.4.0's
controller as the client wrote them, as a Kafka 4.4.0 broker forwards them.

One controller and two Runnel brokers (nodes 1 and 2, ephemeral ports); a
topic whose partition lives on node 1 alone. Asked through node 1:
- to move it to nodes 1 and 2 with AllowReplicationFactorChange false: the
  controller refuses it with INVALID_REPLICATION_FACTOR and its message, the
  flag echoed; with the flag true, the reassignment is accepted;
- node 2 stopped, `kafka-cluster.sh unregister --id 2` (ClusterTool): the
  controller removes its registration; an id no broker has gets the
  controller's BROKER_ID_NOT_REGISTERED message.
"""

import re
import struct

import pytest

import kraft
import wire
from procs import free_port
from test_cluster_forward import create_topic_wire
from test_cluster_join import ClusterBroker, count, need_jars, wait_for  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

ALTER_REASSIGNMENTS = 45
INVALID_REPLICATION_FACTOR = 38
TOPIC = "reassign-rf"


def unfenced(q, node):
    return count(q, r"request from broker %d to unfence has been granted" % node)


def reassign_v1(bootstrap, replicas, allow):
    """(echoed flag, top error, [(partition, error, message)])."""
    host, port = bootstrap.split(":")
    cs, ca = wire.compact_string, wire.compact_array
    part = struct.pack(">i", 0) + ca([struct.pack(">i", r) for r in replicas]) + b"\0"
    body = struct.pack(">i?", 30000, allow) + ca([cs(TOPIC) + ca([part]) + b"\0"]) + b"\0"
    with wire.connect(host, int(port), timeout=60) as s:
        r = wire.flex_call(s, ALTER_REASSIGNMENTS, 1, body, 1)
    r.take(">i")
    echoed, err = r.take(">?h")
    r.string()

    def presp(x):
        out = x.take(">ih") + (x.string(),)
        x.skip_tags()
        return out

    def tresp(x):
        assert x.string() == TOPIC
        parts = x.array(presp)
        x.skip_tags()
        return parts

    return echoed, err, r.array(tresp)[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(quorum, [Runnel node 1, Runnel node 2]), both unfenced."""
    base = tmp_path_factory.mktemp("cluster-raised")
    q = kraft.KraftQuorum(base / "kraft", [free_port()]).start()
    brokers = []
    try:
        for node in (1, 2):
            b = ClusterBroker(base / ("runnel-%d" % node), q, port=free_port(),
                              extra={"node.id": str(node)})
            b.format(q.cluster_id)
            before = unfenced(q, node)
            b.start()
            brokers.append(b)
            wait_for("unfence %d" % node, lambda n=node, c=before: unfenced(q, n) > c, 90)
        yield q, brokers
    finally:
        for b in brokers:
            b.kill9()
        q.kill()


def test_replication_factor_change_refused_unless_allowed(cluster):
    _, brokers = cluster
    bootstrap = "127.0.0.1:%d" % brokers[0].port
    assert create_topic_wire(bootstrap, TOPIC, {0: [1]})[0] == 0
    echoed, err, parts = reassign_v1(bootstrap, [1, 2], False)
    assert (echoed, err) == (False, 0)
    assert parts == [(0, INVALID_REPLICATION_FACTOR,
                      "The replication factor is changed from 1 to 2")]
    echoed, err, parts = reassign_v1(bootstrap, [1, 2], True)
    assert (echoed, err, parts) == (True, 0, [(0, 0, None)])


def unregister(bootstrap, node):
    res = kraft.run_tool("org.apache.kafka.tools.ClusterTool",
                         ["unregister", "--bootstrap-server", bootstrap, "--id", str(node)])
    return res.returncode, res.stdout + res.stderr


def test_kafka_cluster_unregister(cluster):
    q, brokers = cluster
    bootstrap = "127.0.0.1:%d" % brokers[0].port
    brokers[1].kill9()
    code, out = unregister(bootstrap, 2)
    assert code == 0 and "Broker 2 is no longer registered." in out, out
    wait_for("UnregisterBrokerRecord", lambda: count(
        q, r"Replayed UnregisterBrokerRecord|UnregisterBrokerRecord\(brokerId=2") > 0, 30)
    code, out = unregister(bootstrap, 99)
    assert code != 0 and re.search(r"Broker ID 99 is not currently registered", out), out
