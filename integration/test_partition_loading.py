"""A partition's life cycle after a restart (issue 13, defects 3 and 4).

1. Opening a big partition log (recovery after a kill -9, and the producer
   state restored from its snapshot and the batches past it, or from every
   batch header) happens on helper threads at start-up, not in the first
   request that touches the partition: after a clean restart and after a
   kill -9, from the first accepted
   connection, ApiVersions on another connection keeps answering at once;
   the first Fetch of the partition is answered at once (with the retriable
   NOT_LEADER_OR_FOLLOWER while the log loads, then with data); an
   idempotent producer writing to it continues without
   OUT_OF_ORDER_SEQUENCE (its sequence state is rebuilt before its next
   batch is accepted). A stop while a log loads is clean.
2. Retention runs on every partition, also one that no request touched
   since the restart: its expired segments go within the check interval.

Against Apache Kafka these pass too (Kafka loads every log before its
listeners accept), but for the latency bounds, which a JVM just started
misses while it warms up (80 ms seen): those are checked on Runnel only.
"""

import json
import os
import struct
import subprocess
import sys
import time

import wire
import wire_data
from conftest import _start_broker, require_module
from procs import wait_until
from roundtrip import create_topic

NOT_LEADER_OR_FOLLOWER = wire_data.NOT_LEADER_OR_FOLLOWER

# The restart test's partition: the house issue's 1,000,000 one-record
# batches (about 15 s to write here); the transaction and delete tests need
# only a log that takes a while to load.
BATCHES = int(os.environ.get("RUNNEL_IT_LOADING_BATCHES", "1000000"))
LOADING_BATCHES = min(BATCHES, 400000)
PER_REQUEST = 2000      # batches in one Produce request
IDEMPOTENT_BEFORE = 300  # records the idempotent producer writes before the restart
IDEMPOTENT_AFTER = 300
LATENCY_LIMIT_MS = 50.0  # p99 of answers while a partition loads
# The slowest single answer. Loading on the loop would stall it for the whole
# recovery (seconds: 11.8 s for the kill -9 case on the CI machine); on a
# shared 2-core machine a lone answer can wait ~200 ms for a CPU while the
# p99 stays at a few ms, so the bound for one answer is looser than the p99's.
STALL_LIMIT_MS = 1000.0
BROKER_PROPS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def fill(broker, topic, batches):
    """batches one-record batches in partition 0: Produce v3 with acks=0 (no
    responses), PER_REQUEST frames per write, the same frame every time (the
    broker rewrites each base offset); one acks=1 produce at the end."""
    one = wire_data.build_batch([(None, b"v", ())], int(time.time() * 1000))
    body = struct.pack(">hhi", -1, 0, 10000)
    body += struct.pack(">i", 1) + wire_data._string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(one)) + one
    frame = wire.frame(wire.request_header(wire_data.PRODUCE, 3, 0) + body)
    with wire.connect(broker.host, broker.port, timeout=60) as s:
        left = batches - 1
        while left > 0:
            n = min(PER_REQUEST, left)
            s.sendall(frame * n)
            left -= n
        err, base = wire_data.produce_v3(s, 1, topic, 0, one, acks=1)
        assert err == 0, "fill produce error %d" % err
        assert base == batches - 1, (base, batches)


# ApiVersions v0 back to back on a connection of its own, in a process of
# its own (so no other thread of the test holds the interpreter lock while a
# request is timed), until its stdin closes; prints the latencies in ms.
PROBE = r"""
import json, select, socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("connected", flush=True)
lat, corr = [], 0
def recv(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed")
        b += c
    return b
while not select.select([sys.stdin], [], [], 0)[0]:
    corr += 1
    client = b"probe"
    hdr = struct.pack(">hhih", 18, 0, corr, len(client)) + client
    t0 = time.monotonic()
    s.sendall(struct.pack(">i", len(hdr)) + hdr)
    (n,) = struct.unpack(">i", recv(4))
    body = recv(n)
    lat.append((time.monotonic() - t0) * 1000.0)
    assert struct.unpack_from(">i", body)[0] == corr
print(json.dumps(lat), flush=True)
"""


