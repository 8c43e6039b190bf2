"""Leader epochs and truncation (issue 15 item 2): one Apache Kafka 4.4.0
KRaft controller and three Runnel brokers, an RF=3 topic. A leader takes
acks=1 writes its followers never saw (both followers paused with
SIGSTOP), then is paused itself; the controller fences it after the
session timeout and elects a follower at a new leader epoch, which takes
more writes. When the old leader comes back it follows the new leader,
gets DivergingEpoch in its Fetch v18 answers and truncates the writes
nobody else has: afterwards every broker's segments hold the same batches
byte for byte and the leader-epoch-checkpoint files agree.

Ports: 21000-21099.
"""

import os
import signal
import time
from pathlib import Path

import pytest

from test_cluster_join import need_jars, wait_for  # noqa: F401 (fixture)
from test_replication import (batches, bootstrap, consume_all, create_topic, describe, note,
                              producer, start_brokers, start_quorum, stop_brokers, wait_isr)

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 21001
BROKER_PORTS = {1: 21011, 2: 21012, 3: 21013}


@pytest.fixture
def cluster(tmp_path, need_jars):
    q = start_quorum(tmp_path, CONTROLLER_PORT)
    brokers = start_brokers(q, tmp_path, BROKER_PORTS)
    paused = []
    yield brokers, paused
    for b in brokers.values():  # nothing left paused, whatever failed
        if b.alive():
            os.kill(b.proc.pid, signal.SIGCONT)
    stop_brokers(brokers)
    q.stop()


def pause(b, paused):
    os.kill(b.proc.pid, signal.SIGSTOP)
    paused.append(b)


def resume(b, paused):
    os.kill(b.proc.pid, signal.SIGCONT)
    paused.remove(b)


def partition_dir(b, topic):
    return Path(b.datadir) / ("%s-0" % topic)


def epoch_checkpoint(b, topic):
    p = partition_dir(b, topic) / "leader-epoch-checkpoint"
    return p.read_text() if p.exists() else None


def produce(brokers, topic, values, **extra):
    p = producer(brokers, **extra)
    acked = []
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, m: acked.append(err is None))
    assert p.flush(60) == 0
    assert acked == [True] * len(values)


def test_old_leader_truncates_what_only_it_took(cluster):
    pytest.importorskip("confluent_kafka")
    brokers, paused = cluster
    create_topic(brokers, "div")
    wait_isr(brokers, "div", 3)
    produce(brokers, "div", [b"a-%d" % i for i in range(100)])
    old = describe(brokers, "div")[0][0]
    followers = [b for n, b in brokers.items() if n != old]
    wait_for("followers hold the first writes",
             lambda: len({b"".join(batches(partition_dir(b, "div")))
                          for b in brokers.values()}) == 1, 30, interval=0.2)

    # the leader alone takes acks=1 writes (quickly: the followers must not
    # be fenced, so that one of them is elected from the ISR)
    for f in followers:
        pause(f, paused)
    # a paused follower's kernel still takes the answer to its parked fetch:
    # let those answer empty (replica.fetch.wait.max.ms, 500) before writing
    time.sleep(1.0)
    produce({old: brokers[old]}, "div", [b"lost-%d" % i for i in range(50)], acks=1,
            **{"enable.idempotence": False, "linger.ms": 0})
    pause(brokers[old], paused)
    for f in followers:
        resume(f, paused)
    live = {b.node: b for b in followers}
    wait_for("a follower elected", lambda: describe(live, "div").get(0, (-1,))[0]
             in live, 30, interval=0.2)
    new = describe(live, "div")[0][0]
    # not idempotent: the new leader may hand out a producer id it already
    # tracks from the replicated first writes (producer id blocks are not
    # what this test is about)
    produce(live, "div", [b"b-%d" % i for i in range(30)], **{"enable.idempotence": False})

    resume(brokers[old], paused)
    t0 = time.monotonic()
    ref = lambda: b"".join(batches(partition_dir(brokers[new], "div")))  # noqa: E731
    wait_for("the old leader truncated and caught up",
             lambda: b"".join(batches(partition_dir(brokers[old], "div"))) == ref(), 60,
             interval=0.1)
    note("old leader converged after SIGCONT", time.monotonic() - t0)
    assert "truncated a diverged log" in brokers[old].log_text()

    want = batches(partition_dir(brokers[new], "div"))
    for b in brokers.values():
        assert batches(partition_dir(b, "div")) == want, b.node
    epochs = {n: epoch_checkpoint(b, "div") for n, b in brokers.items()}
    assert len(set(epochs.values())) == 1, epochs
    lines = epochs[new].splitlines()
    assert lines[0] == "0" and int(lines[1]) == 2, lines  # epoch 0, then the new leader's
    assert lines[3].split()[1] == "100", lines
    # (the old leader rejoining the ISR is AlterPartition's work, not this test's)
    got = consume_all(brokers, "div", 130)
    assert got == [b"a-%d" % i for i in range(100)] + [b"b-%d" % i for i in range(30)]
