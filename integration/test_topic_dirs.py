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

--target=kafka runs the same checks against Apache Kafka, with two
documented differences: Kafka's broker may serve a new partition a moment
after CreateTopics answered (its controller answers, the broker follows), and
it renames a deleted partition's directory (<topic>-<n>.<id>-delete) a moment
after DeleteTopics answered, so for Kafka those two are waited for instead of
asserted at once. The Metadata-before-directories check is Runnel's own rule.
"""

import re
import struct
import threading
import time

import pytest

import wire
import wire_data
from procs import wait_until
from wire import compact_array as carray
from wire import compact_string as cstr

CREATE_TOPICS, DELETE_TOPICS = 19, 20
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 3, 5, 6
RETRIABLE_WHILE_CREATING = {UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
                            NOT_LEADER_OR_FOLLOWER}
BOUND_MS = 50.0
# This shared 2-core machine delays a client now and then by itself: an idle
# Runnel broker probed for 15 s showed a worst round trip of 45.6 ms (load
# average 5), Kafka 64.8 ms during its create. So a few isolated waits over
# BOUND_MS (at most 1 per 1000 round trips, at least 2) are taken as
# scheduler noise as long as none reaches SPIKE_MS; a stalled event loop
# shows as one long wait (before the fix: 4.6 s behind 1,000 partitions) or
# as a wait per step. Kafka's own figures meet the same rule.
SPIKE_MS = 250.0
REQUEST_TIMEOUT_MS = 300000


# ---- raw requests ---------------------------------------------------------------

def send_create(sock, name, partitions, correlation_id=1):
    """CreateTopics v7 for one topic, not waiting for the answer."""
    topic = cstr(name) + struct.pack(">ih", partitions, 1) + carray([]) + carray([]) + b"\0"
    body = carray([topic]) + struct.pack(">i?", REQUEST_TIMEOUT_MS, False) + b"\0"
    hdr = struct.pack(">hhih", CREATE_TOPICS, 7, correlation_id, 4) + b"test" + b"\0"
    sock.sendall(wire.frame(hdr + body))


def recv_create(sock, correlation_id=1):
    """(error_code, error_message, num_partitions) of the one topic."""
    r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == correlation_id
    r.skip_tags()
    r.take(">i")  # throttle

    def result(x):
        out = (x.string(), x.uuid(), x.take(">h"), x.string(), x.take(">i"), x.take(">h"))
        x.array(lambda y: (y.string(), y.string(), y.take(">?b?"), y.skip_tags()))
        x.skip_tags()
        return out

    ((_name, _id, err, msg, partitions, _rf),) = r.array(result)
    return err, msg, partitions


def send_delete(sock, name, correlation_id=2):
    """DeleteTopics v6 by name, not waiting for the answer."""
    body = carray([cstr(name) + bytes(16) + b"\0"]) + struct.pack(">i", REQUEST_TIMEOUT_MS) + b"\0"
    hdr = struct.pack(">hhih", DELETE_TOPICS, 6, correlation_id, 4) + b"test" + b"\0"
    sock.sendall(wire.frame(hdr + body))


def recv_delete(sock, correlation_id=2):
    """(error_code, error_message) of the one topic."""
    r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == correlation_id
    r.skip_tags()
    r.take(">i")  # throttle

    def result(x):
        out = (x.string(), x.uuid(), x.take(">h"), x.string())
        x.skip_tags()
        return out

    ((_name, _id, err, msg),) = r.array(result)
    return err, msg


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

class ApiVersionsProbe:
    """A connection of its own sending ApiVersions v0 back to back, timing each."""

    def __init__(self, broker):
        self.sock = wire.connect(broker.host, broker.port, timeout=120)
        self.waits = []
        self.at = []  # perf_counter() at each send
        self.in_flight = None  # perf_counter() at the send still unanswered
        self.error = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        corr = 0
        try:
            while not self.stopping.is_set():
                corr += 1
                t0 = self.in_flight = time.perf_counter()
                err, apis = wire.api_versions_v0(self.sock, corr)
                self.in_flight = None
                self.waits.append((time.perf_counter() - t0) * 1000.0)
                self.at.append(t0)
                assert err == 0 and wire.API_VERSIONS in apis
                time.sleep(0.001)
        except Exception as e:  # reported by stop()
            self.error = e

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: len(self.waits) >= 20 or self.error, 10, what="probe running")
        self.since = len(self.waits)
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(60)
        self.sock.close()
        if self.error is not None:
            raise self.error

    def check(self, what):
        """Reports the waits since __enter__ and asserts the bound."""
        w, p99, top, over = self.report(what)
        assert top < BOUND_MS or (over <= max(2, len(w) // 1000) and top < SPIKE_MS), (
            "ApiVersions waited %.1f ms behind %s (%d waits over %.0f ms of %d)"
            % (top, what, over, BOUND_MS, len(w)))
        self.since = len(self.waits)

    def report(self, what):
        """(waits, p99, max, how many over BOUND_MS) in ms since __enter__, printed."""
        w = self.waits[self.since:]
        t0 = self.in_flight
        if t0 is not None:  # still waiting: that wait counts too
            w = w + [(time.perf_counter() - t0) * 1000.0]
        w = sorted(w)
        assert w, "the probe never ran during %s" % what
        p50, p99, top = w[len(w) // 2], w[min(len(w) - 1, int(len(w) * 0.99))], w[-1]
        over = sum(1 for x in w if x >= BOUND_MS)
        worst = max(range(self.since, len(self.waits)), key=lambda i: self.waits[i],
                    default=self.since)
        print("\n%s: ApiVersions round trips=%d p50=%.2f ms p99=%.2f ms max=%.2f ms "
              "(%.2f s in; %d over %.0f ms)" % (what, len(w), p50, p99, top,
                                                 self.at[worst] - self.at[self.since]
                                                 if worst < len(self.at) else 0.0, over,
                                                 BOUND_MS))
        return w, p99, top, over


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


# ---- tests ------------------------------------------------------------------------

def await_dirs(broker, name, want, target):
    """Runnel: the directories are as wanted when the request is answered.
    Kafka: its controller answers, then its broker acts: wait for them."""
    if target != "kafka":
        assert partition_dirs(broker, name) == want
    else:
        wait_until(lambda: partition_dirs(broker, name) == want, 120, interval=0.05,
                   what="Kafka's partition directories of %s" % name)


def test_create_1000_partitions_does_not_stall_api_versions(broker, target):
    name = "dirs-1000"
    with wire.connect(broker.host, broker.port, timeout=300) as s, ApiVersionsProbe(broker) as probe:
        send_create(s, name, 1000)
        (err, msg, n), took = timed(lambda: recv_create(s))
        assert (err, n) == (0, 1000), msg
        await_dirs(broker, name, set(range(1000)), target)
        probe.check("CreateTopics 1000 partitions (answered in %.2f s)" % took)
    if target != "kafka":  # Kafka may write its partition.metadata later
        assert all((broker.datadir / ("%s-%d" % (name, p)) / "partition.metadata").is_file()
                   for p in (0, 499, 999))
    for p in (0, 499, 999):
        produce_and_fetch(broker, name, p, strict=target != "kafka")
    with wire.connect(broker.host, broker.port) as s:
        assert topic_partitions(s, name, 3) == (0, 1000)


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
    with wire.connect(broker.host, broker.port, timeout=300) as s, ApiVersionsProbe(broker) as probe:
        w.start()
        send_create(s, name, 5000)
        (err, msg, n), took = timed(lambda: recv_create(s))
        assert (err, n) == (0, 5000), msg
        await_dirs(broker, name, set(range(5000)), target)
        stop.set()
        w.join(60)
        probe.check("CreateTopics 5000 partitions (answered in %.2f s)" % took)
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
    with wire.connect(broker.host, broker.port) as s:
        wait_until(lambda: topic_partitions(s, name, 7)[0] == UNKNOWN_TOPIC_OR_PARTITION, 30,
                   what="the topic gone from Metadata")


def registry_line(broker, name):
    path = broker.datadir / "runnel-topics.properties"
    for line in path.read_text().splitlines():
        if line.startswith("topic %s " % name):
            return line
    return None


def test_kill9_in_the_middle_of_create_and_delete(broker, target):
    name = "dirs-restart"
    total = 5000
    with wire.connect(broker.host, broker.port, timeout=300) as s:
        send_create(s, name, total)
        wait_until(lambda: len(partition_dirs(broker, name)) >= 100, 120, interval=0.005,
                   what="some directories made")
        broker.kill9()
    made = len(partition_dirs(broker, name))
    print("\nkilled with %d of %d directories made" % (made, total))
    if target != "kafka" and made < total:
        line = registry_line(broker, name)
        assert line is not None and line.endswith(" pending"), line
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
        assert line is not None and line.endswith(" deleting"), line
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
