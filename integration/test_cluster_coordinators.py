"""Coordinators move with the leadership of their internal partitions
(issue 15 item 6): one Apache Kafka 4.4.0 KRaft controller and three Runnel
brokers, `__consumer_offsets` and `__transaction_state` with replication
factor 3 and min.insync.replicas 2. When the broker leading a group's (or a
transactional id's) partition is killed with SIGKILL, the controller elects
another replica, whose coordinator loads the partition from its log: the
committed offsets are all there (OffsetFetch from the new coordinator, and a
consumer of the group resumes exactly where the first stopped), committed
transactions stay committed and the one open across the kill is either
completed or aborted, never half visible to read_committed consumers. The
killed broker comes back, a preferred leader election (Kafka 4.4's
kafka-leader-election) moves the coordinator back to it, and the offsets
are still all there.

Ports: ephemeral (procs.free_port).
"""

import os
import signal
import struct
import time

import pytest

import kraft
import wire
from conftest import require_module
from procs import free_port
from test_cluster_join import need_jars, wait_for  # noqa: F401 (fixture)
from test_cluster_txn import read_committed
from test_replication import (NodeBroker, bootstrap, create_topic, describe, start_brokers,
                              start_quorum, stop_brokers)

pytestmark = pytest.mark.usefixtures("runnel_only")

TOPIC = "coordmove"
PARTS = 3
RECORDS = 300
INTERNAL = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "4000",
}


class CoordBroker(NodeBroker):
    def __init__(self, datadir, quorum, node, ports):
        super().__init__(datadir, quorum, node, ports)
        self.overrides.update(INTERNAL)


@pytest.fixture
def cluster(tmp_path, need_jars):  # noqa: F811
    q = start_quorum(tmp_path, free_port())
    ports = {n: free_port() for n in (1, 2, 3)}
    brokers = {}
    try:
        start_brokers(q, tmp_path, ports,
                      make=lambda d, qq, n: CoordBroker(d, qq, n, ports), into=brokers)
        create_topic(brokers, TOPIC, PARTS, 3)
        yield brokers
    finally:
        stop_brokers(brokers)
        q.stop()


def java_partition(key, n):
    """Kafka's partition of a group or transactional id: abs(hashCode) % n."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % n


def coordinator(brokers, internal, key):
    """The broker the cluster's Metadata names as leader of key's partition."""
    p = java_partition(key, 3)
    leader = describe(brokers, internal).get(p, (-1, []))[0]
    return leader, p


def produce_all(brokers):
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all",
                     "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(TOPIC, value=b"r%d" % i, partition=i % PARTS)
    assert p.flush(60) == 0


def consumer(brokers, group, **extra):
    ck = require_module("confluent_kafka")
    conf = {"bootstrap.servers": bootstrap(brokers), "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
    conf.update(extra)
    c = ck.Consumer(conf)
    c.subscribe([TOPIC])
    return c


def consume(c, n, timeout=60.0, commit=True):
    """Up to n values, each committed synchronously after it was read."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m.value().decode())
        if commit:
            c.commit(message=m, asynchronous=False)
    return got


def committed(brokers, group, timeout=60.0):
    """{partition: offset} the group's coordinator answers OffsetFetch with,
    retried while the coordinator moves or loads."""
    ck = require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    req = ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(TOPIC, p)
                                                  for p in range(PARTS)])
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            res = admin.list_consumer_group_offsets([req])[group].result(10)
            return {tp.partition: tp.offset for tp in res.topic_partitions if tp.error is None}
        except ck.KafkaException as e:
            last = e
            time.sleep(0.5)
    raise AssertionError("OffsetFetch kept failing: %s" % last)


def elect_preferred(brokers, topic, partition):
    res = kraft.run_tool("org.apache.kafka.tools.LeaderElectionCommand",
                         ["--bootstrap-server", bootstrap(brokers), "--election-type",
                          "preferred", "--topic", topic, "--partition", str(partition)])
    return res.stdout + res.stderr


