"""The command-line tools a developer runs every day, against the broker,
each checked by what it prints and what it does, on Runnel and (with
--target=kafka) on Apache Kafka 4.1.1:

- kafka-console-producer / kafka-console-consumer: keys, headers, a group
  from the beginning, --max-messages, --partition/--offset, the formatter's
  print.* properties;
- kafka-consumer-groups: --list, --describe (offsets and exact lag, --state,
  --members with an active member), --reset-offsets (dry run and execute, to
  earliest, latest, datetime, offset, shift), --delete-offsets, --delete;
- kafka-transactions: list, describe, describe-producers, find-hanging;
- kafka-broker-api-versions, kafka-features describe, kafka-cluster,
  kafka-get-offsets;
- kafka-producer-perf-test / kafka-consumer-perf-test, kafka-verifiable-producer
  / -consumer: they complete and count right;
- kafka-dump-log on the broker's own segment, index and time index files and
  on __transaction_state;
- kafka-leader-election and kafka-reassign-partitions as one broker answers.

Where Kafka 4.1 answers differently because it is a KRaft cluster or speaks
protocol versions newer than Runnel's message definitions (ListTransactions
v2, transaction.version 2), the test says so at that
place and asserts what both must share.
"""

import csv
import json
import re
import time

import pytest

import procs
from conftest import require_module
from kafka_cli import TOOLS, offsets, perf_produce
from roundtrip import Rec, create_topic, java_partition, produce_kafka_python

BROKER_PROPS = {"group.initial.rebalance.delay.ms": "0"}
GROUPS = "consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "consumer.ConsoleConsumer"


@pytest.fixture(scope="module", autouse=True)
def clients(kafka_jars):
    """Every test here runs Kafka's tools; most also produce with kafka-python."""
    require_module("kafka")
    require_module("confluent_kafka")


def node_id(broker):
    return getattr(broker, "node_id", 1)


def keys_on(partition, n, partitions=2, tag="k"):
    """n distinct keys the Java client's partitioner puts on partition."""
    keys, i = [], 0
    while len(keys) < n:
        key = b"%s%d" % (tag.encode(), i)
        if java_partition(key, partitions) == partition:
            keys.append(key)
        i += 1
    return keys


def produce_timed(broker, topic, counts, base_ts):
    """counts: {partition: n}; record i of a partition has timestamp
    base_ts + i * 1000 and value "p<partition>-<i>"."""
    recs = []
    for p, n in counts.items():
        recs += [Rec(k, b"p%d-%d" % (p, i), (), base_ts + i * 1000)
                 for i, k in enumerate(keys_on(p, n, len(counts)))]
    produce_kafka_python(broker.bootstrap, topic, recs)


def iso_utc(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03d" % (ms % 1000)


def tables(out):
    """The rows of the tables a tool printed (a header line starting with
    GROUP/TOPIC, rows below it up to a blank line) as dicts keyed by column,
    and the whole line under "line" (a STATUS column holds spaces).
    "COORDINATOR (ID)" splits into two words in header and rows alike."""
    rows, header = [], None
    for line in out.splitlines():
        f = line.split()
        if not f:
            header = None
        elif f[0] in ("GROUP", "TOPIC") and len(f) > 2:
            header = f
        elif header is not None:
            rows.append(dict(zip(header, f), line=line))
    return rows


def by_partition(rows, column):
    return {int(r["PARTITION"]): r[column] for r in rows}


def said(res):
    """All a tool printed: ConsumerGroupCommand writes its tables to stdout,
    its notes and errors ("has no active members") to stderr."""
    return res.stdout + res.stderr


def describe_group(tool, group, *extra):
    res = tool(GROUPS, "--describe", "--group", group, *extra)
    return tables(res.stdout), said(res)


def lags(tool, group):
    """{partition: (CURRENT-OFFSET, LOG-END-OFFSET, LAG)} from --describe."""
    return {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                                  int(r["LAG"])) for r in describe_group(tool, group)[0]}


def reset(tool, group, *args):
    """--reset-offsets; returns {partition: NEW-OFFSET} as printed."""
    res = tool(GROUPS, "--reset-offsets", "--group", group, *args)
    return {p: int(o) for p, o in by_partition(tables(res.stdout), "NEW-OFFSET").items()}, res


def export(tool, group):
    """The group's committed offsets as --reset-offsets --export prints them (CSV)."""
    return tool(GROUPS, "--reset-offsets", "--group", group, "--all-topics", "--to-current",
                "--export", "--dry-run").stdout


