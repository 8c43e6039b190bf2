"""docker/compose.yml as a user runs it, with compose v1 (`docker-compose`,
Debian's package) and v2 (`docker compose`, the CLI plugin .ci/docker-setup
builds from the Go module proxy): `up --build` brings up the broker with its
named volume and healthcheck; a kcat container on the compose network reaches
it by service name (runnel:29092), and this machine through the published
port."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import missing, require_exe
from dockerutil import SETUP_HINT, free_port, require_docker, wait_healthy

pytestmark = pytest.mark.usefixtures("runnel_only")

ROOT = Path(__file__).resolve().parent.parent
FILES = ["-f", str(ROOT / "docker" / "compose.yml"),
         "-f", str(ROOT / "integration" / "docker" / "compose-client.yml")]


def compose_command(version):
    if version == "v1":
        exe = shutil.which("docker-compose")
        return [exe] if exe else None
    res = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True,
                         timeout=30)
    return ["docker", "compose"] if res.returncode == 0 else None


@pytest.fixture(params=["v1", "v2"])
def compose(request):
    require_docker()
    cmd = compose_command(request.param)
    if cmd is None:
        missing("docker compose %s" % request.param, SETUP_HINT)
    project = "runneltest%s%d" % (request.param, os.getpid())
    env = dict(os.environ, RUNNEL_PORT=str(free_port()))

    def run(*args, timeout=600, check=True, input=None):
        res = subprocess.run([*cmd, "-p", project, *FILES, *args], env=env, capture_output=True,
                             text=True, timeout=timeout, input=input)
        if check and res.returncode != 0:
            raise AssertionError("compose %s failed (%d):\n%s\n%s"
                                 % (" ".join(args), res.returncode, res.stdout, res.stderr))
        return res

    run.project = project
    run.port = env["RUNNEL_PORT"]
    yield run
    run("down", "-v", "-t", "5", check=False, timeout=120)


def test_compose_up_client_by_service_name(compose, kcat):
    compose("up", "-d", "--build", "runnel")
    broker = compose("ps", "-q", "runnel").stdout.strip()
    wait_healthy(broker)
    # Another container on the compose network, by service name.
    res = compose("run", "--rm", "client", "-P", "-b", "runnel:29092", "-t", "compose-t",
                  "-p", "0", input="one\ntwo\n")
    res = compose("run", "--rm", "client", "-C", "-b", "runnel:29092", "-t", "compose-t",
                  "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q")
    assert res.stdout.split() == ["one", "two"]
    res = compose("run", "--rm", "client", "-L", "-b", "runnel:29092", "-t", "compose-t")
    assert "runnel:29092" in res.stdout
    # This machine, through the published port and the localhost advertisement.
    got = subprocess.run([kcat, "-C", "-b", "localhost:%s" % compose.port, "-t", "compose-t",
                          "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q"],
                         capture_output=True, text=True, timeout=30)
    assert got.stdout.split() == ["one", "two"], got.stderr
    # The named volume keeps the data across down (without -v) and up.
    compose("down", "-t", "10")
    compose("up", "-d", "runnel")
    broker = compose("ps", "-q", "runnel").stdout.strip()
    wait_healthy(broker)
    res = compose("run", "--rm", "client", "-C", "-b", "runnel:29092", "-t", "compose-t",
                  "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q")
    assert res.stdout.split() == ["one", "two"]
