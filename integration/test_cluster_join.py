"""Runnel brokers join a cluster run by Apache Kafka 4.4.0's KRaft controllers.

Real components only: controller JVMs from the 4.4.0 jars (kraft.py), the
runnel binary as a broker (process.roles=broker). What the controllers
decided is read from their own log lines (org.apache.kafka.controller at
INFO: "Replayed initial RegisterBrokerRecord", "request from broker N to
unfence has been granted", "Fencing broker N ... session has timed out")
and from `kafka-metadata-quorum describe --replication`, which lists the
broker as an observer of __cluster_metadata.

The measured times are printed (pytest -s) and collected in TIMES.
Ports: 19400-19499.
"""

import re
import subprocess
import time

import pytest

import kraft
from kafka_real import random_cluster_id
from runnel_broker import RunnelBroker

pytestmark = pytest.mark.usefixtures("runnel_only")

NODE = 1
BROKER_PORT = 19411
TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def need_jars():
    if not kraft.jars_present():
        from conftest import missing
        missing("Kafka 4.4.0 jars in %s" % kraft.JARS_44)


def note(name, seconds):
    TIMES[name] = seconds
    print("\n[cluster-join] %s: %.2f s" % (name, seconds))


class ClusterBroker(RunnelBroker):
    """A Runnel broker in cluster mode, its log dir formatted first."""

    def __init__(self, datadir, quorum, port=BROKER_PORT, formatter="runnel", extra=None):
        overrides = {
            "process.roles": "broker",
            "node.id": str(NODE),
            "controller.quorum.voters": quorum.voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "broker.rack": "rack-a",
        }
        overrides.update(extra or {})
        super().__init__(datadir, port=port, overrides=overrides)
        self.quorum = quorum
        self.formatter = formatter
        self.props_path = self.datadir.parent / (self.datadir.name + ".server.properties")

    def write_props(self):
        props = {"listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
                 "log.dirs": str(self.datadir)}
        props.update(self.overrides)
        self.props_path.write_text("".join("%s=%s\n" % kv for kv in props.items()))

    def format(self, cluster_id):
        self.write_props()
        if self.formatter == "kafka":
            res = kraft.run_tool("kafka.tools.StorageTool",
                                 ["format", "-t", cluster_id, "-c", str(self.props_path)])
        else:
            res = subprocess.run([str(self.binary), "format", "-t", cluster_id, "-c",
                                  str(self.props_path)], capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, (res.stdout, res.stderr)

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_for(what, probe, timeout, interval=0.05):
    """Polls probe() until true; returns the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if probe():
            return time.monotonic() - t0
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))


def controller_log(quorum):
    return "".join(c.log_path.read_text(errors="replace") for c in quorum.controllers
                   if c.log_path.exists())


def count(quorum, pattern):
    return len(re.findall(pattern, controller_log(quorum)))


REGISTERED = (r"Replayed (?:initial RegisterBrokerRecord for|RegisterBrokerRecord establishing "
              r"a new incarnation of) broker %d\b" % NODE)
UNFENCED = r"request from broker %d to unfence has been granted" % NODE
FENCED = r"Fencing broker %d at epoch \d+ because its session has timed out" % NODE


def observer_row(quorum):
    for row in quorum.replication():
        if row.get("NodeId") == str(NODE):
            return row
    return None


@pytest.fixture
def quorum1(tmp_path):
    q = kraft.KraftQuorum(tmp_path / "kraft", [19401]).start()
    yield q
    q.kill()


@pytest.fixture
def quorum3(tmp_path):
    q = kraft.KraftQuorum(tmp_path / "kraft", [19402, 19403, 19404]).start()
    yield q
    q.kill()


def start_joined(b, quorum, timeout=60):
    """Starts b and waits until the controller unfenced it; returns
    (seconds to registration, seconds to unfenced) from the start."""
    regs, unf = count(quorum, REGISTERED), count(quorum, UNFENCED)
    t0 = time.monotonic()
    b.start()
    wait_for("registration", lambda: count(quorum, REGISTERED) > regs, timeout)
    t_reg = time.monotonic() - t0
    wait_for("unfence", lambda: count(quorum, UNFENCED) > unf, timeout)
    return t_reg, time.monotonic() - t0


def join_as_observer(b, quorum, label):
    """Starts b, notes the time to unfenced, checks it observes the metadata
    log, and stops it (clean exit asserted)."""
    try:
        _, t_unf = start_joined(b, quorum)
        note(label, t_unf)
        assert observer_row(quorum)["Status"] == "Observer", quorum.replication()
    finally:
        b.stop()


def test_register_unfence_heartbeat(quorum1, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum1)
    b.format(quorum1.cluster_id)
    try:
        t_reg, t_unf = start_joined(b, quorum1)
        note("registration after start", t_reg)
        note("unfenced after start", t_unf)
        row = observer_row(quorum1)
        assert row is not None and row["Status"] == "Observer", quorum1.replication()
        # heartbeats keep the session: well past broker.session.timeout.ms (9 s)
        # the broker is still unfenced and its fetches are recent.
        time.sleep(11)
        assert count(quorum1, FENCED) == 0, controller_log(quorum1)[-3000:]
        row = observer_row(quorum1)
        leader = [r for r in quorum1.replication() if r["Status"] == "Leader"][0]
        assert int(row["Lag"]) <= 2, row
        assert int(leader["LastFetchTimestamp"]) - int(row["LastFetchTimestamp"]) < 3000, row
        assert b.alive()
        assert "caught up with the metadata log" in b.log_text()
    finally:
        b.stop()


def test_bootstrap_servers_by_name(quorum1, tmp_path):
    """controller.quorum.bootstrap.servers (no voter ids), named by host name:
    resolved off the event loop, the leader learned from the Fetch response."""
    port = quorum1.controllers[0].port
    b = ClusterBroker(tmp_path / "b1", quorum1,
                      extra={"controller.quorum.voters": "",
                             "controller.quorum.bootstrap.servers": "localhost:%d" % port})
    b.format(quorum1.cluster_id)
    join_as_observer(b, quorum1, "unfenced after start (bootstrap servers by name)")


def test_kill9_fenced_then_rejoins(quorum1, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum1, formatter="kafka")  # Kafka's tool formats it
    b.format(quorum1.cluster_id)
    start_joined(b, quorum1)
    b.kill9()
    t_fenced = wait_for("fenced after kill -9", lambda: count(quorum1, FENCED) >= 1, 30)
    note("fenced after kill -9 (broker.session.timeout.ms=9000)", t_fenced)
    assert t_fenced < 9.0 + 3.0
    join_as_observer(b, quorum1, "unfenced again after restart")


def test_wrong_cluster_id_refuses_to_start(quorum1, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum1)
    wrong = random_cluster_id()
    b.format(wrong)
    res = subprocess.run(b.command(), capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    lines = [l for l in res.stderr.splitlines() if wrong in l and quorum1.cluster_id in l]
    assert len(lines) == 1, res.stderr[-3000:]
    assert "INCONSISTENT_CLUSTER_ID" in lines[0]


def test_meta_properties_checked_before_start(quorum1, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum1)
    res = subprocess.run(b.command(), capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "No `meta.properties` found" in res.stderr, res.stderr
    b.format(quorum1.cluster_id)
    other = ClusterBroker(tmp_path / "b1", quorum1, extra={"node.id": "7"})
    res = subprocess.run(other.command(), capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "node id 1" in res.stderr and "node.id 7" in res.stderr, \
        res.stderr


def test_controllers_down_at_start_then_joins(quorum1, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum1)
    b.format(quorum1.cluster_id)
    ctl = quorum1.controllers[0]
    ctl.kill9()
    b.start()
    try:
        wait_for("a retry line", lambda: "retrying\" controller=127.0.0.1:19401" in b.log_text(),
                 15)
        time.sleep(3)
        assert b.alive(), b.log_tail()
        unf = count(quorum1, UNFENCED)
        t0 = time.monotonic()
        ctl.start()
        t = wait_for("unfence once the controller is up",
                     lambda: count(quorum1, UNFENCED) > unf, 60)
        note("unfenced after the controller came up (its JVM start included)",
             time.monotonic() - t0)
        assert t > 0
    finally:
        b.stop()


def test_three_controllers_failover(quorum3, tmp_path):
    b = ClusterBroker(tmp_path / "b1", quorum3)
    b.format(quorum3.cluster_id)
    t_reg, t_unf = start_joined(b, quorum3)
    note("3 controllers: unfenced after start", t_unf)
    try:
        old = quorum3.leader_id()
        victim = [c for c in quorum3.controllers if c.node_id == old][0]
        mark = len(b.log_text())
        t0 = time.monotonic()
        victim.kill9()
        pat = re.compile(r'metadata quorum leader" leader_id=(\d+)')

        def new_leader():
            return any(int(m) != old for m in pat.findall(b.log_text()[mark:]))

        t_leader = wait_for("the broker following a new leader", new_leader, 60)
        note("failover: broker fetching from the new leader after kill -9", t_leader)
        wait_for("heartbeats answered by the new controller",
                 lambda: "heartbeats answered\" controller" in b.log_text()[mark:], 60)
        note("failover: heartbeats answered by the new active controller after kill -9",
             time.monotonic() - t0)
        time.sleep(2)
        assert quorum3.leader_id() not in (-1, old)
        row = observer_row(quorum3)
        assert row is not None and row["Status"] == "Observer", quorum3.replication()
        assert count(quorum3, FENCED) == 0, controller_log(quorum3)[-3000:]
        assert b.alive()
    finally:
        b.stop()