# ---- console producer and consumer ----------------------------------------------------------


def test_console_producer_consumer(tool, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    sent = [("h1:a,h2:b", "k%d" % i, "v%d" % i) for i in range(6)] + [("h3:", "k9", "last")]
    t0 = int(time.time() * 1000)
    tool("ConsoleProducer", "--topic", t, "--property", "parse.key=true",
         "--property", "key.separator=:", "--property", "parse.headers=true",
         input="".join("%s\t%s:%s\n" % r for r in sent))
    t1 = int(time.time() * 1000)

    group = "it-cli-console-" + t
    res = tool(CONSOLE_CONSUMER, "--topic", t, "--group", group, "--from-beginning",
               "--max-messages", str(len(sent)), "--timeout-ms", "30000",
               "--property", "print.timestamp=true", "--property", "print.partition=true",
               "--property", "print.offset=true", "--property", "print.headers=true",
               "--property", "print.key=true")
    assert "Processed a total of %d messages" % len(sent) in res.stderr, procs.describe(res)
    got = [ln.split("\t") for ln in res.stdout.splitlines() if ln.startswith("CreateTime:")]
    assert len(got) == len(sent), res.stdout
    expected = {}  # partition -> [(headers, key, value)] in send order
    for hdrs, key, value in sent:
        expected.setdefault(java_partition(key.encode(), 2), []).append((hdrs, key, value))
    printed = {}
    for ts, part, off, hdrs, key, value in got:
        assert t0 <= int(ts.split(":")[1]) <= t1, (ts, t0, t1)
        p, o = int(part.split(":")[1]), int(off.split(":")[1])
        printed.setdefault(p, []).append((o, (hdrs, key, value)))
    for p, recs in expected.items():
        assert sorted(printed[p]) == list(enumerate(recs)), (p, printed)

    # The group committed where it stopped: every record read, no lag.
    ends = {p: len(r) for p, r in expected.items()}
    assert lags(tool, group) == {p: (n, n, 0) for p, n in ends.items()}

    # --partition/--offset without a group, value only.
    p = max(ends, key=ends.get)
    res = tool(CONSOLE_CONSUMER, "--topic", t, "--partition", str(p), "--offset", "1",
               "--max-messages", "1", "--timeout-ms", "30000")
    assert res.stdout.splitlines() == [expected[p][1][2]], res.stdout


# ---- kafka-consumer-groups --------------------------------------------------------------------


def test_consumer_groups_active_member(tool, broker, topic_name, tmp_path):
    """A running console consumer: --describe shows it with its offsets,
    state and assignment; reset, delete and delete-offsets are refused while
    it is there; once it leaves the group is Empty."""
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    produce_timed(broker, t, {0: 5, 1: 3}, int(time.time() * 1000) - 10000)
    group = "it-cli-active-" + t
    cmd = procs.java_command(TOOLS + CONSOLE_CONSUMER, [
        "--bootstrap-server", broker.bootstrap, "--topic", t, "--group", group,
        "--from-beginning", "--consumer-property", "client.id=it-cli-member",
        "--consumer-property", "auto.commit.interval.ms=200"])
    with procs.background(cmd, tmp_path / "console-consumer.log") as member:
        deadline = time.monotonic() + 60
        while True:
            rows, out = describe_group(tool, group)
            if len(rows) == 2 and all(r["LAG"] == "0" and r["CLIENT-ID"] == "it-cli-member"
                                      for r in rows):
                break
            assert member.poll() is None, procs.tail(tmp_path / "console-consumer.log")
            assert time.monotonic() < deadline, "the member never caught up:\n" + out
            time.sleep(0.5)
        assert by_partition(rows, "CURRENT-OFFSET") == {0: "5", 1: "3"}
        assert {r["HOST"] for r in rows} == {"/127.0.0.1"}
        assert len({r["CONSUMER-ID"] for r in rows}) == 1

        (state,), out = describe_group(tool, group, "--state")
        assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == (
            "Stable", "1", "range"), out
        assert state["(ID)"] == "(%d)" % node_id(broker), out
        listed = {r["GROUP"]: r for r in tables(tool(GROUPS, "--list", "--state", "--type").stdout)}
        assert (listed[group]["TYPE"], listed[group]["STATE"]) == ("Classic", "Stable"), listed
        (m,), out = describe_group(tool, group, "--members", "--verbose")
        assert (m["CLIENT-ID"], m["#PARTITIONS"], m["CURRENT-ASSIGNMENT"]) == (
            "it-cli-member", "2", "%s:0,1" % t), out

        new, res = reset(tool, group, "--topic", t, "--to-earliest", "--execute")
        assert new == {}
        assert ("Assignments can only be reset if the group '%s' is inactive, but the current "
                "state is Stable." % group) in said(res), said(res)
        out = said(tool(GROUPS, "--delete", "--group", group))
        assert "GroupNotEmptyException: The group is not empty." in out, out
        res = tool(GROUPS, "--delete-offsets", "--group", group, "--topic", t)
        status = by_partition(tables(res.stdout), "STATUS")
        assert set(status) == {0, 1}, said(res)
        assert res.stdout.count("GroupSubscribedToTopicException") == 2, said(res)
    (state,), out = describe_group(tool, group, "--state")
    assert (state["STATE"], state["#MEMBERS"]) == ("Empty", "0"), out
    assert "Consumer group '%s' has no active members." % group in out
    assert lags(tool, group) == {0: (5, 5, 0), 1: (3, 3, 0)}


def test_consumer_groups_reset_offsets(tool, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    base = int(time.time() * 1000) - 60000
    produce_timed(broker, t, {0: 6, 1: 4}, base)
    group = "it-cli-reset-" + t

    assert reset(tool, group, "--topic", t, "--to-earliest", "--dry-run")[0] == {0: 0, 1: 0}
    assert group not in tool(GROUPS, "--list").stdout.split()  # a dry run commits nothing
    assert reset(tool, group, "--topic", t, "--to-latest", "--execute")[0] == {0: 6, 1: 4}
    assert lags(tool, group) == {0: (6, 6, 0), 1: (4, 4, 0)}
    assert reset(tool, group, "--topic", t, "--shift-by", "-2", "--execute")[0] == {0: 4, 1: 2}
    assert lags(tool, group) == {0: (4, 6, 2), 1: (2, 4, 2)}

    new, res = reset(tool, group, "--topic", t, "--shift-by", "-100", "--dry-run")
    assert new == {0: 0, 1: 0}
    assert "is lower than earliest offset for topic partition %s-0" % t in res.stderr
    assert lags(tool, group) == {0: (4, 6, 2), 1: (2, 4, 2)}

    # The first record at or after the time: offset 3 on both partitions.
    mid = iso_utc(base + 2500)
    assert reset(tool, group, "--topic", t, "--to-datetime", mid, "--execute")[0] == {0: 3, 1: 3}
    assert lags(tool, group) == {0: (3, 6, 3), 1: (3, 4, 1)}
    later = iso_utc(base + 3600 * 1000)  # after every record: the log end
    assert reset(tool, group, "--topic", t, "--to-datetime", later, "--dry-run")[0] == {
        0: 6, 1: 4}

    new, res = reset(tool, group, "--topic", "%s:1" % t, "--to-offset", "99", "--execute")
    assert new == {1: 4}
    assert "New offset (99) is higher than latest offset for topic partition %s-1" % t in \
        res.stderr
    assert lags(tool, group) == {0: (3, 6, 3), 1: (4, 4, 0)}
    exported = export(tool, group)
    assert sorted(csv.reader(exported.split())) == [[t, "0", "3"], [t, "1", "4"]], exported


def test_consumer_groups_delete_offsets_and_delete(tool, broker, target, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    produce_timed(broker, t, {0: 2, 1: 2}, int(time.time() * 1000) - 10000)
    group = "it-cli-delete-" + t
    reset(tool, group, "--topic", t, "--to-offset", "1", "--execute")
    assert group in tool(GROUPS, "--list").stdout.split()

    # Partition 7 and the missing topic do not exist: UNKNOWN_TOPIC_OR_PARTITION
    # for them (Kafka's KafkaApis checks before the group coordinator), the
    # existing partition's offset goes.
    missing = t + "-missing"
    res = tool(GROUPS, "--delete-offsets", "--group", group, "--topic", "%s:0" % t,
               "--topic", "%s:7" % t, "--topic", "%s:0" % missing)
    status = {(r["TOPIC"], int(r["PARTITION"])): r["line"].strip() for r in tables(res.stdout)}
    assert "Encountered some partition-level error" in said(res), said(res)
    assert status[(t, 0)].endswith("Successful"), said(res)
    for tp in ((t, 7), (missing, 0)):
        assert "UnknownTopicOrPartitionException" in status[tp], said(res)
    assert lags(tool, group) == {1: (1, 2, 1)}

    res = tool(GROUPS, "--delete-offsets", "--group", group + "-none", "--topic", "%s:1" % t)
    assert "Error: The group id does not exist." in said(res), said(res)

    out = said(tool(GROUPS, "--delete", "--group", group))
    assert "Deletion of requested consumer groups ('%s') was successful." % group in out, out
    assert group not in tool(GROUPS, "--list").stdout.split()
    out = said(tool(GROUPS, "--delete", "--group", group))
    assert ("Group '%s' could not be deleted due to: org.apache.kafka.common.errors."
            "GroupIdNotFoundException: The group id does not exist." % group) in out, out

    # DescribeGroups v6 (KIP-1043) reports GROUP_ID_NOT_FOUND with Kafka's
    # message (up to v5 a missing group is Dead).
    res = tool(GROUPS, "--describe", "--group", group)
    assert "GroupIdNotFoundException: Group %s not found." % group in said(res), said(res)


def offsets_records(datadir, group):
    """kafka-dump-log --offsets-decoder on the __consumer_offsets partition of
    group: [(key, payload)] of its offset commit records (payload None for a
    tombstone), in log order."""
    logs = [f for f in sorted(datadir.glob("__consumer_offsets-*/*.log"))
            if group.encode() in f.read_bytes()]
    assert len(logs) == 1, logs
    res = procs.run_java("kafka.tools.DumpLogSegments", ["--offsets-decoder", "--files", logs[0]],
                         timeout=120)
    assert res.returncode == 0, procs.describe(res)
    found = []
    for m in re.finditer(r"^\| offset: \d+ .* key: (\{.*\}) payload: (.*)$", res.stdout, re.M):
        key = json.loads(m.group(1))
        if key["type"] in ("0", "1") and key["data"]["group"] == group:
            found.append((key["data"], None if m.group(2) == "<DELETE>" else m.group(2)))
    return found


def test_consumer_groups_after_topic_deletion(tool, broker, topic_name):
    """Deleting a topic deletes every group's committed offsets of it
    (tombstones in __consumer_offsets); the group and its other offsets stay."""
    t, kept = topic_name(), topic_name("kept")
    create_topic(broker.bootstrap, t, 2)
    create_topic(broker.bootstrap, kept, 1)
    group = "it-cli-deleted-" + t
    for topic in (t, kept):
        reset(tool, group, "--topic", topic, "--to-earliest", "--execute")
    assert sorted(csv.reader(export(tool, group).split())) == sorted(
        [[kept, "0", "0"], [t, "0", "0"], [t, "1", "0"]])
    tool("TopicCommand", "--delete", "--topic", t)

    deadline = time.monotonic() + 30
    while True:  # Kafka's coordinator hears of the deletion a moment later
        rows, out = describe_group(tool, group)
        if {r["TOPIC"] for r in rows} == {kept}:
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.5)
    assert [(r["PARTITION"], r["CURRENT-OFFSET"]) for r in rows] == [("0", "0")], out
    assert "Consumer group '%s' has no active members." % group in out
    exported = export(tool, group)
    assert list(csv.reader(exported.split())) == [[kept, "0", "0"]], exported

    recs = [(k["topic"], k["partition"], v is None) for k, v in offsets_records(broker.datadir,
                                                                                group)]
    assert recs[-2:] in ([(t, 0, True), (t, 1, True)], [(t, 1, True), (t, 0, True)]), recs


# ---- kafka-transactions -------------------------------------------------------------------


def tsv(out):
    """Rows of TransactionsCommand's tab-separated tables, as dicts."""
    lines = [ln for ln in out.splitlines() if "\t" in ln]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("\t")]
    return [{h: v.strip() for h, v in zip(header, ln.split("\t")) if h} for ln in lines[1:]]


def transaction_records(datadir, txid):
    """What kafka-dump-log --transaction-log-decoder shows of txid in
    __transaction_state: [(key, value)] as decoded JSON, in log order."""
    logs = [f for f in sorted(datadir.glob("__transaction_state-*/*.log"))
            if txid.encode() in f.read_bytes()]
    assert len(logs) == 1, logs
    res = procs.run_java("kafka.tools.DumpLogSegments", ["--transaction-log-decoder",
                                                        "--files", logs[0]], timeout=120)
    assert res.returncode == 0, procs.describe(res)
    found = []
    for m in re.finditer(r"^\| offset: \d+ .* key: (\{.*\}) payload: (\{.*\})$", res.stdout,
                         re.M):
        key, value = json.loads(m.group(1)), json.loads(m.group(2))
        if key["data"]["transactionalId"] == txid:
            found.append((key, value))
    return found


def test_transactions_tool(tool, broker, java_runner, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    done, open_ = "it-cli-done-" + t, "it-cli-open-" + t
    res = java_runner("TxnTool", "produce", broker.bootstrap, t, done)
    assert res.returncode == 0, procs.describe(res)
    # Three records in a transaction left open (TxnTool halts without ending it).
    res = java_runner("TxnTool", "open", broker.bootstrap, t, open_, "600000", "3")
    assert res.returncode == 0 and "open" in res.stdout.split(), procs.describe(res)

    rows = {r["TransactionalId"]: r for r in tsv(tool("TransactionsCommand", "list").stdout)}
    assert rows[done]["TransactionState"] == "CompleteCommit", rows
    assert rows[open_]["TransactionState"] == "Ongoing", rows
    assert {rows[done]["Coordinator"], rows[open_]["Coordinator"]} == {str(node_id(broker))}
    assert tsv(tool("TransactionsCommand", "list", "--duration-filter", "3600000").stdout) == []

    (d,) = tsv(tool("TransactionsCommand", "describe", "--transactional-id", open_).stdout)
    assert (d["TransactionState"], d["ProducerId"], d["ProducerEpoch"]) == (
        "Ongoing", rows[open_]["ProducerId"], "0"), d
    assert (d["TransactionTimeoutMs"], d["TopicPartitions"]) == ("600000", "%s-0" % t), d
    res = tool("TransactionsCommand", "describe", "--transactional-id", open_ + "-none",
               check=False)
    assert res.returncode == 1
    assert "failed because the ID could not be found" in said(res)

    # Partition 0 holds the three transactions of `done` (5 records and a
    # marker each, offsets 0-17) and then the open one from offset 18.
    producers = {r["ProducerId"]: r for r in tsv(
        tool("TransactionsCommand", "describe-producers", "--topic", t, "--partition",
             "0").stdout)}
    assert set(producers) == {rows[done]["ProducerId"], rows[open_]["ProducerId"]}, producers
    row = producers[rows[open_]["ProducerId"]]
    assert int(row.pop("LastTimestamp")) > int(time.time() * 1000) - 600000, row
    assert row == {"ProducerId": rows[open_]["ProducerId"], "ProducerEpoch": "0",
                   "LatestCoordinatorEpoch": "-1", "LastSequence": "2",
                   "CurrentTransactionStartOffset": "18"}
    # (Kafka 4.1's transaction.version 2 bumps the epoch at each commit, so
    # there `done` ends at epoch 3 with its last sequence reset; Runnel
    # finalizes no transaction.version, so clients use the classic protocol.)
    assert producers[rows[done]["ProducerId"]]["CurrentTransactionStartOffset"] == "None"

    # An open transaction its coordinator knows is not hanging, however old.
    for args in (["--broker-id", str(node_id(broker))],
                 ["--topic", t, "--max-transaction-timeout", "0"]):
        out = tool("TransactionsCommand", "find-hanging", *args).stdout
        assert out.split("\n")[0].split() == [
            "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
            "StartOffset", "LastTimestamp", "Duration(min)"], out
        assert tsv(out) == [], out

    # kafka-dump-log decodes the coordinator's records in __transaction_state.
    recs = transaction_records(broker.datadir, done)
    statuses = [v["data"]["transactionStatus"] for _, v in recs]
    assert {1, 2, 3, 4, 5} <= set(statuses) and statuses[-1] == 4, statuses
    assert {v["data"]["producerId"] for _, v in recs} == {int(rows[done]["ProducerId"])}
    last = transaction_records(broker.datadir, open_)[-1][1]["data"]
    assert last["transactionStatus"] == 1 and last["transactionTimeoutMs"] == 600000, last
    assert last["transactionPartitions"] == [{"topic": t, "partitionIds": [0]}], last


# ---- cluster information and offsets ---------------------------------------------------------


def test_api_versions_features_cluster(tool, broker):
    out = tool("BrokerApiVersionsCommand").stdout
    lines = out.splitlines()
    assert lines[0] == "%s (id: %d rack: null isFenced: false) -> (" % (
        broker.bootstrap, node_id(broker)), out
    apis = dict(re.findall(r"^\t(\w+)\(\d+\): (.*?),?$", out, re.M))
    for name in ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                 "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
                 "DescribeGroups", "ListGroups", "CreateTopics", "DeleteTopics", "InitProducerId",
                 "DescribeConfigs", "IncrementalAlterConfigs", "DescribeCluster",
                 "ConsumerGroupHeartbeat", "ConsumerGroupDescribe"):
        assert "[usable: " in apis[name], (name, out)
    # v5 from Kafka 4.4.0 on; a 4.1 tool uses v4 of it
    assert re.match(r"0 to [45] \[usable: [45]\]$", apis["ApiVersions"]), out

    # The KRaft features as a single node reports them (metadata.version,
    # kraft.version, ...: test_api_versions_kafka44.py compares the levels;
    # a 4.1 tool prints metadata.version 33 as "UNKNOWN 33").
    described = tool("FeatureCommand", "describe").stdout
    features = {m[0]: m[1:] for m in re.findall(
        r"^Feature: (\S+)\tSupportedMinVersion: (\S+)\tSupportedMaxVersion: (\S+)\t"
        r"FinalizedVersionLevel: (\S+)\tEpoch: \d+$", described, re.M)}
    assert features["group.version"] == ("0", "1", "1"), features
    assert "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t" in described, described

    meta = dict(ln.split("=", 1) for ln in (broker.datadir / "meta.properties").read_text()
                .splitlines() if "=" in ln and not ln.startswith("#"))
    out = procs.run_java(TOOLS + "ClusterTool", ["cluster-id", "--bootstrap-server",
                                                  broker.bootstrap], timeout=120, check=True)
    assert out.stdout.strip() == "Cluster ID: %s" % meta["cluster.id"]
    res = procs.run_java(TOOLS + "ClusterTool", ["list-endpoints", "--bootstrap-server",
                                                  broker.bootstrap], timeout=120, check=True)
    assert [ln.split() for ln in res.stdout.splitlines()] == [
        ["ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE"],
        [str(node_id(broker)), broker.host, str(broker.port), "null", "unfenced", "broker"]]


def test_get_offsets(tool, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    base = int(time.time() * 1000) - 60000
    produce_timed(broker, t, {0: 6, 1: 4}, base)
    assert offsets(tool, t, "-1") == {0: 6, 1: 4}
    assert offsets(tool, t, "-2") == {0: 0, 1: 0}
    assert offsets(tool, t, "-3") == {0: 5, 1: 3}  # the record with the largest timestamp
    assert offsets(tool, t, "-4") == {0: 0, 1: 0}  # earliest local
    assert offsets(tool, t, "-5") == {}  # latest tiered: no tiered storage
    assert offsets(tool, t, str(base + 2500)) == {0: 3, 1: 3}
    assert offsets(tool, t, str(base + 3000)) == {0: 3, 1: 3}
    assert offsets(tool, t, str(base + 4500)) == {0: 5}  # partition 1 has none that late
    out = tool("GetOffsetShell", "--topic-partitions", "%s:1" % t, "--time", "-1").stdout
    assert out.split() == ["%s:1:4" % t]


# ---- perf and verifiable clients ---------------------------------------------------------------


def consumer_perf(broker, topic, n, *extra):
    """ConsumerPerformance's result row as a dict."""
    res = procs.run_java(TOOLS + "ConsumerPerformance", [
        "--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", str(n),
        "--timeout", "30000"] + list(extra), timeout=120)
    assert res.returncode == 0, procs.describe(res)
    header, row = [ln for ln in res.stdout.splitlines() if "," in ln][:2]
    return dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(","))))


