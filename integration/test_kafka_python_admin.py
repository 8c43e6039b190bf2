"""kafka-python KafkaAdminClient: create, list, describe, delete topics.

kafka-python speaks older, non-flexible request versions (CreateTopics v3,
DeleteTopics v3, Metadata v5 or so), so this covers other codec paths than
librdkafka and the Java client do.
"""

import pytest

from conftest import require_module
from procs import wait_until


@pytest.fixture(scope="module")
def kp():
    require_module("kafka")
    import kafka.admin
    import kafka.errors

    return kafka


@pytest.fixture(scope="module")
def admin(kp, broker):
    a = kp.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                                  client_id="runnel-it-kafka-python",
                                  request_timeout_ms=15000)
    yield a
    a.close()


@pytest.fixture(scope="module")
def cluster(admin):
    return admin.describe_cluster()


def new_topic(kp, name, partitions, rf, configs=None):
    return kp.admin.NewTopic(name, partitions, rf, topic_configs=configs or {})


def test_describe_cluster(admin, broker, cluster):
    assert cluster["cluster_id"]
    brokers = cluster["brokers"]
    assert len(brokers) == 1
    b = brokers[0]
    assert (b["host"], b["port"]) == (broker.host, broker.port)
    assert cluster["controller_id"] == b["node_id"]


def test_create_list_describe_delete(kp, admin, cluster, topic_name):
    node_id = cluster["brokers"][0]["node_id"]
    name = topic_name()
    resp = admin.create_topics([new_topic(kp, name, 3, 1, {"retention.ms": "3600000"})])
    assert [(t[0], t[1]) for t in resp.topic_errors] == [(name, 0)]

    wait_until(lambda: name in admin.list_topics(), 10, what="topic listed")

    (d,) = admin.describe_topics([name])
    assert d["topic"] == name and d["error_code"] == 0 and not d["is_internal"]
    parts = sorted(d["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["error_code"] == 0
        assert p["leader"] == node_id
        assert p["replicas"] == [node_id]
        assert p["isr"] == [node_id]

    resp = admin.delete_topics([name])
    assert [(t[0], t[1]) for t in resp.topic_error_codes] == [(name, 0)]
    wait_until(lambda: name not in admin.list_topics(), 10, what="topic gone")
    (d,) = admin.describe_topics([name])
    assert d["error_code"] == kp.errors.UnknownTopicOrPartitionError.errno


def test_create_existing_topic_fails(kp, admin, topic_name):
    name = topic_name()
    admin.create_topics([new_topic(kp, name, 1, 1)])
    with pytest.raises(kp.errors.TopicAlreadyExistsError):
        admin.create_topics([new_topic(kp, name, 1, 1)])


@pytest.mark.parametrize("bad", ["bad name!", "..", "a" * 250], ids=["space", "dotdot", "too-long"])
def test_invalid_topic_name(kp, admin, bad):
    with pytest.raises(kp.errors.InvalidTopicError):
        admin.create_topics([new_topic(kp, bad, 1, 1)])
    assert bad not in admin.list_topics()


def test_invalid_partitions(kp, admin, topic_name):
    name = topic_name()
    with pytest.raises(kp.errors.InvalidPartitionsError):
        admin.create_topics([new_topic(kp, name, 0, 1)])
    assert name not in admin.list_topics()


def test_invalid_replication_factor(kp, admin, topic_name):
    name = topic_name()
    with pytest.raises(kp.errors.InvalidReplicationFactorError):
        admin.create_topics([new_topic(kp, name, 1, 3)])
    assert name not in admin.list_topics()


def test_validate_only_creates_nothing(kp, admin, topic_name):
    name = topic_name()
    resp = admin.create_topics([new_topic(kp, name, 2, 1)], validate_only=True)
    assert [(t[0], t[1]) for t in resp.topic_errors] == [(name, 0)]
    assert name not in admin.list_topics()


def test_delete_unknown_topic(kp, admin, topic_name):
    with pytest.raises(kp.errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name("missing")])
