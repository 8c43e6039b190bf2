"""Transactions version 2 (KIP-890 part 2) with Kafka 4.4.0's Java client.

Runnel finalizes transaction.version 2, so a Java 4.4.0 transactional
producer adds partitions through Produce v12 and TxnOffsetCommit v5 (no
AddPartitionsToTxn, no AddOffsetsToTxn) and ends each transaction with
EndTxn v5, which bumps the producer epoch: after three transactions the
coordinator's epoch is 3 where a version 1 client's stays 0. Checked here:
the producer reports transaction version 2 and the epochs show the bumps;
commit and abort with read_committed consumers; a producer fenced in the
middle of a transaction by a second one with the same transactional.id;
sendOffsetsToTransaction; a 4.1.1 client and librdkafka (transaction
version 1: AddPartitionsToTxn, EndTxn without bumps) still working; the
same epochs from a Kafka 4.4.0 node (ports 19900-19901).
"""

from types import SimpleNamespace

import pytest

import kraft
import procs
from conftest import require_exe, require_module
from kafka_real import KafkaReal
from roundtrip import create_topic, last_stable_offset, produce_kafka_python
from test_transactions import commit_abort_commit

KAFKA44_PORT = 19900
KAFKA44_CONTROLLER_PORT = 19901
TXN_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def compile_tool(jars, out):
    src = procs.REPO / "integration" / "java" / "TxnTool.java"
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", str(jars / "*"), "-d", out, src],
              timeout=180, check=True)
    return out


class Tool:
    """TxnTool and kafka-transactions run on one Kafka release's jars."""

    def __init__(self, jars, classes):
        self.cp = "%s:%s" % (classes, jars / "*")

    def java(self, main, args, timeout=120):
        cmd = ["java"] + procs.JAVA_TOOL_OPTS + ["-cp", self.cp, main] + [str(a) for a in args]
        return procs.run(cmd, timeout=timeout)

    def __call__(self, *args):
        res = self.java("TxnTool", args)
        assert res.returncode == 0, "TxnTool %s failed:\n%s\n%s" % (args[0], res.stdout, res.stderr)
        return [x for x in res.stdout.split("\n") if x]

    def describe(self, bootstrap, txid):
        """kafka-transactions describe: {column: value}."""
        res = self.java(TXN_COMMAND, ["--bootstrap-server", bootstrap, "describe",
                                      "--transactional-id", txid])
        assert res.returncode == 0, res.stderr
        header, row = res.stdout.splitlines()[:2]
        return dict(zip(header.split(), row.split()))

    def consume(self, bootstrap, topic, isolation):
        return sorted(line.split()[3] for line in self("consume", bootstrap, topic, isolation)
                      if line.startswith("rec "))


@pytest.fixture(scope="module")
def tool44(tmp_path_factory):
    require_exe("javac")
    if not kraft.jars_present():
        pytest.skip("Kafka 4.4.0 jars not in %s" % kraft.JARS_44)
    return Tool(kraft.JARS_44, compile_tool(kraft.JARS_44, tmp_path_factory.mktemp("txn44")))


@pytest.fixture(scope="module")
def tool41(kafka_jars, tmp_path_factory):
    return Tool(kafka_jars, compile_tool(kafka_jars, tmp_path_factory.mktemp("txn41")))


def expected(prefixes, partitions=(0, 1), n=5):
    return sorted("%s-%d-%d" % (p, part, i) for p in prefixes for part in partitions
                  for i in range(n))


def produce_three(tool, bootstrap, topic, txid):
    """Commit, abort, commit; returns what the coordinator describes after."""
    out = tool("produce", bootstrap, topic, txid, "tv")
    assert out == ["committed", "aborted", "committed", "tv2 true"], out
    return tool.describe(bootstrap, txid)


