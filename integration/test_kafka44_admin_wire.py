"""Two admin answers Kafka 4.x added, on the wire, as Kafka 4.4.0 gives them
(run with --target=kafka to check the expectations against Kafka itself):

- DescribeGroups v6 (KIP-1043): a group that does not exist, and one that is
  not a classic group, get GROUP_ID_NOT_FOUND with Kafka's message; up to v5
  the same groups are Dead with no error.
- ListConfigResources (API 74) v0-1 (KIP-1142): the resources that can carry
  configs, groups with configs first, then brokers, then topics; a resource
  type that is not a config resource type gets UNSUPPORTED_VERSION.

Runnel keeps no broker loggers and no client metrics resources, so it lists
none of those (Kafka lists its node as a broker logger, docs/compatibility.md).
"""

import itertools
import struct

import pytest

import kafka_cli
import wire
from conftest import require_module

GROUP_ID_NOT_FOUND = 69
UNSUPPORTED_VERSION = 35
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32

_corr = itertools.count(1)


def describe_groups(broker, groups, version):
    """[(error, message, group id, state, protocol type)] from DescribeGroups v5/v6."""
    body = wire.compact_array([wire.compact_string(g) for g in groups]) + b"\x00" + b"\x00"
    with wire.connect(broker.host, broker.port) as sock:
        r = wire.flex_call(sock, 15, version, body, next(_corr))
    r.take(">i")  # throttle

    def group(x):
        err = x.take(">h")
        msg = x.string() if version >= 6 else None
        gid, state, ptype = x.string(), x.string(), x.string()
        x.string()  # protocol data
        x.array(lambda m: pytest.fail("no members expected"))
        x.take(">i")  # authorized operations
        x.skip_tags()
        return err, msg, gid, state, ptype

    return r.array(group)


def list_config_resources(broker, version, types=()):
    """(error, [(name, type)]) from ListConfigResources."""
    body = b""
    if version >= 1:
        body = wire.compact_array([struct.pack(">b", t) for t in types])
    with wire.connect(broker.host, broker.port) as sock:
        r = wire.flex_call(sock, 74, version, body + b"\x00", next(_corr))
    r.take(">i")  # throttle
    err = r.take(">h")

    def resource(x):
        name = x.string()
        rtype = x.take(">b") if version >= 1 else None
        x.skip_tags()
        return name, rtype

    return err, r.array(resource)


@pytest.fixture(scope="module")
def groups(broker):
    """A classic group and a KIP-848 consumer group, each with a commit."""
    ck = require_module("confluent_kafka")
    topic = "kafka44-wire-groups"
    p = ck.Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    names = {"classic": "kafka44-classic", "consumer": "kafka44-modern"}
    for protocol, name in names.items():
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name,
                         "group.protocol": protocol, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        try:
            c.subscribe([topic])
            for _ in range(30):
                m = c.poll(1)
                if m is not None and m.error() is None:
                    break
            assert m is not None and m.value() == b"x"
            c.commit(asynchronous=False)
        finally:
            c.close()
    return names


def test_describe_groups_v6_not_found_and_not_classic(broker, groups):
    got = describe_groups(broker, ["kafka44-none", "", groups["classic"], groups["consumer"]], 6)
    assert got == [
        (GROUP_ID_NOT_FOUND, "Group kafka44-none not found.", "kafka44-none", "Dead", ""),
        (GROUP_ID_NOT_FOUND, "Group  not found.", "", "Dead", ""),
        (0, None, groups["classic"], "Empty", "consumer"),
        (GROUP_ID_NOT_FOUND, "Group %s is not a classic group." % groups["consumer"],
         groups["consumer"], "Dead", ""),
    ]


def test_describe_groups_v5_says_dead_without_an_error(broker, groups):
    got = describe_groups(broker, ["kafka44-none", "", groups["consumer"]], 5)
    assert got == [(0, None, "kafka44-none", "Dead", ""), (0, None, "", "Dead", ""),
                   (0, None, groups["consumer"], "Dead", "")]


@pytest.fixture(scope="module")
def config_resources(broker):
    """A topic, and a group with a dynamic config (kafka-configs, Kafka's own
    tool): the resources ListConfigResources must name."""
    admin = require_module("confluent_kafka.admin")
    a = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "kafka44-wire-configs"
    for f in a.create_topics([admin.NewTopic(topic, 1, 1)]).values():
        f.result()
    group = "kafka44-configured"
    kafka_cli.run_tool(broker.bootstrap, "kafka.admin.ConfigCommand", "--alter", "--entity-type", "groups",
                       "--entity-name", group, "--add-config", "consumer.session.timeout.ms=50000")
    return {"topic": topic, "group": group}


def node_id(broker):
    ck = require_module("confluent_kafka")
    brokers = ck.Producer({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).brokers
    assert len(brokers) == 1
    return str(next(iter(brokers)))


def kinds(listed, *rtypes):
    return [(n, t) for n, t in listed if t in rtypes]


def test_list_config_resources_all_types_in_kafkas_order(broker, config_resources):
    err, listed = list_config_resources(broker, 1)
    assert err == 0
    # Runnel has none of these two kinds; Kafka lists its node as a broker logger.
    listed = [(n, t) for n, t in listed if t not in (BROKER_LOGGER, CLIENT_METRICS)]
    order = [t for _, t in listed]
    assert order == sorted(order, reverse=True), listed  # groups, brokers, topics
    assert (config_resources["group"], GROUP) in listed
    assert kinds(listed, BROKER) == [(node_id(broker), BROKER)]
    topics = [n for n, _ in kinds(listed, TOPIC)]
    assert config_resources["topic"] in topics
    assert len(topics) == len(set(topics))


def test_list_config_resources_by_type(broker, config_resources):
    err, topics = list_config_resources(broker, 1, [TOPIC])
    assert err == 0 and topics and {t for _, t in topics} == {TOPIC}
    assert (config_resources["topic"], TOPIC) in topics
    assert list_config_resources(broker, 1, [BROKER, TOPIC, BROKER]) == \
        (0, [(node_id(broker), BROKER)] + topics)
    err, grps = list_config_resources(broker, 1, [GROUP])
    assert err == 0 and (config_resources["group"], GROUP) in grps
    assert {t for _, t in grps} == {GROUP}
    assert list_config_resources(broker, 1, [CLIENT_METRICS]) == (0, [])
    # v0 was ListClientMetricsResources: client metrics resources only.
    assert list_config_resources(broker, 0) == (0, [])


@pytest.mark.parametrize("types", [[0], [1], [3], [99], [-1], [TOPIC, 0]])
def test_list_config_resources_unknown_type_unsupported_version(broker, types):
    assert list_config_resources(broker, 1, types) == (UNSUPPORTED_VERSION, [])