def test_perf_tools(tool, broker, topic_name, tmp_path):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    out = perf_produce(broker.bootstrap, t, 400, 100)
    assert re.search(r"^400 records sent, ", out, re.M), out
    assert offsets(tool, t) == {0: 400}
    stats = consumer_perf(broker, t, 400)
    assert stats["data.consumed.in.nMsg"] == "400", stats
    assert stats["data.consumed.in.MB"] == "%.4f" % (400 * 100 / 1048576), stats

    # Transactions of ~50 ms each: 300 records, one commit marker per
    # transaction after them, and a read_committed consumer sees the 300.
    tx = topic_name("tx")
    create_topic(broker.bootstrap, tx, 1)
    out = perf_produce(broker.bootstrap, tx, 300, 50, "it-perf-tx", props=["acks=all"],
                       args=["--transactional-id", "it-perf-" + tx,
                             "--transaction-duration-ms", "50"])
    assert re.search(r"^300 records sent, ", out, re.M), out
    assert 300 < offsets(tool, tx)[0] <= 600
    conf = tmp_path / "read_committed.properties"
    conf.write_text("isolation.level=read_committed\n")
    stats = consumer_perf(broker, tx, 300, "--consumer.config", conf)
    assert stats["data.consumed.in.nMsg"] == "300", stats


