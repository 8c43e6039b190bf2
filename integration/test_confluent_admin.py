"""confluent-kafka (librdkafka) AdminClient: create, list, describe, delete topics."""

import pytest

from conftest import require_module
from procs import wait_until

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


@pytest.fixture(scope="module")
def admin(ck, broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


@pytest.fixture(scope="module")
def node_id(admin):
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == 1, md.brokers
    return next(iter(md.brokers))


def create(admin, *new_topics, **kw):
    """Create topics; return {name: None or KafkaError}."""
    from confluent_kafka import KafkaException

    out = {}
    for name, fut in admin.create_topics(list(new_topics), request_timeout=15, **kw).items():
        try:
            out[name] = fut.result(timeout=30)
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def topics(admin):
    return admin.list_topics(timeout=10).topics


def test_metadata_shows_broker_and_controller(admin, broker, node_id):
    md = admin.list_topics(timeout=10)
    b = md.brokers[node_id]
    assert (b.host, b.port) == (broker.host, broker.port)
    assert md.controller_id == node_id
    assert md.cluster_id


def test_create_list_describe_delete(ck, admin, node_id, topic_name):
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    res = create(admin, NewTopic(name, 3, 1, config={"retention.ms": "3600000"}))
    assert res == {name: None}

    wait_until(lambda: name in topics(admin), 10, what="topic listed")
    t = topics(admin)[name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert p.error is None
        assert p.leader == node_id
        assert list(p.replicas) == [node_id]
        assert list(p.isrs) == [node_id]

    d = admin.describe_topics(TopicCollection([name]))[name].result(timeout=30)
    assert d.name == name
    assert not d.is_internal
    assert str(d.topic_id) and str(d.topic_id) != ZERO_UUID
    assert [p.id for p in d.partitions] == [0, 1, 2]
    assert all(p.leader.id == node_id for p in d.partitions)

    res = admin.delete_topics([name], operation_timeout=15)
    assert res[name].result(timeout=30) is None
    wait_until(lambda: name not in topics(admin), 10, what="topic gone from metadata")

    with pytest.raises(KafkaException) as ei:
        admin.describe_topics(TopicCollection([name]))[name].result(timeout=30)
    assert ei.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_cluster(admin, broker, node_id):
    c = admin.describe_cluster(request_timeout=15).result(timeout=30)
    assert c.cluster_id
    assert c.controller is not None and c.controller.id == node_id
    assert [(n.id, n.host, n.port) for n in c.nodes] == [(node_id, broker.host, broker.port)]


def test_default_partitions_and_replication(admin, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    assert create(admin, NewTopic(name, -1, -1)) == {name: None}
    wait_until(lambda: name in topics(admin), 10, what="topic listed")
    # num.partitions is 1 by default in Kafka and in Runnel.
    assert sorted(topics(admin)[name].partitions) == [0]


def test_create_existing_topic_fails(ck, admin, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    assert create(admin, NewTopic(name, 1, 1)) == {name: None}
    err = create(admin, NewTopic(name, 2, 1))[name]
    assert err is not None and err.code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    # The original topic is untouched.
    wait_until(lambda: name in topics(admin), 10, what="topic listed")
    assert len(topics(admin)[name].partitions) == 1


@pytest.mark.parametrize("bad", ["bad name!", "..", ".", "a" * 250, "t\u00e9"],
                         ids=["space", "dotdot", "dot", "too-long", "non-ascii"])
def test_invalid_topic_name(ck, admin, bad):
    from confluent_kafka.admin import NewTopic

    err = create(admin, NewTopic(bad, 1, 1))[bad]
    assert err is not None and err.code() == ck.KafkaError.TOPIC_EXCEPTION, err
    assert bad not in topics(admin)


def test_invalid_partitions(ck, admin, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    err = create(admin, NewTopic(name, 0, 1))[name]
    assert err is not None and err.code() == ck.KafkaError.INVALID_PARTITIONS, err
    assert name not in topics(admin)


def test_invalid_replication_factor(ck, admin, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    err = create(admin, NewTopic(name, 1, 3))[name]
    assert err is not None and err.code() == ck.KafkaError.INVALID_REPLICATION_FACTOR, err
    assert name not in topics(admin)


def test_mixed_batch_creates_only_valid_topics(ck, admin, topic_name):
    from confluent_kafka.admin import NewTopic

    good, bad_rf = topic_name("good"), topic_name("rf")
    res = create(admin, NewTopic(good, 2, 1), NewTopic(bad_rf, 1, 3))
    assert res[good] is None
    assert res[bad_rf].code() == ck.KafkaError.INVALID_REPLICATION_FACTOR
    wait_until(lambda: good in topics(admin), 10, what="valid topic listed")
    assert bad_rf not in topics(admin)


def test_validate_only_creates_nothing(admin, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    assert create(admin, NewTopic(name, 2, 1), validate_only=True) == {name: None}
    assert name not in topics(admin)


def test_delete_unknown_topic(ck, admin, topic_name):
    from confluent_kafka import KafkaException

    name = topic_name("missing")
    fut = admin.delete_topics([name], operation_timeout=15)[name]
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=30)
    assert ei.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
