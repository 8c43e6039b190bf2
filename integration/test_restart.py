"""Topics, their configs and ids survive a clean restart (SIGTERM) and a kill -9."""

import pytest

from conftest import require_module
from procs import wait_until

CONFIGS_A = {"retention.ms": "3600000", "cleanup.policy": "compact"}
CONFIGS_B = {"max.message.bytes": "65536", "segment.bytes": "1048576"}


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def admin_for(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def create(admin, name, partitions, configs):
    from confluent_kafka.admin import NewTopic

    fut = admin.create_topics([NewTopic(name, partitions, 1, config=configs)],
                              request_timeout=15)[name]
    assert fut.result(timeout=30) is None
    wait_until(lambda: name in admin.list_topics(timeout=10).topics, 10, what="topic listed")


def snapshot(admin, names):
    """{name: (topic_id, partition count, {config: value})} plus the cluster id."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource

    out = {}
    for name in names:
        d = admin.describe_topics(TopicCollection([name]))[name].result(timeout=30)
        out[name] = {"id": str(d.topic_id), "partitions": len(d.partitions)}
    res = admin.describe_configs([ConfigResource("topic", n) for n in names], request_timeout=15)
    for resource, fut in res.items():
        entries = fut.result(timeout=30)
        out[resource.name]["configs"] = {k: e.value for k, e in entries.items()
                                         if e.source == 1}  # DYNAMIC_TOPIC_CONFIG
    cluster_id = admin.list_topics(timeout=10).cluster_id
    return out, cluster_id


def test_topics_survive_clean_restart(ck, broker, topic_name):
    a_name, b_name, gone = topic_name("a"), topic_name("b"), topic_name("deleted")
    admin = admin_for(broker)
    create(admin, a_name, 3, CONFIGS_A)
    create(admin, b_name, 1, CONFIGS_B)
    create(admin, gone, 1, {})
    assert admin.delete_topics([gone], operation_timeout=15)[gone].result(timeout=30) is None
    wait_until(lambda: gone not in admin.list_topics(timeout=10).topics, 10, what="deleted")

    before, cluster_before = snapshot(admin, [a_name, b_name])
    assert before[a_name]["configs"] == CONFIGS_A
    assert before[b_name]["configs"] == CONFIGS_B
    del admin

    broker.restart()  # SIGTERM; asserts a clean exit, then starts on the same port and dir

    admin = admin_for(broker)
    wait_until(lambda: {a_name, b_name} <= set(admin.list_topics(timeout=10).topics), 15,
               what="topics listed after restart")
    after, cluster_after = snapshot(admin, [a_name, b_name])
    assert after == before
    assert cluster_after == cluster_before
    assert gone not in admin.list_topics(timeout=10).topics


def test_topics_survive_kill9(ck, broker, topic_name):
    name = topic_name()
    admin = admin_for(broker)
    create(admin, name, 2, {"retention.ms": "7200000"})
    before, _ = snapshot(admin, [name])
    del admin

    broker.kill9()
    broker.start()

    admin = admin_for(broker)
    wait_until(lambda: name in admin.list_topics(timeout=10).topics, 15,
               what="topic listed after kill -9")
    after, _ = snapshot(admin, [name])
    assert after == before


def test_new_topics_after_restart_work(ck, broker, topic_name):
    broker.restart()
    name = topic_name()
    admin = admin_for(broker)
    create(admin, name, 4, {})
    t = admin.list_topics(timeout=10).topics[name]
    assert sorted(t.partitions) == [0, 1, 2, 3]
