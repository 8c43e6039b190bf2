"""Metadata by hand-built requests: topic-list semantics per version and
auto-creation (auto.create.topics.enable=true is the default, as in Kafka)."""

import time

import pytest

import wire
from conftest import require_module
from procs import wait_until

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17


@pytest.fixture
def conn(broker):
    s = wire.connect(broker.host, broker.port)
    yield s
    s.close()


_corr = iter(range(1, 1 << 30))


def md(conn, version, topics, allow=True):
    return wire.metadata(conn, version, topics, next(_corr), allow_auto_create=allow)


def names(resp):
    return sorted(t["name"] for t in resp["topics"])


@pytest.fixture(scope="module")
def existing(broker):
    """One topic with one partition, made with confluent-kafka's admin client."""
    require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "it-md-existing"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic(name, 1, 1)], request_timeout=15)[name]
    assert fut.result(timeout=30) is None
    with wire.connect(broker.host, broker.port) as s:
        wait_until(lambda: md(s, 4, [name], allow=False)["topics"][0]["error_code"] == 0, 15,
                   what="created topic has a leader")
    return name


@pytest.mark.parametrize("version", [0, 1, 4, 8])
def test_broker_and_controller(conn, broker, version):
    r = md(conn, version, [])
    assert [(b["host"], b["port"]) for b in r["brokers"]] == [(broker.host, broker.port)]
    if version >= 1:
        assert r["controller_id"] == r["brokers"][0]["node_id"]
    if version >= 2:
        assert r["cluster_id"]


def test_v0_empty_list_means_all_topics(conn, existing):
    assert existing in names(md(conn, 0, []))


def test_v1_empty_list_means_no_topics(conn, existing):
    assert md(conn, 1, [])["topics"] == []


def test_v1_null_means_all_topics(conn, existing):
    assert existing in names(md(conn, 1, None))
    assert existing in names(md(conn, 8, None))


def test_named_topic(conn, existing):
    r = md(conn, 8, [existing], allow=False)
    (t,) = r["topics"]
    node = r["brokers"][0]["node_id"]
    assert t["error_code"] == 0 and t["name"] == existing and t["is_internal"] is False
    (p,) = t["partitions"]  # num.partitions defaults to 1
    assert p["error_code"] == 0 and p["partition"] == 0
    assert p["leader"] == node and p["replicas"] == [node] and p["isr"] == [node]
    assert p["leader_epoch"] >= 0


def test_no_auto_create_when_not_allowed(conn):
    name = "it-md-not-allowed"
    (t,) = md(conn, 4, [name], allow=False)["topics"]
    assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    time.sleep(1.0)
    (t,) = md(conn, 4, [name], allow=False)["topics"]
    assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert name not in names(md(conn, 4, None))


@pytest.mark.parametrize("version", [0, 4, 8])
def test_auto_create_when_allowed(conn, broker, version):
    name = "it-md-auto-v%d" % version
    (t,) = md(conn, version, [name], allow=True)["topics"]
    # Kafka answers this first request before the topic has partitions.
    assert t["name"] == name
    assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION and t["partitions"] == [], t

    def has_leader():
        (t,) = md(conn, version, [name], allow=False)["topics"]
        return t["error_code"] == 0 and t["partitions"] and t["partitions"][0]["leader"] >= 0

    wait_until(has_leader, 15, what="auto-created topic has a leader")
    (t,) = md(conn, version, [name], allow=False)["topics"]
    assert [p["partition"] for p in t["partitions"]] == [0]


def test_auto_create_invalid_name(conn):
    (t,) = md(conn, 4, ["bad name!"], allow=True)["topics"]
    assert t["error_code"] == INVALID_TOPIC_EXCEPTION
