"""Kafka 4.4.0's Java client on the versions that name topics by ID.

Runnel advertises Produce v13, OffsetCommit v10, OffsetFetch v10 and
TxnOffsetCommit v6 as Kafka 4.4.0 does, and the 4.4.0 client picks them:

- Kip848Tool (group.protocol=consumer) produces, two consumers of a group
  read every record once, fetch their committed offsets on assignment
  (OffsetFetch v10) and commit after each poll (OffsetCommit v10); the
  committed offsets come back whole;
- TxnTool's sendOffsetsToTransaction reads a topic, writes it to another in
  a transaction with the consumer's offsets, aborts once and commits once;
  the committed offset is what the committed transaction wrote (its
  producer sends Produce v13 and TxnOffsetCommit v6; the classic consumer
  fetches offsets by name, v9, as it does from Kafka 4.4.0).

The broker runs with runnel.log.level=DEBUG, whose one line per completed
request names its API key and version: the test asserts that the client
really used the ID-named versions (and never the name-named ones it would
fall back to).
"""

import re

import pytest

import kraft
import procs
from conftest import require_exe
from roundtrip import create_topic
from test_kip848_consumer import parse
from test_transactions_v2 import Tool, compile_tool, offsets_topics

BROKER_PROPS = {"runnel.log.level": "DEBUG"}
PARTITIONS = 4
PER_PHASE = 40
PRODUCE, OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 0, 8, 9, 28


@pytest.fixture(scope="module")
def java44(tmp_path_factory):
    """run(main_class, *args) on the Kafka 4.4.0 jars with TxnTool and Kip848Tool."""
    require_exe("javac")
    if not kraft.jars_present():
        pytest.skip("Kafka 4.4.0 jars not in %s" % kraft.JARS_44)
    out = compile_tool(kraft.JARS_44, tmp_path_factory.mktemp("ids44"))
    src = procs.REPO / "integration" / "java" / "Kip848Tool.java"
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", str(kraft.JARS_44 / "*"),
               "-d", out, src], timeout=180, check=True)
    return Tool(kraft.JARS_44, out)


def versions_used(broker, api_key, client=""):
    """The versions of api_key the broker completed requests of (from clients
    whose id starts with client), from its log."""
    text = broker.log_path.read_text(errors="replace")
    pattern = (r'msg="request completed" .*?api_key=%d api_version=(\d+) correlation_id=-?\d+ '
               r'client_id="%s' % (api_key, re.escape(client)))
    return {int(v) for v in re.findall(pattern, text)}


def test_java44_consumers_commit_by_topic_id(broker, java44, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, PARTITIONS)
    res = java44.java("Kip848Tool", ["share", broker.bootstrap, t, t + "-group", "2",
                                     PARTITIONS, PER_PHASE], timeout=300)
    assert res.returncode == 0, procs.describe(res)
    out = parse(res.stdout)
    assert out["phase1"] == ["consumed=%d dupes=0" % PER_PHASE]
    assert out["phase2"] == ["consumed=%d dupes=0" % (2 * PER_PHASE)]
    per_partition = 2 * PER_PHASE // PARTITIONS
    assert out["committed"] == ["%d %d" % (p, per_partition) for p in range(PARTITIONS)]
    assert versions_used(broker, PRODUCE, "producer-") == {13}
    assert versions_used(broker, OFFSET_COMMIT, "consumer-" + t) == {10}
    assert versions_used(broker, OFFSET_FETCH, "consumer-" + t) == {10}


def test_java44_send_offsets_to_transaction_by_topic_id(broker, java44, topic_name):
    src, dst = offsets_topics(broker, topic_name)
    group, txid = "ids-group-" + src, "ids-txn-" + dst
    out = java44("offsets", broker.bootstrap, src, dst, group, txid)
    assert out == ["aborted 5", "committed-offset 0 -", "committed 5", "committed-offset 0 5"]
    assert java44.consume(broker.bootstrap, dst, "read_committed") == sorted(
        "out-v%d" % i for i in range(5))
    assert versions_used(broker, TXN_OFFSET_COMMIT) == {6}
    assert versions_used(broker, PRODUCE, "producer-" + txid) == {13}
