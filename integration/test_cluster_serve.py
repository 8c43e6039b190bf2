"""Cluster mode, the metadata acted on: one Apache Kafka 4.4.0 KRaft
controller and three Runnel brokers (real binaries). A topic created on the
controller (CreateTopics sent to it, until forwarding lands)
reaches every broker through __cluster_metadata; each broker makes the
replicas it hosts, with the controller's topic id; a RemoveTopicRecord
removes them; a record of an unknown type stops a broker with one line.

Ports: 19500-19599.
"""

import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

import kafka_cli
import kraft
import procs
import wire
from roundtrip import check_roundtrip, make_records, parse_tool_output, write_lines
from test_cluster_forward import find_coordinator
from test_cluster_join import ClusterBroker, need_jars, wait_for  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

CONTROLLER_PORT = 19501
BROKER_PORTS = {1: 19511, 2: 19512, 3: 19513}
TIMES = {}


def note(name, seconds):
    TIMES[name] = seconds
    print("\n[cluster-serve] %s: %.2f s" % (name, seconds))


class NodeBroker(ClusterBroker):
    """A cluster broker with its own node id."""

    def __init__(self, datadir, quorum, node):
        super().__init__(datadir, quorum, port=BROKER_PORTS[node],
                         extra={"node.id": str(node)})
        self.node = node


@pytest.fixture
def quorum1(tmp_path):
    q = kraft.KraftQuorum(tmp_path / "kraft", [CONTROLLER_PORT]).start()
    yield q
    q.stop()


def start_brokers(quorum, tmp_path, nodes=(1, 2, 3)):
    brokers = {}
    for n in nodes:
        b = NodeBroker(tmp_path / ("b%d" % n), quorum, n)
        b.format(quorum.cluster_id)
        b.start()
        brokers[n] = b
    return brokers


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def controller_topics(quorum, op, name, partitions=1, rf=1):
    """Creates (CreateTopics v4) or deletes (DeleteTopics v3) a topic straight
    on the controller, which serves both on its listener; Kafka 4.4's
    kafka-topics has no --bootstrap-controller and its Admin refuses these
    calls with bootstrap.controllers. Until brokers forward them."""
    c = quorum.controllers[0]
    sock = wire.connect(c.host, c.port)
    try:
        if op == "create":
            body = (struct.pack(">i", 1) + _str(name) + struct.pack(">ihii", partitions, rf, 0, 0)
                    + struct.pack(">ib", 30000, 0))
            sock.sendall(wire.frame(wire.request_header(19, 4, 7) + body))
        else:
            body = struct.pack(">i", 1) + _str(name) + struct.pack(">i", 30000)
            sock.sendall(wire.frame(wire.request_header(20, 3, 7) + body))
        resp = wire.recv_frame(sock)
    finally:
        sock.close()
    # correlation id, throttle, one topic: name, error code
    (n,) = struct.unpack_from(">i", resp, 8)
    (nlen,) = struct.unpack_from(">h", resp, 12)
    (err,) = struct.unpack_from(">h", resp, 14 + nlen)
    assert n == 1 and err == 0, (op, name, err)


def partition_dirs(b, topic):
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in Path(b.datadir).glob(topic + "-*")
                  if p.is_dir())


def registry_line(b, topic):
    reg = Path(b.datadir) / "runnel-topics.properties"
    if not reg.exists():
        return None
    for line in reg.read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["topic", topic]:
            return parts
    return None


def wait_unfenced(brokers):
    """Until every broker is unfenced: the controller places replicas only
    on unfenced brokers."""
    for b in brokers.values():
        wait_for("broker %d unfenced" % b.node,
                 lambda b=b: "unfenced: serving in the cluster" in b.log_text(), 30)


def stop_all(brokers):
    for b in brokers.values():
        b.stop()


def test_topic_from_controller_reaches_hosting_brokers(quorum1, tmp_path):
    brokers = start_brokers(quorum1, tmp_path)
    try:
        wait_unfenced(brokers)
        t0 = time.monotonic()
        controller_topics(quorum1, "create", "orders", 6, 1)
        wait_for("every broker holds the topic",
                 lambda: all(len(registry_line(b, "orders") or []) == 4
                             for b in brokers.values()),
                 30)
        note("topic created on the controller -> on every broker's disk", time.monotonic() - t0)
        ids = {tuple(registry_line(b, "orders")[2:4]) for b in brokers.values()}
        assert len(ids) == 1, ids  # one id (the controller's) and 6 partitions everywhere
        assert list(ids)[0][1] == "6"
        for b in brokers.values():
            assert b.alive()
            assert "stopping: cannot apply" not in b.log_text()

        controller_topics(quorum1, "delete", "orders")
        wait_for("every broker removed it",
                 lambda: all(registry_line(b, "orders") is None and not partition_dirs(b, "orders")
                             for b in brokers.values()), 30)
    finally:
        stop_all(brokers)


