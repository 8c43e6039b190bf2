"""Admin requests sent to a Runnel broker in cluster mode are forwarded to
Apache Kafka 4.4.0's KRaft controller in an Envelope, and answered with the
controller's answer.

Real components only: controller JVMs from the 4.4.0 jars (kraft.py, with
Kafka's StandardAuthorizer so ACLs can be created), the runnel binary as a
broker, Kafka's own command-line tools, confluent-kafka's AdminClient, and
requests written by hand where the tools check a topic's existence through
Metadata first (the broker's metadata image is another branch's work). What
the controller did is read back from the controller itself
(`--bootstrap-controller`) or its log. The same requests against an
all-Kafka cluster (one controller + one Kafka 4.4.0 broker from the jars)
must give the same answers.

Ports: 19600-19699.
"""

import re
import struct
import time

import pytest

import kraft
import wire
from procs import BrokerProcess
from test_cluster_join import ClusterBroker, count, need_jars, wait_for  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

RUNNEL_PORT = 19611
KAFKA_PORT = 19612
NODE = 1
CREATE_TOPICS = 19
INCREMENTAL_ALTER_CONFIGS = 44
TIMES = {}
ANSWERS = {}  # kind -> comparable answers, to compare Runnel with Kafka
AUTHZ = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
         "super.users": "User:ANONYMOUS"}
UNFENCED = r"request from broker %d to unfence has been granted" % NODE


def note(name, seconds):
    TIMES[name] = seconds
    print("\n[cluster-forward] %s: %.2f s" % (name, seconds))


def quorum(tmp_path, ports):
    q = kraft.KraftQuorum(tmp_path / "kraft", ports)
    for c in q.controllers:
        base = c.properties
        c.properties = lambda base=base: dict(base(), **AUTHZ)
    return q.start()


class KafkaBroker(BrokerProcess):
    """An Apache Kafka 4.4.0 broker (process.roles=broker) from the jars."""

    clean_exit_codes = (0, 143)
    start_timeout = 90.0

    def __init__(self, datadir, q, port, extra=None):
        super().__init__(datadir, port=port)
        self.q = q
        self.extra = dict(extra or {})
        self.props_path = self.datadir.parent / (self.datadir.name + ".server.properties")

    def prepare(self):
        props = dict({
            "process.roles": "broker", "node.id": str(NODE),
            "controller.quorum.voters": self.q.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT", "log.dirs": str(self.datadir),
            "offsets.topic.replication.factor": "1"}, **AUTHZ)
        props.update(self.extra)
        self.props_path.write_text("".join("%s=%s\n" % kv for kv in props.items()))
        if not (self.datadir / "meta.properties").exists():
            res = kraft.run_tool("kafka.tools.StorageTool",
                                 ["format", "-t", self.q.cluster_id, "-c", str(self.props_path)])
            assert res.returncode == 0, res.stderr

    def command(self):
        return (["java"] + kraft.CONTROLLER_JVM_OPTS
                + ["-cp", kraft.classpath(), "kafka.Kafka", str(self.props_path)])


def start_broker(kind, tmp_path, q, extra=None):
    """A Runnel or Kafka broker joined to q, unfenced; (broker, its address)."""
    unf = count(q, UNFENCED)
    if kind == "runnel":
        b = ClusterBroker(tmp_path / "runnel", q, port=RUNNEL_PORT,
                          extra=dict({"node.id": str(NODE)}, **(extra or {})))
        b.format(q.cluster_id)
    else:
        b = KafkaBroker(tmp_path / "kafka", q, KAFKA_PORT, extra)
    b.start()
    wait_for("unfence", lambda: count(q, UNFENCED) > unf, 90)
    return b, "127.0.0.1:%d" % b.port


# ---- the requests ------------------------------------------------------------

def tool(main_class, *args):
    """Runs one of Kafka's tools: (exit code, its output without log noise)."""
    res = kraft.run_tool(main_class, list(args), timeout=120)
    lines = [l for l in (res.stdout + res.stderr).splitlines()
             if l.strip() and not l.startswith("[main]") and "at org.apache" not in l]
    return res.returncode, "\n".join(lines)


