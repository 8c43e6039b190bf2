"""Run a real Apache Kafka 4.x broker from the Maven jars, for side-by-side runs.

Single node in KRaft combined mode (process.roles=broker,controller), loopback
only, on ports picked here, with its data in a directory the caller owns.
Used by the integration tests (`pytest integration --target=kafka`) to check
that they assert Kafka's own behaviour, and by bench/ to compare figures.

    k = KafkaReal(datadir).start()
    ... k.bootstrap ...
    k.stop()

The jars come from `.ci/install-deps --test` (integration/java/pom.xml).
"""

import base64
import itertools
import signal
import time
import uuid
from pathlib import Path

import wire
from procs import JARS, BrokerProcess, free_port, java_classpath, run

KAFKA_JVM_OPTS = [
    "-Xms256m",
    "-Xmx768m",
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
]


def random_cluster_id():
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.

    Like Kafka, avoid ids starting with '-', which command lines take for options.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def jars_present(jars=JARS):
    return any(Path(jars).glob("kafka_2.13-*.jar"))


class KafkaReal(BrokerProcess):
    # The JVM answers SIGTERM by running Kafka's shutdown hook and then exits
    # with 143 (128 + SIGTERM): that is Kafka's clean stop.
    clean_exit_codes = (0, 143)
    start_timeout = 90.0

    def __init__(self, datadir, port=None, controller_port=None, node_id=1,
                 extra_props=None, log_path=None, jvm_opts=None, extra_listeners=None,
                 classpath=None):
        """classpath: another release's jars (default: JARS, java_classpath()).
        extra_listeners: {name: (security protocol, port)} served beside
        PLAINTEXT (and advertised), e.g. {"SASL_PLAINTEXT": ("SASL_PLAINTEXT", p)};
        their listener.name.* keys go in extra_props."""
        super().__init__(datadir, port=port, log_path=log_path)
        self.extra_listeners = dict(extra_listeners or {})
        self.controller_port = controller_port or free_port()
        self.node_id = node_id
        self.cluster_id = random_cluster_id()
        self.extra_props = dict(extra_props or {})
        self.jvm_opts = list(jvm_opts or [])
        self.classpath = classpath or java_classpath()
        self.props_path = self.datadir.parent / (self.datadir.name + ".server.properties")

    def properties(self):
        h = self.host
        p = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": "%d@%s:%d" % (self.node_id, h, self.controller_port),
            "listeners": "PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (h, self.port, h,
                                                                  self.controller_port),
            "advertised.listeners": "PLAINTEXT://%s:%d" % (h, self.port),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.datadir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        for name, (protocol, port) in self.extra_listeners.items():
            addr = "%s://%s:%d" % (name, h, port)
            p["listeners"] += "," + addr
            p["advertised.listeners"] += "," + addr
            p["listener.security.protocol.map"] += ",%s:%s" % (name, protocol)
        p.update({k: str(v) for k, v in self.extra_props.items()})
        return p

    def write_properties(self):
        lines = ["%s=%s" % kv for kv in self.properties().items()]
        self.props_path.write_text("\n".join(lines) + "\n")

    def prepare(self):
        self.write_properties()
        if (self.datadir / "meta.properties").exists():
            return  # formatted by an earlier start: keep the data
        res = run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                   "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                   "-cp", self.classpath, "kafka.tools.StorageTool",
                   "format", "--cluster-id=" + self.cluster_id, "-c", str(self.props_path)],
                  timeout=120)
        if res.returncode != 0:
            raise RuntimeError("kafka storage format failed (%d):\n%s\n%s"
                               % (res.returncode, res.stdout, res.stderr))

    def command(self):
        return (["java"] + KAFKA_JVM_OPTS + self.jvm_opts
                + ["-cp", self.classpath, "kafka.Kafka", str(self.props_path)])

    def wait_ready(self):
        super().wait_ready()  # the port accepts
        # Kafka's listener accepts before the broker serves requests: wait until
        # Metadata shows this broker registered and a controller elected.
        corr = itertools.count(1)

        def registered():
            with wire.connect(self.host, self.port, timeout=5) as s:
                brokers, controller = wire.metadata_v1_brokers(s, next(corr))
            return bool(brokers) and controller >= 0, (brokers, controller)

        self.wait_serving(registered, "kafka")


def main(argv=None):
    """Run a real Kafka in the foreground: python3 integration/kafka_real.py [DATADIR] [PORT]."""
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("datadir", nargs="?")
    ap.add_argument("port", nargs="?", type=int, default=9092)
    a = ap.parse_args(argv)
    datadir = a.datadir or tempfile.mkdtemp(prefix="kafka-real-")
    k = KafkaReal(datadir, port=a.port)
    k.start()
    print("kafka ready on %s (data %s, log %s); Ctrl-C stops it"
          % (k.bootstrap, k.datadir, k.log_path), flush=True)
    try:
        while k.alive():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        k.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _raise_interrupt)
    main()
