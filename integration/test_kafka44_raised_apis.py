"""The APIs raised to Kafka 4.4.0's versions: topics named by ID (Produce
v13, OffsetCommit v10, OffsetFetch v10, TxnOffsetCommit v6),
AlterPartitionReassignments v1 and UnregisterBroker v0, on the wire, each
request sent as the same bytes to Runnel and to a Kafka 4.4.0 node (combined
mode, from integration/.deps/jars-4.4, on ephemeral ports), the answers
compared field by field:

- a topic ID no topic has: UNKNOWN_TOPIC_ID for every partition it names,
  the ID echoed in the answer;
- the topic's own ID: the produce is appended (offset 0, then 1), the
  commit accepted and fetched back by ID, and a fetch of all the group's
  offsets names the topic by its ID;
- a transactional commit (InitProducerId, then TxnOffsetCommit v6, which adds
  the group to the transaction itself): accepted for the topic's ID,
  UNKNOWN_TOPIC_ID for an unknown one;
- AlterPartitionReassignments v1 with AllowReplicationFactorChange false: the
  flag echoed; the replica set the partition has is accepted, a target with an
  unregistered broker refused with Kafka's message;
- UnregisterBroker for an id no broker has: BROKER_ID_NOT_REGISTERED and the
  controller's message; for the node's own id: accepted (last, since Kafka's
  node registers again afterwards).

Topic IDs differ between the two brokers (each made its own), so each is
compared as "the topic's ID" or "the unknown ID".
"""

import itertools
import os
import struct
import time

import pytest

import kraft
import wire
import wire_data
from kafka_real import KafkaReal

pytestmark = pytest.mark.usefixtures("runnel_only")

PRODUCE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 0, 8, 9, 10, 22
TXN_OFFSET_COMMIT, CREATE_TOPICS, ALTER_REASSIGNMENTS, UNREGISTER_BROKER = 28, 19, 45, 64
NONE, UNKNOWN_TOPIC_ID, INVALID_REPLICA_ASSIGNMENT, BROKER_ID_NOT_REGISTERED = 0, 100, 39, 102
RETRIABLE = {3, 5, 6, 7, 14, 15, 16}  # unknown partition, leader moving, coordinator loading
TOPIC = "ids-by-wire"
UNKNOWN = os.urandom(16)

_corr = itertools.count(1)


def call(b, api, version, body):
    with wire.connect(b.host, b.port) as sock:
        return wire.flex_call(sock, api, version, body, next(_corr))


def uvarint_i32s(values):
    return wire.compact_array([struct.pack(">i", v) for v in values])


def create_topic(b):
    """CreateTopics v7 for TOPIC (2 partitions): its topic ID."""
    topic = (wire.compact_string(TOPIC) + struct.pack(">ih", 2, 1) + b"\x01" + b"\x01" + b"\x00")
    r = call(b, CREATE_TOPICS, 7, wire.compact_array([topic]) + struct.pack(">i?", 30000, False)
             + b"\x00")
    r.take(">i")
    r.uvarint()  # one topic
    assert r.string() == TOPIC
    tid = r.uuid()
    assert r.take(">h") == NONE
    return tid


class Node:
    """One broker under comparison and its topic's ID."""

    def __init__(self, b):
        self.b = b
        self.host, self.port = b.host, b.port
        self.tid = create_topic(b)

    def ref(self, tid):
        return {self.tid: "topic", UNKNOWN: "unknown"}.get(tid, tid)


def produce_v13(n, tid, partition, value, acks=-1):
    batch = wire_data.build_batch([(None, value, ())], int(time.time() * 1000))
    part = struct.pack(">i", partition) + wire.uvarint(len(batch) + 1) + batch + b"\x00"
    topic = tid + wire.compact_array([part]) + b"\x00"
    body = b"\x00" + struct.pack(">hi", acks, 10000) + wire.compact_array([topic]) + b"\x00"
    r = call(n, PRODUCE, 13, body)

    def partition_response(x):
        index, err, base, _append_time, log_start = x.take(">ihqqq")
        x.array(lambda y: pytest.fail("no record errors expected"))
        msg = x.string()
        x.skip_tags()
        return index, err, base, log_start, msg

    out = id_topics(r, n, partition_response)
    r.take(">i")
    return out


def id_topics(r, n, part):
    """An answer's array of topics named by ID: [(n.ref(id), [part(x)])]."""
    def topic(x):
        t = n.ref(x.uuid())
        parts = x.array(part)
        x.skip_tags()
        return t, parts

    return r.array(topic)


def retry(fn, errors_of, timeout=60.0):
    """fn() until no error in errors_of(result) is a retriable one."""
    deadline = time.time() + timeout
    while True:
        res = fn()
        if not RETRIABLE & set(errors_of(res)) or time.time() > deadline:
            return res
        time.sleep(0.3)