def topics(bootstrap, *args):
    return tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, *args)


def configs(flag, bootstrap, *args):
    return tool("org.apache.kafka.tools.ConfigCommand", flag, bootstrap, *args)


def acls(flag, bootstrap, *args):
    return tool("org.apache.kafka.tools.AclCommand", flag, bootstrap, *args)


def create_topic_wire(bootstrap, name, assignment):
    """CreateTopics v7 with a manual assignment {partition: [brokers]}:
    (error code, error message) of the topic's result."""
    host, port = bootstrap.split(":")
    cs, ca = wire.compact_string, wire.compact_array
    assigns = [struct.pack(">i", p) + ca([struct.pack(">i", b) for b in bs]) + b"\0"
               for p, bs in assignment.items()]
    topic = cs(name) + struct.pack(">ih", -1, -1) + ca(assigns) + ca([]) + b"\0"
    body = ca([topic]) + struct.pack(">i?", 15000, False) + b"\0"
    with wire.connect(host, int(port), timeout=90) as s:
        r = wire.flex_call(s, CREATE_TOPICS, 7, body, 7)
    r.take(">i")
    assert r.uvarint() == 2
    got, _id, err, msg = r.string(), r.uuid(), r.take(">h"), r.string()
    assert got == name
    return err, msg


def alter_topic_config_wire(bootstrap, name, key, value):
    """IncrementalAlterConfigs v1 SET key=value on a topic: (error, message)."""
    host, port = bootstrap.split(":")
    cs, ca = wire.compact_string, wire.compact_array
    res = (struct.pack(">b", 2) + cs(name)
           + ca([cs(key) + struct.pack(">b", 0) + cs(value) + b"\0"]) + b"\0")
    body = ca([res]) + struct.pack(">?", False) + b"\0"
    with wire.connect(host, int(port), timeout=90) as s:
        r = wire.flex_call(s, INCREMENTAL_ALTER_CONFIGS, 1, body, 8)
    r.take(">i")
    assert r.uvarint() == 2
    return r.take(">h"), r.string()


def delete_topic(bootstrap, name):
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": bootstrap})
    try:
        a.delete_topics([name], operation_timeout=30)[name].result(timeout=60)
        return "deleted"
    except Exception as e:  # the KafkaException carries the controller's error
        return str(e.args[0].name() if e.args else e)


def acl_call(bootstrap, what):
    """CreateAcls / DeleteAcls of User:alice READ on topic fwd-a (kafka-acls
    lists the broker's ACLs first, which the broker's image will serve)."""
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType)
    a = AdminClient({"bootstrap.servers": bootstrap})
    args = (ResourceType.TOPIC, "fwd-a", ResourcePatternType.LITERAL, "User:alice", "*",
            AclOperation.READ, AclPermissionType.ALLOW)
    try:
        if what == "create":
            a.create_acls([AclBinding(*args)], request_timeout=60)[AclBinding(*args)].result()
        else:
            f = AclBindingFilter(*args)
            return "deleted %d" % len(a.delete_acls([f], request_timeout=60)[f].result())
        return "created"
    except Exception as e:
        return str(e)


def replayed(q, pattern):
    """Whether the controller's log says it replayed a record matching pattern."""
    return re.search(r"Replayed " + pattern, kraft_log(q)) is not None