class ApiVersionsProbe:
    def __init__(self, broker):
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, broker.host, str(broker.port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "connected"
        self.latencies = []
        self.error = None

    def finish(self, after_s):
        time.sleep(after_s)
        out, _ = self.proc.communicate("stop\n", timeout=60)
        if self.proc.returncode != 0:
            self.error = "probe exited with %d" % self.proc.returncode
        else:
            self.latencies = json.loads(out.strip().splitlines()[-1])


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def first_fetches(broker, topic, offset):
    """Fetches of (topic, 0) at offset until data comes: [(error, ms, bytes)]."""
    out = []
    deadline = time.monotonic() + 60
    with wire.connect(broker.host, broker.port, timeout=60) as s:
        corr = 1
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            res = wire_data.fetch_v4_once(s, corr, topic, 0, offset, max_wait_ms=0,
                                         min_bytes=0)
            out.append((res.error, (time.monotonic() - t0) * 1000.0, len(res.records)))
            corr += 1
            if res.error == 0 and len(res.records) > 0:
                return out
            assert res.error in (0, NOT_LEADER_OR_FOLLOWER), out
            time.sleep(0.01)
    raise AssertionError("no data fetched within 60 s: %s" % out[-5:])


def restart_and_probe(broker, target, how, topic, p, first, n, report):
    """Restarts the broker (how: clean or kill9) and, from the first accepted
    connection, times ApiVersions on a connection of its own while the
    producer sends records first..first+n and the partition is fetched."""
    if how == "kill9":
        broker.kill9()
        broker.start()  # returns once the port accepted a connection
    else:
        broker.restart()
    up = time.monotonic()
    probe = ApiVersionsProbe(broker)
    for i in range(first, first + n):
        p.produce(topic, value=b"idem-%06d" % i, partition=0, on_delivery=report)
    fetches = first_fetches(broker, topic, BATCHES + first - 1)
    loaded_s = time.monotonic() - up
    remaining = p.flush(60)
    probe.finish(0.5)
    lat = probe.latencies
    p99, worst = percentile(lat, 0.99), max(lat)
    retriable = sum(1 for e, _ms, _n in fetches if e == NOT_LEADER_OR_FOLLOWER)
    print("\n%s restart: %d ApiVersions, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d fetches "
          "(%d NOT_LEADER_OR_FOLLOWER) before data at %.2f s, slowest fetch %.2f ms"
          % (how, len(lat), percentile(lat, 0.5), p99, worst, len(fetches), retriable,
             loaded_s, max(ms for _e, ms, _n in fetches)))
    assert probe.error is None, probe.error
    assert len(lat) >= 20
    if target == "runnel":  # a JVM just started answers its first requests slower (JIT)
        assert p99 < LATENCY_LIMIT_MS and worst < STALL_LIMIT_MS, (how, p99, worst)
        assert fetches[0][1] < STALL_LIMIT_MS, "%s: the first fetch took %.1f ms" % (
            how, fetches[0][1])
    assert remaining == 0, "idempotent records still unsent"


def test_restart_with_a_big_partition_never_stalls(broker, target, topic_name):
    """A clean restart (producer snapshots written) and a kill -9 (the log
    recovered past its recovery point, producer state replayed past the
    last snapshot)."""
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    t0 = time.monotonic()
    fill(broker, topic, BATCHES)
    print("\nfill: %d batches in %.1f s" % (BATCHES, time.monotonic() - t0))

    delivered, failed = [], []

    def report(err, msg):
        (failed if err is not None else delivered).append((err, msg.value()))

    p = ck.Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 200, "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000,
    })
    for i in range(IDEMPOTENT_BEFORE):
        p.produce(topic, value=b"idem-%06d" % i, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    assert not failed, failed[:5]
    restart_and_probe(broker, target, "clean", topic, p, IDEMPOTENT_BEFORE, IDEMPOTENT_AFTER,
                      report)
    restart_and_probe(broker, target, "kill9", topic, p, IDEMPOTENT_BEFORE + IDEMPOTENT_AFTER,
                      IDEMPOTENT_AFTER, report)
    assert not failed, "deliveries failed: %s" % failed[:5]
    total = IDEMPOTENT_BEFORE + 2 * IDEMPOTENT_AFTER
    assert len(delivered) == total

    # Every idempotent record once, in order, right after the filler batches.
    res = None
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        got, offset, corr = [], BATCHES, 1
        while len(got) < total:
            res = wire_data.fetch_v4(s, corr, topic, 0, offset, max_wait_ms=100)
            corr += 1
            assert res.error == 0, res.error
            batches = [b for b in wire_data.parse_batches(res.records) if b.last_offset >= offset]
            assert batches, "nothing at %d (high watermark %d)" % (offset, res.high_watermark)
            for b in batches:
                got += [r[3] for r in b.records if r[0] >= offset]
            offset = batches[-1].last_offset + 1
    assert got == [b"idem-%06d" % i for i in range(total)]
    end = BATCHES + total
    assert res.high_watermark == end

    # A stop while the log loads is clean (exit code asserted) and loses nothing.
    broker.restart()
    broker.restart()
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        res = wire_data.fetch_v4(s, 1, topic, 0, end - 1, max_wait_ms=0)
    assert res.error == 0 and res.high_watermark == end, (res.error, res.high_watermark)


def segment_files(datadir, topic):
    d = os.path.join(str(datadir), "%s-0" % topic)
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


RETENTION_MS = 4000
CHECK_MS = 1000


def test_retention_runs_on_untouched_partitions(target, tmp_path_factory, topic_name):
    props = {"log.retention.ms": str(RETENTION_MS),
             "log.retention.check.interval.ms": str(CHECK_MS),
             "log.segment.bytes": str(1 << 20)}  # Kafka 4's smallest
    if target == "kafka":  # Kafka's log manager waits this long before its first pass
        props["log.initial.task.delay.ms"] = "0"
    b = _start_broker(target, tmp_path_factory, "retention_untouched", props)
    try:
        topic = create_topic(b.bootstrap, topic_name(), 1)
        one = wire_data.build_batch([(None, b"x" * 1000, ())] * 20, int(time.time() * 1000))
        with wire.connect(b.host, b.port, timeout=30) as s:
            for corr in range(1, 171):  # ~3.4 MB: three 1 MiB segments and an active one
                err, _ = wire_data.produce_v3(s, corr, topic, 0, one, acks=1)
                assert err == 0
        produced_at = time.monotonic()
        before = segment_files(b.datadir, topic)
        assert len(before) >= 3, before
        b.stop()
        # Down until the segments expired, then up with nothing touching them.
        time.sleep(max(0.0, RETENTION_MS / 1000.0 + 0.5 - (time.monotonic() - produced_at)))
        still = segment_files(b.datadir, topic)
        assert still == before, "retention ran before the stop: %s -> %s" % (before, still)
        b.start()
        up = time.monotonic()
        old = set(before[:-1])  # all but the last (active) one
        wait_until(lambda: not old & set(segment_files(b.datadir, topic)),
                   CHECK_MS / 1000.0 + 5.0, interval=0.1,
                   what="expired segments of the untouched partition deleted")
        print("\nexpired segments %s deleted %.2f s after the restart"
              % (sorted(old), time.monotonic() - up))
    finally:
        if b.alive():
            b.stop()


TXN_TIMEOUT_MS = 3000


def test_transaction_aborted_while_its_partition_loads(broker, topic_name):
    """A transaction that times out right after a restart, while its
    partition's log still loads: its abort marker waits for the log, then
    is written once (read_committed reaches the end past the marker)."""
    ck = require_module("confluent_kafka")
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    fill(broker, topic, LOADING_BATCHES // 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "it-" + topic,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    started = time.monotonic()
    for i in range(10):
        p.produce(topic, value=b"open-%d" % i, partition=0)
    assert p.flush(30) == 0
    end = LOADING_BATCHES // 2 + 10
    broker.kill9()  # unclean: the next start recovers the whole log (long enough to abort)
    time.sleep(max(0.0, TXN_TIMEOUT_MS / 1000.0 + 0.2 - (time.monotonic() - started)))
    broker.start()  # the transaction has timed out: the coordinator aborts it at once

    def stable():
        with wire.connect(broker.host, broker.port, timeout=30) as s:
            res = wire_data.fetch_v4(s, 1, topic, 0, end, max_wait_ms=0, isolation_level=1)
        return res.error == 0 and res.last_stable == res.high_watermark == end + 1

    wait_until(stable, 30, interval=0.2, what="the abort marker written after the load")
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        res = wire_data.fetch_v4(s, 1, topic, 0, LOADING_BATCHES // 2, max_wait_ms=0)
    batches = wire_data.parse_batches(res.records)
    control = [b for b in batches if b.attributes & 0x20]
    assert len(control) == 1 and control[0].base_offset == end, batches
    del p


def test_topic_deleted_while_it_loads(broker, topic_name):
    """Deleting a topic whose log still loads after a restart: the load is
    cancelled or awaited, the topic goes, and one created again under the
    same name starts empty."""
    require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    topic = create_topic(broker.bootstrap, topic_name(), 1)
    fill(broker, topic, LOADING_BATCHES // 4)
    broker.kill9()  # unclean: the next start recovers the log, which takes a while
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60) is None
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, what="deleted")
    create_topic(broker.bootstrap, topic, 1)
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        res = wire_data.fetch_v4(s, 1, topic, 0, 0, max_wait_ms=0)
    assert res.error == 0 and res.high_watermark == 0, (res.error, res.high_watermark)
    assert broker.alive()
