"""Group configs (KIP-848's GROUP config resource, type 32): DescribeConfigs
lists every group key with the broker's defaults, AlterConfigs and
IncrementalAlterConfigs set and delete them with Kafka 4.1's checks and
texts, the values survive a restart and a DeleteGroups, and the consumer
group protocol uses the group's consumer.heartbeat.interval.ms. The group
need not exist. Client: confluent-kafka (librdkafka test 0081 does the
same), raw ConsumerGroupHeartbeat for the interval.
"""

import pytest

import cgwire
import wire
from conftest import require_module
from procs import wait_until
from roundtrip import admin as make_admin
from roundtrip import create_topic

DYNAMIC_GROUP_CONFIG = 8
DEFAULT_CONFIG = 5
DEFAULTS = {
    "consumer.heartbeat.interval.ms": "5000",
    "consumer.session.timeout.ms": "45000",
    "share.auto.offset.reset": "latest",
    "share.heartbeat.interval.ms": "5000",
    "share.isolation.level": "read_uncommitted",
    "share.record.lock.duration.ms": "30000",
    "share.session.timeout.ms": "45000",
    "streams.heartbeat.interval.ms": "5000",
    "streams.num.standby.replicas": "0",
    "streams.session.timeout.ms": "45000",
}


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def describe(ck, a, group):
    r = ck.admin.ConfigResource(ck.admin.ResourceType.GROUP, group)
    res = a.describe_configs([r], request_timeout=15)[r].result(timeout=30)
    return {k: (e.value, e.source) for k, e in res.items()}


def describe_after_change(ck, a, group, key, want):
    """describe() once key reads want: Kafka's broker answers DescribeConfigs
    from its metadata cache, which follows the controller's commit by a few
    milliseconds (Runnel's answer is current at once)."""
    got = {}

    def changed():
        got.update(describe(ck, a, group))
        return got.get(key) == want

    wait_until(changed, 10, interval=0.05, what="%s of %s reads %s" % (key, group, want))
    return got


def alter(ck, a, group, *ops):
    """IncrementalAlterConfigs of (key, value, op name); None or the error text."""
    entries = [ck.admin.ConfigEntry(k, v, incremental_operation=getattr(
        ck.admin.AlterConfigOpType, op)) for k, v, op in ops]
    r = ck.admin.ConfigResource(ck.admin.ResourceType.GROUP, group, incremental_configs=entries)
    try:
        return a.incremental_alter_configs([r], request_timeout=15)[r].result(timeout=30)
    except ck.KafkaException as e:
        err = e.args[0]
        assert err.code() == ck.KafkaError.INVALID_CONFIG, err
        return err.str()


def test_defaults_for_any_group(ck, broker):
    got = describe(ck, make_admin(broker.bootstrap), "gc-never-seen")
    assert got == {k: (v, DEFAULT_CONFIG) for k, v in DEFAULTS.items()}


def test_set_delete_and_checks(ck, broker):
    a = make_admin(broker.bootstrap)
    g = "gc-checks"
    assert alter(ck, a, g, ("consumer.session.timeout.ms", "50000", "SET"),
                 ("share.auto.offset.reset", "by_duration:PT1H30M", "SET")) is None
    got = describe_after_change(ck, a, g, "share.auto.offset.reset",
                                ("by_duration:PT1H30M", DYNAMIC_GROUP_CONFIG))
    assert got["consumer.session.timeout.ms"] == ("50000", DYNAMIC_GROUP_CONFIG)
    assert got["consumer.heartbeat.interval.ms"] == ("5000", DEFAULT_CONFIG)
    refused = {
        ("consumer.session.timeout.ms", "5000"):
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ("consumer.heartbeat.interval.ms", "60000"):
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ("consumer.heartbeat.interval.ms", "abc"):
            "Invalid value abc for configuration consumer.heartbeat.interval.ms: "
            "Not a number of type INT",
        ("share.isolation.level", "dirty"):
            "Invalid value dirty for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ("streams.num.standby.replicas", "3"):
            "streams.num.standby.replicas must be less than or equal to "
            "group.streams.max.standby.replicas",
        ("no.such.key", "1"): "Unknown group config name: no.such.key",
    }
    for (key, value), text in refused.items():
        assert alter(ck, a, g, (key, value, "SET")) == text
    assert alter(ck, a, g, ("consumer.session.timeout.ms", "1", "APPEND")) == (
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
    # Nothing refused changed anything.
    assert describe(ck, a, g) == got
    assert alter(ck, a, g, ("share.auto.offset.reset", None, "DELETE")) is None
    describe_after_change(ck, a, g, "share.auto.offset.reset", ("latest", DEFAULT_CONFIG))


def test_legacy_alter_replaces_all(ck, broker):
    a = make_admin(broker.bootstrap)
    g = "gc-legacy"
    assert alter(ck, a, g, ("consumer.session.timeout.ms", "50000", "SET"),
                 ("streams.num.standby.replicas", "1", "SET")) is None
    r = ck.admin.ConfigResource(ck.admin.ResourceType.GROUP, g,
                                set_config={"consumer.heartbeat.interval.ms": "6000"})
    assert a.alter_configs([r], request_timeout=15)[r].result(timeout=30) is None
    set_here = {k: v for k, (v, src) in describe(ck, a, g).items()
                if src == DYNAMIC_GROUP_CONFIG}
    assert set_here == {"consumer.heartbeat.interval.ms": "6000"}


def test_heartbeat_interval_from_group_config(ck, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    g = t + "-group"
    a = make_admin(broker.bootstrap)
    assert alter(ck, a, g, ("consumer.heartbeat.interval.ms", "7000", "SET")) is None
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        assert cgwire.find_coordinator(s, g) == 0
        r = cgwire.heartbeat(s, g, member_id="m-1", epoch=0, rebalance=30000, topics=[t],
                             owned=[])
        assert r["error"] == 0, r
        assert r["interval"] == 7000
        cgwire.heartbeat(s, g, member_id="m-1", epoch=-1)  # leave


def test_configs_survive_delete_and_restart(ck, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, 1)
    g = t + " group"  # ids may hold spaces
    a = make_admin(broker.bootstrap)
    assert alter(ck, a, g, ("consumer.session.timeout.ms", "55000", "SET")) is None
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g,
                     "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition(t, 0, 1)], asynchronous=False)
    c.close()
    assert a.delete_consumer_groups([g], request_timeout=15)[g].result(timeout=30) is None
    assert describe(ck, a, g)["consumer.session.timeout.ms"] == ("55000", DYNAMIC_GROUP_CONFIG)
    broker.restart()
    a = make_admin(broker.bootstrap)

    def kept():
        try:
            return describe(ck, a, g)["consumer.session.timeout.ms"] == (
                "55000", DYNAMIC_GROUP_CONFIG)
        except ck.KafkaException:
            return False

    wait_until(kept, 60, what="group config after restart")
