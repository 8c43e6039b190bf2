"""Consumer groups with real clients: members of one group split a topic's
partitions, a member leaving hands its partitions over, committed offsets
resume after a consumer restart and after a broker restart; Kafka's console
consumer (the Java consumer, default assignors) and kafka-consumer-groups
(ConsumerGroupCommand --list/--describe/--reset-offsets/--delete).

These need Produce and Fetch: until the broker advertises them the tests skip
(CI=true makes that a failure)."""

import re
import threading
import time

import pytest

from conftest import in_ci, require_module
from procs import wait_until
import wire

PARTITIONS = 6
PRODUCE, FETCH = 0, 1


@pytest.fixture(scope="module")
def kp(broker):
    require_module("kafka")
    s = wire.connect(broker.host, broker.port)
    try:
        _, apis = wire.api_versions_v0(s, 1)
    finally:
        s.close()
    if PRODUCE not in apis or FETCH not in apis:
        msg = "broker does not advertise Produce/Fetch yet"
        if in_ci():
            pytest.fail(msg + " (CI=true)", pytrace=False)
        pytest.skip(msg)
    import kafka

    return kafka


def make_topic(kp, broker, name, partitions=PARTITIONS):
    a = kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        a.create_topics([kp.admin.NewTopic(name, partitions, 1)], timeout_ms=15000)
    finally:
        a.close()


def produce(kp, broker, topic, count, start=0):
    p = kp.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(start, start + count):
            p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
        p.flush(timeout=60)
    finally:
        p.close(timeout=10)


def kp_consumer(kp, broker, topic, group, **conf):
    cfg = dict(bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
               enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500,
               fetch_max_wait_ms=100, client_id="runnel-it-group")
    cfg.update(conf)
    c = kp.KafkaConsumer(**cfg)
    c.subscribe([topic])
    return c


