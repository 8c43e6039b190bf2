"""testcontainers-python's KafkaContainer (the Confluent contract: its own
start script sources /etc/confluent/docker/bash-config and runs configure and
launch) on the Runnel image, unmodified, producing and consuming through the
container with confluent-kafka.

The module's default mode starts ZooKeeper first (the image's
zookeeper-server-start does nothing); with_kraft() accepts only a Confluent
Platform version as the image tag, so the image is tagged runnel:7.6.0 for it.
testcontainers' reaper image comes from a registry (none here), hence
TESTCONTAINERS_RYUK_DISABLED; docker_host mode makes it dial the published
port on this machine.
"""

import os
import time

import pytest

from conftest import require_module
from dockerutil import IMAGE, docker, require_docker

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
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                     "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"tc-%d" % i for i in range(10)]


def test_kafka_container_default_mode(kafka_container_cls):
    with kafka_container_cls(IMAGE) as kafka:
        roundtrip(kafka.get_bootstrap_server(), "tc-python")


def test_kafka_container_kraft(kafka_container_cls):
    docker("tag", IMAGE, KRAFT_TAG)
    try:
        with kafka_container_cls(KRAFT_TAG).with_kraft() as kafka:
            roundtrip(kafka.get_bootstrap_server(), "tc-python-kraft")
            text = kafka.get_wrapped_container().logs().decode()
            assert "ignored\" key=process.roles" in text
            assert "cluster_id=MkU3OEVBNTcwNTJENDM2Qk" in text
    finally:
        docker("rmi", KRAFT_TAG, check=False)
