"""Apache Kafka 4.4.0's KRaft controllers, for the cluster-mode tests.

Runnel implements the broker role only; the controller quorum it joins is
Kafka's own, run from the Maven jars of integration/java-4.4/pom.xml
(`.ci/install-deps --test` puts them in integration/.deps/jars-4.4). Each
controller is one JVM (process.roles=controller, a small heap) on a loopback
port, its storage formatted with Kafka's storage tool first.

    q = KraftQuorum(tmpdir, ports=[19401, 19402, 19403]).start()
    ... q.bootstrap_servers, q.cluster_id, q.describe_status() ...
    q.controllers[0].kill9(); q.stop()
"""

import contextlib
import os
import re
import subprocess
from pathlib import Path

from kafka_real import KafkaReal, random_cluster_id
from procs import DEPS, BrokerProcess, run

JARS_44 = Path(os.environ.get("RUNNEL_KAFKA44_JARS") or DEPS / "jars-4.4")

CONTROLLER_JVM_OPTS = [
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    # the controller's decisions about brokers (registered, fenced, unfenced)
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.controller=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
]
TOOL_JVM_OPTS = ["-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx128m",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=error"]


def jars_present():
    return (JARS_44 / "kafka_2.13-4.4.0.jar").exists()


def classpath():
    return str(JARS_44 / "*")


@contextlib.contextmanager
def single_node(base, port, controller_port):
    """A Kafka 4.4.0 node in combined mode (broker and controller) with its
    data and log under base, stopped when the block ends."""
    k = KafkaReal(base / "data", port=port, controller_port=controller_port,
                  classpath=classpath(), log_path=base / "kafka.log")
    k.start()
    try:
        yield k
    finally:
        k.stop()


def run_tool(main_class, args, timeout=120):
    """Run one of Kafka 4.4's command-line tools; returns the CompletedProcess."""
    return run(["java"] + TOOL_JVM_OPTS + ["-cp", classpath(), main_class] + list(args),
               timeout=timeout)


class KraftController(BrokerProcess):
    """One controller JVM. Its storage is formatted on the first start only."""

    clean_exit_codes = (0, 143)
    start_timeout = 90.0

    def __init__(self, datadir, node_id, port, voters, cluster_id, log_path=None):
        super().__init__(datadir, port=port, log_path=log_path)
        self.node_id = node_id
        self.voters = voters  # "1@127.0.0.1:19401,..."
        self.cluster_id = cluster_id
        self.props_path = self.datadir.parent / (self.datadir.name + ".controller.properties")

    def properties(self):
        return {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": "CONTROLLER://%s:%d" % (self.host, self.port),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.datadir),
            "metadata.log.dir": str(self.datadir),
        }

    def prepare(self):
        self.props_path.write_text("".join("%s=%s\n" % kv for kv in self.properties().items()))
        if (self.datadir / "meta.properties").exists():
            return
        res = run_tool("kafka.tools.StorageTool",
                       ["format", "--cluster-id=" + self.cluster_id, "-c", str(self.props_path)])
        if res.returncode != 0:
            raise RuntimeError("kafka-storage format failed (%d):\n%s\n%s"
                               % (res.returncode, res.stdout, res.stderr))

    def command(self):
        return (["java"] + CONTROLLER_JVM_OPTS
                + ["-cp", classpath(), "kafka.Kafka", str(self.props_path)])


class KraftQuorum:
    """1 or 3 controllers with static voters on the given loopback ports."""

    def __init__(self, basedir, ports, cluster_id=None):
        self.basedir = Path(basedir)
        self.cluster_id = cluster_id or random_cluster_id()
        voters = ",".join("%d@127.0.0.1:%d" % (3000 + i, p) for i, p in enumerate(ports))
        self.controllers = [
            KraftController(self.basedir / ("controller-%d" % (3000 + i)), 3000 + i, p,
                            voters, self.cluster_id)
            for i, p in enumerate(ports)]
        self.voters = voters

    @property
    def bootstrap_servers(self):
        return ",".join(c.bootstrap for c in self.controllers)

    def start(self):
        # The JVMs start together: a quorum of three needs two up to elect.
        procs = []
        for c in self.controllers:
            c.prepare()
            c.prepare = lambda: None
        for c in self.controllers:
            procs.append(c)
            c.start()
        self.wait_leader()
        return self

    def stop(self):
        for c in self.controllers:
            if c.alive():
                c.stop()

    def kill(self):
        for c in self.controllers:
            if c.alive():
                c.kill9()

    def live_bootstrap(self):
        return ",".join(c.bootstrap for c in self.controllers if c.alive())

    def describe(self, what):
        """kafka-metadata-quorum describe --status or --replication, as text."""
        res = run_tool("org.apache.kafka.tools.MetadataQuorumCommand",
                       ["--bootstrap-controller", self.live_bootstrap(), "describe", what],
                       timeout=60)
        if res.returncode != 0:
            raise RuntimeError("metadata quorum describe %s failed: %s" % (what, res.stderr))
        return res.stdout

    def leader_id(self):
        m = re.search(r"LeaderId:\s+(-?\d+)", self.describe("--status"))
        return int(m.group(1)) if m else -1

    def replication(self):
        """Rows of `describe --replication`: [{NodeId, DirectoryId, LogEndOffset,
        Lag, LastFetchTimestamp, LastCaughtUpTimestamp, Status}, ...]."""
        lines = [l.split() for l in self.describe("--replication").splitlines() if l.strip()]
        head, rows = lines[0], lines[1:]
        return [dict(zip(head, r)) for r in rows]

    def wait_leader(self, timeout=60.0):
        import time
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                lid = self.leader_id()
                if lid >= 0:
                    return lid
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                last = e
            time.sleep(0.5)
        raise TimeoutError("no controller leader within %.0fs: %r" % (timeout, last))
