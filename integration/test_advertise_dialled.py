"""runnel.advertise.dialled.address: Metadata, FindCoordinator and
DescribeCluster answer with the address and port the client's connection
reached, not advertised.listeners (a single node behind Docker networking;
docs/operations.md, "The dialled address").

The broker listens on 0.0.0.0 and advertises a name that resolves nowhere;
clients dial it as 127.0.0.1 and as 127.0.0.2 (both loopback on Linux). With
the key on, each is told the address it dialled and kcat and a
confluent-kafka consumer group work through either; with it off, Metadata
says the advertised name, as Kafka's would. Runnel only (a Runnel key)."""

import subprocess

import pytest

import wire
from conftest import require_module
from procs import free_port
from runnel_broker import RunnelBroker, runnel_bin

pytestmark = pytest.mark.usefixtures("runnel_only")

NOWHERE = "runnel-nowhere.invalid"


def start(tmp_path_factory, dialled):
    port = free_port()
    props = {"listeners": "PLAINTEXT://0.0.0.0:%d" % port,
             "advertised.listeners": "PLAINTEXT://%s:%d" % (NOWHERE, port)}
    if dialled is not None:
        props["runnel.advertise.dialled.address"] = dialled
    b = RunnelBroker(tmp_path_factory.mktemp("dialled") / "data", port=port, binary=runnel_bin(),
                     overrides=props)
    b.start()
    return b, port


def metadata_brokers(host, port):
    with wire.connect(host, port) as s:
        brokers, _controller = wire.metadata_v1_brokers(s, 1)
    return brokers


@pytest.fixture(scope="module")
def dialled(tmp_path_factory):
    b, port = start(tmp_path_factory, "true")
    yield port
    b.stop()


def test_metadata_names_the_address_dialled(dialled):
    assert metadata_brokers("127.0.0.1", dialled) == [(1, "127.0.0.1", dialled)]
    assert metadata_brokers("127.0.0.2", dialled) == [(1, "127.0.0.2", dialled)]


def test_kcat_and_a_consumer_group_through_the_dialled_address(dialled, kcat, topic_name):
    ck = require_module("confluent_kafka")
    bootstrap = "127.0.0.2:%d" % dialled
    topic = topic_name()
    subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0"], input="a\nb\nc\n",
                   text=True, check=True, timeout=30)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-g",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = []
        for _ in range(100):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == 3:
                break
        assert got == [b"a", b"b", b"c"]
        c.commit(asynchronous=False)  # through the coordinator FindCoordinator named
        committed = c.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 3
    finally:
        c.close()


@pytest.mark.parametrize("setting", [None, "false"])
def test_off_answers_the_advertised_listener(tmp_path_factory, setting):
    b, port = start(tmp_path_factory, setting)
    try:
        assert metadata_brokers("127.0.0.2", port) == [(1, NOWHERE, port)]
    finally:
        b.stop()
