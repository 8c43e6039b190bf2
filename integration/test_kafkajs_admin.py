"""kafkajs admin client (integration/js/admin.js): createTopics,
fetchTopicMetadata, describeCluster, listTopics, deleteTopics."""

import json

import pytest


@pytest.fixture(scope="module")
def result(node_runner, broker):
    res = node_runner("admin.js", broker.bootstrap, "it-kafkajs-admin", timeout=120)
    assert res.returncode == 0, "admin.js failed:\n%s\n%s" % (res.stdout, res.stderr)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    assert lines, "no JSON from admin.js:\n%s\n%s" % (res.stdout, res.stderr)
    return json.loads(lines[-1])


def ok(result, step):
    assert "ok" in result[step], "%s failed: %s" % (step, result[step])
    return result[step]["ok"]


def error_types(result, step):
    err = result[step].get("error")
    assert err, "%s should have failed: %s" % (step, result[step])
    types = [e["type"] for e in err.get("errors", [])]
    if err.get("type"):
        types.append(err["type"])
    if err.get("cause"):
        types.append(err["cause"].get("type"))
    return types


def test_create_topic(result):
    assert ok(result, "create") is True


def test_create_existing_topic_reports_not_created(result):
    # kafkajs maps TOPIC_ALREADY_EXISTS to a false result instead of an error.
    assert ok(result, "create_again") is False


def test_create_invalid_name(result):
    assert error_types(result, "create_bad_name") == ["INVALID_TOPIC_EXCEPTION"]


def test_create_invalid_partitions(result):
    assert error_types(result, "create_bad_partitions") == ["INVALID_PARTITIONS"]


def test_create_invalid_replication_factor(result):
    assert error_types(result, "create_bad_rf") == ["INVALID_REPLICATION_FACTOR"]


def test_list_topics(result):
    names = ok(result, "list")
    assert "it-kafkajs-admin" in names
    assert not [n for n in names if n.startswith("it-kafkajs-admin-")], names
    assert "bad name!" not in names


def test_fetch_topic_metadata(result):
    cluster = ok(result, "cluster")
    node_id = cluster["brokers"][0]["nodeId"]
    (topic,) = ok(result, "metadata")["topics"]
    assert topic["name"] == "it-kafkajs-admin"
    parts = sorted(topic["partitions"], key=lambda p: p["partitionId"])
    assert [p["partitionId"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["partitionErrorCode"] == 0
        assert p["leader"] == node_id
        assert p["replicas"] == [node_id]
        assert p["isr"] == [node_id]


def test_describe_cluster(result, broker):
    cluster = ok(result, "cluster")
    assert cluster["clusterId"]
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(broker.host, broker.port)]
    assert cluster["controller"] == cluster["brokers"][0]["nodeId"]


def test_delete_topic(result):
    assert ok(result, "delete") is True
    assert "it-kafkajs-admin" not in ok(result, "list_after_delete")


def test_delete_missing_topic_fails(result):
    err = result["delete_missing"].get("error")
    assert err, result["delete_missing"]
    assert "UNKNOWN_TOPIC_OR_PARTITION" in error_types(result, "delete_missing"), err