def test_offsets_survive_coordinator_kill_and_come_back(cluster):
    brokers = cluster
    group = "coordmove-group"
    produce_all(brokers)
    c = consumer(brokers, group)
    first = consume(c, RECORDS // 2)
    c.close()
    assert len(first) == RECORDS // 2, len(first)
    before = committed(brokers, group)
    assert sum(o for o in before.values() if o >= 0) == RECORDS // 2, before

    old, p = coordinator(brokers, "__consumer_offsets", group)
    assert old in brokers, (old, p)
    t0 = time.monotonic()
    brokers[old].kill9()
    wait_for("another coordinator for the group",
             lambda: coordinator(brokers, "__consumer_offsets", group)[0] not in (-1, old),
             60, interval=0.2)
    after = committed(brokers, group)
    print("\n[coordinators] kill -9 of the group coordinator -> OffsetFetch answered by "
          "broker %d: %.2f s" % (coordinator(brokers, "__consumer_offsets", group)[0],
                                 time.monotonic() - t0))
    assert after == before, (before, after)

    # the consumer of the same group resumes where the first stopped
    c = consumer(brokers, group)
    rest = consume(c, RECORDS - len(first), timeout=90)
    extra = consume(c, 1, timeout=3)
    c.close()
    assert not set(first) & set(rest), sorted(set(first) & set(rest))[:10]
    assert sorted(first + rest + extra) == sorted("r%d" % i for i in range(RECORDS))

    # the killed broker returns; a preferred election moves the coordinator back
    brokers[old].start()
    wait_for("broker %d back in the ISR of __consumer_offsets-%d" % (old, p),
             lambda: old in describe(brokers, "__consumer_offsets").get(p, (-1, []))[1],
             60, interval=0.5)
    t0 = time.monotonic()
    out = elect_preferred(brokers, "__consumer_offsets", p)
    wait_for("broker %d coordinating the group again" % old,
             lambda: coordinator(brokers, "__consumer_offsets", group)[0] == old, 30,
             interval=0.2)
    final = committed(brokers, group)
    print("[coordinators] preferred election -> coordinator back on broker %d, OffsetFetch "
          "answered: %.2f s (%s)" % (old, time.monotonic() - t0, out.strip()[:120]))
    assert final == {q: RECORDS // PARTS for q in range(PARTS)}, final
    c = consumer(brokers, group)
    assert consume(c, 1, timeout=5, commit=False) == []
    c.close()


def txn_producer(brokers, txid):
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bootstrap(brokers), "transactional.id": txid,
                     "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
    p.init_transactions(60)
    return p


def run_txn(p, tag, n=6):
    p.begin_transaction()
    for i in range(n):
        p.produce(TOPIC, value=("%s-%d" % (tag, i)).encode(), partition=i % PARTS)


def finish_txn(p, commit, timeout=90.0):
    """Commits (or aborts) p's transaction, retrying what the client says is
    retriable; True when it committed."""
    ck = require_module("confluent_kafka")
    deadline = time.monotonic() + timeout
    while True:
        try:
            if commit:
                p.commit_transaction(30)
                return True
            p.abort_transaction(30)
            return False
        except ck.KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                commit = False
            elif not err.retriable() or time.monotonic() > deadline:
                raise


def test_transactions_survive_coordinator_kill(cluster):
    brokers = cluster
    txid = "coordmove-txn"
    p = txn_producer(brokers, txid)
    committed_tags = []
    for k in range(5):
        run_txn(p, "a%d" % k)
        assert finish_txn(p, True)
        committed_tags.append("a%d" % k)

    old, sp = coordinator(brokers, "__transaction_state", txid)
    assert old in brokers, (old, sp)
    run_txn(p, "open")
    p.flush(30)
    t0 = time.monotonic()
    brokers[old].kill9()
    open_committed = finish_txn(p, True)
    print("\n[coordinators] kill -9 of the transaction coordinator -> open transaction %s "
          "after %.2f s" % ("committed" if open_committed else "aborted", time.monotonic() - t0))
    new = coordinator(brokers, "__transaction_state", txid)[0]
    assert new not in (-1, old), new
    for k in range(3):
        run_txn(p, "b%d" % k)
        assert finish_txn(p, True)
        committed_tags.append("b%d" % k)
    p.flush(10)

    got = read_committed(require_module("confluent_kafka"), bootstrap(brokers), topic=TOPIC,
                         parts=PARTS)
    tags = {}
    for v in got:
        tag = v.rsplit("-", 1)[0]
        tags.setdefault(tag, []).append(v)
    assert len(got) == len(set(got)), "a record read twice"
    for tag in committed_tags:
        assert len(tags.get(tag, [])) == 6, (tag, tags.get(tag))
    assert len(tags.get("open", [])) in ((6,) if open_committed else (0,)), tags.get("open")
    assert set(tags) <= set(committed_tags) | {"open"}, sorted(tags)


def _s(text):
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def offset_commit_v2(b, group, partition, offset, timeout=60.0):
    """OffsetCommit v2 of one offset to broker b: (error code, seconds the
    answer took)."""
    body = (_s(group) + struct.pack(">i", -1) + _s("") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + _s(TOPIC) + struct.pack(">i", 1)
            + struct.pack(">iqh", partition, offset, -1))
    sock = wire.connect(b.host, b.port, timeout=timeout)
    try:
        t0 = time.monotonic()
        sock.sendall(wire.frame(wire.request_header(8, 2, 1) + body))
        resp = wire.recv_frame(sock)
        took = time.monotonic() - t0
    finally:
        sock.close()
    # correlation id, [topic name, [partition, error]]
    (nlen,) = struct.unpack_from(">h", resp, 8)
    (err,) = struct.unpack_from(">h", resp, 10 + nlen + 4 + 4)
    return err, took


def test_commit_answered_only_once_the_isr_has_it(cluster):
    """min.insync.replicas=2: with both followers of the group's partition
    stopped, a commit is not answered as done (Kafka's
    COORDINATOR_NOT_AVAILABLE once the wait fails or the ISR shrank below
    the minimum); once they resume, commits succeed again."""
    brokers = cluster
    group = "coordmove-isr"
    ck = require_module("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": group})
    c.commit(offsets=[ck.TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    c.close()
    leader, p = coordinator(brokers, "__consumer_offsets", group)
    wait_for("ISR of 3 for __consumer_offsets-%d" % p,
             lambda: len(describe(brokers, "__consumer_offsets")[p][1]) == 3, 30, interval=0.2)
    assert offset_commit_v2(brokers[leader], group, 0, 2)[0] == 0
    followers = [n for n in brokers if n != leader]
    for n in followers:
        os.kill(brokers[n].proc.pid, signal.SIGSTOP)
    try:
        err, took = offset_commit_v2(brokers[leader], group, 0, 3)
        print("\n[coordinators] both followers stopped: OffsetCommit answered %d after %.2f s"
              % (err, took))
        assert err == 15, err  # COORDINATOR_NOT_AVAILABLE, not a commit the ISR lacks
        assert took > 1.0, took
        wait_for("ISR of the leader alone",
                 lambda: describe({leader: brokers[leader]}, "__consumer_offsets")[p][1]
                 == [leader], 30, interval=0.2)
        err, took = offset_commit_v2(brokers[leader], group, 0, 4)
        assert err == 15 and took < 1.0, (err, took)  # refused before the append
    finally:
        for n in followers:
            os.kill(brokers[n].proc.pid, signal.SIGCONT)
    wait_for("a commit answered done again",
             lambda: offset_commit_v2(brokers[leader], group, 0, 5)[0] == 0, 60, interval=0.5)
    assert committed(brokers, group)[0] == 5
