"""The cluster a fault run uses: three Kafka 4.4 KRaft controllers (a
3-voter quorum, kraft.py) and three Runnel brokers, every broker-to-broker
and broker-to-controller link through a proxy of proxy.py.

Each broker has two listeners: PLAINTEXT, which clients dial directly, and
INTERNAL (inter.broker.listener.name), advertised at its proxy, so a
follower fetching from it goes through `int-N`. Its controller.quorum.voters
names one proxy per controller, `ctl-N-K`, so every broker-to-controller
link can be cut on its own. Controllers talk to each other directly.

Ports, from base (20100 by default; everything inside base..base+99):
  controllers base+1..3, brokers base+11..13 (clients), base+21..23 (INTERNAL),
  INTERNAL proxies base+31..33, controller proxies base+41..49.
The FaultCluster owns its processes and proxies; close() ends them.
"""

import time
from pathlib import Path

import kraft
from test_cluster_join import ClusterBroker

from .proxy import ProxySet

SESSION_MS = 3000
HEARTBEAT_MS = 500


class FaultBroker(ClusterBroker):
    def __init__(self, datadir, quorum, node, base, voters):
        self.node = node
        internal = base + 20 + node
        advertised = base + 30 + node
        port = base + 10 + node
        super().__init__(datadir, quorum, port=port, extra={
            "node.id": str(node),
            "listeners": "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (port, internal),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d"
                                    % (port, advertised),
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "controller.quorum.voters": voters,
            "broker.session.timeout.ms": str(SESSION_MS),
            "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
        })
        self.start_timeout = 30.0

    def write_props(self):
        self.props_path.write_text("".join("%s=%s\n" % kv for kv in dict(
            {"log.dirs": str(self.datadir)}, **self.overrides).items()))


class FaultCluster:
    def __init__(self, basedir, base=20100):
        self.basedir = Path(basedir)
        self.base = base
        self.quorum = kraft.KraftQuorum(self.basedir / "kraft", [base + k for k in (1, 2, 3)])
        for c in self.quorum.controllers:
            c.properties = (lambda orig: lambda: dict(orig(), **{
                "broker.session.timeout.ms": str(SESSION_MS),
                "broker.heartbeat.interval.ms": str(HEARTBEAT_MS)}))(c.properties)
        self.proxies = ProxySet()
        self.brokers = {}

    def start(self):
        self.quorum.start()
        for n in (1, 2, 3):
            self.proxies.add("int-%d" % n, self.base + 30 + n, self.base + 20 + n)
            voters = []
            for k, c in enumerate(self.quorum.controllers, 1):
                listen = self.base + 40 + 3 * (n - 1) + k
                self.proxies.add("ctl-%d-%d" % (n, k), listen, c.port)
                voters.append("%d@127.0.0.1:%d" % (c.node_id, listen))
            b = FaultBroker(self.basedir / ("b%d" % n), self.quorum, n, self.base,
                            ",".join(voters))
            b.format(self.quorum.cluster_id)
            self.brokers[n] = b
        for b in self.brokers.values():
            b.start()
        for b in self.brokers.values():
            self.wait_unfenced(b)
        return self

    def unfenced_count(self, b):
        return b.log_text().count("unfenced: serving in the cluster")

    def wait_unfenced(self, b, after=0, timeout=60):
        deadline = time.monotonic() + timeout
        while self.unfenced_count(b) <= after:
            if time.monotonic() > deadline:
                raise TimeoutError("broker %d not unfenced within %ds\n%s"
                                   % (b.node, timeout, b.log_tail(3000)))
            time.sleep(0.1)

    def crashed(self):
        """Brokers that died without being told to (a sanitizer report, a crash)."""
        return [n for n, b in self.brokers.items() if b.expect_running and not b.alive()]

    def revive(self):
        """Restarts every broker that is not running; returns their ids."""
        dead = [n for n, b in self.brokers.items() if not b.alive()]
        for n in dead:
            self.restart_broker(n)
        return dead

    def restart_broker(self, n):
        b = self.brokers[n]
        seen = self.unfenced_count(b)
        b.start()
        self.wait_unfenced(b, after=seen)

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    @property
    def all_bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers.values())

    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name, partitions=3, rf=3, configs=None):
        from confluent_kafka.admin import NewTopic
        admin = self.admin()  # held until the future completes
        fut = admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[name]
        fut.result(30)

    def describe(self, name):
        """{partition: (leader, replicas, isr)} as the cluster's Metadata says."""
        try:
            admin = self.admin()
            md = admin.list_topics(name, timeout=10)
        except Exception:  # noqa: BLE001 - a broker being killed; the caller retries
            return {}
        t = md.topics.get(name)
        if t is None or t.error is not None:
            return {}
        return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs))
                for p in t.partitions.values()}

    def wait_healthy(self, name, partitions, timeout=60, isr=3):
        """Every partition led by a live broker with `isr` replicas in the ISR
        (at least: a restarted replica rejoins only by AlterPartition)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.describe(name)
            if len(last) == partitions and all(l > 0 and len(i) >= isr
                                               for l, _, i in last.values()):
                return last
            time.sleep(0.3)
        raise TimeoutError("topic %s not healthy within %ds: %s" % (name, timeout, last))

    def leader_of(self, name, partition=0):
        d = self.describe(name)
        return d[partition][0] if partition in d else -1

    def close(self):
        self.proxies.heal()
        for b in self.brokers.values():
            b.close()
        self.quorum.kill()
        self.proxies.close()
