"""Java AdminClient (kafka-clients 4.x), via integration/java/AdminCheck.java:
createTopics, describeTopics, listTopics, describeCluster, deleteTopics."""

import json

import pytest

TOPIC = "it-java-admin"
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def result(java_runner, broker):
    res = java_runner("AdminCheck", broker.bootstrap, TOPIC, timeout=180)
    assert res.returncode == 0, "AdminCheck failed:\n%s\n%s" % (res.stdout, res.stderr)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    assert lines, "no JSON from AdminCheck:\n%s\n%s" % (res.stdout, res.stderr)
    return json.loads(lines[-1])


def ok(result, step):
    assert "ok" in result[step], "%s failed: %s" % (step, result[step])
    return result[step]["ok"]


def error(result, step):
    assert "error" in result[step], "%s should have failed: %s" % (step, result[step])
    return result[step]["error"]


@pytest.fixture(scope="module")
def node_id(result):
    nodes = ok(result, "cluster")["nodes"]
    assert len(nodes) == 1, nodes
    return nodes[0]["id"]


def test_describe_cluster(result, broker, node_id):
    c = ok(result, "cluster")
    assert c["cluster_id"]
    assert c["nodes"] == [{"id": node_id, "host": broker.host, "port": broker.port}]
    assert c["controller"] == {"id": node_id, "host": broker.host, "port": broker.port}


def test_create_and_describe(result, node_id):
    assert ok(result, "create") is True
    d = ok(result, "describe")
    assert d["name"] == TOPIC and d["internal"] is False
    assert d["topic_id"] and d["topic_id"] != ZERO_UUID
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    for p in d["partitions"]:
        assert p["leader"] == node_id
        assert p["replicas"] == [node_id]
        assert p["isr"] == [node_id]


def test_create_with_broker_defaults(result, node_id):
    assert ok(result, "create_defaults") is True
    d = ok(result, "describe_defaults")
    assert [(p["partition"], p["replicas"]) for p in d["partitions"]] == [(0, [node_id])]


def test_list_topics(result):
    names = ok(result, "list")
    assert TOPIC in names and TOPIC + "-dflt" in names
    # Failed and validate-only creations left nothing behind.
    for suffix in ("-p0", "-rf3", "-vo"):
        assert TOPIC + suffix not in names
    assert "bad name!" not in names


@pytest.mark.parametrize("step,exc", [
    ("create_again", "TopicExistsException"),
    ("create_bad_name", "InvalidTopicException"),
    ("create_bad_partitions", "InvalidPartitionsException"),
    ("create_bad_rf", "InvalidReplicationFactorException"),
])
def test_create_errors(result, step, exc):
    assert error(result, step) == exc


def test_validate_only(result):
    assert ok(result, "create_validate_only") is True


def test_delete(result):
    assert ok(result, "delete") is True
    assert TOPIC not in ok(result, "list_after_delete")
    assert error(result, "describe_after_delete") == "UnknownTopicOrPartitionException"
    assert error(result, "delete_missing") == "UnknownTopicOrPartitionException"
