"""ISR shrink and expand (issue 15 item 3, the "follower down" test): one
Apache Kafka 4.4.0 KRaft controller and three Runnel brokers, RF=3 with
min.insync.replicas=2 and a short replica.lag.time.max.ms. The broker
session timeout is long, so the controller never fences a paused follower:
only the leader's AlterPartition takes it out of the ISR, and only the
leader's AlterPartition brings it back once it caught up.

Ports: 21100-21199.
"""

import os
import signal
import time
from pathlib import Path

import pytest

from test_cluster_join import ClusterBroker, need_jars, wait_for  # noqa: F401 (fixture)
from test_replication import (batches, describe, note, producer, start_brokers, start_quorum,
                              stop_brokers, wait_isr)

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 21101
BROKER_PORTS = {1: 21111, 2: 21112, 3: 21113}
SESSION_MS = 60000  # longer than any pause here: no fencing by the controller
LAG_MS = 2000


class IsrBroker(ClusterBroker):
    def __init__(self, datadir, quorum, node):
        super().__init__(datadir, quorum, port=BROKER_PORTS[node],
                         extra={"node.id": str(node),
                                "broker.session.timeout.ms": str(SESSION_MS),
                                "broker.heartbeat.interval.ms": "500",
                                "replica.lag.time.max.ms": str(LAG_MS)})
        self.node = node
        self.paused = False

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False


@pytest.fixture
def isr_cluster(tmp_path, need_jars):
    q = start_quorum(tmp_path, CONTROLLER_PORT, SESSION_MS)
    brokers = {}
    try:
        yield start_brokers(q, tmp_path, BROKER_PORTS, make=IsrBroker, into=brokers)
    finally:
        for b in brokers.values():
            if b.alive() and b.paused:
                b.resume()
        stop_brokers(brokers)
        q.stop()


def running(brokers):
    return {n: b for n, b in brokers.items() if b.alive() and not b.paused}


def isr_of(brokers, topic):
    """The ISR every running broker's Metadata agrees on ([] while they
    differ: a follower just resumed answers from its older image)."""
    seen = {tuple(describe({n: b}, topic).get(0, (-1, []))[1])
            for n, b in running(brokers).items()}
    return list(seen.pop()) if len(seen) == 1 else []


def produce(brokers, topic, values, **extra):
    """Sends values with acks=all; returns the delivery errors (None: ok)."""
    conf = {"enable.idempotence": False, "retries": 0, "message.timeout.ms": 15000}
    conf.update(extra)
    p = producer(running(brokers), **conf)
    errs = []
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, m: errs.append(err))
    p.flush(30)
    return errs


def write_until(brokers, topic, what, probe, timeout, tag):
    """Writes acks=all records every 50 ms until probe() holds (a follower
    lags only while the leader's log grows: an idle one stays in the ISR, as
    in Kafka); returns (seconds, delivery errors)."""
    p = producer(running(brokers), **{"enable.idempotence": False, "retries": 0,
                                      "message.timeout.ms": 30000})
    errs = []
    t0 = time.monotonic()
    i = 0
    while not probe():
        assert time.monotonic() - t0 < timeout, "timed out waiting for " + what
        p.produce(topic, value=b"%s-%d" % (tag, i), partition=0,
                  on_delivery=lambda err, m: errs.append(err))
        i += 1
        p.poll(0.05)
    took = time.monotonic() - t0
    p.flush(40)
    assert len(errs) == i
    return took, errs


def create(brokers, name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[name] \
        .result(30)
    wait_isr(brokers, name, 3)
    return describe(brokers, name)[0][0]


def wait_same_batches(brokers, topic):
    leader = describe(running(brokers), topic)[0][0]
    ref_dir = Path(brokers[leader].datadir) / ("%s-0" % topic)
    wait_for("every replica holds the leader's batches",
             lambda: len({b"".join(batches(Path(b.datadir) / ("%s-0" % topic)))
                          for b in brokers.values()}) == 1, 30, interval=0.2)
    ref = batches(ref_dir)
    assert len(ref) > 0
    for b in brokers.values():
        assert batches(Path(b.datadir) / ("%s-0" % topic)) == ref, b.node


def rejoined(brokers, topic, what):
    """Waits for the ISR of 3 (noting how long it took), then acks=all
    works and every replica holds the same batches."""
    t0 = time.monotonic()
    wait_for("ISR back to 3", lambda: len(isr_of(brokers, topic)) == 3, 60, interval=0.1)
    note(what, time.monotonic() - t0)
    assert produce(brokers, topic, [b"z-%d" % i for i in range(50)]) == [None] * 50
    wait_same_batches(brokers, topic)


def test_paused_followers_leave_and_rejoin_the_isr(isr_cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    brokers = isr_cluster
    leader = create(brokers, "isr")
    f1, f2 = [n for n in brokers if n != leader]
    assert produce(brokers, "isr", [b"a-%d" % i for i in range(20)]) == [None] * 20

    brokers[f1].pause()
    took, errs = write_until(brokers, "isr", "ISR without %d" % f1,
                             lambda: isr_of(brokers, "isr") == sorted([leader, f2]),
                             LAG_MS / 1000 + 20, b"b")
    note("SIGSTOP of a follower -> ISR shrunk (replica.lag.time.max.ms=%d)" % LAG_MS, took)
    # the writes held while the ISR was 3 are answered once it is 2
    assert errs == [None] * len(errs)
    # ISR 2 = min.insync.replicas: acks=all goes on
    assert produce(brokers, "isr", [b"c-%d" % i for i in range(50)]) == [None] * 50

    brokers[f2].pause()
    took, errs = write_until(brokers, "isr", "ISR of the leader alone",
                             lambda: isr_of(brokers, "isr") == [leader],
                             LAG_MS / 1000 + 20, b"d")
    note("SIGSTOP of the second follower -> ISR = leader alone", took)
    # held while the ISR was 2, then below the minimum: refused after the
    # append (the ones held) or before it (the ones after the shrink)
    short = (confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
             confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS)
    assert all(e is None or e.code() in short for e in errs), errs
    errs = produce(brokers, "isr", [b"refused"])
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS, errs[0]

    brokers[f1].resume()
    brokers[f2].resume()
    rejoined(brokers, "isr", "SIGCONT of both followers -> ISR back to 3")
    assert describe(brokers, "isr")[0][0] == leader


def test_killed_follower_rejoins_the_isr_after_restart(isr_cluster):
    pytest.importorskip("confluent_kafka")
    brokers = isr_cluster
    leader = create(brokers, "rj")
    victim = [n for n in brokers if n != leader][0]
    assert produce(brokers, "rj", [b"a-%d" % i for i in range(20)]) == [None] * 20
    brokers[victim].kill9()
    took, errs = write_until(brokers, "rj", "ISR without %d" % victim,
                             lambda: len(isr_of(brokers, "rj")) == 2, LAG_MS / 1000 + 20, b"k")
    note("kill -9 of a follower -> ISR shrunk", took)
    assert errs == [None] * len(errs)
    # writes it misses, acknowledged by the two left
    assert produce(brokers, "rj", [b"b-%d" % i for i in range(100)]) == [None] * 100
    brokers[victim].start()
    rejoined(brokers, "rj", "follower restarted -> back in the ISR")
