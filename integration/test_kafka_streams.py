"""Kafka Streams against the broker: a stateful word count (StreamsApp in
integration/java) with a repartition topic, a RocksDB count store and its
changelog, and a windowed count beside it, under exactly_once_v2 and
at_least_once.

The tests feed input, read the output back until every word's count is the
expected one, and stop the app (SIGTERM: a clean close) or kill it
(SIGKILL, with a transaction open); a new process with the same
application.id, its state directory kept or wiped (then every store is
restored from its changelog), gets more input and the counts must carry
on. With exactly-once a read_committed reader sees every word's counts as
exactly 1, 2, ..., n: no duplicate, no gap; also after a restore from
changelogs the log cleaner compacted while they held aborted records, over
a broker crash, and while a second instance comes and goes. The internal
topics Streams creates carry the configs it asked for (DescribeConfigs),
and the consumed repartition records are deleted (DeleteRecords).
Everything also runs against Apache Kafka 4.1.1 with --target=kafka.
"""

import collections
import os
import random
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

import procs
from conftest import missing, require_module
from roundtrip import create_topic

# Both targets alike: timed-out transactions aborted within a second of their
# timeout, a group's first rebalance without delay, and the log cleaner
# looking for dirty logs every 200 ms.
BROKER_PROPS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
                "group.initial.rebalance.delay.ms": "0",
                "log.cleaner.backoff.ms": "200"}

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]
WINDOW_MS = 60000
PARTITIONS = 2


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


@pytest.fixture(scope="module")
def streams_classes(java_classes):
    """java_classes, which must hold StreamsApp (kafka-streams among the jars)."""
    if not (java_classes / "StreamsApp.class").is_file():
        missing("the kafka-streams jar in %s" % procs.JARS)
    return java_classes


_started = []  # App objects of the running test


@pytest.fixture(autouse=True)
def reap_apps():
    """Whatever a test leaves running (a failed assertion) is killed."""
    yield
    while _started:
        _started.pop().kill9()


