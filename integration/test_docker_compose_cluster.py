"""docker/compose-cluster.yml as a user runs it, with compose v1 and v2: one
Apache Kafka 4.4.0 KRaft controller (docker/controller/Dockerfile, the Maven
Central jars on Debian's JRE) and three Runnel brokers (process.roles=broker)
whose data volumes the image's start script formats for CLUSTER_ID. Every
broker registers and is unfenced by the controller; a broker container
killed and started again registers again with the data it had."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import missing
from dockerutil import SETUP_HINT, free_port, require_docker, wait_healthy
from test_docker_compose import compose_command

pytestmark = pytest.mark.usefixtures("runnel_only")

ROOT = Path(__file__).resolve().parent.parent
FILES = ["-f", str(ROOT / "docker" / "compose-cluster.yml")]
BROKERS = ("runnel-1", "runnel-2", "runnel-3")
CONTROLLER_IMAGE = "runnel-kraft-controller:latest"


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
    # A broker killed and started again: same volume (no second format), a new
    # registration the controller unfences.
    cluster("kill", "runnel-2")
    cluster("start", "runnel-2")
    wait_for("runnel-2 to serve again",
             lambda: logs(cluster, "runnel-2").count('msg="unfenced: serving in the cluster"') >= 2)
    assert logs(cluster, "runnel-2").count("Formatted /var/lib/runnel/data") == 1