def poll_values(consumers, want, timeout=60.0, got=None):
    """Polls every consumer in turn until want values arrived in all; returns
    {consumer index: values}, added to got when given."""
    got = got if got is not None else {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while True:
        for i, c in enumerate(consumers):
            for recs in c.poll(timeout_ms=50).values():
                got[i] += [r.value for r in recs]
        if sum(len(v) for v in got.values()) >= want or time.monotonic() > deadline:
            return got


def test_kafka_python_members_split_and_resume(kp, broker, topic_name):
    t = topic_name()
    make_topic(kp, broker, t)
    group = "it-kp-split"
    cs = [kp_consumer(kp, broker, t, group) for _ in range(3)]
    try:
        got = {i: [] for i in range(3)}

        def split():
            poll_values(cs, 0, got=got)
            sets = [c.assignment() for c in cs]
            return all(len(s) == 2 for s in sets) and len(set().union(*sets)) == PARTITIONS

        wait_until(split, 90, interval=0.01, what="three members with two partitions each")
        produce(kp, broker, t, 120)  # after the split: no rebalance moves uncommitted records
        poll_values(cs, 120, got=got)
        values = sorted(v for vs in got.values() for v in vs)
        assert values == sorted(b"v%d" % i for i in range(120))  # each record once
        for c in cs:
            c.commit()
    finally:
        for c in cs:
            c.close()
    produce(kp, broker, t, 30, start=120)
    c = kp_consumer(kp, broker, t, group)
    try:
        got = poll_values([c], 30)[0]
        assert sorted(got) == sorted(b"v%d" % i for i in range(120, 150))  # resumed at commits
    finally:
        c.close()


def test_leaving_member_hands_over_partitions(kp, broker, topic_name):
    t = topic_name()
    make_topic(kp, broker, t)
    group = "it-kp-handover"
    a = kp_consumer(kp, broker, t, group)
    b = kp_consumer(kp, broker, t, group)
    try:
        def both():
            a.poll(timeout_ms=50)
            b.poll(timeout_ms=50)
            return len(a.assignment()) == 3 and len(b.assignment()) == 3

        wait_until(both, 90, interval=0.01, what="two members with three partitions each")
        b.close()
        wait_until(lambda: a.poll(timeout_ms=50) is not None and len(a.assignment()) == 6, 30,
                   interval=0.01, what="the remaining member owns every partition")
    finally:
        a.close()


def confluent_split(ck, broker, t, group, strategy):
    from confluent_kafka import Consumer

    def assigned(i):
        def cb(consumer, partitions):
            owned[i] |= {p.partition for p in partitions}

        return cb

    def revoked(i):
        def cb(consumer, partitions):
            owned[i] -= {p.partition for p in partitions}

        return cb

    owned = [set(), set(), set()]
    cs = []
    for i in range(3):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "partition.assignment.strategy": strategy, "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
        c.subscribe([t], on_assign=assigned(i), on_revoke=revoked(i))
        cs.append(c)
    try:
        def split():
            for c in cs:
                c.poll(0.05)
            return (all(len(o) == 2 for o in owned)
                    and set().union(*owned) == set(range(PARTITIONS)))

        wait_until(split, 90, interval=0.01, what="%s: two partitions per member" % strategy)
    finally:
        for c in cs:
            c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_members_split(kp, broker, topic_name, strategy):
    ck = require_module("confluent_kafka")
    t = topic_name()
    make_topic(kp, broker, t)
    confluent_split(ck, broker, t, "it-ck-" + strategy, strategy)


def test_committed_offsets_survive_broker_restart(kp, broker, topic_name):
    t = topic_name()
    make_topic(kp, broker, t)
    produce(kp, broker, t, 60)
    group = "it-kp-restart"
    c = kp_consumer(kp, broker, t, group)
    try:
        assert len(poll_values([c], 60)[0]) == 60
        c.commit()
    finally:
        c.close()
    broker.restart()
    produce(kp, broker, t, 12, start=60)
    c = kp_consumer(kp, broker, t, group)
    try:
        got = poll_values([c], 12)[0]
        assert sorted(got) == sorted(b"v%d" % i for i in range(60, 72))
    finally:
        c.close()


GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def test_java_console_consumer_and_group_command(kp, broker, topic_name, java_runner):
    t = topic_name()
    make_topic(kp, broker, t)
    produce(kp, broker, t, 36)
    group = "it-java-group"
    res = java_runner(CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", t,
                      "--group", group, "--from-beginning", "--max-messages", "36",
                      "--timeout-ms", "60000", timeout=120)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.split()) == 36

    def tool(*args):
        r = java_runner(GROUP_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    assert group in tool("--list").split()
    out = tool("--describe", "--group", group)
    rows = [ln.split() for ln in out.splitlines() if ln.startswith(group + " ")]
    assert len(rows) == PARTITIONS
    for row in rows:  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        assert row[1] == t and row[3] == "6" and row[4] == "6" and row[5] == "0"
    tool("--reset-offsets", "--group", group, "--topic", t, "--to-datetime",
         "2000-01-01T00:00:00.000", "--execute")
    out = tool("--describe", "--group", group)
    lags = [ln.split()[5] for ln in out.splitlines() if ln.startswith(group + " ")]
    assert lags == ["6"] * PARTITIONS
    tool("--delete-offsets", "--group", group, "--topic", "%s:0" % t)
    out = tool("--describe", "--group", group)
    assert not re.search(r"^%s\s+%s\s+0\s+0\s" % (group, t), out, re.M)
    assert "Deletion of requested consumer groups ('%s') was successful" % group in \
        tool("--delete", "--group", group)
    assert group not in tool("--list").split()


def test_kafkajs_members_split(kp, broker, topic_name, node_runner):
    import json

    t = topic_name()
    make_topic(kp, broker, t)
    res = node_runner("group.js", "split", broker.bootstrap, t, "it-kafkajs-split", "3",
                      str(PARTITIONS), timeout=150)
    assert res.returncode == 0, res.stderr
    owned = json.loads(res.stdout)["assignments"]
    assert sorted(p for o in owned for p in o) == list(range(PARTITIONS))
    assert [len(o) for o in owned] == [2, 2, 2]