def json_events(out):
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]


def test_verifiable_producer_consumer(broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    res = procs.run_java(TOOLS + "VerifiableProducer", [
        "--bootstrap-server", broker.bootstrap, "--topic", t, "--max-messages", "30",
        "--acks", "-1", "--value-prefix", "5"], timeout=120)
    assert res.returncode == 0, procs.describe(res)
    events = json_events(res.stdout)
    acked = [e for e in events if e["name"] == "producer_send_success"]
    assert [(e["partition"], e["offset"], e["value"]) for e in acked] == [
        (0, i, "5.%d" % i) for i in range(30)], res.stdout
    assert events[-1]["name"] == "tool_data" and (events[-1]["sent"], events[-1]["acked"]) == (
        30, 30), events[-1]

    for protocol in ("classic", "consumer"):
        res = procs.run_java(TOOLS + "VerifiableConsumer", [
            "--bootstrap-server", broker.bootstrap, "--topic", t, "--group-id",
            "it-cli-verifiable-%s-%s" % (protocol, t), "--group-protocol", protocol,
            "--max-messages", "30", "--reset-policy", "earliest"], timeout=120)
        assert res.returncode == 0, procs.describe(res)
        events = json_events(res.stdout)
        names = [e["name"] for e in events]
        assert names[0] == "startup_complete" and names[-1] == "shutdown_complete", names
        assert [e["partitions"] for e in events if e["name"] == "partitions_assigned"] == [
            [{"topic": t, "partition": 0}]], res.stdout
        consumed = [p for e in events if e["name"] == "records_consumed" for p in e["partitions"]]
        assert sum(p["count"] for p in consumed) == 30, res.stdout
        assert (min(p["minOffset"] for p in consumed), max(p["maxOffset"] for p in consumed)) == (
            0, 29)
        commits = [e for e in events if e["name"] == "offsets_committed"]
        assert commits and all(e["success"] for e in commits), res.stdout
        assert commits[-1]["offsets"] == [{"topic": t, "partition": 0, "offset": 30}]


# ---- kafka-dump-log ----------------------------------------------------------------------------


def dump(*args):
    res = procs.run_java("kafka.tools.DumpLogSegments", [str(a) for a in args], timeout=180)
    assert res.returncode == 0, procs.describe(res)
    text = res.stdout + res.stderr
    for bad in ("ismatch", "out of order", "Exception", "rror", "is corrupt", "isvalid: false"):
        assert bad not in text, "%r in kafka-dump-log output:\n%s" % (bad, text[-6000:])
    return res.stdout


BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) "
                      r"CreateTime: (\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: \d+ "
                      r"isvalid: true$", re.M)