def test_java44_commit_and_abort_bump_the_epoch(broker, tool44, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    txid = "it-tv2-" + t
    fields = produce_three(tool44, broker.bootstrap, t, txid)
    # InitProducerId gave epoch 0; each EndTxn v5 bumped it once
    assert fields["TransactionState"] == "CompleteCommit"
    assert fields["ProducerEpoch"] == "3", fields
    assert tool44.consume(broker.bootstrap, t, "read_committed") == expected(["c1", "c3"])
    assert tool44.consume(broker.bootstrap, t, "read_uncommitted") == expected(["a2", "c1", "c3"])


def test_java44_producer_fenced_mid_transaction(broker, tool44, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    out = tool44("fence", broker.bootstrap, t, "it-tv2-" + t)
    assert out[0] == "b-initialised" and out[-1] == "b-committed", out
    send, commit = out[1].split(), out[2].split()
    fenced = ("ProducerFencedException", "InvalidProducerEpochException")
    assert send[0] == "zombie-send" and any(f in send[1] for f in fenced), out
    assert commit[0] == "zombie-commit" and any(f in commit[1] for f in fenced), out
    assert tool44.consume(broker.bootstrap, t, "read_committed") == ["b-1"]


def offsets_topics(broker, topic_name):
    """(src, dst): one partition each, src holding five records v0..v4."""
    src, dst = topic_name("in"), topic_name("out")
    for t in (src, dst):
        create_topic(broker.bootstrap, t, 1)
    produce_kafka_python(broker.bootstrap, src, [
        SimpleNamespace(key=None, value=b"v%d" % i, headers=(), timestamp=None) for i in range(5)])
    return src, dst


def test_java44_send_offsets_to_transaction(broker, tool44, topic_name):
    src, dst = offsets_topics(broker, topic_name)
    group = "it-tv2-group-" + src
    out = tool44("offsets", broker.bootstrap, src, dst, group, "it-tv2-" + dst)
    # TxnOffsetCommit v5 added the group's partition itself (no AddOffsetsToTxn)
    assert out == ["aborted 5", "committed-offset 0 -", "committed 5", "committed-offset 0 5"]
    assert tool44.consume(broker.bootstrap, dst, "read_committed") == sorted(
        "out-v%d" % i for i in range(5))
    assert len(tool44.consume(broker.bootstrap, dst, "read_uncommitted")) == 10


def test_java41_client_still_works(broker, tool41, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    txid = "it-tv2-41-" + t
    out = tool41("produce", broker.bootstrap, t, txid, "tv")
    assert out[:3] == ["committed", "aborted", "committed"], out
    assert tool41.consume(broker.bootstrap, t, "read_committed") == expected(["c1", "c3"])


def test_librdkafka_transaction_version_1(broker, tool44, topic_name):
    """librdkafka adds partitions with AddPartitionsToTxn and ends with
    EndTxn below v5: the epoch stays where InitProducerId put it."""
    ck = require_module("confluent_kafka")
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    txid = "it-tv1-ck-" + t
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txid})
    commit_abort_commit(p, t)
    fields = tool44.describe(broker.bootstrap, txid)
    assert fields["TransactionState"] == "CompleteCommit"
    assert fields["ProducerEpoch"] == "0", fields
    assert tool44.consume(broker.bootstrap, t, "read_committed") == sorted(
        "%s-%d" % (n, i) for n in ("c1", "c3") for i in range(3))


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory, tool44):
    base = tmp_path_factory.mktemp("kafka44-txn")
    k = KafkaReal(base / "data", port=KAFKA44_PORT, controller_port=KAFKA44_CONTROLLER_PORT,
                  classpath=kraft.classpath(), log_path=base / "kafka.log")
    k.start()
    try:
        yield k
    finally:
        k.stop()


def test_epochs_as_kafka_44(broker, kafka44, tool44, topic_name):
    """The same producer against a Kafka 4.4.0 node: the same epoch, state
    and records."""
    got = {}
    for name, bootstrap in (("runnel", broker.bootstrap),
                            ("kafka", "%s:%d" % (kafka44.host, kafka44.port))):
        t = topic_name(name)
        create_topic(bootstrap, t, 2)
        fields = produce_three(tool44, bootstrap, t, "it-tv2-cmp-" + t)
        got[name] = (fields["TransactionState"], fields["ProducerEpoch"],
                     tool44.consume(bootstrap, t, "read_committed"))
    assert got["runnel"] == got["kafka"]