def admin_answers(bootstrap, controller_q):
    """The same admin requests, in order, against one broker; the answers
    keyed by what was asked."""
    controller = controller_q.bootstrap_servers
    out = {}
    out["create"] = topics(bootstrap, "--create", "--topic", "fwd-a", "--partitions", "2",
                           "--replication-factor", "1")
    out["create again"] = topics(bootstrap, "--create", "--topic", "fwd-a", "--partitions", "2",
                                 "--replication-factor", "1")
    out["rf > brokers"] = topics(bootstrap, "--create", "--topic", "fwd-rf", "--partitions", "1",
                                 "--replication-factor", "3")
    out["unknown broker"] = create_topic_wire(bootstrap, "fwd-b", {0: [99]})
    out["duplicate replicas"] = create_topic_wire(bootstrap, "fwd-c", {0: [NODE, NODE]})
    out["empty replicas"] = create_topic_wire(bootstrap, "fwd-d", {0: []})
    out["topic config"] = alter_topic_config_wire(bootstrap, "fwd-a", "retention.ms", "3600000")
    out["topic config seen"] = replayed(controller_q, r"ConfigRecord for ConfigResource\(type=TOPIC, "
                                        r"name='fwd-a'\) which set configuration retention.ms "
                                        r"to 3600000")
    out["broker config"] = configs("--bootstrap-server", bootstrap, "--alter", "--entity-type",
                                   "brokers", "--entity-default", "--add-config",
                                   "log.cleaner.threads=2")
    out["broker config seen"] = "log.cleaner.threads=2" in configs(
        "--bootstrap-controller", controller, "--describe", "--entity-type", "brokers",
        "--entity-default")[1]
    out["acl add"] = acl_call(bootstrap, "create")
    out["acl seen"] = "principal=User:alice" in acls("--bootstrap-controller", controller, "--list",
                                                     "--topic", "fwd-a")[1]
    out["acl remove"] = acl_call(bootstrap, "delete")
    out["acl gone"] = "principal=User:alice" not in acls("--bootstrap-controller", controller,
                                                         "--list", "--topic", "fwd-a")[1]
    out["scram"] = configs("--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
                           "--entity-name", "alice", "--add-config",
                           "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    out["scram seen"] = replayed(controller_q, r"UserScramCredentialRecord creating new entry for "
                                              r"alice with mechanism SCRAM_SHA_256")
    out["quota"] = configs("--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
                           "--entity-name", "fwd-client", "--add-config",
                           "producer_byte_rate=1048576")
    out["quota seen"] = replayed(controller_q, r"ClientQuotaRecord for ClientQuotaEntity\(entries="
                                              r"\{client-id=fwd-client\}\) setting "
                                              r"producer_byte_rate to 1048576.0")
    out["delete"] = delete_topic(bootstrap, "fwd-a")
    out["delete again"] = delete_topic(bootstrap, "fwd-a")
    return out


EXPECTED_ERRORS = {
    "unknown broker": 39,      # INVALID_REPLICA_ASSIGNMENT
    "duplicate replicas": 39,
    "empty replicas": 39,
}


def check_answers(out):
    assert out["create"][0] == 0 and "Created topic fwd-a." in out["create"][1], out["create"]
    assert out["create again"][0] != 0
    assert "Topic 'fwd-a' already exists." in out["create again"][1]
    assert "InvalidReplicationFactorException" in out["rf > brokers"][1] or \
        "cannot be reached because only 1 broker(s) are registered" in out["rf > brokers"][1]
    for k, code in EXPECTED_ERRORS.items():
        assert out[k][0] == code, (k, out[k])
    assert out["topic config"] == (0, None)
    assert out["acl add"] == "created" and out["acl remove"] == "deleted 1"
    for k in ("broker config", "scram", "quota"):
        assert out[k][0] == 0, (k, out[k])
    for k in ("topic config seen", "broker config seen", "acl seen", "acl gone", "scram seen",
              "quota seen"):
        assert out[k] is True, k
    assert out["delete"] == "deleted"
    assert out["delete again"] == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name


def comparable(out):
    """The answers with their whitespace normalised."""
    return {k: (v[0], " ".join((v[1] or "").split())) if isinstance(v, tuple) else v
            for k, v in out.items()}


@pytest.mark.parametrize("kind", ["runnel", "kafka"])
def test_admin_requests_answered_by_the_controller(tmp_path, kind):
    q = quorum(tmp_path, [19601])
    b = None
    try:
        b, bootstrap = start_broker(kind, tmp_path, q)
        out = admin_answers(bootstrap, q)
        print("\n[cluster-forward] %s answers: %r" % (kind, out))
        check_answers(out)
        log = kraft_log(q)
        assert "Replayed TopicRecord for topic fwd-a" in log
        assert "Replayed RemoveTopicRecord for topic fwd-a" in log
        ANSWERS[kind] = comparable(out)
        if len(ANSWERS) == 2:  # the same requests, the same answers
            assert ANSWERS["runnel"] == ANSWERS["kafka"]
    finally:
        if b is not None:
            b.kill9()
        q.kill()


