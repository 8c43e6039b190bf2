"""Kafka Connect in distributed mode against the broker.

A Connect worker (ConnectDistributed from the connect-runtime jar) joins a
group on the broker, creates its config, offset and status topics, and runs
the FileStream connectors configured through its REST API: a source that
reads a file the test writes into a topic, and a sink that writes the topic
into another file. The lines must reach the topic and the sink file once
each and in order; the internal topics must be compacted as Connect asks;
connector and tasks must report RUNNING; a restarted worker must keep its
connectors and resume from the committed source offsets, so new lines
arrive and no old line comes twice; the offsets REST API (KIP-875) must
read, alter and reset both connectors' offsets; a source must create its
topic with the broker's defaults. All of that runs twice, the second time
with exactly.once.source.support=enabled, where the source offsets and the
config topic are written in transactions. Last, two workers share the
connectors and one takes over when the other is killed. Everything also
runs against Apache Kafka 4.1.1 with --target=kafka.
"""

import json
import time
import urllib.error
import urllib.request
import uuid
from types import SimpleNamespace

import pytest

import procs
from conftest import missing, require_module
from roundtrip import admin, create_topic, end_offsets, read_all

# Connect's group rebalances at once on both targets.
BROKER_PROPS = {"group.initial.rebalance.delay.ms": "0"}

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
FIRST_LINES = ["line-%03d first run" % i for i in range(25)]
MORE_LINES = ["line-%03d after restart" % i for i in range(25, 40)]


class ConnectWorker(procs.BrokerProcess):
    """A distributed Connect worker whose REST API listens on 127.0.0.1:port.

    datadir holds its properties file; its log goes to the usual
    <datadir>.stderr.log beside it."""

    clean_exit_codes = (0, 143)  # 143: the JVM ran the shutdown hook on SIGTERM
    start_timeout = 120.0

    def __init__(self, datadir, bootstrap, props):
        super().__init__(datadir)
        self.props_path = self.datadir / "worker.properties"
        p = {
            "bootstrap.servers": bootstrap,
            "listeners": "http://%s:%d" % (self.host, self.port),
            "rest.advertised.host.name": self.host,
            "rest.advertised.port": str(self.port),
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            # Commit source offsets and sink positions often, not every minute.
            "offset.flush.interval.ms": "500",
            # The FileStream connectors are on the class path with
            # ServiceLoader manifests: no reflective scan of every jar.
            "plugin.discovery": "service_load",
        }
        p.update(props)
        self.props_path.write_text("".join("%s=%s\n" % kv for kv in p.items()))

    def command(self):
        return (["java"] + procs.JAVA_TOOL_OPTS
                + ["-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect=info",
                   "-Dorg.slf4j.simpleLogger.showDateTime=true",
                   "-cp", procs.java_classpath(), CONNECT_MAIN, str(self.props_path)])

    def url(self, path):
        return "http://%s:%d%s" % (self.host, self.port, path)

    def rest(self, method, path, body=None, timeout=30):
        """(HTTP status, decoded JSON body or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, (json.loads(raw) if raw else None)

    def wait_ready(self):
        super().wait_ready()  # the REST port accepts
        # ... while the REST resources are still being set up. (A 200 does not
        # yet mean the worker has read its config topic.)

        def answers():
            res = self.rest("GET", "/connectors", timeout=10)
            return res[0] == 200, res

        self.wait_serving(answers, "connect worker", interval=0.5)

    def put_connector(self, name, config, timeout=60):
        """Create or update a connector; retried while the worker rebalances (409)."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.rest("PUT", "/connectors/%s/config" % name, config)
            if status in (200, 201):
                return body
            assert status == 409 and time.monotonic() < deadline, (
                "PUT connector %s: %s %r\n%s" % (name, status, body, self.log_tail()))
            time.sleep(0.5)

    def status(self, name):
        code, body = self.rest("GET", "/connectors/%s/status" % name)
        return body if code == 200 else None


def wait_value(fetch, ok, what, timeout=30):
    """Poll fetch() until ok(value); return the value, or fail showing the last one."""
    last = [None]

    def check():
        last[0] = fetch()
        return ok(last[0])

    try:
        procs.wait_until(check, timeout, interval=0.3, what=what)
    except TimeoutError as e:
        raise AssertionError("%s; last seen: %r" % (e, last[0])) from None
    return last[0]


def wait_status(worker, name, ok, what, timeout=30):
    return wait_value(lambda: worker.status(name), ok, "%s %s" % (name, what), timeout)


