"""Creating or deleting many partitions never stalls other clients (issue 13,
defect 5).

A CreateTopics of 1,000 partitions used to make every partition directory
and its partition.metadata (with fsyncs) on the event loop: an ApiVersions on
another connection waited 0.78 s behind it, 20.5 s behind four topics of
5,000, 5.3 s behind deleting them. Kafka keeps answering meanwhile, and so
must Runnel: the directories are made and removed on helper threads, and
CreateTopics / DeleteTopics are answered once that work is done.

Each test runs a probe: a second connection sending ApiVersions back to back
(raw wire), recording every round trip. Its worst wait during the topic
change must stay under BOUND_MS. A topic being created is not listed by
Metadata (nor served) before its partition directories exist, and is usable
(produce then fetch) as soon as CreateTopics answered; after DeleteTopics
answered its directories are gone. A kill -9 in the middle of a create or a
delete leaves a topic that the restarted broker finishes creating or
deleting.

--target=kafka runs the same checks against Apache Kafka, with documented
differences: Kafka's controller answers CreateTopics before its broker made
the logs, and DeleteTopics before the broker renamed their directories
(<topic>-<n>.<id>-delete), so for Kafka the probe's window runs until the
directories are there (or gone) and a partition may be retried until it
serves; Kafka itself stalls ApiVersions by a few hundred ms meanwhile on
this machine, so it is held to KAFKA_BOUND_MS (below, with the figures).
The Metadata-before-directories check is Runnel's own rule.

Figures (2 shared cores; ASan build; load average 4-13): before the fix
ApiVersions waited 0.79 s behind 1,000 partitions and 5.2 s behind 5,000;
with it the worst waits were 2.6 ms / 13 ms / 13 ms (create 1,000, create
5,000, delete 5,000) on a quiet moment, up to ~200 ms in rare machine-wide
hiccups that an idle broker saw at the same instant.
"""

import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import wire
import wire_data
from conftest import _start_broker
from procs import wait_until
from wire import compact_array as carray
from wire import compact_string as cstr

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 3, 5, 6
INVALID_PARTITIONS = 37
RETRIABLE_WHILE_CREATING = {UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
                            NOT_LEADER_OR_FOLLOWER}
BOUND_MS = 50.0
# This shared 2-core machine stalls now and then by itself: an idle Runnel
# broker probed for 15 s showed a worst round trip of 45.6 ms (load average
# 5); probing a busy and an idle broker side by side, both saw the same
# hiccup at the same instant (195 ms and 85 ms). So isolated waits over
# BOUND_MS (at most 1 per 200 round trips, at least 3) are taken as machine
# noise as long as none reaches SPIKE_MS; a stalled event loop shows as one
# long wait (before the fix: 4.6 s behind 1,000 partitions) or as a wait
# per step of the work (150 steps for 5,000 partitions).
SPIKE_MS = 250.0
# Apache Kafka 4.1 itself stalls other clients while its broker creates the
# logs of a new topic (measured here, load average 5-13: 1,000 partitions
# p99 48 ms max 305 ms; 5,000 partitions p99 142 ms max 343 ms, 170 of 3,298
# round trips over 50 ms). --target=kafka therefore asserts only that no
# wait reaches KAFKA_BOUND_MS; Runnel's bound above is Runnel's own.
KAFKA_BOUND_MS = 1000.0
REQUEST_TIMEOUT_MS = 300000


# ---- raw requests ---------------------------------------------------------------

def flex_send(sock, api_key, version, correlation_id, body):
    """A request of a flexible version (header v2), not waiting for the answer."""
    hdr = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + b"\0"
    sock.sendall(wire.frame(hdr + body))


def flex_reply(sock, correlation_id, result):
    """The one topic result of a CreateTopics / DeleteTopics response."""
    r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == correlation_id
    r.skip_tags()
    r.take(">i")  # throttle
    (out,) = r.array(result)
    return out


def send_create(sock, name, partitions, correlation_id=1):
    """CreateTopics v7 for one topic."""
    topic = cstr(name) + struct.pack(">ih", partitions, 1) + carray([]) + carray([]) + b"\0"
    body = carray([topic]) + struct.pack(">i?", REQUEST_TIMEOUT_MS, False) + b"\0"
    flex_send(sock, CREATE_TOPICS, 7, correlation_id, body)


