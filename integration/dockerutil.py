"""Helpers for the tests of the Docker image (test_docker*.py).

They drive the real dockerd through the docker CLI. `.ci/docker-setup`
installs Docker, starts dockerd and builds the image `runnel:latest`
($RUNNEL_IMAGE). Docker or the image missing fails the test in CI and skips
it elsewhere (conftest.missing). Every container a test starts is named
`runnel-test-*` and removed, with its anonymous volumes, when the test ends.
"""

import itertools
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import missing

IMAGE = os.environ.get("RUNNEL_IMAGE", "runnel:latest")
READY = "Transitioning from RECOVERY to RUNNING"
SETUP_HINT = "run: bash .ci/docker-setup"
KCAT_IMAGE = "runnel-test-kcat:latest"  # integration/docker/kcat.Dockerfile, as compose builds it
_names = itertools.count(1)


def docker(*args, check=True, timeout=60, **kw):
    res = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                         **kw)
    if check and res.returncode != 0:
        raise AssertionError("docker %s failed (%d): %s" % (" ".join(args), res.returncode,
                                                            res.stderr.strip()))
    return res


def require_docker():
    """The docker CLI, a dockerd that answers, and the Runnel image."""
    if shutil.which("docker") is None:
        missing("docker CLI", SETUP_HINT)
    if docker("info", check=False, timeout=20).returncode != 0:
        missing("a running dockerd", SETUP_HINT)
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        missing("the image %s" % IMAGE, SETUP_HINT)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Containers:
    """Starts containers for one test and removes them all at its end."""

    def __init__(self):
        self.names = []

    def name(self):
        n = "runnel-test-%d-%d" % (os.getpid(), next(_names))
        self.names.append(n)
        return n

    def run(self, *args, env=None, image=IMAGE, cmd=()):
        """docker run -d; returns the container's name."""
        name = self.name()
        argv = ["run", "-d", "--name", name]
        for k, v in (env or {}).items():
            argv += ["-e", "%s=%s" % (k, v)]
        docker(*argv, *args, image, *cmd)
        return name

    def broker(self, *args, env=None, cmd=()):
        """A broker reachable from this machine on 127.0.0.1:PORT (published
        port, advertised as such); returns (name, "127.0.0.1:PORT")."""
        port = free_port()
        e = {"KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092",
             "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:%d" % port}
        e.update(env or {})
        name = self.run("-p", "127.0.0.1:%d:9092" % port, *args, env=e, cmd=cmd)
        wait_ready(name)
        return name, "127.0.0.1:%d" % port

    def cleanup(self):
        for n in self.names:
            docker("rm", "-f", "-v", n, check=False)


def logs(name, since=None):
    args = ["logs"] + (["--since", since] if since else []) + [name]
    res = docker(*args, check=False)
    return res.stdout + res.stderr


def state(name):
    return docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name).stdout.split()


def wait_ready(name, timeout=60, count=1):
    """Until the readiness line has been logged `count` times; fails with the
    log if the container stops first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = logs(name)
        if text.count(READY) >= count:
            return text
        status, code = state(name)
        if status in ("exited", "dead"):
            raise AssertionError("container %s exited (%s) before it was ready:\n%s"
                                 % (name, code, text))
        time.sleep(0.1)
    raise AssertionError("container %s not ready in %d s:\n%s" % (name, timeout, logs(name)))


def wait_exit(name, timeout=30):
    """The exit code of a container that stops by itself."""
    res = docker("wait", name, timeout=timeout)
    return int(res.stdout.strip())


@pytest.fixture
def containers():
    require_docker()
    c = Containers()
    yield c
    c.cleanup()


def wait_healthy(name, timeout=60):
    """Until docker reports the container's HEALTHCHECK healthy."""
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        status = docker("inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip()
        if status == "healthy":
            return
        time.sleep(0.2)
    raise AssertionError("%s is %s after %d s" % (name, status, timeout))


def consume_values(ck, bootstrap, topic, count, timeout=60):
    """The first `count` values a new confluent-kafka group reads from topic."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                     "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def kcat_image():
    """The kcat client image, built from integration/docker/kcat.Dockerfile
    when this dockerd does not have it yet."""
    if docker("image", "inspect", KCAT_IMAGE, check=False).returncode != 0:
        here = os.path.dirname(os.path.abspath(__file__))
        docker("build", "-t", KCAT_IMAGE, "-f", os.path.join(here, "docker", "kcat.Dockerfile"),
               os.path.join(here, "docker"), timeout=600)
    return KCAT_IMAGE
