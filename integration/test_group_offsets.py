"""Committed offsets and group administration without any records: commits
from outside a group (generation -1, as assign()-style consumers and the
admin tools make them), OffsetFetch, ListGroups, DescribeGroups, DeleteGroups,
and the offsets surviving a broker restart (rebuilt from
__consumer_offsets). Clients: kafka-python and confluent-kafka."""

import pytest

from conftest import require_module
from procs import wait_until


@pytest.fixture(scope="module")
def kp():
    require_module("kafka")
    import kafka

    return kafka


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def admin(kp, broker):
    return kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000,
                               client_id="runnel-it-groups")


def make_topic(kp, broker, name, partitions):
    a = admin(kp, broker)
    try:
        a.create_topics([kp.admin.NewTopic(name, partitions, 1)], timeout_ms=15000)
    finally:
        a.close()


def commit(kp, broker, group, offsets):
    """Commits {(topic, partition): (offset, metadata)} with generation -1."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = kp.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                         enable_auto_commit=False, client_id="runnel-it-groups")
    try:
        c.assign([TopicPartition(t, p) for (t, p) in offsets])
        c.commit({TopicPartition(t, p): OffsetAndMetadata(o, m, -1)
                  for (t, p), (o, m) in offsets.items()})
    finally:
        c.close()


def fetched(kp, broker, group):
    a = admin(kp, broker)
    try:
        got = a.list_consumer_group_offsets(group)
    finally:
        a.close()
    return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in got.items()}


def test_commit_fetch_list_describe(kp, broker, topic_name):
    t = topic_name()
    make_topic(kp, broker, t, 3)
    want = {(t, 0): (5, "five"), (t, 2): (17, "")}
    commit(kp, broker, "it-simple-group", want)
    assert fetched(kp, broker, "it-simple-group") == want
    a = admin(kp, broker)
    try:
        groups = dict(a.list_consumer_groups())
        assert groups.get("it-simple-group") == ""  # a simple group has no protocol type
        (d,) = a.describe_consumer_groups(["it-simple-group"])
        assert d.state == "Empty" and d.members == []
        (d,) = a.describe_consumer_groups(["it-no-such-group"])
        assert d.state == "Dead"
    finally:
        a.close()


def test_commit_overwrites_and_unknown_partitions_are_unset(kp, broker, topic_name):
    from kafka import TopicPartition

    t = topic_name()
    make_topic(kp, broker, t, 2)
    commit(kp, broker, "it-overwrite", {(t, 0): (3, "a")})
    commit(kp, broker, "it-overwrite", {(t, 0): (9, "b")})
    assert fetched(kp, broker, "it-overwrite") == {(t, 0): (9, "b")}
    a = admin(kp, broker)
    try:
        got = a.list_consumer_group_offsets("it-overwrite", partitions=[TopicPartition(t, 1)])
        assert got[TopicPartition(t, 1)].offset == -1
    finally:
        a.close()


def test_metadata_keeps_nul_characters(kp, broker, topic_name):
    """Committed metadata is a string that may hold NUL characters: all of it
    comes back, as librdkafka's test 0099 expects."""
    t = topic_name()
    make_topic(kp, broker, t, 1)
    want = {(t, 0): (42, "Hello\0world!")}
    commit(kp, broker, "it-nul-metadata", want)
    assert fetched(kp, broker, "it-nul-metadata") == want


def test_commit_to_unknown_topic_fails(ck, broker):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-unknown-topic",
                  "enable.auto.commit": False})
    try:
        with pytest.raises(KafkaException) as e:
            c.commit(offsets=[TopicPartition("it-no-such-topic", 0, 4)], asynchronous=False)
        assert "UNKNOWN_TOPIC_OR_PART" in str(e.value)
    finally:
        c.close()


def test_delete_groups(ck, kp, broker, topic_name):
    from confluent_kafka.admin import AdminClient

    t = topic_name()
    make_topic(kp, broker, t, 2)
    commit(kp, broker, "it-del-group", {(t, 0): (7, "")})
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in a.delete_consumer_groups(["it-del-group"], request_timeout=15).values():
        assert f.result(timeout=30) is None
    assert "it-del-group" not in dict(admin(kp, broker).list_consumer_groups())
    assert fetched(kp, broker, "it-del-group") == {}
    with pytest.raises(Exception) as e:
        a.delete_consumer_groups(["it-del-group"], request_timeout=15)["it-del-group"].result(30)
    assert "GROUP_ID_NOT_FOUND" in str(e.value)


def test_offsets_survive_restart(kp, broker, topic_name):
    t = topic_name()
    make_topic(kp, broker, t, 4)
    want = {(t, p): (100 + p, "m\0%d" % p if p == 3 else "m%d" % p) for p in range(4)}
    commit(kp, broker, "it-restart-group", want)
    commit(kp, broker, "it-restart-gone", {(t, 0): (1, "")})
    a = admin(kp, broker)
    try:
        a.delete_consumer_groups(["it-restart-gone"])
    finally:
        a.close()
    broker.restart()

    def rebuilt():
        try:
            return fetched(kp, broker, "it-restart-group") == want
        except kp.errors.KafkaError:  # COORDINATOR_LOAD_IN_PROGRESS while Kafka loads
            return False

    wait_until(rebuilt, 30, what="offsets rebuilt after restart")
    groups = dict(admin(kp, broker).list_consumer_groups())
    assert "it-restart-group" in groups and "it-restart-gone" not in groups