class App:
    """One StreamsApp process; its stdout goes to a file the test reads."""

    def __init__(self, classes, log_path, args, classpath=None, jvm_opts=()):
        """classpath: instead of classes plus the 4.1 jars (test_streams_groups
        runs the app on the 4.4 jars); jvm_opts go before the class name."""
        self.log_path = log_path
        with open(log_path, "ab") as log:
            log.write(b"==== start\n")
            log.flush()
            self.proc = subprocess.Popen(
                ["java"] + procs.JAVA_TOOL_OPTS + list(jvm_opts)
                + ["-cp", classpath or procs.java_classpath(classes), "StreamsApp"]
                + [str(a) for a in args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        _started.append(self)
        self.offset = os.path.getsize(log_path)

    def lines(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace").splitlines()

    def check_alive(self):
        errors = [x for x in self.lines() if x.startswith("error ")]
        assert not errors and self.proc.poll() is None, (
            "StreamsApp failed (exit %s):\n%s" % (self.proc.poll(), self.output()))

    def output(self):
        return procs.tail(self.log_path, 8000)

    def stop(self):
        """SIGTERM: the shutdown hook closes the app (commit, then close)."""
        code = procs.stop_process(self.proc, signal.SIGTERM, timeout=60)
        assert code in (0, 143), "StreamsApp exit %s\n%s" % (code, self.output())
        assert "closed" in self.lines(), self.output()
        assert not [x for x in self.lines() if x.startswith("error ")], self.output()

    def kill9(self):
        procs.stop_process(self.proc, signal.SIGKILL, timeout=10)

    def restored(self, store):
        """{partition: records restored} for store, from "restored" lines."""
        got = {}
        for x in self.lines():
            f = x.split()
            if len(f) == 4 and f[0] == "restored" and f[1] == store:
                got[int(f[2])] = int(f[3])
        return got


class Run:
    """The topics, state directory and expected counts of one application."""

    def __init__(self, broker, classes, tmp_path, topic_name, guarantee, changelog=None):
        self.broker = broker
        self.classes = classes
        self.guarantee = guarantee
        self.changelog = dict(changelog or {})  # topic configs of the changelogs
        self.app_id = topic_name("app")
        self.input, self.output, self.window_output = (
            topic_name("in"), topic_name("out"), topic_name("wout"))
        for t in (self.input, self.output, self.window_output):
            create_topic(broker.bootstrap, t, PARTITIONS)
        self.tmp_path = tmp_path
        self.state_dir = tmp_path / "state"
        self.rng = random.Random(self.app_id)
        # Record timestamps a few minutes in the past, in whole minutes from
        # here: the windows are known, and far inside every retention.
        self.base_ms = (int(time.time() * 1000) // WINDOW_MS - 10) * WINDOW_MS
        self.sent = 0
        self.counts = collections.Counter()
        self.window_counts = collections.Counter()

    def start(self, instance=""):
        """A new app process; a second instance ("b") has its own state
        directory and log."""
        state_dir = self.state_dir.with_name(self.state_dir.name + instance)
        args = [self.broker.bootstrap, self.app_id, self.input, self.output,
                self.window_output, self.guarantee, state_dir]
        if self.changelog:
            args.append(",".join("%s=%s" % kv for kv in sorted(self.changelog.items())))
        return App(self.classes, self.tmp_path / ("streams-app%s.log" % instance), args)

    def feed(self, ck, n_lines, pause=0.0, stop=None):
        """Produce n_lines lines of 1-6 words, alternating partitions, 1 s of
        record time apart (pause seconds of real time apart when > 0; fewer
        once the event stop is set), and add them to the expected counts."""
        p = ck.Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
        for _ in range(n_lines):
            if stop is not None and stop.is_set():
                break
            words = [self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 6))]
            ts = self.base_ms + self.sent * 1000
            p.produce(self.input, value=" ".join(words).encode(), partition=self.sent % PARTITIONS,
                      timestamp=ts)
            for w in words:
                self.counts[w] += 1
                self.window_counts["%s@%d" % (w, ts - ts % WINDOW_MS)] += 1
            self.sent += 1
            if pause:
                p.flush(10)
                time.sleep(pause)
        assert p.flush(30) == 0

    def wait_counts(self, ck, app, timeout=90):
        """Read both outputs (read_committed) until every key's latest count is
        the expected one."""
        want = {self.output: dict(self.counts), self.window_output: dict(self.window_counts)}
        latest = {t: {} for t in want}
        c = reader(ck, self.broker, [self.output, self.window_output])
        try:
            deadline = time.monotonic() + timeout
            # the app is RUNNING once it has its tasks: the counts are its work
            while latest != want or "state RUNNING" not in app.lines():
                app.check_alive()
                assert time.monotonic() < deadline, (
                    "counts not reached in %ss\nwant %s\ngot %s\n%s"
                    % (timeout, want, latest, app.output()))
                for m in c.consume(500, timeout=0.5):
                    if m.error() is None:
                        latest[m.topic()][m.key().decode()] = long_value(m)
        finally:
            c.close()

    def history(self, ck, topic, isolation="read_committed"):
        """{key: [counts in order]} of the whole topic, up to its end offsets."""
        return history(ck, self.broker, topic, isolation)

    def check_history(self, ck):
        """Every count of every key, in order. Exactly-once: 1..n with no
        duplicate or gap. At-least-once allows a replay, so only the order and
        the final count are certain."""
        for topic, want in ((self.output, self.counts), (self.window_output, self.window_counts)):
            got = self.history(ck, topic)
            assert sorted(got) == sorted(want), topic
            for key, seq in got.items():
                if self.guarantee == "exactly_once_v2":
                    assert seq == list(range(1, want[key] + 1)), (topic, key, seq)
                else:
                    assert seq == sorted(seq) and seq[-1] == want[key], (topic, key, seq)
                    assert set(seq) == set(range(1, want[key] + 1)), (topic, key, seq)


def long_value(m):
    assert len(m.value()) == 8, m.value()
    return struct.unpack(">q", m.value())[0]


def reader(ck, broker, topics):
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-streams-reader",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    c.assign([ck.TopicPartition(t, p, ck.OFFSET_BEGINNING) for t in topics
              for p in range(PARTITIONS)])
    return c


def history(ck, broker, topic, isolation):
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-streams-history",
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = collections.defaultdict(list)
        at_end = set()
        deadline = time.monotonic() + 30
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, "reading %s: only %s at the end" % (topic, at_end)
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got[m.key().decode()].append(long_value(m))
                elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise AssertionError("reading %s: %s" % (topic, m.error()))
        return dict(got)
    finally:
        c.close()


