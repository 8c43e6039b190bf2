"""Unclean leader election (issue 15): one Apache Kafka 4.4.0 KRaft
controller and two Runnel brokers, an RF=2 topic with
min.insync.replicas=1. Follower B stops, leader A takes writes B never
sees (B out of the ISR), A is killed, B comes back: with unclean election
off the partition has no leader (LEADER_NOT_AVAILABLE). Once
`unclean.leader.election.enable=true` is set on the topic (kafka-configs
through a Runnel broker, forwarded to the controller), or
kafka-leader-election --election-type unclean asks for it, the controller
elects B from outside the ISR (LeaderRecoveryState RECOVERING); B accepts,
logs one WARN line naming the partition, and serves. When A comes back it
truncates to B's log (the diverging-epoch path): both logs end
byte-identical, the ISR grows back to both (B's AlterPartition says
RECOVERED, which the controller takes), and what A alone had is gone.

Ports: ephemeral.
"""

import time
from pathlib import Path

import pytest

from kafka_cli import run_tool
from procs import free_port
from test_cluster_join import need_jars, wait_for  # noqa: F401 (fixture)
from test_replication import (batches, bootstrap, consume_all, create_topic, describe, note,
                              producer, start_brokers, start_quorum, stop_brokers, wait_isr)

pytestmark = pytest.mark.usefixtures("runnel_only")

WARN = ('leader by an unclean election (from outside the ISR): records the previous leaders '
        'had past this replica\'s log end may be lost" topic=uc partition=0')


@pytest.fixture
def cluster(tmp_path, need_jars):
    # the controller looks for leaderless partitions an unclean election
    # may now fill every unclean.leader.election.interval.ms (5 min)
    q = start_quorum(tmp_path, free_port(), extra={"unclean.leader.election.interval.ms": "1000"})
    brokers = {}
    try:
        start_brokers(q, tmp_path, {n: free_port() for n in (1, 2)}, into=brokers)
        yield q, brokers
    finally:
        stop_brokers(brokers)
        q.stop()


def produce(brokers, values, **extra):
    p = producer(brokers, **extra)
    acked = []
    for v in values:
        p.produce("uc", value=v, partition=0, on_delivery=lambda err, m: acked.append(err))
    assert p.flush(60) == 0
    assert acked == [None] * len(values), acked[:3]


def partition_state(brokers):
    """(leader, error code) of uc-0 in the live brokers' Metadata."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap(brokers)}).list_topics("uc", timeout=10)
    p = md.topics["uc"].partitions[0]
    return p.leader, (p.error.code() if p.error is not None else 0)


def offline_partition(brokers):
    """uc-0 left with no leader: B stopped, writes only A took, A killed, B
    back. Returns (a, b, the live brokers)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create_topic(brokers, "uc", rf=2, configs={"min.insync.replicas": "1"})
    wait_isr(brokers, "uc", 2)
    produce(brokers, [b"a-%d" % i for i in range(100)])
    a = describe(brokers, "uc")[0][0]
    b = [n for n in brokers if n != a][0]
    wait_for("B holds the first writes",
             lambda: batches(Path(brokers[b].datadir) / "uc-0") ==
             batches(Path(brokers[a].datadir) / "uc-0"), 30, interval=0.2)
    brokers[b].stop()
    wait_isr({a: brokers[a]}, "uc", 1)
    produce(brokers, [b"b-%d" % i for i in range(100)])  # only A has these
    brokers[a].kill9()
    brokers[b].start()
    live = {b: brokers[b]}
    wait_for("B unfenced", lambda: brokers[b].log_text().count(
        "unfenced: serving in the cluster") >= 2, 30)
    # unclean election off: no leader, whatever time passes
    for _ in range(4):
        assert partition_state(live) == (-1, confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE)
        time.sleep(1)
    assert WARN not in brokers[b].log_text()
    return a, b, live


def test_unclean_election_then_old_leader_truncates(cluster):
    quorum, brokers = cluster
    a, b, live = offline_partition(brokers)
    run_tool(bootstrap(live), "kafka.admin.ConfigCommand", "--alter", "--entity-type", "topics",
             "--entity-name", "uc", "--add-config", "unclean.leader.election.enable=true")
    t0 = time.monotonic()
    wait_for("B elected", lambda: partition_state(live) == (b, 0), 60, interval=0.2)
    note("unclean.leader.election.enable set -> B leads", time.monotonic() - t0)
    wait_for("the WARN line", lambda: WARN in brokers[b].log_text(), 10)
    assert brokers[b].log_text().count(WARN) == 1
    produce(live, [b"c-%d" % i for i in range(50)])
    # A comes back, follows B and truncates what only it had
    t0 = time.monotonic()
    brokers[a].start()
    want = batches(Path(brokers[b].datadir) / "uc-0")
    wait_for("A byte-identical to B",
             lambda: batches(Path(brokers[a].datadir) / "uc-0") == want, 60, interval=0.2)
    note("old leader restarted -> truncated, byte-identical to the new one",
         time.monotonic() - t0)
    # B's AlterPartition adding A: LeaderRecoveryState RECOVERED (the
    # controller refuses an ISR of two while RECOVERING)
    wait_isr(brokers, "uc", 2)
    assert "the controller accepted the ISR" in brokers[b].log_text()
    expect = [b"a-%d" % i for i in range(100)] + [b"c-%d" % i for i in range(50)]
    assert consume_all(brokers, "uc", len(expect)) == expect


def test_unclean_election_by_kafka_leader_election(cluster):
    """The same through ElectLeaders (kafka-leader-election --election-type
    unclean, forwarded by Runnel to the controller)."""
    quorum, brokers = cluster
    a, b, live = offline_partition(brokers)
    res = run_tool(bootstrap(live), "LeaderElectionCommand", "--election-type", "unclean",
                   "--topic", "uc", "--partition", "0")
    assert "Successfully completed leader election (UNCLEAN)" in res.stdout, res.stdout
    wait_for("B elected", lambda: partition_state(live) == (b, 0), 10, interval=0.1)
    wait_for("the WARN line", lambda: WARN in brokers[b].log_text(), 10)
    assert brokers[b].log_text().count(WARN) == 1
    produce(live, [b"c-%d" % i for i in range(50)])
    expect = [b"a-%d" % i for i in range(100)] + [b"c-%d" % i for i in range(50)]
    assert consume_all(live, "uc", len(expect)) == expect
