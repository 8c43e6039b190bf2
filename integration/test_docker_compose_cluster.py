"""docker/compose-cluster.yml as a user runs it, with compose v1 and v2: one
Apache Kafka 4.4.0 KRaft controller (docker/controller/Dockerfile, the Maven
Central jars on Debian's JRE) and three Runnel brokers (process.roles=broker)
whose data volumes the image's start script formats for CLUSTER_ID. Every
broker registers and is unfenced by the controller. A kcat container on the
compose network sees the three brokers by service name; a topic auto-created
through one broker (6 partitions of 3 replicas, by the controller) takes
keyed records from this machine through the published ports while a broker
container is down, and every acknowledged record is read back through
another broker."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import missing, require_module
from dockerutil import SETUP_HINT, free_port, kcat_image, require_docker, wait_healthy
from test_docker_compose import compose_command

pytestmark = pytest.mark.usefixtures("runnel_only")

ROOT = Path(__file__).resolve().parent.parent
FILES = ["-f", str(ROOT / "docker" / "compose-cluster.yml")]
BROKERS = ("runnel-1", "runnel-2", "runnel-3")
CONTROLLER_IMAGE = "runnel-kraft-controller:latest"
TOPIC = "cluster-orders"
RECORDS = 600


@pytest.fixture(params=["v1", "v2"])
def cluster(request):
    require_docker()
    if subprocess.run(["docker", "image", "inspect", CONTROLLER_IMAGE],
                      capture_output=True, timeout=30).returncode != 0:
        missing("the image %s" % CONTROLLER_IMAGE, SETUP_HINT)
    cmd = compose_command(request.param)
    if cmd is None:
        missing("docker compose %s" % request.param, SETUP_HINT)
    project = "runnelcluster%s%d" % (request.param, os.getpid())
    env = dict(os.environ, CLUSTER_ID="MkU3OEVBNTcwNTJENDM2Qg")
    for i in range(1, 4):
        env["RUNNEL_PORT_%d" % i] = str(free_port())

    def run(*args, timeout=600, check=True):
        res = subprocess.run([*cmd, "-p", project, *FILES, *args], env=env, capture_output=True,
                             text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("compose %s failed (%d):\n%s\n%s"
                                 % (" ".join(args), res.returncode, res.stdout, res.stderr))
        return res

    run.env = env
    run.project = project
    yield run
    run("down", "-v", "-t", "5", check=False, timeout=180)


def logs(compose, service):
    return compose("logs", "--no-color", service).stdout


def wait_for(what, fn, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.5)
    raise AssertionError("timed out waiting for " + what)


def unfenced(compose):
    """Broker ids the controller's log says it unfenced."""
    return set(int(x) for x in re.findall(r"The request from broker (\d+) to unfence has been "
                                          r"granted", logs(compose, "controller")))


def test_cluster_compose_brokers_join_the_controller(cluster):
    cluster("up", "-d", "--build")
    for name in BROKERS:
        wait_healthy(cluster("ps", "-q", name).stdout.strip(), timeout=120)
    wait_for("the controller to unfence brokers 1, 2 and 3",
             lambda: unfenced(cluster) >= {1, 2, 3})
    for i, name in enumerate(BROKERS, start=1):
        text = logs(cluster, name)
        assert "Formatted /var/lib/runnel/data for cluster MkU3OEVBNTcwNTJENDM2Qg (node.id %d)" \
            % i in text, text
        assert 'msg="unfenced: serving in the cluster"' in text, text
    listed = kcat_in_network(cluster, "-L", "-b", "runnel-1:29092")
    for i, name in enumerate(BROKERS, start=1):
        assert "broker %d at %s:29092" % (i, name) in listed, listed
    produce_through_a_broker_restart(cluster)
    # The killed broker came back on its volume (no second format) with a new
    # registration the controller unfenced.
    wait_for("runnel-2 unfenced again",
             lambda: logs(cluster, "runnel-2").count('msg="unfenced: serving in the cluster"') >= 2)
    assert logs(cluster, "runnel-2").count("Formatted /var/lib/runnel/data") == 1
    got = kcat_in_network(cluster, "-C", "-b", "runnel-3:29092", "-t", TOPIC, "-o", "beginning",
                          "-c", str(RECORDS), "-e", "-q", "-f", "%k=%s\n").split()
    assert sorted(got) == sorted("k%d=v%d" % (i, i) for i in range(RECORDS))


def kcat_in_network(compose, *args):
    """kcat in a container on the compose project's network."""
    res = subprocess.run(["docker", "run", "--rm", "--network", compose.project + "_default",
                          kcat_image(), *args], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res.stdout


def produce_through_a_broker_restart(compose):
    """RECORDS keyed records, idempotent acks=all, from this machine, to an
    auto-created topic with 3 replicas per partition (min.insync.replicas 2).
    runnel-2 is killed a third of the way in; the second third must be
    acknowledged while it is still down (the controller moves its
    partitions' leadership to the other two), then it is started again and
    the last third follows."""
    ck = require_module("confluent_kafka")
    bootstrap = ",".join("localhost:%s" % compose.env["RUNNEL_PORT_%d" % i] for i in (1, 3))
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 120000, "enable.idempotence": True})
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    def send(first, last):
        for i in range(first, last):
            p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, on_delivery=report)
            p.poll(0.01)
        assert p.flush(150) == 0, "records still unacknowledged"
        assert not failed, failed[:5]

    send(0, RECORDS // 3)
    md = p.list_topics(TOPIC, timeout=30).topics[TOPIC]
    assert len(md.partitions) == 6
    assert {pm.leader for pm in md.partitions.values()} == {1, 2, 3}
    assert all(sorted(pm.replicas) == [1, 2, 3] for pm in md.partitions.values())
    compose("kill", "runnel-2")
    send(RECORDS // 3, 2 * RECORDS // 3)
    md = p.list_topics(TOPIC, timeout=30).topics[TOPIC]
    assert {pm.leader for pm in md.partitions.values()} <= {1, 3}
    compose("start", "runnel-2")
    send(2 * RECORDS // 3, RECORDS)