# ---- serving: Metadata, leaders, every client through any broker -------------

TOPIC = "serve"
PARTS = 6


def describe_leaders(bootstrap, topic):
    """{partition: leader} from `kafka-topics --describe` ("none" -> -1)."""
    res = kafka_cli.run_tool(bootstrap, "TopicCommand", "--describe", "--topic", topic)
    leaders = {}
    for m in re.finditer(r"Partition:\s*(\d+)\s+Leader:\s*(\S+)", res.stdout):
        leaders[int(m.group(1))] = -1 if m.group(2) == "none" else int(m.group(2))
    return leaders


def metadata_leaders(b, topic):
    """{partition: leader} from librdkafka's Metadata (kcat -L) of broker b."""
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat not installed")
    res = subprocess.run([kcat, "-b", b.bootstrap, "-L", "-t", topic, "-m", "5"],
                         capture_output=True, timeout=30)
    return {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r"partition (\d+), leader (-?\d+)", res.stdout.decode())}


@pytest.fixture
def cluster3(quorum1, tmp_path):
    brokers = start_brokers(quorum1, tmp_path)
    try:
        wait_unfenced(brokers)
        controller_topics(quorum1, "create", TOPIC, PARTS, 1)
        t0 = time.monotonic()
        wait_for("6 leaders in every broker's Metadata",
                 lambda: all(len([l for l in metadata_leaders(b, TOPIC).values() if l >= 0])
                             == PARTS for b in brokers.values()), 60, interval=0.2)
        note("topic created -> 6 leaders in every broker's Metadata", time.monotonic() - t0)
        yield brokers
    finally:
        stop_all(brokers)


def produce_python(bootstrap, topic, per_partition, tag):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=5)
    try:
        futs = [p.send(topic, key=b"k%d" % i, value=("%s-%d-%d" % (tag, part, i)).encode(),
                       partition=part)
                for part in range(PARTS) for i in range(per_partition)]
        p.flush(30)
        for f in futs:
            f.get(timeout=30)
    finally:
        p.close()


