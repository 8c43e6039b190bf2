"""The retention guard (runnel.retention.guard) and the lag verdict, against a
real broker with confluent-kafka.

A group commits offset 10 of a topic whose old segments retention is about to
delete (broker-wide log.retention.ms of 2 s, 4 KiB segments, a 200 ms
retention check), then stops:
  warn  the data goes and one line per deletion names the group, topic,
        partition and the records it loses (they add up to what it lost);
  hold  the data stays readable from the committed offset until the bound
        (runnel.retention.guard.max.ms past retention.ms), then goes, with
        the warning line;
  off   Kafka's behaviour: the data goes silently, the resumed consumer gets
        OFFSET_OUT_OF_RANGE and resets to the earliest offset, and the broker
        logs that fetch once, naming the group.
The lag status: a consumer commits while a producer writes, stops, and its
partition goes to STOPPED (the group's status ERROR); it resumes, catches up
and goes back to OK. The status changes are read from the broker's log lines
(msg="lag status" ... change=A->B)."""

import json
import re
import threading
import time
import uuid

import pytest

import urllib.request

import procs
from conftest import require_module
from procs import free_port, wait_until
from runnel_broker import RunnelBroker, runnel_bin
from test_console import browser_runner  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")

COMMON = {
    "log.retention.ms": "2000",
    "log.segment.bytes": "4096",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "runnel.lag.check.interval.ms": "200",
    "runnel.lag.window.commits": "3",
    "runnel.lag.window.min.stop.ms": "1500",
}
HOLD_MAX_MS = 5000
COMMITTED = 40  # past the first segments (about 18 records each)
RECORDS = 150


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def start(tmp_path_factory, name, **extra):
    base = tmp_path_factory.mktemp(name)
    props = dict(COMMON)
    props.update(extra)
    return RunnelBroker(base / "data", binary=runnel_bin(), overrides=props)


WARN_METRICS_PORT = free_port()
WARN_CONSOLE_URL = "http://127.0.0.1:%d/" % free_port()


@pytest.fixture(scope="module")
def warn_broker(tmp_path_factory):
    yield from procs.serving(start(tmp_path_factory, "guard_warn", **{
        "runnel.metrics.listener": "http://127.0.0.1:%d" % WARN_METRICS_PORT,
        "runnel.console.listener": WARN_CONSOLE_URL.rstrip("/")}))


def metric(name_and_labels):
    """One sample of the warn broker's /metrics, or None."""
    url = "http://127.0.0.1:%d/metrics" % WARN_METRICS_PORT
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(scope="module")
def hold_broker(tmp_path_factory):
    yield from procs.serving(start(tmp_path_factory, "guard_hold", **{
        "runnel.retention.guard": "hold",
        "runnel.retention.guard.max.ms": str(HOLD_MAX_MS)}))


@pytest.fixture(scope="module")
def off_broker(tmp_path_factory):
    yield from procs.serving(start(tmp_path_factory, "guard_off",
                                   **{"runnel.retention.guard": "off"}))


def names():
    tag = uuid.uuid4().hex[:8]
    return "guard-" + tag, "group-" + tag


def log_text(b):
    return b.log_path.read_text(errors="replace")


def produce(ck, b, topic, n, start=0):
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(topic, value=b"v%05d-" % i + b"x" * 200)
        if i % 5 == 4:
            p.flush(10)  # small batches, so retention has several segments
    assert p.flush(30) == 0