def running(status):
    return (status is not None and status["connector"]["state"] == "RUNNING"
            and len(status["tasks"]) == 1 and status["tasks"][0]["state"] == "RUNNING")


def stopped(status):
    return (status is not None and status["connector"]["state"] == "STOPPED"
            and status["tasks"] == [])


def sink_lines(path):
    return path.read_text().splitlines() if path.exists() else []


def wait_sink(worker, path, want, timeout=90):
    """Wait until the sink file holds len(want) lines, then compare."""
    deadline = time.monotonic() + timeout
    while len(sink_lines(path)) < len(want):
        assert worker.alive(), "connect worker died\n%s" % worker.log_tail()
        assert time.monotonic() < deadline, (
            "sink file has %d of %d lines after %ds\n%s"
            % (len(sink_lines(path)), len(want), timeout, worker.log_tail()))
        time.sleep(0.3)
    assert sink_lines(path) == want


def topic_values(bootstrap, topic):
    """The topic's committed values, decoded from the JsonConverter's JSON strings."""
    return [json.loads(g.value) for g in read_all(bootstrap, topic, [0],
                                                  isolation="read_committed")]


def append(path, lines):
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


@pytest.fixture(scope="module")
def connect_jars(kafka_jars):
    """The worker and the FileStream connectors (integration/java/pom.xml)."""
    for jar in ("connect-runtime", "connect-json", "connect-file"):
        if not any(kafka_jars.glob(jar + "-*.jar")):
            missing("%s jar in %s" % (jar, kafka_jars))
    return kafka_jars


@pytest.fixture(scope="module")
def clients():
    """confluent-kafka (admin) and kafka-python (roundtrip.read_all)."""
    require_module("kafka")
    return require_module("confluent_kafka")


@pytest.fixture(scope="module", params=["at-least-once", "exactly-once"])
def connect(request, clients, connect_jars, broker, tmp_path_factory):
    """A worker running a FileStreamSource into a topic and a FileStreamSink out
    of it, with 25 lines through both; yields a namespace the tests share, in
    order (the last one restarts the worker)."""
    eos = request.param == "exactly-once"
    run = uuid.uuid4().hex[:8]
    base = tmp_path_factory.mktemp("connect-" + request.param)
    topics = {k: "connect-%s-%s" % (k, run) for k in ("configs", "offsets", "status", "data")}
    # Unique connector names: a sink's consumer group is connect-<name>.
    names = {k: "file-%s-%s" % (k, run) for k in ("source", "sink")}
    props = {
        "group.id": "connect-cluster-" + run,
        "config.storage.topic": topics["configs"],
        "offset.storage.topic": topics["offsets"],
        "status.storage.topic": topics["status"],
    }
    if eos:
        props["exactly.once.source.support"] = "enabled"
    create_topic(broker.bootstrap, topics["data"], 1)
    source_file, sink_file = base / "source.txt", base / "sink.txt"
    append(source_file, FIRST_LINES)

    worker = ConnectWorker(base / "worker", broker.bootstrap, props)
    try:
        worker.start()
        source = {"connector.class": "FileStreamSource", "tasks.max": "1",
                  "file": str(source_file), "topic": topics["data"]}
        if eos:
            source["exactly.once.support"] = "required"
        worker.put_connector(names["source"], source)
        worker.put_connector(names["sink"], {"connector.class": "FileStreamSink",
                                             "tasks.max": "1", "file": str(sink_file),
                                             "topics": topics["data"]})
        yield SimpleNamespace(worker=worker, eos=eos, topics=topics,
                              source_connector=names["source"], sink_connector=names["sink"],
                              connectors=(names["source"], names["sink"]),
                              source=source_file, sink=sink_file)
    finally:
        if worker.alive():
            worker.stop(timeout=60)


def test_lines_reach_topic_and_sink_once_in_order(connect, broker):
    wait_sink(connect.worker, connect.sink, FIRST_LINES)
    assert topic_values(broker.bootstrap, connect.topics["data"]) == FIRST_LINES


