"""Administration with the tools people run: Kafka's ConfigCommand
(kafka-configs), TopicCommand --alter, LogDirsCommand, DeleteRecordsCommand,
GetOffsetShell, kafkajs describeConfigs/alterConfigs/createPartitions,
confluent-kafka describe_configs/incremental_alter_configs, a retention
change applied at run time, and a client quota slowing a producer.

The module runs its own broker with a short retention check interval (the
same overrides for Runnel and, with --target=kafka, for Apache Kafka)."""

import json
import re
import struct
import time

import pytest

import procs
import wire
from conftest import missing, require_module
from kafka_cli import offsets, perf_produce
from kafka_real import KafkaReal, jars_present
from runnel_broker import RunnelBroker, runnel_bin

CONFIGS = "kafka.admin.ConfigCommand"
OVERRIDES = {
    "log.retention.check.interval.ms": "300",
    "log.segment.delete.delay.ms": "0",
    "num.partitions": "1",
}


@pytest.fixture(scope="module")
def broker(target, tmp_path_factory):
    base = tmp_path_factory.mktemp("admin_tools")
    if not jars_present():
        missing("Kafka jars in %s" % procs.JARS)
    if target == "kafka":
        b = KafkaReal(base / "data", extra_props=OVERRIDES)
    else:
        b = RunnelBroker(base / "data", binary=runnel_bin(), overrides=OVERRIDES)
    yield from procs.serving(b)


def create_topic(tool, name, partitions=1, *configs):
    args = ["--create", "--topic", name, "--partitions", str(partitions)]
    for c in configs:
        args += ["--config", c]
    tool("TopicCommand", *args)


def describe_configs(tool, etype, name, *extra):
    args = ["--describe", "--entity-type", etype]
    args += ["--entity-default"] if name is None else ["--entity-name", name]
    out = tool(CONFIGS, *(args + list(extra))).stdout
    return dict(re.findall(r"^\s+([a-z0-9_.]+)=(\S*) sensitive=", out, re.M)), out


# ---- kafka-configs on topics -------------------------------------------------------


def test_configs_topic_alter_describe_delete(tool, topic_name):
    name = topic_name()
    create_topic(tool, name)
    tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name,
         "--add-config", "retention.ms=3600000,cleanup.policy=[delete,compact],max.message.bytes=5000")
    cfg, out = describe_configs(tool, "topics", name)
    assert cfg["retention.ms"] == "3600000", out
    assert cfg["max.message.bytes"] == "5000", out
    assert set(cfg["cleanup.policy"].split(",")) == {"delete", "compact"}, out
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=3600000" in out

    tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name,
         "--delete-config", "max.message.bytes")
    cfg, out = describe_configs(tool, "topics", name)
    assert "max.message.bytes" not in cfg and cfg["retention.ms"] == "3600000", out

    every, out = describe_configs(tool, "topics", name, "--all")
    assert every["max.message.bytes"] == "1048588", out
    assert every["segment.bytes"] == "1073741824", out


def test_configs_topic_invalid_values_rejected(tool, topic_name):
    name = topic_name()
    create_topic(tool, name)
    res = tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name,
               "--add-config", "retention.ms=soon", check=False)
    assert res.returncode != 0
    assert "InvalidConfigurationException" in res.stdout + res.stderr, procs.describe(res)
    res = tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name,
               "--add-config", "no.such.config=1", check=False)
    assert res.returncode != 0
    cfg, out = describe_configs(tool, "topics", name)
    assert "retention.ms" not in cfg, out


# ---- kafka-configs on the broker ---------------------------------------------------------


def test_configs_broker_dynamic_and_read_only(tool, broker):
    tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
         "--add-config", "log.cleaner.threads=2,log.retention.bytes=123456789")
    cfg, out = describe_configs(tool, "brokers", "1")
    assert cfg.get("log.retention.bytes") == "123456789", out
    assert "DYNAMIC_BROKER_CONFIG:log.retention.bytes=123456789" in out

    every, out = describe_configs(tool, "brokers", "1", "--all")
    assert "log.dirs" in every and "num.partitions" in every, out

    res = tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
               "--add-config", "log.dirs=/elsewhere", check=False)
    assert res.returncode != 0
    assert "Cannot update these configs dynamically" in res.stdout + res.stderr, procs.describe(res)

    tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.segment.bytes=20000000")
    cfg, out = describe_configs(tool, "brokers", None)
    assert cfg.get("log.segment.bytes") == "20000000", out
    tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
         "--delete-config", "log.segment.bytes")
    tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
         "--delete-config", "log.cleaner.threads,log.retention.bytes")
    cfg, out = describe_configs(tool, "brokers", "1")
    assert "log.retention.bytes" not in cfg, out