def test_dump_log_reads_segments_and_indexes(broker, topic_name):
    """Three segments of 1 MiB (the smallest segment.bytes Kafka 4 allows),
    gzip batches after plain ones: kafka-dump-log reads every batch and
    record back, and the offset and time index entries point at batches as
    Kafka's own indexes do (the offset index names a batch's last offset and
    its position; --verify-index-only and --index-sanity-check find nothing)."""
    t = topic_name()
    create_topic(broker.bootstrap, t, 1, {"segment.bytes": "1048576"})
    n, plain = 3000, 2300  # 2.4 MB plain, then gzip batches of little
    base = int(time.time() * 1000) - 60000
    pad = b"." * 993  # values of 1000 bytes
    recs = [Rec(b"k%d" % i, b"v%06d" % i + pad, (("h", b"%d" % i),), base + i) for i in
            range(n)]
    produce_kafka_python(broker.bootstrap, t, recs[:plain])
    produce_kafka_python(broker.bootstrap, t, recs[plain:], compression_type="gzip")

    pdir = broker.datadir / ("%s-0" % t)
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) >= 3, sorted(p.name for p in pdir.iterdir())
    seen, batches = [], {}
    for log in logs:
        out = dump("--deep-iteration", "--print-data-log", "--files", log)
        assert out.startswith("Dumping %s\n" % log), out[:300]
        for m in BATCH_RE.finditer(out):
            first, last, count, pos, ts, size, codec = m.groups()
            assert int(last) - int(first) + 1 == int(count)
            batches[(log.name, int(pos))] = (int(first), int(last), int(ts), codec)
        for m in re.finditer(r"^\| offset: (\d+) CreateTime: (\d+) keySize: \d+ valueSize: 1000 "
                             r"sequence: -?\d+ headerKeys: \[h\] key: k(\d+) payload: v(\d+)\.+$",
                             out, re.M):
            off, ts, k, v = (int(x) for x in m.groups())
            assert off == k == v and ts == base + off, m.group(0)
            seen.append(off)
    assert seen == list(range(n))
    codecs = [c for *_, c in sorted(batches.values())]
    assert codecs[0] == "none" and codecs[-1] == "gzip", codecs
    assert sorted(batches.values())[-1][1] == n - 1

    for log in logs:
        seg = log.with_suffix("")
        out = dump("--files", "%s.index" % seg)
        entries = re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)
        assert entries or log == logs[-1], out  # 1 MiB of records has index entries
        for off, pos in entries:
            first, last, _, _ = batches[(log.name, int(pos))]
            assert int(off) == last, (log.name, off, pos, first, last)
        out = dump("--files", "%s.timeindex" % seg)
        for ts, off in re.findall(r"^timestamp: (\d+) offset: (\d+)$", out, re.M):
            assert (int(ts), int(off)) in {(b[2], b[1]) for b in batches.values()}, (ts, off)
        dump("--verify-index-only", "--files", "%s.index,%s.timeindex" % (seg, seg))
        if log == logs[-1]:
            continue  # Kafka's active indexes are preallocated: zeros fail a sanity check
        out = dump("--index-sanity-check", "--files", "%s.index,%s.timeindex" % (seg, seg))
        assert re.search(r"\.index passed sanity check\.$", out, re.M), out
        assert re.search(r"\.timeindex passed sanity check\.$", out, re.M), out


