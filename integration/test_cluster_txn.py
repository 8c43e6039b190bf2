"""Transactions across brokers in cluster mode: one Apache Kafka 4.4.0
KRaft controller and three Runnel brokers; a topic of 6 partitions, two
led by each broker; transactional producers (Kafka 4.4.0's Java client at
transaction version 2, librdkafka at version 1) write transactions that
span every partition, every third one aborted. A read_committed consumer
then reads exactly the committed records and none of the aborted ones:
the coordinator's markers reached the partitions on the other brokers
(WriteTxnMarkers over the inter-broker listener), and the leaders of
partitions whose coordinator is elsewhere verified (or, at version 2,
added) them with the coordinator (AddPartitionsToTxn v4+). Producer ids,
asked of each broker, are distinct: they come from the controller's
AllocateProducerIds blocks.

Ports: 21200-21299.
"""

import time

import pytest

import kraft
import wire
import wire_data
from conftest import require_module
from test_cluster_join import ClusterBroker, need_jars, wait_for  # noqa: F401 (fixture)
from test_cluster_serve import controller_topics, metadata_leaders, wait_unfenced
from test_transactions_v2 import tool44  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 21201
BROKER_PORTS = {1: 21211, 2: 21212, 3: 21213}
TOPIC = "txspread"
PARTS = 6
N_TXNS = 30


class TxnBroker(ClusterBroker):
    def __init__(self, datadir, quorum, node):
        super().__init__(datadir, quorum, port=BROKER_PORTS[node],
                         extra={"node.id": str(node),
                                "transaction.state.log.num.partitions": "6",
                                "offsets.topic.num.partitions": "6"})
        self.node = node


@pytest.fixture
def txcluster(tmp_path):
    q = kraft.KraftQuorum(tmp_path / "kraft", [CONTROLLER_PORT]).start()
    brokers = {}
    try:
        for n in (1, 2, 3):
            b = TxnBroker(tmp_path / ("b%d" % n), q, n)
            b.format(q.cluster_id)
            b.start()
            brokers[n] = b
        wait_unfenced(brokers)
        controller_topics(q, "create", TOPIC, PARTS, 1)
        wait_for("6 leaders in every broker's Metadata",
                 lambda: all(len([l for l in metadata_leaders(b, TOPIC).values() if l >= 0])
                             == PARTS for b in brokers.values()), 60, interval=0.2)
        leaders = metadata_leaders(brokers[1], TOPIC)
        assert sorted(leaders.values()) == [1, 1, 2, 2, 3, 3], leaders
        yield brokers
    finally:
        for b in brokers.values():
            b.stop()
        q.stop()


def bootstrap(brokers):
    return ",".join(b.bootstrap for b in brokers.values())


def read_committed(ck, bs, timeout=60.0, topic=TOPIC, parts=PARTS):
    """Every value in topic read with read_committed up to each partition's
    last stable offset."""
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic + "-reader",
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    got = []
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(parts)])
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < parts and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError("consumer error: %s" % m.error())
            got.append(m.value().decode())
        assert len(eof) == parts, "not every partition reached its end: %s" % sorted(eof)
    finally:
        c.close()
    return got


def expected(prefix, n):
    return sorted("%s%d-%d" % (prefix, i, p) for i in range(n) if i % 3 != 2
                  for p in range(PARTS))


def test_librdkafka_transactions_span_three_brokers(txcluster):
    ck = require_module("confluent_kafka")
    bs = bootstrap(txcluster)
    errors = 0
    t0 = time.monotonic()
    for k in range(3):  # three transactional ids: coordinators on different brokers
        p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "ck-spread-%d" % k})
        p.init_transactions(30)
        for i in range(N_TXNS):
            try:
                p.begin_transaction()
                for part in range(PARTS):
                    p.produce(TOPIC, value=("c%d.%d-%d" % (k, i, part)).encode(),
                              partition=part)
                if i % 3 == 2:
                    p.flush(30)
                    p.abort_transaction(30)
                else:
                    p.commit_transaction(30)
            except ck.KafkaException as e:
                errors += 1
                print("txn %d.%d: %s" % (k, i, e))
                p.abort_transaction(30)
    took = time.monotonic() - t0
    print("\n[cluster-txn] librdkafka: %d transactions over 6 partitions on 3 brokers in "
          "%.1f s (%.1f txn/s), %d errors" % (3 * N_TXNS, took, 3 * N_TXNS / took, errors))
    assert errors == 0
    got = sorted(read_committed(ck, bs))
    want = sorted("c%d.%d-%d" % (k, i, part) for k in range(3) for i in range(N_TXNS)
                  if i % 3 != 2 for part in range(PARTS))
    assert got == want, (len(got), len(want), sorted(set(got) ^ set(want))[:10])


def test_java44_transactions_span_three_brokers(txcluster, tool44):  # noqa: F811
    ck = require_module("confluent_kafka")
    bs = bootstrap(txcluster)
    t0 = time.monotonic()
    for k in range(3):
        out = tool44("spread", bs, TOPIC, "java-spread-%d" % k, N_TXNS)
        assert out[-1] == "done %d errors 0" % N_TXNS, out
    took = time.monotonic() - t0
    print("\n[cluster-txn] java 4.4 (tv2): %d transactions over 6 partitions on 3 brokers "
          "in %.1f s (%.1f txn/s, JVM start included)" % (3 * N_TXNS, took, 3 * N_TXNS / took))
    got = sorted(read_committed(ck, bs))
    want = sorted("s%d-%d" % (i, part) for k in range(3) for i in range(N_TXNS)
                  if i % 3 != 2 for part in range(PARTS))
    assert got == want, (len(got), len(want), sorted(set(got) ^ set(want))[:10])


def test_producer_ids_distinct_across_brokers(txcluster):
    pids = []
    for b in txcluster.values():
        sock = wire.connect(b.host, b.port)
        try:
            for i in range(5):
                deadline = time.monotonic() + 30
                while True:
                    err, pid, epoch = wire_data.init_producer_id_v0(sock, 10 + i)
                    if err == 0 or time.monotonic() > deadline:
                        break
                    # COORDINATOR_LOAD_IN_PROGRESS until the first block arrives
                    assert err in (14, 15), err
                    time.sleep(0.1)
                assert err == 0 and epoch == 0, (b.node, err)
                pids.append(pid)
        finally:
            sock.close()
    assert len(set(pids)) == len(pids), pids
