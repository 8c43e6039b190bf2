"""The Docker image (docker/Dockerfile) against a real dockerd: clients
through a published port, data across `docker restart`, SIGTERM, both Kafka
image contracts' environment mappings, and the errors a container gives for
bad input. The image comes from `.ci/docker-setup`; see dockerutil.py.
"""

import json
import os
import subprocess
import time

import pytest

from conftest import require_module
from dockerutil import (IMAGE, consume_values, containers, docker, free_port, kcat_image,  # noqa: F401
                        logs, wait_exit, wait_healthy, wait_ready)
import procs
from roundtrip import check_roundtrip, make_records, parse_tool_output, write_lines
from runnel_broker import runnel_bin

pytestmark = pytest.mark.usefixtures("runnel_only")


def kcat_produce(kcat, bootstrap, topic, values):
    subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0"],
                   input="".join(v + "\n" for v in values), text=True, check=True, timeout=30)


def kcat_consume(kcat, bootstrap, topic, count):
    res = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
                          "-c", str(count), "-e", "-q"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def runnel_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("runnel: ")]


def test_image_is_small_with_user_volume_healthcheck(containers):
    info = json.loads(docker("image", "inspect", IMAGE).stdout)[0]
    assert info["Size"] <= 20 * 1000 * 1000, "image is %d bytes" % info["Size"]
    cfg = info["Config"]
    assert cfg["User"] == "1001:1001"
    assert "/var/lib/runnel/data" in cfg["Volumes"]
    assert cfg["Healthcheck"]["Test"][0] == "CMD"
    assert cfg["Cmd"] == ["/etc/kafka/docker/run"]
    assert not cfg.get("Entrypoint")
    # The scripts start scripts written for Kafka's images call.
    paths = ["/etc/kafka/docker/run"] + ["/etc/confluent/docker/" + s for s in
                                         ("run", "configure", "launch", "ensure")]
    res = docker("run", "--rm", IMAGE, "sh", "-c",
                 "for f in %s; do test -x $f || echo missing $f; done; "
                 "test -r /etc/confluent/docker/bash-config || echo missing bash-config; "
                 "test -w /etc/confluent/docker/configure || echo configure not writable; "
                 "test -w /etc/kafka || echo /etc/kafka not writable; "
                 "kafka-storage format --ignore-formatted -t x -c /etc/confluent/docker/run"
                 % " ".join(paths))
    assert "missing" not in res.stdout and "writable" not in res.stdout, res.stdout
    assert "nothing to do" in res.stdout


def test_kcat_through_published_port_and_data_survives_restart(containers, kcat):
    name, bootstrap = containers.broker()
    values = ["v%d" % i for i in range(20)]
    kcat_produce(kcat, bootstrap, "docker-kcat", values)
    assert kcat_consume(kcat, bootstrap, "docker-kcat", len(values)) == values

    docker("restart", "-t", "10", name)
    wait_ready(name, count=2)
    assert kcat_consume(kcat, bootstrap, "docker-kcat", len(values)) == values
    # A clean stop before the restart: the log dir was closed cleanly.
    assert "clean_shutdown=true" in logs(name)


def test_healthcheck_turns_healthy(containers):
    name, _ = containers.broker()
    wait_healthy(name, timeout=30)