def read_python(bootstrap, topic, partitions, want, timeout=30.0):
    """The values of every record in the given partitions, read with
    kafka-python through bootstrap."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=1000)
    tps = [TopicPartition(topic, p) for p in partitions]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value.decode() for r in recs]
    finally:
        c.close()
    return got


def test_leaders_spread_and_kafka_topics_describe(cluster3):
    leaders = describe_leaders(cluster3[1].bootstrap, TOPIC)
    assert sorted(leaders) == list(range(PARTS)), leaders
    per = {n: sum(1 for l in leaders.values() if l == n) for n in cluster3}
    assert per == {1: 2, 2: 2, 3: 2}, leaders
    # every broker answers the same leaders
    for b in cluster3.values():
        assert metadata_leaders(b, TOPIC) == leaders


def test_kafka_python_through_any_broker(cluster3):
    produce_python(cluster3[2].bootstrap, TOPIC, 10, "kp")
    got = read_python(cluster3[3].bootstrap, TOPIC, range(PARTS), PARTS * 10)
    assert sorted(got) == sorted("kp-%d-%d" % (p, i) for p in range(PARTS) for i in range(10))


def test_confluent_kafka_through_any_broker(cluster3):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": cluster3[1].bootstrap})
    for part in range(PARTS):
        for i in range(5):
            p.produce(TOPIC, value=b"ck-%d-%d" % (part, i), partition=part)
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": cluster3[2].bootstrap, "group.id": "x",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(TOPIC, part, confluent_kafka.OFFSET_BEGINNING)
              for part in range(PARTS)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < PARTS * 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    assert sorted(got) == sorted("ck-%d-%d" % (p, i) for p in range(PARTS) for i in range(5))


def test_kcat_through_any_broker(cluster3, kcat):
    for part in range(PARTS):
        res = subprocess.run([kcat, "-b", cluster3[3].bootstrap, "-P", "-t", TOPIC,
                              "-p", str(part)], input=b"".join(b"kc-%d-%d\n" % (part, i)
                                                               for i in range(4)),
                             capture_output=True, timeout=60)
        assert res.returncode == 0, res.stderr
    got = []
    for part in range(PARTS):
        res = subprocess.run([kcat, "-b", cluster3[1].bootstrap, "-C", "-t", TOPIC, "-p",
                              str(part), "-o", "beginning", "-e", "-q"],
                             capture_output=True, timeout=60)
        assert res.returncode == 0, res.stderr
        got += res.stdout.decode().split()
    assert sorted(got) == sorted("kc-%d-%d" % (p, i) for p in range(PARTS) for i in range(4))


def test_java_client_through_any_broker(cluster3, java_runner, tmp_path):
    records = make_records("cluster-java", 120)
    path = tmp_path / "records.txt"
    write_lines(path, records)
    res = java_runner("RecordsTool", "roundtrip", cluster3[2].bootstrap, path,
                      "%s=none" % TOPIC, timeout=240)
    assert res.returncode == 0, procs.describe(res)
    acks, errors, got, other = parse_tool_output(res.stdout)
    assert not errors, sorted(errors.items())[:5]
    check_roundtrip(records, got, PARTS, acks)
    assert {a.partition for a in acks.values()} == set(range(PARTS))


def test_not_leader_for_other_brokers_partitions(cluster3):
    """A Produce v7 sent to a broker that does not lead the partition is
    refused with NOT_LEADER_OR_FOLLOWER (error 6)."""
    from kafka.client_async import KafkaClient
    from kafka.protocol.produce import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder
    leaders = describe_leaders(cluster3[1].bootstrap, TOPIC)
    other = [p for p, l in leaders.items() if l != 1][0]
    bld = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    bld.append(timestamp=None, key=None, value=b"x", headers=[])
    bld.close()
    client = KafkaClient(bootstrap_servers=cluster3[1].bootstrap, request_timeout_ms=10000)
    try:
        deadline = time.monotonic() + 20
        while not client.ready(1) and time.monotonic() < deadline:
            client.poll(timeout_ms=100)
        req = ProduceRequest[7](transactional_id=None, required_acks=1, timeout=5000,
                                topics=[(TOPIC, [(other, bld.buffer())])])
        fut = client.send(1, req)
        client.poll(future=fut, timeout_ms=10000)
        assert fut.succeeded(), fut.exception
        part = fut.value.topics[0][1][0]
        assert part[1] == 6, fut.value
    finally:
        client.close()


def test_kill9_leaders_none_then_back_with_data(cluster3):
    produce_python(cluster3[1].bootstrap, TOPIC, 5, "before")
    victim = cluster3[3]
    theirs = [p for p, l in describe_leaders(cluster3[1].bootstrap, TOPIC).items() if l == 3]
    assert len(theirs) == 2
    victim.kill9()
    t0 = time.monotonic()
    wait_for("its partitions without a leader",
             lambda: all(metadata_leaders(cluster3[1], TOPIC).get(p, 0) in (-1, None)
                         for p in theirs), 60, interval=0.2)
    note("kill -9 -> its partitions leader -1", time.monotonic() - t0)
    leaders = describe_leaders(cluster3[2].bootstrap, TOPIC)
    assert all(leaders[p] == -1 for p in theirs), leaders
    # the other partitions keep working
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=cluster3[2].bootstrap, acks=1)
    for part in range(PARTS):
        if part not in theirs:
            p.send(TOPIC, value=b"during", partition=part).get(timeout=30)
    p.close()
    t0 = time.monotonic()
    victim.start()
    wait_for("its partitions led again",
             lambda: all(metadata_leaders(cluster3[1], TOPIC).get(p) == 3 for p in theirs),
             60, interval=0.2)
    note("restart -> its partitions led again", time.monotonic() - t0)
    got = read_python(cluster3[2].bootstrap, TOPIC, theirs, 10)
    assert sorted(got) == sorted("before-%d-%d" % (p, i) for p in theirs for i in range(5))


def test_api_versions_finalized_features_from_the_controller(cluster3):
    """ApiVersions v3+ answers the levels the controller's FeatureLevelRecords
    finalized (metadata.version at least, as the quorum was formatted)."""
    import cgwire
    feats = cgwire.finalized_features(cluster3[1].host, cluster3[1].port)
    assert feats.get("metadata.version", (0, 0))[0] >= 7, feats


def consume_in_group(ck, bootstraps, group, want, timeout=60.0):
    """Members of group, one per bootstrap broker, read and commit (sync)
    until want records were read between them; returns the values."""
    members = [ck.Consumer({"bootstrap.servers": bs, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
               for bs in bootstraps]
    got = []
    try:
        for c in members:
            c.subscribe([TOPIC])
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            for c in members:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.value().decode())
                    c.commit(message=m, asynchronous=False)
    finally:
        for c in members:
            c.close()
    return got


def test_consumer_group_of_three_commits_and_resumes(cluster3):
    """FindCoordinator names the leader of the group's __consumer_offsets
    partition (created by the controller on first use), whichever broker is
    asked; three members share the partitions, commit, and a later member
    resumes after what they committed."""
    ck = pytest.importorskip("confluent_kafka")
    bootstraps = [b.bootstrap for b in cluster3.values()]
    p = ck.Producer({"bootstrap.servers": bootstraps[0], "acks": "all"})

    def produce(tag, n):
        for part in range(PARTS):
            for i in range(n):
                p.produce(TOPIC, value=b"%s-%d-%d" % (tag.encode(), part, i), partition=part)
        assert p.flush(30) == 0

    produce("g1", 10)
    t0 = time.monotonic()
    got = consume_in_group(ck, bootstraps, "three", PARTS * 10)
    note("group of 3: first 60 records read and committed", time.monotonic() - t0)
    assert sorted(got) == sorted("g1-%d-%d" % (q, i) for q in range(PARTS) for i in range(10))
    coords = {find_coordinator(b.bootstrap, 0, "three") for b in cluster3.values()}
    assert len(coords) == 1, coords  # every broker names the same coordinator
    (err, node), = coords
    assert err == 0 and node in cluster3, coords
    produce("g2", 5)
    got = consume_in_group(ck, bootstraps[2:], "three", PARTS * 5)
    assert sorted(got) == sorted("g2-%d-%d" % (q, i) for q in range(PARTS) for i in range(5))
    other = next(n for n in cluster3 if n != node)
    assert offset_fetch_v8(cluster3[node].bootstrap, "three", TOPIC) == (0, [(0, 15)])
    # a broker that does not coordinate the group sends the client back to
    # FindCoordinator, as Kafka's does, instead of answering from its own state
    assert offset_fetch_v8(cluster3[other].bootstrap, "three", TOPIC) == (16, [])
    assert heartbeat_v4(cluster3[other].bootstrap, "three") == 16  # NOT_COORDINATOR


OFFSET_FETCH, HEARTBEAT = 9, 12


def offset_fetch_v8(bootstrap, group, topic):
    """OffsetFetch v8 of partition 0 of topic: (group error, [(partition, offset)])."""
    host, port = bootstrap.split(":")
    body = (wire.compact_array([wire.compact_string(group) + wire.compact_array(
        [wire.compact_string(topic) + wire.compact_array([struct.pack(">i", 0)]) + b"\0"]) + b"\0"])
        + b"\0" + b"\0")  # require_stable false, tags
    with wire.connect(host, int(port)) as s:
        r = wire.flex_call(s, OFFSET_FETCH, 8, body, 7)
    r.take(">i")  # throttle
    assert r.uvarint() == 2 and r.string() == group
    parts = []

    def partition(x):
        index, offset, _epoch = x.take(">iqi")
        x.string()
        assert x.take(">h") == 0
        x.skip_tags()
        parts.append((index, offset))

    def one_topic(x):
        assert x.string() == topic
        x.array(partition)
        x.skip_tags()

    r.array(one_topic)
    return r.take(">h"), parts


def heartbeat_v4(bootstrap, group):
    """A classic Heartbeat v4 of an unknown member: its error code."""
    host, port = bootstrap.split(":")
    body = (wire.compact_string(group) + struct.pack(">i", 1) + wire.compact_string("m")
            + b"\0" + b"\0")  # group_instance_id null, tags
    with wire.connect(host, int(port)) as s:
        r = wire.flex_call(s, HEARTBEAT, 4, body, 8)
    r.take(">i")
    return r.take(">h")