def recv_create(sock, correlation_id=1):
    """(error_code, error_message, num_partitions) of the one topic."""
    def result(x):
        _name, _id, err, msg = x.string(), x.uuid(), x.take(">h"), x.string()
        partitions, _rf = x.take(">i"), x.take(">h")
        x.array(lambda y: (y.string(), y.string(), y.take(">?b?"), y.skip_tags()))
        x.skip_tags()
        return err, msg, partitions

    return flex_reply(sock, correlation_id, result)


def send_delete(sock, name, correlation_id=2):
    """DeleteTopics v6 for one topic, by name."""
    body = carray([cstr(name) + bytes(16) + b"\0"]) + struct.pack(">i", REQUEST_TIMEOUT_MS) + b"\0"
    flex_send(sock, DELETE_TOPICS, 6, correlation_id, body)


def recv_delete(sock, correlation_id=2):
    """(error_code, error_message) of the one topic."""
    def result(x):
        _name, _id, err, msg = x.string(), x.uuid(), x.take(">h"), x.string()
        x.skip_tags()
        return err, msg

    return flex_reply(sock, correlation_id, result)


def send_grow(sock, name, count, correlation_id=3):
    """CreatePartitions v3 for one topic (no assignments)."""
    topic = cstr(name) + struct.pack(">i", count) + b"\0" + b"\0"  # null assignments, tags
    body = carray([topic]) + struct.pack(">i?", REQUEST_TIMEOUT_MS, False) + b"\0"
    flex_send(sock, CREATE_PARTITIONS, 3, correlation_id, body)


def recv_grow(sock, correlation_id=3):
    """(error_code, error_message) of the one topic."""
    def result(x):
        _name, err, msg = x.string(), x.take(">h"), x.string()
        x.skip_tags()
        return err, msg

    return flex_reply(sock, correlation_id, result)


def topic_partitions(sock, name, correlation_id):
    """(topic error, number of partitions Metadata v4 lists); no auto-create."""
    md = wire.metadata(sock, 4, [name], correlation_id, allow_auto_create=False)
    (t,) = md["topics"]
    return t["error_code"], len(t["partitions"] or [])


def partition_dirs(broker, name):
    """The partition numbers whose directory <name>-<n> exists in log.dirs."""
    pat = re.compile(re.escape(name) + r"-(\d+)$")
    return {int(m.group(1)) for p in broker.datadir.iterdir() if (m := pat.match(p.name))}


def produce_and_fetch(broker, name, partition, strict):
    """One record produced to the partition and fetched back. strict: the
    first produce must succeed (Runnel answers CreateTopics only once the
    partitions exist); else retriable errors are retried (Kafka)."""
    batch = wire_data.build_batch([(b"k", b"v-%d" % partition, ())], int(time.time() * 1000))
    with wire.connect(broker.host, broker.port) as s:
        got = []

        def produced():
            got[:] = [wire_data.produce_v3(s, 10 + partition, name, partition, batch)]
            assert strict is False or got[0][0] == 0, got
            assert got[0][0] in RETRIABLE_WHILE_CREATING | {0}, got
            return got[0][0] == 0

        wait_until(produced, 60, interval=0.1, what="produce to %s-%d" % (name, partition))
        err, base = got[0]
        res = wire_data.fetch_v4(s, 20 + partition, name, partition, base, max_wait_ms=0)
        assert res.error == 0, res
        recs = [r for b in wire_data.parse_batches(res.records) for r in b.records]
        assert recs and recs[0][3] == b"v-%d" % partition, recs


# ---- the probe --------------------------------------------------------------------

# The probe runs in a process of its own, so that this one's threads (the
# Metadata watcher, directory listings) never hold its interpreter lock.
PROBE = r"""
import sys, time, wire
s = wire.connect(sys.argv[1], int(sys.argv[2]), timeout=600)
corr = 0
while True:
    corr += 1
    t0 = time.monotonic()
    err, apis = wire.api_versions_v0(s, corr)
    ok = err == 0 and wire.API_VERSIONS in apis
    print("%.6f %.3f %d" % (t0, (time.monotonic() - t0) * 1000.0, ok), flush=True)
    time.sleep(0.001)
"""