def test_confluent_kafka_through_published_port(containers):
    ck = require_module("confluent_kafka")
    _, bootstrap = containers.broker(env={"KAFKA_NUM_PARTITIONS": "3"})
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    for i in range(30):
        p.produce("docker-ck", key=b"k%d" % i, value=b"value-%d" % i,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0 and not errors
    got = consume_values(ck, bootstrap, "docker-ck", 30)
    assert sorted(got) == sorted(b"value-%d" % i for i in range(30))
    md = p.list_topics("docker-ck", 10)
    assert len(md.topics["docker-ck"].partitions) == 3


def test_java_client_through_published_port(containers, java_runner, tmp_path):
    """The Java client (kafka-clients 4.x, idempotent acks=all at its
    defaults) produces 90 records of every shape to 3 partitions through the
    published port and reads each back with its key, headers and timestamp."""
    _, bootstrap = containers.broker(env={"KAFKA_NUM_PARTITIONS": "3"})
    records = make_records("docker-java", 90)
    path = tmp_path / "records.txt"
    write_lines(path, records)
    res = java_runner("RecordsTool", "roundtrip", bootstrap, path, "docker-java=lz4",
                      timeout=240)
    assert res.returncode == 0, procs.describe(res)
    acks, errors, got, _ = parse_tool_output(res.stdout)
    assert not errors, sorted(errors.items())[:5]
    check_roundtrip(records, got, 3, acks)


def test_sigterm_exits_zero_within_a_second(containers):
    name, _ = containers.broker()
    t0 = time.monotonic()
    docker("kill", "-s", "TERM", name)
    code = wait_exit(name)
    elapsed = time.monotonic() - t0
    assert code == 0, logs(name)
    # Two docker CLI round trips are in the figure; the broker itself logs
    # its stop a few milliseconds after the signal.
    assert elapsed < 2.0, "stopped %.2f s after SIGTERM" % elapsed
    assert 'msg="stopped" exit=0' in logs(name)


def test_invalid_value_stops_container_with_the_binary_error(containers, tmp_path):
    name = containers.run(env={"KAFKA_NUM_PARTITIONS": "abc"})
    assert wait_exit(name) == 2
    lines = runnel_lines(logs(name))
    env = dict(os.environ, KAFKA_NUM_PARTITIONS="abc", KAFKA_LOG_DIRS=str(tmp_path))
    res = subprocess.run([str(runnel_bin())], env=env, capture_output=True, text=True,
                         timeout=20)
    assert res.returncode == 2
    assert lines == runnel_lines(res.stderr)
    assert lines == ["runnel: config: num.partitions=abc (from KAFKA_NUM_PARTITIONS): "
                     "expected an integer >= 1; fix it in the properties file or on the "
                     "command line (runnel --help lists the keys)"]


def test_unknown_key_logged_once_and_kraft_keys_accepted(containers):
    env = {"KAFKA_NO_SUCH_KEY": "1", "KAFKA_PROCESS_ROLES": "broker,controller",
           "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
           "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_NODE_ID": "1",
           "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw"}
    name, _ = containers.broker(env=env)
    text = logs(name)
    unknown = [ln for ln in text.splitlines() if "unknown configuration key" in ln]
    assert len(unknown) == 1 and unknown[0].endswith("key=no.such.key"), unknown
    assert 'ignored" key=process.roles' in text
    assert 'ignored" key=controller.quorum.voters' in text
    assert "cluster_id=4L6g3nShT-eMCtK--X86sw" in text


def test_unwritable_data_volume_one_line(containers, tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # owned by this (root) user: the image's uid 1001 cannot write
    if os.geteuid() != 0:
        os.chmod(data, 0o555)
    name = containers.run("-v", "%s:/var/lib/runnel/data" % data)
    assert wait_exit(name) == 1
    lines = logs(name).splitlines()
    assert lines == ["runnel: data directory /var/lib/runnel/data is not writable by uid "
                     "1001; give the volume to that uid (chown -R 1001 on it) or run the "
                     "container with --user set to the volume's owner"]


def test_apache_mapping_and_derived_listeners(containers, kcat):
    """apache/kafka's mapping (__ -> _, ___ -> -) and KAFKA_LISTENERS derived from
    the advertised listeners: the container port equals the published one."""
    port = free_port()
    name = containers.run("-p", "127.0.0.1:%d:%d" % (port, port),
                          env={"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:%d" % port,
                               "KAFKA_NO__SUCH___KEY": "1"})
    text = wait_ready(name)
    assert "runnel: serving PLAINTEXT://0.0.0.0:%d;" % port in text
    assert "key=no_such-key" in text
    bootstrap = "127.0.0.1:%d" % port
    kcat_produce(kcat, bootstrap, "docker-apache", ["a", "b"])
    assert kcat_consume(kcat, bootstrap, "docker-apache", 2) == ["a", "b"]


def test_confluent_contract(containers, kcat):
    """/etc/confluent/docker/run: Confluent's mapping (__ -> -, ___ -> _) into
    /etc/kafka/kafka.properties, and a broker serving that file."""
    res = docker("run", "--rm", "-e", "KAFKA_NO__SUCH___KEY=1", "-e", "KAFKA_HEAP_OPTS=-Xmx1G",
                 "-e", "KAFKA_LOG_RETENTION_MS=1000", IMAGE, "sh", "-c",
                 "/etc/confluent/docker/configure && cat /etc/kafka/kafka.properties")
    props = [ln for ln in res.stdout.splitlines() if not ln.startswith("#")]
    assert "no-such_key=1" in props
    assert "log.retention.ms=1000" in props
    assert "log.dirs=/var/lib/runnel/data" in props
    assert "listeners=PLAINTEXT://0.0.0.0:9092" in props
    assert not [p for p in props if p.startswith("heap")]

    name, bootstrap = containers.broker(cmd=["/etc/confluent/docker/run"],
                                        env={"KAFKA_NO__SUCH___KEY": "1"})
    text = logs(name)
    assert "key=no-such_key" in text and "key=no_such-key" not in text
    assert "[KafkaServer id=1] started" in text and "Kafka Server started" in text
    kcat_produce(kcat, bootstrap, "docker-confluent", ["x", "y"])
    assert kcat_consume(kcat, bootstrap, "docker-confluent", 2) == ["x", "y"]


def test_confluent_bad_value_stops_container(containers):
    """The Confluent contract reads kafka.properties, so the error names the key
    (each key there follows a comment naming its variable)."""
    name = containers.run(env={"KAFKA_NUM_PARTITIONS": "abc"}, cmd=["/etc/confluent/docker/run"])
    assert wait_exit(name) == 2
    assert runnel_lines(logs(name)) == [
        "runnel: config: num.partitions=abc: expected an integer >= 1; fix it in the "
        "properties file or on the command line (runnel --help lists the keys)"]


@pytest.mark.parametrize("dialled", [True, False])
def test_dialled_address_serves_a_container_told_localhost(containers, dialled):
    """The compose pitfall: a broker advertising localhost, a client in another
    container dialling it by name. runnel.advertise.dialled.address=true answers
    Metadata with the address the client reached, so the client works; without
    it the client is sent to its own localhost and cannot produce (as Kafka)."""
    image = kcat_image()
    net = "runnel-test-net-%d-%s" % (os.getpid(), dialled)
    docker("network", "create", net)
    try:
        env = {"KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092",
               "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:9092"}
        if dialled:
            env["KAFKA_RUNNEL_ADVERTISE_DIALLED_ADDRESS"] = "true"
        name = containers.run("--network", net, env=env)
        wait_ready(name)
        client = ["run", "--rm", "-i", "--network", net, image]
        res = docker(*client, "-L", "-b", "%s:9092" % name, "-m", "10", check=False, timeout=60)
        want = "localhost:9092" if not dialled else ":9092"
        assert want in res.stdout, res.stdout + res.stderr
        assert ("localhost:9092" in res.stdout) != dialled, res.stdout
        produce = docker(*client, "-P", "-b", "%s:9092" % name, "-t", "dialled", "-p", "0",
                         "-m", "10", "-X", "message.timeout.ms=5000", input="one\ntwo\n",
                         check=False, timeout=60)
        if not dialled:
            assert produce.returncode != 0 or "failed" in produce.stderr.lower(), \
                "a client told localhost cannot produce: %s" % produce.stderr
            return
        assert produce.returncode == 0, produce.stderr
        got = docker(*client, "-C", "-b", "%s:9092" % name, "-t", "dialled", "-p", "0",
                     "-o", "beginning", "-c", "2", "-e", "-q", "-m", "10", timeout=60)
        assert got.stdout.split() == ["one", "two"]
    finally:
        docker("rm", "-f", *containers.names, check=False)
        docker("network", "rm", net, check=False)