def kraft_log(q):
    return "".join(c.log_path.read_text(errors="replace") for c in q.controllers
                   if c.log_path.exists())


def test_forwarding_follows_a_controller_failover(tmp_path):
    """3 controllers; the active one is killed: a CreateTopics sent to the
    Runnel broker right after is retried until the new active controller
    answers it (NOT_CONTROLLER and lost connections are retried)."""
    q = quorum(tmp_path, [19621, 19622, 19623])
    b = None
    try:
        b = ClusterBroker(tmp_path / "runnel", q, port=19631, extra={"node.id": str(NODE)})
        b.format(q.cluster_id)
        unf = count(q, UNFENCED)
        b.start()
        wait_for("unfence", lambda: count(q, UNFENCED) > unf, 90)
        bootstrap = "127.0.0.1:%d" % b.port
        t0 = time.monotonic()
        assert create_topic_wire(bootstrap, "before-failover", {0: [NODE]}) == (0, None)
        note("CreateTopics through Runnel, steady state", time.monotonic() - t0)
        leader = q.leader_id()
        q.controllers[leader - 3000].kill9()
        t0 = time.monotonic()
        assert create_topic_wire(bootstrap, "after-failover", {0: [NODE]}) == (0, None)
        note("CreateTopics through Runnel works again after the active controller's kill -9",
             time.monotonic() - t0)
        assert q.leader_id() != leader
        assert "Replayed TopicRecord for topic after-failover" in kraft_log(q)
    finally:
        if b is not None:
            b.kill9()
        q.kill()


FIND_COORDINATOR = 10
COORDINATOR_NOT_AVAILABLE = 15
UNKNOWN_TOPIC_OR_PARTITION = 3
INTERNAL = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "1",
            "transaction.state.log.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1", "auto.create.topics.enable": "true",
            "num.partitions": "2", "default.replication.factor": "1"}


def find_coordinator(bootstrap, key_type, key):
    """FindCoordinator v4 for one key: (error code, node id)."""
    host, port = bootstrap.split(":")
    body = struct.pack(">b", key_type) + wire.compact_array([wire.compact_string(key)]) + b"\0"
    with wire.connect(host, int(port)) as s:
        r = wire.flex_call(s, FIND_COORDINATOR, 4, body, 4)
    r.take(">i")
    assert r.uvarint() == 2
    assert r.string() == key
    node, _host, _port, err = r.take(">i"), r.string(), r.take(">i"), r.take(">h")
    return err, node


def metadata_error(bootstrap, topic):
    host, port = bootstrap.split(":")
    with wire.connect(host, int(port)) as s:
        md = wire.metadata(s, 8, [topic], 5, allow_auto_create=True)
    (t,) = md["topics"]
    return t["error_code"]