# ---- partitions, log dirs, records ----------------------------------------------------------


def test_topics_alter_partitions(tool, topic_name):
    name = topic_name()
    create_topic(tool, name, 2)
    tool("TopicCommand", "--alter", "--topic", name, "--partitions", "5")
    out = tool("TopicCommand", "--describe", "--topic", name).stdout
    assert "PartitionCount: 5" in out, out
    res = tool("TopicCommand", "--alter", "--topic", name, "--partitions", "3", check=False)
    assert res.returncode != 0 and "InvalidPartitionsException" in res.stdout + res.stderr


def test_log_dirs_describe(tool, broker, topic_name):
    name = topic_name()
    create_topic(tool, name, 2)
    perf_produce(broker.bootstrap, name, 200, 100)
    out = tool("LogDirsCommand", "--describe", "--topic-list", name).stdout
    doc = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
    (b,) = doc["brokers"]
    (d,) = b["logDirs"]
    assert d["error"] is None
    parts = {p["partition"]: p for p in d["partitions"]}
    assert set(parts) == {"%s-0" % name, "%s-1" % name}, parts
    assert sum(p["size"] for p in parts.values()) > 200 * 100
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())


def test_delete_records_and_get_offsets(tool, broker, topic_name, tmp_path):
    name = topic_name()
    create_topic(tool, name)
    perf_produce(broker.bootstrap, name, 50, 50)
    assert offsets(tool, name, "-1") == {0: 50}
    assert offsets(tool, name, "-2") == {0: 0}
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": name, "partition": 0, "offset": 20}]}))
    out = tool("DeleteRecordsCommand", "--offset-json-file", str(spec)).stdout
    assert "low_watermark: 20" in out, out
    assert offsets(tool, name, "-2") == {0: 20}
    assert offsets(tool, name, "-1") == {0: 50}


# ---- retention at run time --------------------------------------------------------------------


def test_retention_change_deletes_old_segments_at_run_time(tool, broker, topic_name):
    name = topic_name()
    create_topic(tool, name, 1, "segment.bytes=1048576")  # Kafka 4's smallest
    perf_produce(broker.bootstrap, name, 3500, 1000)  # ~3.6 MB: 3 whole segments + the active one
    assert offsets(tool, name, "-2") == {0: 0}
    time.sleep(1.5)  # every segment's newest record is now older than 1 s
    tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name,
         "--add-config", "retention.ms=1000")
    deadline = time.monotonic() + 30
    while offsets(tool, name, "-2")[0] == 0:
        assert time.monotonic() < deadline, "retention never moved the log start offset"
        time.sleep(0.5)
    start = offsets(tool, name, "-2")[0]
    # Kafka also rolls and deletes an expired active segment (start == 3500);
    # keeping the active one is fine too.
    assert 0 < start <= 3500
    assert offsets(tool, name, "-1") == {0: 3500}


# ---- quotas ---------------------------------------------------------------------------------


def test_quota_slows_producer_to_configured_rate(tool, broker, topic_name):
    name = topic_name()
    create_topic(tool, name)
    rate = 256 * 1024
    tool(CONFIGS, "--alter", "--entity-type", "clients", "--entity-name", "it-quota",
         "--add-config", "producer_byte_rate=%d" % rate)
    out = tool(CONFIGS, "--describe", "--entity-type", "clients", "--entity-name",
               "it-quota").stdout
    assert "producer_byte_rate=%d" % rate in out.replace(".0", ""), out
    n, size = 6000, 1000
    out = perf_produce(broker.bootstrap, name, n, size, client_id="it-quota")
    # The tool's own summary times the sends alone, not the JVM's start-up.
    m = re.search(r"^%d records sent, ([0-9.]+) records/sec" % n, out, re.M)
    assert m, out
    measured = float(m.group(1)) * size
    assert 0.8 * rate <= measured <= 1.2 * rate, "measured %.0f B/s against %d" % (measured, rate)
    tool(CONFIGS, "--alter", "--entity-type", "clients", "--entity-name", "it-quota",
         "--delete-config", "producer_byte_rate")


# ---- kafkajs ----------------------------------------------------------------------------------


