"""testcontainers' Kafka modules on the Runnel image, unmodified.

testcontainers-python's KafkaContainer (the Confluent contract: its own
start script sources /etc/confluent/docker/bash-config and runs configure and
launch) on the Runnel image, unmodified, producing and consuming through the
container with confluent-kafka.

The module's default mode starts ZooKeeper first (the image's
zookeeper-server-start does nothing); with_kraft() accepts only a Confluent
Platform version as the image tag, so the image is tagged runnel:7.6.0 for it.
testcontainers' reaper image comes from a registry (none here), hence
TESTCONTAINERS_RYUK_DISABLED; docker_host mode makes it dial the published
port on this machine.

testcontainers-go's modules/kafka (integration/go-tc, built offline from the
modules .ci/install-deps fetched) runs the Confluent contract with a start
script of its own and waits for "Transitioning from RECOVERY to RUNNING";
TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 stands for docker_host mode there.

testcontainers-java's org.testcontainers.kafka.KafkaContainer
(integration/java-tc, jars from Maven Central) runs the apache/kafka contract,
/etc/kafka/docker/run; the image is declared with
DockerImageName.asCompatibleSubstituteFor("apache/kafka").

@testcontainers/kafka 11.14 for Node (integration/js-tc; 12.x needs a newer
Node than Debian's 20) in KRaft mode, which takes only a Confluent Platform
version as the tag: runnel:7.6.0 again. It runs /etc/confluent/docker/run.
"""

import json
import os
import shutil

import pytest

import procs
from conftest import missing, require_module
from dockerutil import IMAGE, consume_values, docker, require_docker

pytestmark = pytest.mark.usefixtures("runnel_only")

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
KRAFT_TAG = "runnel:7.6.0"


@pytest.fixture(scope="module")
def kafka_container_cls():
    require_docker()
    return require_module("testcontainers.community.kafka").KafkaContainer


def roundtrip(bootstrap, topic):
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, value=b"tc-%d" % i)
    assert p.flush(30) == 0
    assert consume_values(ck, bootstrap, topic, 10) == [b"tc-%d" % i for i in range(10)]


def test_kafka_container_default_mode(kafka_container_cls):
    with kafka_container_cls(IMAGE) as kafka:
        roundtrip(kafka.get_bootstrap_server(), "tc-python")


@pytest.fixture
def kraft_tag():
    docker("tag", IMAGE, KRAFT_TAG)
    yield KRAFT_TAG
    docker("rmi", KRAFT_TAG, check=False)


def test_kafka_container_kraft(kafka_container_cls, kraft_tag):
    with kafka_container_cls(kraft_tag).with_kraft() as kafka:
        roundtrip(kafka.get_bootstrap_server(), "tc-python-kraft")
        text = kafka.get_wrapped_container().logs().decode()
        assert "ignored\" key=process.roles" in text
        assert "cluster_id=MkU3OEVBNTcwNTJENDM2Qk" in text


def test_testcontainers_go_kafka_module():
    require_docker()
    go = procs.find_go()
    if go is None:
        missing("go >= the version integration/go/go.mod names")
    if not (procs.DEPS / "stamps" / "go-tc").is_file():
        missing("Go modules of integration/go-tc in %s" % procs.GO_DEPS)
    src = procs.REPO / "integration" / "go-tc"
    exe = procs.GO_DEPS / "tcgo"
    procs.run([go, "build", "-o", exe, "."], timeout=900, env=procs.go_env(), cwd=src,
              check=True)
    env = dict(os.environ, TESTCONTAINERS_RYUK_DISABLED="true",
               TESTCONTAINERS_HOST_OVERRIDE="127.0.0.1")
    res = procs.run([str(exe), IMAGE], timeout=180, env=env)
    assert res.returncode == 0, procs.describe(res)
    out = json.loads(res.stdout)
    assert out["consumed"] == ["tc-go-%d" % i for i in range(10)]


def test_testcontainers_java_kafka_container(tmp_path):
    require_docker()
    jars = procs.DEPS / "jars-tc"
    for exe in ("java", "javac"):
        if shutil.which(exe) is None:
            missing("executable %s on PATH" % exe)
    if not list(jars.glob("testcontainers-*.jar")):
        missing("testcontainers-java jars in %s" % jars)
    src = procs.REPO / "integration" / "java-tc" / "TcKafka.java"
    cp = "%s/*" % jars
    procs.run(["javac", "-d", tmp_path, "-cp", cp, src], timeout=300, check=True)
    env = dict(os.environ, TESTCONTAINERS_RYUK_DISABLED="true",
               TESTCONTAINERS_HOST_OVERRIDE="127.0.0.1")
    res = procs.run(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                     "%s:%s" % (cp, tmp_path), "TcKafka", IMAGE], timeout=240, env=env)
    assert res.returncode == 0, procs.describe(res)
    assert "consumed: " + " ".join("v%d" % i for i in range(10)) in res.stdout.splitlines()


def test_testcontainers_node_kafka_container(kraft_tag):
    require_docker()
    node = shutil.which("node")
    if node is None:
        missing("executable node on PATH")
    js = procs.REPO / "integration" / "js-tc"
    if not (js / "node_modules" / "@testcontainers" / "kafka").is_dir():
        missing("@testcontainers/kafka in %s/node_modules" % js)
    env = dict(os.environ, TESTCONTAINERS_RYUK_DISABLED="true",
               TESTCONTAINERS_HOST_OVERRIDE="127.0.0.1")
    res = procs.run([node, js / "tc-kafka.js", kraft_tag], timeout=240, env=env, cwd=js)
    assert res.returncode == 0, procs.describe(res)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["consumed"] == ["tc-js-%d" % i for i in range(10)]