@pytest.mark.parametrize("kind", ["runnel", "kafka"])
def test_internal_and_auto_created_topics_made_by_the_controller(tmp_path, kind):
    """FindCoordinator for a group and a transactional id, and a Metadata
    that auto-creates, make the broker ask the controller for the topic
    (COORDINATOR_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION meanwhile), with
    the broker's offsets.topic.* / transaction.state.log.* / num.partitions
    settings and the internal topics' configs, as Kafka's broker does."""
    q = quorum(tmp_path, [19641])
    b = None
    try:
        b, bootstrap = start_broker(kind, tmp_path, q, INTERNAL)
        assert find_coordinator(bootstrap, 0, "fwd-group")[0] == COORDINATOR_NOT_AVAILABLE
        assert find_coordinator(bootstrap, 1, "fwd-txn")[0] == COORDINATOR_NOT_AVAILABLE
        assert metadata_error(bootstrap, "fwd-auto") == UNKNOWN_TOPIC_OR_PARTITION
        wait_for("the controller creates the three topics",
                 lambda: all(replayed(q, r"TopicRecord for topic %s\b" % t) for t in
                             ("__consumer_offsets", "__transaction_state", "fwd-auto")), 30)
        log = kraft_log(q)
        parts = lambda t: len(re.findall(r"Replayed PartitionRecord for new partition %s-\d+ " % t,
                                         log))
        assert (parts("__consumer_offsets"), parts("__transaction_state"), parts("fwd-auto")) \
            == (3, 2, 2)
        for topic, key, value in (("__consumer_offsets", "cleanup.policy", "compact"),
                                  ("__consumer_offsets", "compression.type", "producer"),
                                  ("__transaction_state", "min.insync.replicas", "1"),
                                  ("__transaction_state", "compression.type", "uncompressed"),
                                  ("__transaction_state", "unclean.leader.election.enable",
                                   "false")):
            assert replayed(q, r"ConfigRecord for ConfigResource\(type=TOPIC, name='%s'\) which "
                               r"set configuration %s to %s" % (topic, key, value)), (topic, key)
    finally:
        if b is not None:
            b.kill9()
        q.kill()


def test_a_stalled_controller_stalls_no_other_client(tmp_path):
    """The controller JVM is stopped (SIGSTOP): 40 CreateTopics sent to the
    Runnel broker at once wait (16 in flight, the rest queued) while other
    clients' Metadata requests are answered at once; after SIGCONT every
    CreateTopics gets the controller's answer."""
    import os
    import signal
    import threading
    q = quorum(tmp_path, [19651])
    b = None
    try:
        b, bootstrap = start_broker("runnel", tmp_path, q)
        os.kill(q.controllers[0].proc.pid, signal.SIGSTOP)
        results = {}

        def create(i):
            results[i] = create_topic_wire(bootstrap, "stalled-%d" % i, {0: [NODE]})

        threads = [threading.Thread(target=create, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        assert not results  # all waiting for the controller
        host, port = bootstrap.split(":")
        worst = 0.0
        for i in range(20):
            t0 = time.monotonic()
            with wire.connect(host, int(port)) as s:
                wire.metadata(s, 8, None, 100 + i)
            worst = max(worst, time.monotonic() - t0)
        note("slowest Metadata while 40 forwarded requests wait", worst)
        assert worst < 1.0
        t0 = time.monotonic()
        os.kill(q.controllers[0].proc.pid, signal.SIGCONT)
        for t in threads:
            t.join(90)
        note("40 parked CreateTopics answered after SIGCONT", time.monotonic() - t0)
        assert sorted(results) == list(range(40))
        assert set(results.values()) == {(0, None)}
    finally:
        if b is not None:
            b.kill9()
        if q.controllers[0].alive():
            os.kill(q.controllers[0].proc.pid, signal.SIGCONT)
        q.kill()


REQUEST_TIMED_OUT = 7


def test_unreachable_controller_times_out_as_kafka(tmp_path):
    """The only controller is gone: a CreateTopics sent to the Runnel broker
    is retried for Kafka's 60 s (NodeToControllerChannelManager's
    retryTimeoutMs for forwarding), then answered REQUEST_TIMED_OUT with a
    null message, as Kafka's broker answers a TimeoutException."""
    q = quorum(tmp_path, [19661])
    b = None
    try:
        b, bootstrap = start_broker("runnel", tmp_path, q)
        q.controllers[0].kill9()
        t0 = time.monotonic()
        assert create_topic_wire(bootstrap, "nobody-home", {0: [NODE]}) == (REQUEST_TIMED_OUT,
                                                                          None)
        waited = time.monotonic() - t0
        note("CreateTopics with no controller answered REQUEST_TIMED_OUT after", waited)
        assert 59.0 <= waited <= 66.0
        assert "forwarded request timed out" in b.log_text()
    finally:
        if b is not None:
            b.kill9()
        q.kill()