def commit(ck, b, group, topic, offset):
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                     "enable.auto.commit": False})
    try:
        c.commit(offsets=[ck.TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def watermarks(ck, b, topic):
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "watermarks",
                     "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def read_at(ck, b, topic, offset):
    """The first record at or after offset, read without a group commit."""
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader-" + topic,
                     "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        c.assign([ck.TopicPartition(topic, 0, offset)])
        deadline = time.time() + 10
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            return m
        return None
    finally:
        c.close()


def setup_stopped_group(ck, b):
    topic, group = names()
    produce(ck, b, topic, RECORDS)
    commit(ck, b, group, topic, COMMITTED)
    return topic, group


def loss_lines(b, group, topic):
    pat = re.compile(r'msg="retention deletes records a group has not read" group=%s topic=%s '
                     r'partition=0 committed_offset=(\d+) log_start_offset=(\d+) records=(\d+) '
                     r'guard="([^"]+)"' % (re.escape(group), re.escape(topic)))
    return pat.findall(log_text(b))


def test_warn_names_the_group_and_its_loss(ck, warn_broker, browser_runner):
    b = warn_broker
    topic, group = setup_stopped_group(ck, b)
    wait_until(lambda: watermarks(ck, b, topic)[0] > COMMITTED, 20, interval=0.2,
               what="retention past the committed offset")
    wait_until(lambda: loss_lines(b, group, topic), 5, what="the guard's warning")
    low, high = watermarks(ck, b, topic)
    lines = loss_lines(b, group, topic)
    assert all(c == str(COMMITTED) and g == "warn" for c, _, _, g in lines), lines
    assert sum(int(r) for _, _, r, _ in lines) == low - COMMITTED, (lines, low)
    assert int(lines[-1][1]) == low
    assert high == RECORDS
    assert metric("runnel_retention_guard_warnings_total") >= len(lines)
    assert metric("runnel_retention_guard_records_lost_total") >= low - COMMITTED
    assert metric("runnel_retention_guard_holds_total") == 0
    with urllib.request.urlopen(WARN_CONSOLE_URL + "api/session", timeout=5) as r:
        seen = json.loads(r.read())["retentionGuard"]
    assert seen["mode"] == "warn" and seen["warnings"] >= len(lines), seen
    out = browser_runner("banner", url=WARN_CONSOLE_URL, prefix="guard-")
    assert out["pageErrors"] == []
    m = re.match(r"Retention deleted (\d+) record\(s\) that consumer groups had not read "
                 r"\((\d+) time\(s\) since start, runnel.retention.guard=warn\)", out["banner"])
    # retention goes on deleting meanwhile: the page's figures can only be higher
    assert m and int(m.group(1)) >= seen["recordsLost"] and int(m.group(2)) >= seen["warnings"], \
        out["banner"]


def test_hold_keeps_unread_data_until_the_bound(ck, hold_broker):
    b = hold_broker
    topic, group = setup_stopped_group(ck, b)
    produced_at = time.time()
    # Segments wholly below the committed offset go; the one holding it stays.
    wait_until(lambda: watermarks(ck, b, topic)[0] > 0, 15, interval=0.2,
               what="retention of what the group has read")
    time.sleep(1.0)
    low, _ = watermarks(ck, b, topic)
    assert 0 < low <= COMMITTED
    assert "retention guard holds segments a group has not read" in log_text(b)
    m = read_at(ck, b, topic, COMMITTED)
    assert m is not None and m.error() is None and m.offset() == COMMITTED
    assert m.value().startswith(b"v%05d-" % COMMITTED)
    assert not loss_lines(b, group, topic)
    # Past retention.ms + max.ms the hold lets go, and says so.
    wait_until(lambda: watermarks(ck, b, topic)[0] > COMMITTED, 20, interval=0.2,
               what="retention once the hold's bound passed")
    assert time.time() - produced_at >= (2000 + HOLD_MAX_MS) / 1000.0 - 1.0
    lines = loss_lines(b, group, topic)
    assert lines and all(g == "hold bound passed" for _, _, _, g in lines), lines


def test_off_behaves_as_kafka(ck, off_broker):
    b = off_broker
    topic, group = setup_stopped_group(ck, b)
    wait_until(lambda: watermarks(ck, b, topic)[0] > COMMITTED, 20, interval=0.2,
               what="retention past the committed offset")
    assert not loss_lines(b, group, topic)
    low, _ = watermarks(ck, b, topic)
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "client.id": "resumer-" + group})
    try:
        c.subscribe([topic])
        first = None
        deadline = time.time() + 30
        while first is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first = m.offset()
    finally:
        c.close()
    assert first is not None and first >= low > COMMITTED
    pat = (r'msg="fetch offset out of range: the consumer skips to its reset policy" group=%s '
           r'client_id=resumer-%s topic=%s partition=0 offset=%d log_start_offset=(\d+)'
           % (re.escape(group), re.escape(group), re.escape(topic), COMMITTED))
    wait_until(lambda: re.search(pat, log_text(b)), 5, what="the out-of-range line")
    assert len(re.findall(pat, log_text(b))) == 1


def status_changes(b, group, topic):
    pat = re.compile(r'msg="lag status" group=%s topic=%s partition=0 change=(\w+)->(\w+) '
                     r'lag=(-?\d+) lag_ms=(-?\d+)' % (re.escape(group), re.escape(topic)))
    return pat.findall(log_text(b))


def test_lag_status_stops_and_resumes(ck, warn_broker):
    b = warn_broker
    topic, group = names()
    stop_producing = threading.Event()
    produce(ck, b, topic, 1)

    def producer():
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        i = 0
        while not stop_producing.is_set():
            p.produce(topic, value=b"live-%d" % i)
            p.poll(0)
            i += 1
            time.sleep(0.05)
        p.flush(10)

    def consume(c, seconds, until_caught_up=False):
        deadline = time.time() + seconds
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                c.commit(message=m, asynchronous=False)
            if until_caught_up and m is None:
                _, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), cached=False)
                pos = c.position([ck.TopicPartition(topic, 0)])[0].offset
                if pos == high:
                    return

    conf = {"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    t = threading.Thread(target=producer)
    t.start()
    try:
        c = ck.Consumer(conf)
        c.subscribe([topic])
        consume(c, 3.0)
        c.close()  # the consumer stops; the producer goes on
        wait_until(lambda: any(new == "STOPPED" for _, new, _, _ in status_changes(b, group, topic)),
                   15, interval=0.2, what="lag status STOPPED")
    finally:
        stop_producing.set()
        t.join()
    changes = status_changes(b, group, topic)
    stopped = [x for x in changes if x[1] == "STOPPED"][0]
    assert int(stopped[2]) > 0 and int(stopped[3]) >= 0, changes
    labels = '{consumergroup="%s",topic="%s",partition="0"}' % (group, topic)
    assert metric("runnel_consumergroup_partition_status" + labels) == 3.0  # STOPPED
    assert metric('runnel_consumergroup_status{consumergroup="%s"}' % group) == 2.0  # ERROR
    assert metric("runnel_consumergroup_lag_seconds" + labels) > 0
    assert metric('kafka_consumergroup_lag_sum{consumergroup="%s"}' % group) == \
        metric("kafka_consumergroup_lag" + labels) > 0
    c = ck.Consumer(conf)
    c.subscribe([topic])
    try:
        consume(c, 20.0, until_caught_up=True)
        wait_until(lambda: status_changes(b, group, topic)[-1][1] == "OK", 10, interval=0.2,
                   what="lag status back to OK")
        assert metric("runnel_consumergroup_partition_status" + labels) == 0.0
        assert metric('runnel_consumergroup_status{consumergroup="%s"}' % group) == 0.0
    finally:
        c.close()
    seq = [new for _, new, _, _ in status_changes(b, group, topic)]
    assert seq.index("STOPPED") < len(seq) - 1 and seq[-1] == "OK", seq