# ---- leader election and reassignment ---------------------------------------------------------


def test_leader_election(tool, broker, topic_name):
    """One broker leads every partition already: nothing to elect."""
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    for kind in ("preferred", "unclean"):
        res = tool("LeaderElectionCommand", "--election-type", kind, "--all-topic-partitions")
        assert res.stdout == "", res.stdout
    out = tool("LeaderElectionCommand", "--election-type", "preferred", "--topic", t,
               "--partition", "1").stdout
    assert out.strip() == "Valid replica already elected for partitions %s-1" % t
    for topic, part, why in ((t, 9, "No such partition as %s-9" % t),
                             (t + "-none", 0, "No such topic as %s-none" % t)):
        res = tool("LeaderElectionCommand", "--election-type", "preferred", "--topic", topic,
                   "--partition", str(part), check=False)
        assert res.returncode == 1, procs.describe(res)
        assert ("Error completing leader election (PREFERRED) for partition: %s-%d: org.apache."
                "kafka.common.errors.UnknownTopicOrPartitionException: %s" % (topic, part, why)
                ) in said(res), said(res)


def test_reassign_partitions(tool, broker, topic_name, tmp_path):
    """--generate proposes what is there, --execute of it completes at once,
    --verify reports it done and clears the throttles it would have set
    (broker and topic configs), and a move to a broker that is not there is
    refused."""
    t = topic_name()
    create_topic(broker.bootstrap, t, 2)
    node = node_id(broker)
    move = tmp_path / "topics.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    out = tool("reassign.ReassignPartitionsCommand", "--generate", "--topics-to-move-json-file",
               move, "--broker-list", str(node)).stdout
    plans = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    here = {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": [node], "log_dirs": ["any"]} for p in (0, 1)]}
    assert plans == [here, here], out

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(here))
    out = tool("reassign.ReassignPartitionsCommand", "--execute", "--reassignment-json-file",
               plan).stdout
    assert "Successfully started partition reassignments for %s-0,%s-1" % (t, t) in out, out
    out = tool("reassign.ReassignPartitionsCommand", "--verify", "--reassignment-json-file",
               plan).stdout
    for p in (0, 1):
        assert "Reassignment of partition %s-%d is completed." % (t, p) in out, out
    assert "Clearing broker-level throttles on broker %d" % node in out, out
    assert "Clearing topic-level throttles on topic %s" % t in out, out
    out = tool("reassign.ReassignPartitionsCommand", "--list").stdout
    assert "No partition reassignments found." in out, out

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [node + 1], "log_dirs": ["any"]}]}))
    res = tool("reassign.ReassignPartitionsCommand", "--execute", "--reassignment-json-file",
               elsewhere, check=False)
    assert res.returncode == 1 and "Unknown broker id %d" % (node + 1) in said(res), \
        procs.describe(res)