class ApiVersionsProbe:
    """A connection of its own sending ApiVersions v0 back to back, timing each."""

    def __init__(self, broker, target):
        self.kafka = target == "kafka"
        self.waits = []
        self.at = []  # time.monotonic() at each send
        self.bad = 0  # answers that were not a good ApiVersions
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, broker.host, str(broker.port)],
                                     cwd=str(Path(__file__).parent), stdout=subprocess.PIPE,
                                     text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self):
        for line in self.proc.stdout:
            t0, wait, ok = line.split()
            self.at.append(float(t0))
            self.waits.append(float(wait))
            self.bad += ok != "1"

    def in_flight_ms(self):
        """How long the probe's unanswered request has waited (about)."""
        if not self.at:
            return 0.0
        return max(0.0, (time.monotonic() - self.at[-1]) * 1000.0 - self.waits[-1] - 1.0)

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: len(self.waits) >= 20 or self.proc.poll() is not None, 20,
                   what="probe running")
        assert self.proc.poll() is None, "the probe exited"
        self.since = len(self.waits)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait(30)
        self.thread.join(30)
        assert self.bad == 0, "%d ApiVersions answers with an error" % self.bad

    def check(self, what):
        """Reports the waits since __enter__ and asserts the bound."""
        w, p99, top, over = self.report(what)
        if self.kafka:
            assert top < KAFKA_BOUND_MS, "Kafka: ApiVersions waited %.1f ms behind %s" % (top, what)
        else:
            assert top < BOUND_MS or (over <= max(3, len(w) // 200) and top < SPIKE_MS), (
                "ApiVersions waited %.1f ms behind %s (%d waits over %.0f ms of %d)"
                % (top, what, over, BOUND_MS, len(w)))
        self.since = len(self.waits)

    def report(self, what):
        """(waits, p99, max, how many over BOUND_MS) in ms since __enter__, printed."""
        n = len(self.waits)
        w = sorted(self.waits[self.since:n] + [self.in_flight_ms()])  # a stall still on counts
        assert w, "the probe never ran during %s" % what
        p50, p99, top = w[len(w) // 2], w[min(len(w) - 1, int(len(w) * 0.99))], w[-1]
        over = sum(1 for x in w if x >= BOUND_MS)
        worst = max(range(self.since, n), key=lambda i: self.waits[i], default=self.since)
        print("\n%s: ApiVersions round trips=%d p50=%.2f ms p99=%.2f ms max=%.2f ms "
              "(%.2f s in; %d over %.0f ms)" % (what, len(w), p50, p99, top,
                                                 self.at[worst] - self.at[self.since]
                                                 if worst < n else 0.0, over,
                                                 BOUND_MS))
        return w, p99, top, over


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


# ---- tests ------------------------------------------------------------------------

def await_dirs(broker, name, want, target):
    """Kafka's controller answers, then its broker acts: within the probe's
    window, wait for the directories to be as wanted."""
    if target == "kafka":
        wait_until(lambda: partition_dirs(broker, name) == want, 120, interval=0.05,
                   what="Kafka's partition directories of %s" % name)


def assert_dirs(broker, name, want):
    """Runnel: the directories were as wanted when the request was answered
    (checked after the probe: listing thousands in Python holds its GIL)."""
    assert partition_dirs(broker, name) == want


def test_create_1000_partitions_does_not_stall_api_versions(broker, target):
    name = "dirs-1000"
    with wire.connect(broker.host, broker.port, timeout=300) as s, ApiVersionsProbe(broker, target) as probe:
        send_create(s, name, 1000)
        (err, msg, n), took = timed(lambda: recv_create(s))
        assert (err, n) == (0, 1000), msg
        await_dirs(broker, name, set(range(1000)), target)
        probe.check("CreateTopics 1000 partitions (answered in %.2f s)" % took)
    assert_dirs(broker, name, set(range(1000)))
    if target != "kafka":  # Kafka may write its partition.metadata later
        assert all((broker.datadir / ("%s-%d" % (name, p)) / "partition.metadata").is_file()
                   for p in (0, 499, 999))
    for p in (0, 499, 999):
        produce_and_fetch(broker, name, p, strict=target != "kafka")
    with wire.connect(broker.host, broker.port) as s:
        assert topic_partitions(s, name, 3) == (0, 1000)


def test_create_partitions_1000_does_not_stall_api_versions(broker, target):
    """CreatePartitions makes its new directories on helper threads too: the
    topic keeps its old partitions until they all exist, then has them all."""
    name = "dirs-grow"
    with wire.connect(broker.host, broker.port, timeout=300) as s:
        send_create(s, name, 1)
        assert recv_create(s)[0] == 0
        with ApiVersionsProbe(broker, target) as probe:
            send_grow(s, name, 1001)
            (err, msg), took = timed(lambda: recv_grow(s))
            assert err == 0, msg
            await_dirs(broker, name, set(range(1001)), target)
            probe.check("CreatePartitions 1 -> 1001 (answered in %.2f s)" % took)
        assert_dirs(broker, name, set(range(1001)))
        for p in (0, 1, 1000):
            produce_and_fetch(broker, name, p, strict=target != "kafka")
        assert topic_partitions(s, name, 4) == (0, 1001)
        send_grow(s, name, 1001, correlation_id=5)
        assert recv_grow(s, correlation_id=5)[0] == INVALID_PARTITIONS


def test_delete_while_partitions_are_being_added(broker, target):
    """A DeleteTopics that comes while a CreatePartitions is making its
    directories: both are answered, and nothing of the topic is left."""
    name = "dirs-grow-delete"
    with wire.connect(broker.host, broker.port, timeout=300) as s, \
            wire.connect(broker.host, broker.port, timeout=300) as d:
        send_create(s, name, 1)
        assert recv_create(s)[0] == 0
        send_grow(s, name, 3001)
        time.sleep(0.05)  # the grow is under way (3,000 directories take longer)
        send_delete(d, name)
        grown = recv_grow(s)
        assert recv_delete(d) == (0, None)
        # Runnel: the grow saw the delete coming and undid itself, or had
        # finished; Kafka's controller takes them one after the other.
        assert grown[0] in (0, UNKNOWN_TOPIC_OR_PARTITION), grown
        await_dirs(broker, name, set(), target)
        assert topic_partitions(s, name, 6)[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert_dirs(broker, name, set())


def test_auto_create_of_1000_partitions_does_not_stall(target, tmp_path_factory):
    """num.partitions=1000: a Metadata that auto-creates a topic is answered
    at once with UNKNOWN_TOPIC_OR_PARTITION (retry) while the directories are made
    on helper threads; the topic then has its 1,000 partitions and serves."""
    b = _start_broker(target, tmp_path_factory, "auto1000", {"num.partitions": "1000"})
    try:
        name = "dirs-auto"
        with wire.connect(b.host, b.port, timeout=300) as s, ApiVersionsProbe(b, target) as probe:
            md = wire.metadata(s, 4, [name], 1, allow_auto_create=True)
            (t,) = md["topics"]
            assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, t  # Kafka's answer
            wait_until(lambda: topic_partitions(s, name, 2) == (0, 1000), 120, interval=0.05,
                       what="the auto-created topic's 1,000 partitions")
            await_dirs(b, name, set(range(1000)), target)
            probe.check("auto-create of 1000 partitions")
        assert_dirs(b, name, set(range(1000)))
        produce_and_fetch(b, name, 999, strict=target != "kafka")
    finally:
        b.stop()


def watch_creating(broker, name, partitions, target, stop, seen):
    """Metadata and Produce for a topic while it is being created: it is not
    listed before all its directories exist, and Produce gets a retriable
    error until then."""
    batch = wire_data.build_batch([(None, b"early", ())], int(time.time() * 1000))
    corr = 100
    with wire.connect(broker.host, broker.port, timeout=120) as s:
        while not stop.is_set():
            corr += 2
            err, n = topic_partitions(s, name, corr)
            if n > 0 and target != "kafka":
                have = len(partition_dirs(broker, name))
                assert have == partitions, "Metadata listed %d partitions with %d directories" % (
                    n, have)
            perr, _ = wire_data.produce_v3(s, corr + 1, name, 0, batch)
            assert perr in RETRIABLE_WHILE_CREATING | {0}, perr
            seen.append((err, n, perr))
            time.sleep(0.05)


def test_create_and_delete_5000_partitions_does_not_stall_api_versions(broker, target):
    name = "dirs-5000"
    stop, seen, failures = threading.Event(), [], []

    def watcher():
        try:
            watch_creating(broker, name, 5000, target, stop, seen)
        except Exception as e:
            failures.append(e)

    w = threading.Thread(target=watcher, daemon=True)
    with wire.connect(broker.host, broker.port, timeout=300) as s, ApiVersionsProbe(broker, target) as probe:
        w.start()
        send_create(s, name, 5000)
        (err, msg, n), took = timed(lambda: recv_create(s))
        assert (err, n) == (0, 5000), msg
        await_dirs(broker, name, set(range(5000)), target)
        stop.set()
        w.join(60)
        probe.check("CreateTopics 5000 partitions (answered in %.2f s)" % took)
        assert_dirs(broker, name, set(range(5000)))
        assert not failures, failures
        print("while creating: %d Metadata+Produce probes, %d answered not-yet-there"
              % (len(seen), sum(1 for e, n, _ in seen if n == 0)))
        produce_and_fetch(broker, name, 4999, strict=target != "kafka")
        probe.since = len(probe.waits)
        send_delete(s, name)
        (err, msg), took = timed(lambda: recv_delete(s))
        assert err == 0, msg
        await_dirs(broker, name, set(), target)
        probe.check("DeleteTopics 5000 partitions (answered in %.2f s)" % took)
    assert_dirs(broker, name, set())
    with wire.connect(broker.host, broker.port) as s:
        wait_until(lambda: topic_partitions(s, name, 7)[0] == UNKNOWN_TOPIC_OR_PARTITION, 30,
                   what="the topic gone from Metadata")


def registry_line(broker, name):
    path = broker.datadir / "runnel-topics.properties"
    for line in path.read_text().splitlines():
        if line.startswith("topic %s " % name):
            return line
    return None


@pytest.mark.timeout(900)
def test_kill9_in_the_middle_of_create_and_delete(broker, target):
    name = "dirs-restart"
    total = 5000
    broker.start_timeout = max(broker.start_timeout, 300)  # Kafka reopening 6,000 logs
    with wire.connect(broker.host, broker.port, timeout=300) as s:
        send_create(s, name, total)
        wait_until(lambda: len(partition_dirs(broker, name)) >= 100, 120, interval=0.005,
                   what="some directories made")
        broker.kill9()
    made = len(partition_dirs(broker, name))
    print("\nkilled with %d of %d directories made" % (made, total))
    if target != "kafka" and made < total:
        line = registry_line(broker, name)
        assert line is not None and line.endswith(" pending"), (
            "the registry does not hold the half-created topic as pending: %r" % line)
    broker.start()
    with wire.connect(broker.host, broker.port, timeout=60) as s:
        wait_until(lambda: topic_partitions(s, name, 31) == (0, total), 120, interval=0.2,
                   what="the interrupted create finished")
    assert partition_dirs(broker, name) == set(range(total))
    produce_and_fetch(broker, name, total - 1, strict=False)

    with wire.connect(broker.host, broker.port, timeout=300) as s:
        send_delete(s, name)
        wait_until(lambda: len(partition_dirs(broker, name)) <= total - 100, 120,
                   interval=0.005, what="some directories removed")
        broker.kill9()
    left = len(partition_dirs(broker, name))
    print("killed with %d of %d directories left" % (left, total))
    if target != "kafka" and left > 0:
        line = registry_line(broker, name)
        assert line is not None and line.endswith(" deleting"), (
            "the registry does not hold the half-deleted topic as deleting: %r" % line)
    broker.start()
    with wire.connect(broker.host, broker.port, timeout=60) as s:
        wait_until(lambda: topic_partitions(s, name, 41)[0] == UNKNOWN_TOPIC_OR_PARTITION, 60,
                   what="the topic gone from Metadata")
        wait_until(lambda: not partition_dirs(broker, name), 120, interval=0.2,
                   what="the interrupted delete finished")
        # The name is free again.
        def recreated():
            send_create(s, name, 2, correlation_id=51)
            err, msg, _ = recv_create(s, correlation_id=51)
            assert err in (0, 36), msg  # 36: TOPIC_ALREADY_EXISTS while Kafka catches up
            return err == 0

        wait_until(recreated, 60, interval=0.5, what="the name free again")
    if target != "kafka":
        assert registry_line(broker, name).split()[3:] == ["2"]