def test_internal_topics_are_compacted(connect, broker):
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    a = admin(broker.bootstrap)
    internal = [connect.topics[k] for k in ("configs", "offsets", "status")]
    md = a.list_topics(timeout=10).topics
    # Connect's defaults: one config partition (it refuses more), 25 offset
    # partitions, 5 status partitions.
    assert [len(md[t].partitions) for t in internal] == [1, 25, 5]
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in internal]
    for res, fut in a.describe_configs(resources, request_timeout=15).items():
        entry = fut.result(timeout=30)["cleanup.policy"]
        assert (entry.value, entry.source) == (
            "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value), res


def test_connectors_and_tasks_running(connect):
    w = connect.worker
    code, names = w.rest("GET", "/connectors")
    assert code == 200 and sorted(names) == sorted(connect.connectors)
    for name in names:
        wait_status(w, name, running, "RUNNING")
    assert w.status(connect.source_connector)["type"] == "source"
    assert w.status(connect.sink_connector)["type"] == "sink"


def test_restart_keeps_connectors_and_resumes_from_committed_offsets(connect, broker):
    w = connect.worker
    wait_sink(w, connect.sink, FIRST_LINES)
    w.stop(timeout=60)
    append(connect.source, MORE_LINES)
    w.start()
    # The connectors come back from the config topic (read in the background).
    names = wait_value(lambda: sorted(w.rest("GET", "/connectors")[1] or []),
                       lambda got: got == sorted(connect.connectors), "connectors listed")
    wait_sink(w, connect.sink, FIRST_LINES + MORE_LINES)
    assert topic_values(broker.bootstrap, connect.topics["data"]) == FIRST_LINES + MORE_LINES
    for name in names:
        wait_status(w, name, running, "RUNNING after the restart")
    # Nothing more trickles in: the source resumed at its committed position.
    time.sleep(2)
    assert sink_lines(connect.sink) == FIRST_LINES + MORE_LINES


def offsets(worker, name):
    code, body = worker.rest("GET", "/connectors/%s/offsets" % name)
    assert code == 200, (code, body)
    return body["offsets"]


def wait_offsets(worker, name, want, timeout=20):
    """The worker reads its offsets topic (or the sink's group) asynchronously."""
    wait_value(lambda: offsets(worker, name), lambda got: got == want,
               "offsets of %s == %r" % (name, want), timeout)


def put_ok(worker, path, want):
    code, body = worker.rest("PUT", path)
    assert code == want, (path, code, body)


def test_offsets_api_reads_alters_and_resets_offsets(connect, broker):
    """KIP-875 on stopped connectors: read the committed offsets, move the sink
    back to an earlier record and the source back to an earlier line, then
    reset both; every move shows in what the connectors write next."""
    w, t = connect.worker, connect.topics["data"]
    lines = FIRST_LINES + MORE_LINES
    wait_sink(w, connect.sink, lines)
    got = read_all(broker.bootstrap, t, [0], isolation="read_committed")
    end = end_offsets(broker.bootstrap, t, [0])[0]

    src_part = {"filename": str(connect.source)}
    sink_part = {"kafka_topic": t, "kafka_partition": 0}
    wait_offsets(w, connect.source_connector, [
        {"partition": src_part, "offset": {"position": connect.source.stat().st_size}}])

    def sink_at_end(found):
        # Past the last record; under exactly-once only commit markers may
        # follow it, and the sink may or may not have stepped over them.
        return (len(found) == 1 and found[0]["partition"] == sink_part
                and got[-1].offset < found[0]["offset"]["kafka_offset"] <= end)

    wait_value(lambda: offsets(w, connect.sink_connector), sink_at_end,
               "sink offset after record %d, at most %d" % (got[-1].offset, end), 20)

    for name in connect.connectors:
        put_ok(w, "/connectors/%s/stop" % name, 204)
        wait_status(w, name, stopped, "STOPPED")

    # Alter: the sink goes back to record 30, the source to the start of line 35.
    line35 = sum(len(line.encode()) + 1 for line in lines[:35])
    for name, part, off in ((connect.sink_connector, sink_part, {"kafka_offset": got[30].offset}),
                            (connect.source_connector, src_part, {"position": line35})):
        code, body = w.rest("PATCH", "/connectors/%s/offsets" % name,
                            {"offsets": [{"partition": part, "offset": off}]})
        assert code == 200 and "altered successfully" in body["message"], (name, code, body)
        wait_offsets(w, name, [{"partition": part, "offset": off}])
    for name in connect.connectors:
        put_ok(w, "/connectors/%s/resume" % name, 202)
    # The source writes lines 35.. again; the sink writes everything from record 30 on.
    topic = lines + lines[35:]
    wait_sink(w, connect.sink, lines + topic[30:])
    assert topic_values(broker.bootstrap, t) == topic

    # Reset: the sink's group is deleted, the source's offsets get tombstones.
    for name in connect.connectors:
        put_ok(w, "/connectors/%s/stop" % name, 204)
        wait_status(w, name, stopped, "STOPPED")
    for name in connect.connectors:
        code, body = w.rest("DELETE", "/connectors/%s/offsets" % name)
        assert code == 200 and "reset successfully" in body["message"], (name, code, body)
        wait_offsets(w, name, [])
    for name in connect.connectors:
        put_ok(w, "/connectors/%s/resume" % name, 202)
    # The source reads the whole file again, the sink the whole topic (earliest).
    topic = topic + lines
    wait_sink(w, connect.sink, lines + topic[30:-len(lines)] + topic)
    assert topic_values(broker.bootstrap, t) == topic
    for name in connect.connectors:
        wait_status(w, name, running, "RUNNING")


def test_source_creates_its_topic_with_broker_defaults(connect, broker, topic_name):
    """topic.creation.* with partitions and replication factor -1 (KIP-464:
    the broker's defaults), as Debezium's examples configure it."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    w, t = connect.worker, topic_name("created")
    src = connect.source.parent / "created.txt"
    append(src, FIRST_LINES[:5])
    w.put_connector("created-source", {
        "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(src), "topic": t,
        "topic.creation.default.partitions": "-1",
        "topic.creation.default.replication.factor": "-1",
        "topic.creation.default.retention.ms": "3600000"})
    a = admin(broker.bootstrap)
    procs.wait_until(lambda: t in a.list_topics(timeout=10).topics, 60, interval=0.3,
                     what="topic %s created by the connector" % t)
    assert len(a.list_topics(timeout=10).topics[t].partitions) == 1  # num.partitions
    res = ConfigResource(ResourceType.TOPIC, t)
    entry = a.describe_configs([res], request_timeout=15)[res].result(timeout=30)["retention.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    wait_value(lambda: topic_values(broker.bootstrap, t), lambda v: len(v) >= 5,
               "5 lines in %s" % t, 60)
    assert topic_values(broker.bootstrap, t) == FIRST_LINES[:5]
    wait_status(w, "created-source", running, "RUNNING")
    code, body = w.rest("DELETE", "/connectors/created-source")
    assert code == 204, (code, body)


def test_two_workers_share_connectors_and_fail_over(clients, connect_jars, broker, tmp_path):
    """Two workers in one group split the connectors and tasks; when one is
    killed the other takes its work after the session timeout."""
    run = uuid.uuid4().hex[:8]
    topic = create_topic(broker.bootstrap, "connect-pair-data-" + run, 1)
    props = {
        "group.id": "connect-pair-" + run,
        "config.storage.topic": "connect-pair-configs-" + run,
        "offset.storage.topic": "connect-pair-offsets-" + run,
        "status.storage.topic": "connect-pair-status-" + run,
        # Short sessions for the workers and for the sink's consumer, whose
        # group waits for a dead member until its session ends.
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "consumer.session.timeout.ms": "6000",
        "consumer.heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "1000",
    }
    src, snk = tmp_path / "source.txt", tmp_path / "sink.txt"
    append(src, FIRST_LINES)
    a = ConnectWorker(tmp_path / "a", broker.bootstrap, props)
    b = ConnectWorker(tmp_path / "b", broker.bootstrap, props)
    try:
        a.start()
        b.start()
        # Created through b: a follower forwards to the leader over REST.
        b.put_connector("pair-source", {"connector.class": "FileStreamSource", "tasks.max": "1",
                                        "file": str(src), "topic": topic})
        b.put_connector("pair-sink", {"connector.class": "FileStreamSink", "tasks.max": "1",
                                      "file": str(snk), "topics": topic})
        wait_sink(a, snk, FIRST_LINES)
        owners = set()
        for name in ("pair-source", "pair-sink"):
            st = wait_status(a, name, running, "RUNNING")
            owners |= {st["connector"]["worker_id"], st["tasks"][0]["worker_id"]}
        ids = {"%s:%d" % (w.host, w.port) for w in (a, b)}
        assert owners == ids, "work not spread over both workers"

        b.kill9()
        append(src, MORE_LINES)
        # At least once across a crash: lines since the last commit may come twice.
        wait_value(lambda: sink_lines(snk), lambda got: set(got) >= set(MORE_LINES),
                   "every line in the sink after the failover", timeout=90)
        assert list(dict.fromkeys(sink_lines(snk))) == FIRST_LINES + MORE_LINES
        survivor = {"%s:%d" % (a.host, a.port)}
        for name in ("pair-source", "pair-sink"):
            wait_status(a, name, lambda s: running(s) and {
                s["connector"]["worker_id"], s["tasks"][0]["worker_id"]} == survivor,
                "RUNNING on the surviving worker", timeout=60)
    finally:
        for w in (b, a):
            if w.alive():
                w.stop(timeout=60)