def topic_configs(ck, broker, topics):
    """{topic: {name: value}} of the configs set on each topic (not defaults)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    futs = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics],
                              request_timeout=30)
    out = {}
    for res, fut in futs.items():
        entries = fut.result(timeout=30)
        out[res.name] = {k: e.value for k, e in entries.items()
                         if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return out


def watermarks(ck, broker, topic):
    """{partition: (log start offset, end offset)}."""
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-streams-marks"})
    try:
        return {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)
                for p in range(PARTITIONS)}
    finally:
        c.close()


def partition_counts(ck, broker, topics):
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    return {t: len(md.topics[t].partitions) for t in topics if t in md.topics}


def repartition_topics(run):
    return [run.app_id + "-by-word-repartition", run.app_id + "-by-word-window-repartition"]


def await_purge(ck, run):
    """While the app runs: waits until Streams has deleted (DeleteRecords,
    after a commit at most every repartition.purge.interval.ms) consumed
    records from every repartition partition; the commit that made the
    counts visible may come before the next purge."""
    def purged():
        return all(low > 0 for t in repartition_topics(run)
                   for low, _ in watermarks(ck, run.broker, t).values())

    procs.wait_until(purged, 30, interval=0.5, what="repartition records purged")


def check_internal_topics(ck, run):
    a = run.app_id
    repartition = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                   "message.timestamp.type": "CreateTime"}
    want = {
        a + "-by-word-repartition": repartition,
        a + "-by-word-window-repartition": repartition,
        a + "-counts-changelog": dict(run.changelog, **{
            "cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}),
        # window size + grace (the store's retention) + one day of
        # windowstore.changelog.additional.retention.ms
        a + "-window-counts-changelog": dict(run.changelog, **{
            "cleanup.policy": "compact,delete", "retention.ms": str(WINDOW_MS + 3600000 + 86400000),
            "message.timestamp.type": "CreateTime"}),
    }
    assert topic_configs(ck, run.broker, list(want)) == want
    assert partition_counts(ck, run.broker, list(want)) == {t: PARTITIONS for t in want}
    # Streams deleted the repartition records it had consumed (DeleteRecords)
    # and none of a changelog's
    for t in want:
        for p, (low, high) in watermarks(ck, run.broker, t).items():
            if t.endswith("-repartition"):
                assert 0 < low <= high, (t, p, low, high)
            else:
                assert low == 0 < high, (t, p, low, high)


@pytest.mark.parametrize("guarantee,wipe", [("exactly_once_v2", True), ("at_least_once", False)],
                         ids=["eos-wiped-state", "alos-kept-state"])
def test_word_count_restart(broker, ck, streams_classes, tmp_path, topic_name, guarantee, wipe):
    run = Run(broker, streams_classes, tmp_path, topic_name, guarantee)
    run.feed(ck, 30)
    app = run.start()
    run.wait_counts(ck, app)
    await_purge(ck, run)
    app.stop()
    check_internal_topics(ck, run)

    if wipe:
        shutil.rmtree(run.state_dir)
    run.feed(ck, 30)
    app = run.start()
    run.wait_counts(ck, app)
    app.stop()
    restored = app.restored("counts")
    if wipe:
        # every word's count came back from the changelog
        assert sorted(restored) == list(range(PARTITIONS)), app.output()
        assert sum(restored.values()) >= len(WORDS), app.output()
    run.check_history(ck)


class ChangelogMarks:
    """The end offsets of the changelog partitions as read_committed sees
    them (the last stable offsets) and as read_uncommitted does (the high
    watermarks): they differ while a transaction is open on a changelog."""

    def __init__(self, ck, run):
        self.ck, self.run = ck, run
        self.consumers = {
            iso: ck.Consumer({"bootstrap.servers": run.broker.bootstrap,
                              "group.id": "it-streams-lso", "isolation.level": iso})
            for iso in ("read_committed", "read_uncommitted")}

    def get(self):
        return {iso: [c.get_watermark_offsets(self.ck.TopicPartition(self.run.app_id + t, p),
                                              timeout=10)[1]
                      for t in ("-counts-changelog", "-window-counts-changelog")
                      for p in range(PARTITIONS)]
                for iso, c in self.consumers.items()}

    def stable(self):
        m = self.get()
        return m["read_committed"] == m["read_uncommitted"]

    def close(self):
        for c in self.consumers.values():
            c.close()


def kill_mid_transaction(ck, run, app):
    """Feeds lines, 40 a second, while the app runs, and kills it (SIGKILL)
    with a transaction open on its changelogs: once one is seen open the app
    is stopped (SIGSTOP); what it sent before (an EndTxn) settles, and it is
    killed if the transaction is still open, else let go (SIGCONT)."""
    stop = threading.Event()
    feeder = threading.Thread(target=run.feed, args=(ck, 2000, 0.025, stop))
    feeder.start()
    marks = ChangelogMarks(ck, run)
    try:
        deadline = time.monotonic() + 60
        while True:
            app.check_alive()
            assert time.monotonic() < deadline, "no transaction seen open on the changelogs"
            if marks.stable():
                continue
            os.kill(app.proc.pid, signal.SIGSTOP)
            time.sleep(0.3)
            if not marks.stable():
                app.kill9()
                break
            os.kill(app.proc.pid, signal.SIGCONT)
        assert not marks.stable()
    finally:
        stop.set()
        feeder.join(60)
        marks.close()
    assert not feeder.is_alive()


def test_exactly_once_after_kills(broker, ck, streams_classes, tmp_path, topic_name):
    """The app is killed twice with a transaction open. First its state
    directory is kept: the new process has the same transactional.id and
    its InitProducerId fences and aborts the transaction at once. Then it is
    wiped: the next process has a new id, the broker aborts the transaction
    when it times out (Streams sets transaction.timeout.ms to 10 s), and the
    log cleaner compacts the changelogs holding the aborted records (they
    roll every 100 ms here, the cleaner looks every 200 ms) before the app
    restores every store from them. Aborted records must not supersede the
    committed ones they follow: read_committed shows each count once."""
    run = Run(broker, streams_classes, tmp_path, topic_name, "exactly_once_v2",
              changelog={"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
    run.feed(ck, 20)
    app = run.start()
    run.wait_counts(ck, app)
    kill_mid_transaction(ck, run, app)
    app = run.start()
    run.wait_counts(ck, app)

    kill_mid_transaction(ck, run, app)
    shutil.rmtree(run.state_dir)
    marks = ChangelogMarks(ck, run)
    try:
        procs.wait_until(marks.stable, 60, interval=0.5,
                         what="the killed app's transaction aborted")
    finally:
        marks.close()
    time.sleep(2)  # ten cleaner rounds over the aborted records
    app = run.start()
    run.wait_counts(ck, app)
    await_purge(ck, run)
    app.stop()
    restored = app.restored("counts")
    assert sorted(restored) == list(range(PARTITIONS)), app.output()
    run.check_history(ck)
    check_internal_topics(ck, run)


def test_broker_crash_midway(broker, ck, streams_classes, tmp_path, topic_name):
    """The broker is killed (SIGKILL) and restarted while the app processes
    input: the app rides it out, and exactly-once holds."""
    run = Run(broker, streams_classes, tmp_path, topic_name, "exactly_once_v2")
    run.feed(ck, 20)
    app = run.start()
    run.wait_counts(ck, app)
    feeder = threading.Thread(target=run.feed, args=(ck, 100, 0.025))
    feeder.start()
    time.sleep(1.5)
    broker.kill9()
    broker.start()
    feeder.join(60)
    run.feed(ck, 20)
    run.wait_counts(ck, app, timeout=120)
    app.stop()
    run.check_history(ck)


def test_two_instances_then_one(broker, ck, streams_classes, tmp_path, topic_name):
    """A second instance joins (the group rebalances the tasks over both)
    and leaves again (its tasks go back to the first once its session times
    out): the counts stay exact."""
    run = Run(broker, streams_classes, tmp_path, topic_name, "exactly_once_v2")
    a = run.start()
    run.wait_counts(ck, a)
    b = run.start("b")
    run.feed(ck, 40)
    run.wait_counts(ck, b)
    run.wait_counts(ck, a)
    b.stop()
    run.feed(ck, 40)
    run.wait_counts(ck, a, timeout=120)
    a.stop()
    run.check_history(ck)
