"""Runnel's partition caps: no CreateTopics or CreatePartitions can make the
broker allocate (or create directories) without bound. A topic holds at most
100,000 partitions; the broker at most runnel.max.partitions (200,000 by
default, 10 here). Past either, Kafka's INVALID_PARTITIONS (37) and nothing is
created. Kafka itself has no such caps, so these tests are Runnel's only."""

import pytest

from conftest import require_module

BROKER_PROPS = {"runnel.max.partitions": "10"}


@pytest.fixture
def kp(target):
    if target != "runnel":
        pytest.skip("Runnel's own limits")
    return require_module("kafka")


@pytest.fixture
def admin(kp, broker):
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    yield a
    a.close()


def test_topic_partition_cap(kp, admin):
    from kafka.admin import NewTopic

    for n in (100001, 2 ** 31 - 1):
        with pytest.raises(kp.errors.InvalidPartitionsError):
            admin.create_topics([NewTopic("cap-huge", n, 1)], validate_only=True)


def test_broker_partition_cap(kp, admin):
    from kafka.admin import NewPartitions, NewTopic

    admin.create_topics([NewTopic("cap-a", 6, 1)])
    with pytest.raises(kp.errors.InvalidPartitionsError):
        admin.create_topics([NewTopic("cap-b", 5, 1)])  # 6 + 5 > 10
    admin.create_topics([NewTopic("cap-c", 4, 1)])  # exactly 10
    with pytest.raises(kp.errors.InvalidPartitionsError):
        admin.create_partitions({"cap-a": NewPartitions(7)})
    assert "cap-b" not in admin.list_topics()