def produce_errors(res):
    return [p[1] for _, parts in res for p in parts]


def commit_partitions(tid, offsets):
    parts = [struct.pack(">iqi", p, off, -1) + wire.compact_string("m") + b"\x00"
             for p, off in offsets]
    return tid + wire.compact_array(parts) + b"\x00"


def read_partition_errors(r, n):
    def part(x):
        index, err = x.take(">ih")
        x.skip_tags()
        return index, err

    return id_topics(r, n, part)


def offset_commit_v10(n, group, topics):
    body = (wire.compact_string(group) + struct.pack(">i", -1) + wire.compact_string("")
            + wire.compact_string(None) + wire.compact_array(topics) + b"\x00")
    r = call(n, OFFSET_COMMIT, 10, body)
    r.take(">i")
    return read_partition_errors(r, n)


def offset_fetch_v10(n, group, topics):
    """topics: [(tid, [partition])], or None for all of the group's offsets."""
    enc = None if topics is None else [tid + uvarint_i32s(ps) + b"\x00" for tid, ps in topics]
    grp = (wire.compact_string(group) + wire.compact_string(None) + struct.pack(">i", -1)
           + wire.compact_array(enc) + b"\x00")
    r = call(n, OFFSET_FETCH, 10, wire.compact_array([grp]) + b"\x00" + b"\x00")
    r.take(">i")

    def part(x):
        index, off, epoch = x.take(">iqi")
        meta = x.string()
        err = x.take(">h")
        x.skip_tags()
        return index, off, epoch, meta, err

    def group_out(x):
        gid = x.string()
        ts = id_topics(x, n, part)
        err = x.take(">h")
        x.skip_tags()
        return gid, ts, err

    return r.array(group_out)


def commit_errors(res):
    return [e for _, parts in res for _, e in parts]


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory, broker):
    if not kraft.jars_present():
        pytest.skip("Kafka 4.4.0 jars not in %s" % kraft.JARS_44)
    with wire.connect(broker.host, broker.port) as sock:
        brokers, _ = wire.metadata_v1_brokers(sock, next(_corr))
    base = tmp_path_factory.mktemp("kafka44-ids")
    k = KafkaReal(base / "data", node_id=brokers[0][0], classpath=kraft.classpath(),
                  log_path=base / "kafka.log")
    k.start()
    try:
        yield k
    finally:
        k.kill9()  # its controlled shutdown waits on the broker test_unregister_broker removed


@pytest.fixture(scope="module")
def nodes(broker, kafka44):
    """(Runnel, Kafka 4.4.0), each with TOPIC created and its first record
    produced by ID."""
    out = (Node(broker), Node(kafka44))
    for n in out:
        res = retry(lambda n=n: produce_v13(n, n.tid, 0, b"first"), produce_errors)
        assert produce_errors(res) == [NONE], res
    return out


def same(nodes, fn, ordered=True):
    """fn(node) for both; asserts equal answers and returns Runnel's.
    ordered=False: topics compared in sorted order (Kafka lists the topics it
    refused before those its group coordinator answered)."""
    runnel, kafka = (fn(n) for n in nodes)
    if not ordered:
        runnel, kafka = sorted(runnel), sorted(kafka)
    assert runnel == kafka, "runnel %r\nkafka-4.4.0 %r" % (runnel, kafka)
    return runnel


def test_produce_v13_by_topic_id(nodes):
    res = same(nodes, lambda n: produce_v13(n, n.tid, 0, b"second"))
    assert res == [("topic", [(0, NONE, 1, 0, None)])]


def test_produce_v13_unknown_topic_id(nodes):
    res = same(nodes, lambda n: produce_v13(n, UNKNOWN, 0, b"lost"))
    assert res == [("unknown", [(0, UNKNOWN_TOPIC_ID, -1, -1, None)])]


def test_produce_v13_unknown_partition_of_known_id(nodes):
    res = same(nodes, lambda n: produce_v13(n, n.tid, 7, b"lost"))
    assert res[0][1][0][1] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def find_coordinator(n, key, key_type=0):
    """FindCoordinator v4 until the group's (key_type 0) or the transactional
    id's (1) coordinator is ready (Kafka makes __consumer_offsets and
    __transaction_state on the first one)."""
    body = struct.pack(">b", key_type) + wire.compact_array([wire.compact_string(key)]) + b"\x00"

    def once():
        r = call(n, FIND_COORDINATOR, 4, body)
        r.take(">i")
        r.uvarint()
        r.string()
        r.take(">i")
        r.string()
        r.take(">i")
        return r.take(">h")

    assert retry(once, lambda err: [err]) == NONE


