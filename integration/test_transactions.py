"""Transactions end to end with real clients.

The Java producer (TxnTool in integration/java) commits and aborts
transactions over two partitions; read_committed consumers (Java, and
kafka-python) see only committed records, read_uncommitted ones see all;
offsets sent with sendOffsetsToTransaction become the group's committed
offsets only when the transaction commits; a second producer with the same
transactional.id fences the first; confluent-kafka's transactional producer
commits and aborts; a transaction left open across a broker restart is
aborted by its timeout; kafka-transactions (TransactionsCommand) lists and
describes transactions. Everything also runs against Apache Kafka 4.1.1
with --target=kafka.
"""

import time

import pytest

import procs
from conftest import require_module
from roundtrip import create_topic, last_stable_offset, read_all

BROKER_PROPS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
TXN_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def txn_tool(kafka_jars, tmp_path_factory):
    """The compiled integration/java/TxnTool class directory."""
    out = tmp_path_factory.mktemp("txn-tool")
    src = procs.REPO / "integration" / "java" / "TxnTool.java"
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", procs.java_classpath(), "-d",
               out, src], timeout=180, check=True)
    return out


def tool(classes, *args, timeout=120):
    res = procs.run_java("TxnTool", [str(a) for a in args], timeout=timeout, extra_cp=classes)
    assert res.returncode == 0, "TxnTool %s failed:\n%s\n%s" % (args[0], res.stdout, res.stderr)
    return res.stdout.split("\n")


def consume(classes, bootstrap, topic, isolation):
    """[(partition, offset, value)] and {partition: end offset}."""
    recs, ends = [], {}
    for line in tool(classes, "consume", bootstrap, topic, isolation):
        f = line.split()
        if f and f[0] == "rec":
            recs.append((int(f[1]), int(f[2]), f[3]))
        elif f and f[0] == "end":
            ends[int(f[1])] = int(f[2])
    return recs, ends


def values(recs):
    return sorted(v for _, _, v in recs)


def expected(prefixes, partitions=(0, 1), n=5):
    return sorted("%s-%d-%d" % (p, part, i) for p in prefixes for part in partitions
                  for i in range(n))


def test_java_commit_and_abort_read_committed(broker, txn_tool, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    out = tool(txn_tool, "produce", broker.bootstrap, t, "it-txn-" + t)
    assert [x for x in out if x] == ["committed", "aborted", "committed"]
    committed, ends = consume(txn_tool, broker.bootstrap, t, "read_committed")
    assert values(committed) == expected(["c1", "c3"])
    # 5 records + a marker per transaction: the end (last stable) offset is past all three
    assert ends == {0: 18, 1: 18}
    everything, ends = consume(txn_tool, broker.bootstrap, t, "read_uncommitted")
    assert values(everything) == expected(["a2", "c1", "c3"])
    assert ends == {0: 18, 1: 18}
    # the markers take offsets 5, 11 and 17 of each partition
    assert sorted({o for _, o, _ in everything}) == [o for o in range(18) if o not in (5, 11, 17)]
    # kafka-python's read_committed consumer skips the aborted batches too
    got = read_all(broker.bootstrap, t, [0, 1], isolation="read_committed")
    assert sorted(g.value.decode() for g in got) == expected(["c1", "c3"])


def test_java_send_offsets_to_transaction(broker, txn_tool, topic_name):
    ck = require_module("confluent_kafka")
    src, dst = topic_name("in"), topic_name("out")
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, dst, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(src, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    group = "it-txn-group-" + src
    out = [x for x in tool(txn_tool, "offsets", broker.bootstrap, src, dst, group,
                           "it-txn-" + dst) if x]
    # aborted: the group has no offset; committed: the offset after the last record read
    assert out == ["aborted 5", "committed-offset 0 -", "committed 5", "committed-offset 0 5"]
    committed, _ = consume(txn_tool, broker.bootstrap, dst, "read_committed")
    assert values(committed) == sorted("out-v%d" % i for i in range(5))
    everything, _ = consume(txn_tool, broker.bootstrap, dst, "read_uncommitted")
    assert len(everything) == 10


def test_java_zombie_producer_fenced(broker, txn_tool, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    out = [x for x in tool(txn_tool, "fence", broker.bootstrap, t, "it-txn-" + t) if x]
    assert out[0] == "b-initialised" and out[-1] == "b-committed", out
    send, commit = out[1].split(), out[2].split()
    assert send[0] == "zombie-send" and send[1] != "none", out
    assert commit[0] == "zombie-commit" and commit[1] != "none", out
    fenced = ("ProducerFencedException", "InvalidProducerEpochException")
    assert any(f in send[1] for f in fenced) and any(f in commit[1] for f in fenced), out
    committed, _ = consume(txn_tool, broker.bootstrap, t, "read_committed")
    assert values(committed) == ["b-1"]  # the zombie's open transaction was aborted


def commit_abort_commit(p, t):
    """Three transactions of 3 records each on partition 0 of t with a
    confluent-kafka producer: c1 committed, a2 aborted, c3 committed."""
    p.init_transactions(30)
    for name, commit in (("c1", True), ("a2", False), ("c3", True)):
        p.begin_transaction()
        for i in range(3):
            p.produce(t, value=("%s-%d" % (name, i)).encode(), partition=0)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)


def test_confluent_kafka_transactions(broker, topic_name):
    ck = require_module("confluent_kafka")
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "it-ck-" + t})
    commit_abort_commit(p, t)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-ck-g-" + t,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(t, 0, ck.OFFSET_BEGINNING)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        time.sleep(1)
        m = c.poll(1)
        assert m is None or m.error() is not None, "an aborted record was delivered"
    finally:
        c.close()
    assert got == ["c1-0", "c1-1", "c1-2", "c3-0", "c3-1", "c3-2"]