def test_kafkajs_describe_alter_configs_create_partitions(node_runner, broker, topic_name):
    res = node_runner("configs.js", broker.bootstrap, topic_name(), timeout=120)
    assert res.returncode == 0, procs.describe(res)
    r = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    assert r["alter"] == {"ok": [0]}, r
    cfg = r["describe"]["ok"]["configs"]
    assert cfg["retention.ms"]["value"] == "7200000" and not cfg["retention.ms"]["isDefault"]
    assert cfg["max.message.bytes"]["value"] == "200000"
    assert r["replace"] == {"ok": [0]}, r
    cfg = r["describe2"]["ok"]["configs"]
    assert cfg["segment.ms"]["value"] == "3600000"
    assert cfg["retention.ms"]["isDefault"] and cfg["max.message.bytes"]["value"] == "1048588"
    assert r["bad"]["error"]["type"] == "INVALID_CONFIG", r
    assert r["partitions"] == {"ok": True}, r
    assert r["shrink"]["error"]["type"] == "INVALID_PARTITIONS", r
    assert r["metadata"] == {"ok": 4}, r


# ---- confluent-kafka -------------------------------------------------------------------------


def test_confluent_describe_and_incremental_alter(broker, tool, topic_name):
    ck = require_module("confluent_kafka")
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)

    name = topic_name()
    create_topic(tool, name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET),
    ])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(timeout=30)
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    cfg = fut.result(timeout=30)
    assert set(cfg["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert cfg["retention.ms"].value == "600000"
    assert not cfg["retention.ms"].is_default and cfg["segment.bytes"].is_default

    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete",
                    incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(timeout=30)
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    cfg = fut.result(timeout=30)
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["retention.ms"].is_default

    bad = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])
    (fut,) = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(timeout=30)
    assert exc.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_metadata_quorum_tool(broker, tool):
    """kafka-metadata-quorum (DescribeQuorum through the broker): one voter,
    this node, leading and caught up, as a single-node KRaft cluster reports."""
    node = getattr(broker, "node_id", 1)
    status = tool("MetadataQuorumCommand", "describe", "--status").stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
    assert fields["LeaderId"] == str(node)
    assert int(fields["LeaderEpoch"]) >= 1
    assert fields["MaxFollowerLag"] == "0"
    assert json.loads(fields["CurrentVoters"])[0]["id"] == node
    assert json.loads(fields["CurrentObservers"]) == []
    rows = tool("MetadataQuorumCommand", "describe", "--replication").stdout.splitlines()
    assert rows[0].split()[:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"]
    leader = rows[1].split()
    assert leader[0] == str(node) and leader[3] == "0" and leader[-1] == "Leader"


def _describe_quorum_v0(topics):
    """A DescribeQuorum v0 request body (flexible): [(topic, [partition])]."""
    body = bytes([len(topics) + 1])
    for name, parts in topics:
        body += bytes([len(name) + 1]) + name.encode() + bytes([len(parts) + 1])
        body += b"".join(struct.pack(">i", p) + b"\x00" for p in parts) + b"\x00"
    return body + b"\x00"


@pytest.mark.parametrize("topics", [[("foo", [0])], [("__cluster_metadata", [1])],
                                    [("__cluster_metadata", [0]), ("x", [0])]])
def test_describe_quorum_other_partitions(broker, topics):
    """Anything but __cluster_metadata partition 0 alone gets
    UNKNOWN_TOPIC_OR_PARTITION on every partition asked for (Kafka's answer)."""
    with wire.connect(broker.host, broker.port) as s:
        s.sendall(wire.frame(wire.request_header(55, 0, 9, flexible=True)
                             + _describe_quorum_v0(topics)))
        resp = wire.recv_frame(s)
    corr, _tags, top_error, ntopics = struct.unpack(">iBhB", resp[:8])
    assert (corr, top_error, ntopics - 1) == (9, 0, len(topics))
    pos = 8
    for name, parts in topics:
        assert resp[pos + 1:pos + 1 + len(name)] == name.encode()
        pos += 1 + len(name)
        assert resp[pos] - 1 == len(parts)
        pos += 1
        for p in parts:
            index, err, leader, epoch, hw = struct.unpack(">ihiiq", resp[pos:pos + 22])
            assert (index, err, leader, epoch, hw) == (p, 3, 0, 0, 0)
            pos += 22 + 3  # no voters, no observers, no tags
        pos += 1