def hanging(tool, bootstrap, topic):
    """A transaction left open on partition 0 of a new topic (the producer
    halted; its timeout far away), holding the last stable offset at 0."""
    create_topic(bootstrap, topic, 1)
    assert "open" in tool("open", bootstrap, topic, "it-tv2-hang-" + topic, 600000, 5)
    assert last_stable_offset(bootstrap, topic) == 0


def abort(tool, bootstrap, topic, *how):
    res = tool.java(TXN_COMMAND, ["--bootstrap-server", bootstrap, "abort", "--topic", topic,
                                  "--partition", "0"] + list(how))
    assert res.returncode == 0, res.stdout + res.stderr
    procs.wait_until(lambda: last_stable_offset(bootstrap, topic) == 6, 30, interval=0.5,
                     what="the hanging transaction aborted")
    assert tool.consume(bootstrap, topic, "read_committed") == []
    assert len(tool.consume(bootstrap, topic, "read_uncommitted")) == 5


def producer_row(tool, bootstrap, topic):
    """kafka-transactions describe-producers for partition 0: {column: value}."""
    res = tool.java(TXN_COMMAND, ["--bootstrap-server", bootstrap, "describe-producers",
                                  "--topic", topic, "--partition", "0"])
    assert res.returncode == 0, res.stderr
    header, row = res.stdout.splitlines()[:2]
    return dict(zip(header.split(), row.split()))


def test_kafka_transactions_abort_by_start_offset(broker, tool44, topic_name):
    """WriteTxnMarkers from kafka-transactions abort ends a hanging
    transaction: the LSO moves past its abort marker."""
    t = topic_name()
    hanging(tool44, broker.bootstrap, t)
    abort(tool44, broker.bootstrap, t, "--start-offset", "0")


def test_kafka_transactions_abort_by_producer(broker, tool44, topic_name):
    t = topic_name()
    hanging(tool44, broker.bootstrap, t)
    row = producer_row(tool44, broker.bootstrap, t)
    assert row["CurrentTransactionStartOffset"] == "0", row
    abort(tool44, broker.bootstrap, t, "--producer-id", row["ProducerId"], "--producer-epoch",
          row["ProducerEpoch"], "--coordinator-epoch", "0")


def test_list_transactions_by_pattern(broker, tool44, topic_name):
    """ListTransactions v2's TransactionalIdPattern: a whole-id regex."""
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    for txid in ("it-pat-a-" + t, "it-pat-b-" + t):
        tool44("produce", broker.bootstrap, t, txid)

    def listed(pattern):
        res = tool44.java(TXN_COMMAND, ["--bootstrap-server", broker.bootstrap, "list",
                                        "--transactional-id-pattern", pattern])
        assert res.returncode == 0, res.stderr
        return sorted(line.split()[0] for line in res.stdout.splitlines()[1:] if line.strip())

    assert listed("it-pat-a-.*") == ["it-pat-a-" + t]
    assert listed("it-pat-.-" + t) == ["it-pat-a-" + t, "it-pat-b-" + t]
    assert listed("pat-a") == []  # the whole id must match


def test_list_pattern_errors_as_kafka_44(broker, kafka44, tool44):
    """A pattern that does not compile: INVALID_REGULAR_EXPRESSION from both."""
    got = {}
    for name, bootstrap in (("runnel", broker.bootstrap),
                            ("kafka", "%s:%d" % (kafka44.host, kafka44.port))):
        res = tool44.java(TXN_COMMAND, ["--bootstrap-server", bootstrap, "list",
                                        "--transactional-id-pattern", "it-(unclosed"])
        err = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
        got[name] = (res.returncode, err[:1])
    assert got["runnel"] == got["kafka"]
    assert "INVALID_REGULAR_EXPRESSION" in got["runnel"][1][0]