def test_waiting_read_committed_fetch_skips_an_open_transaction(broker, topic_name):
    """A read_committed consumer already waiting in a long-poll Fetch when a
    transactional batch arrives must not get it: the batch is past the last
    stable offset from the moment it is readable. Each transaction here writes
    one record per partition, delivered, then aborts; none may be consumed,
    and a committed one afterwards arrives whole."""
    ck = require_module("confluent_kafka")
    t = topic_name()
    partitions = 4
    create_topic(broker.bootstrap, t, partitions)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-ck-wait-" + t,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 2000})
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "it-wait-" + t})
    got = []

    def drain(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value().decode())

    try:
        c.assign([ck.TopicPartition(t, i, ck.OFFSET_BEGINNING) for i in range(partitions)])
        drain(1.5)  # the consumer's fetches are now parked, waiting for data
        p.init_transactions(30)
        for n in range(3):
            p.begin_transaction()
            for i in range(partitions):
                p.produce(t, value=b"aborted-%d-%d" % (n, i), partition=i)
            p.flush(30)
            drain(1)
            p.abort_transaction(30)
        p.begin_transaction()
        for i in range(partitions):
            p.produce(t, value=b"committed-%d" % i, partition=i)
        p.commit_transaction(30)
        drain(3)
    finally:
        c.close()
    assert sorted(got) == ["committed-%d" % i for i in range(partitions)]


def test_open_transaction_aborted_by_timeout_after_restart(broker, txn_tool, topic_name):
    require_module("confluent_kafka")
    t = topic_name()
    txid = "it-txn-" + t
    create_topic(broker.bootstrap, t, 1)
    assert "open" in tool(txn_tool, "open", broker.bootstrap, t, txid, 4000, 5)
    assert last_stable_offset(broker.bootstrap, t) == 0  # the open transaction holds the LSO
    broker.restart()
    procs.wait_until(lambda: last_stable_offset(broker.bootstrap, t) == 6, 60, interval=0.5,
                     what="the timed-out transaction aborted after the restart")
    committed, ends = consume(txn_tool, broker.bootstrap, t, "read_committed")
    assert committed == [] and ends == {0: 6}
    everything, _ = consume(txn_tool, broker.bootstrap, t, "read_uncommitted")
    assert values(everything) == sorted("open-%d" % i for i in range(5))
    res = procs.run_java(TXN_COMMAND, ["--bootstrap-server", broker.bootstrap, "describe",
                                       "--transactional-id", txid], timeout=120)
    assert res.returncode == 0, res.stderr
    assert "CompleteAbort" in res.stdout, res.stdout


def test_kafka_transactions_tool(broker, txn_tool, topic_name):
    t = topic_name()
    txid = "it-txn-" + t
    create_topic(broker.bootstrap, t, 2)
    tool(txn_tool, "produce", broker.bootstrap, t, txid)
    res = procs.run_java(TXN_COMMAND, ["--bootstrap-server", broker.bootstrap, "list"],
                         timeout=120)
    assert res.returncode == 0, res.stderr
    rows = {line.split()[0]: line.split() for line in res.stdout.splitlines()[1:] if line.strip()}
    assert txid in rows and rows[txid][3] == "CompleteCommit", res.stdout
    res = procs.run_java(TXN_COMMAND, ["--bootstrap-server", broker.bootstrap, "describe",
                                       "--transactional-id", txid], timeout=120)
    assert res.returncode == 0, res.stderr
    header, row = res.stdout.splitlines()[:2]
    fields = dict(zip(header.split(), row.split()))
    assert fields["TransactionalId"] == txid
    assert fields["TransactionState"] == "CompleteCommit"
    assert fields["ProducerId"] == rows[txid][2]
    assert fields["TransactionTimeoutMs"] == "60000"