def test_offset_commit_and_fetch_v10_by_topic_id(nodes):
    group = "ids-commit"
    for n in nodes:
        find_coordinator(n, group)
    res = same(nodes, lambda n: retry(lambda: offset_commit_v10(
        n, group, [commit_partitions(n.tid, [(0, 1), (1, 0)]),
                   commit_partitions(UNKNOWN, [(0, 5)])]), commit_errors), ordered=False)
    assert res == [("topic", [(0, NONE), (1, NONE)]), ("unknown", [(0, UNKNOWN_TOPIC_ID)])]
    fetched = same(nodes, lambda n: [(g, sorted(ts), e) for g, ts, e in offset_fetch_v10(
        n, group, [(n.tid, [0, 1]), (UNKNOWN, [0])])])
    assert fetched == [(group, [("topic", [(0, 1, -1, "m", NONE), (1, 0, -1, "m", NONE)]),
                                ("unknown", [(0, -1, -1, "", UNKNOWN_TOPIC_ID)])], NONE)]
    everything = same(nodes, lambda n: offset_fetch_v10(n, group, None))
    assert everything == [(group, [("topic", [(0, 1, -1, "m", NONE), (1, 0, -1, "m", NONE)])],
                           NONE)]


def init_producer_id(n, txid):
    body = wire.compact_string(txid) + struct.pack(">iqh", 60000, -1, -1) + b"\x00"

    def once():
        r = call(n, INIT_PRODUCER_ID, 5, body)
        r.take(">i")
        return r.take(">hqh")

    err, pid, epoch = retry(once, lambda res: [res[0]])
    assert err == NONE
    return pid, epoch


def txn_offset_commit_v6(n, txid, group, pid, epoch, topics):
    body = (wire.compact_string(txid) + wire.compact_string(group) + struct.pack(">qhi", pid, epoch, -1)
            + wire.compact_string("") + wire.compact_string(None) + wire.compact_array(topics)
            + b"\x00")
    r = call(n, TXN_OFFSET_COMMIT, 6, body)
    r.take(">i")
    return read_partition_errors(r, n)


def test_txn_offset_commit_v6_by_topic_id(nodes):
    def run(n):
        find_coordinator(n, "ids-txn-group")
        find_coordinator(n, "ids-txn", 1)
        pid, epoch = init_producer_id(n, "ids-txn")
        return retry(lambda: txn_offset_commit_v6(
            n, "ids-txn", "ids-txn-group", pid, epoch,
            [commit_partitions(n.tid, [(0, 1)]), commit_partitions(UNKNOWN, [(0, 1)])]),
            commit_errors)

    res = same(nodes, run, ordered=False)
    assert res == [("topic", [(0, NONE)]), ("unknown", [(0, UNKNOWN_TOPIC_ID)])]


def reassign_v1(n, replicas, allow):
    part = struct.pack(">i", 0) + uvarint_i32s(replicas) + b"\x00"
    topic = wire.compact_string(TOPIC) + wire.compact_array([part]) + b"\x00"
    body = struct.pack(">i?", 30000, allow) + wire.compact_array([topic]) + b"\x00"
    r = call(n, ALTER_REASSIGNMENTS, 1, body)
    r.take(">i")
    echoed, err = r.take(">?h")
    msg = r.string()

    def presp(x):
        index, perr = x.take(">ih")
        pmsg = x.string()
        x.skip_tags()
        return index, perr, pmsg

    def tresp(x):
        name = x.string()
        parts = x.array(presp)
        x.skip_tags()
        return name, parts

    return echoed, err, msg, r.array(tresp)


def node_id(broker):
    with wire.connect(broker.host, broker.port) as sock:
        return wire.metadata_v1_brokers(sock, next(_corr))[0][0][0]


def test_alter_partition_reassignments_v1_flag(broker, nodes):
    node = node_id(broker)
    res = same(nodes, lambda n: reassign_v1(n, [node], False))
    assert res == (False, NONE, None, [(TOPIC, [(0, NONE, None)])])
    res = same(nodes, lambda n: reassign_v1(n, [node, node + 90], False))
    assert res[0] is False and res[3][0][1][0][1] == INVALID_REPLICA_ASSIGNMENT
    assert same(nodes, lambda n: reassign_v1(n, [node], True))[0] is True


def unregister_broker(n, broker_id):
    r = call(n, UNREGISTER_BROKER, 0, struct.pack(">i", broker_id) + b"\x00")
    r.take(">i")
    return r.take(">h"), r.string()


def test_unregister_broker(broker, nodes):
    node = node_id(broker)
    res = same(nodes, lambda n: unregister_broker(n, node + 90))
    assert res == (BROKER_ID_NOT_REGISTERED, "Broker ID %d is not currently registered" % (node + 90))
    assert same(nodes, lambda n: unregister_broker(n, node)) == (NONE, "")
