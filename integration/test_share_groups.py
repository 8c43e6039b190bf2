"""KIP-932 share groups with the Java 4.4.0 KafkaShareConsumer, and by hand on the wire.

integration/java/ShareTool.java drives KafkaShareConsumer (kafka-clients 4.4.0
from integration/.deps/jars-4.4): implicit and explicit acknowledgement
(ACCEPT, RELEASE, REJECT), three consumers sharing one partition, redelivery
after an acquisition lock times out and after a consumer is killed, and the
delivery-count limit archiving a poison record. The raw-wire tests check the
errors Kafka gives for acknowledgements of records never acquired or already
acknowledged (INVALID_RECORD_STATE) and for malformed acknowledgement batches
(INVALID_REQUEST).
"""

import os
import signal
import struct
import subprocess
import time
import uuid

import pytest

import procs
import wire

pytestmark = pytest.mark.usefixtures("runnel_only")

LOCK_MS = 3000
BROKER_PROPS = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "1000",
}

JARS44 = procs.DEPS / "jars-4.4"
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121


@pytest.fixture(scope="module")
def share_tool(tmp_path_factory):
    """run(*args, timeout) -> CompletedProcess, and popen(*args) for ShareTool."""
    if not any(JARS44.glob("kafka-clients-4.4*.jar")):
        pytest.skip("no kafka-clients 4.4 jars in %s" % JARS44)
    classes = tmp_path_factory.mktemp("share-tool")
    src = procs.REPO / "integration" / "java" / "ShareTool.java"
    cp = str(JARS44 / "*")
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", classes, src],
              timeout=180, check=True)
    cmd = ["java", "-cp", "%s%s%s" % (classes, os.pathsep, cp), "ShareTool"]

    class Tool:
        def run(self, *args, timeout=120):
            res = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                                 timeout=timeout)
            assert res.returncode == 0, res.stdout + res.stderr
            return res.stdout.splitlines()

        def popen(self, *args):
            return subprocess.Popen(cmd + [str(a) for a in args], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True,
                                    start_new_session=True)

    return Tool()


def fresh(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def got(lines):
    """(offset, value, delivery count, ack) per "got" line."""
    out = []
    for line in lines:
        if line.startswith("got "):
            _, off, val, dc, ack = line.split()
            out.append((int(off), val, int(dc), ack))
    return out


def setup_topic(tool, broker, values_prefix, n):
    topic, group = fresh("share"), fresh("sg")
    tool.run("produce", broker.bootstrap, topic, values_prefix, n)
    tool.run("earliest", broker.bootstrap, group)
    return topic, group


def test_implicit_acknowledgement_delivers_each_record_once(broker, share_tool):
    topic, group = setup_topic(share_tool, broker, "v", 20)
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 20, 60))
    assert sorted(r[0] for r in recs) == list(range(20))
    assert all(r[2] == 1 for r in recs)
    again = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 1, 5))
    assert again == []  # all acknowledged: nothing comes back


def test_explicit_accept_release_reject(broker, share_tool):
    topic, group = fresh("share"), fresh("sg")
    share_tool.run("earliest", broker.bootstrap, group)
    for prefix in ("a", "release", "reject", "b"):
        share_tool.run("produce", broker.bootstrap, topic, prefix, 1)
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "explicit", 3, 60))
    by_value = {}
    for off, val, dc, ack in recs:
        by_value.setdefault(val, []).append((dc, ack))
    assert by_value["a-0"] == [(1, "ACCEPT")]
    assert by_value["release-0"] == [(1, "RELEASE"), (2, "ACCEPT")]
    assert by_value["reject-0"] == [(1, "REJECT")]
    assert by_value["b-0"] == [(1, "ACCEPT")]
    again = got(share_tool.run("consume", broker.bootstrap, topic, group, "explicit", 1, 5))
    assert again == []


def test_three_consumers_on_one_partition_get_distinct_records(broker, share_tool):
    topic, group = setup_topic(share_tool, broker, "m", 3000)
    lines = share_tool.run("multi", broker.bootstrap, topic, group, 3, 3000, 90, timeout=150)
    counts = [int(l.split()[2]) for l in lines if l.startswith("consumer ")]
    total = [l for l in lines if l.startswith("total ")][0].split()
    assert int(total[1]) == 3000 and int(total[3]) == 0, lines
    assert len(counts) == 3 and all(c > 0 for c in counts), counts


def hold(tool, broker, topic, group, n):
    p = tool.popen("hold", broker.bootstrap, topic, group, n)
    held = []
    for line in p.stdout:
        if line.startswith("held "):
            held.append(int(line.split()[1]))
        if line.startswith("holding"):
            break
    return p, held


def test_redelivery_after_the_lock_times_out(broker, share_tool):
    topic, group = setup_topic(share_tool, broker, "l", 5)
    p, held = hold(share_tool, broker, topic, group, 5)
    try:
        assert held == list(range(5))
        started = time.monotonic()
        recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 5, 60))
        waited = time.monotonic() - started
        assert sorted(r[0] for r in recs) == list(range(5))
        assert all(r[2] == 2 for r in recs)  # the second delivery
        assert p.poll() is None  # the holder is still a member: its locks ran out
        assert waited >= LOCK_MS / 1000 - 1.5
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_redelivery_after_a_consumer_is_killed(broker, share_tool):
    topic, group = setup_topic(share_tool, broker, "k", 4)
    p, held = hold(share_tool, broker, topic, group, 4)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert held == list(range(4))
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 4, 60))
    assert sorted(r[0] for r in recs) == list(range(4))
    assert all(r[2] == 2 for r in recs)


def test_delivery_count_limit_archives_a_poison_record(broker, share_tool):
    topic, group = fresh("share"), fresh("sg")
    share_tool.run("earliest", broker.bootstrap, group)
    share_tool.run("produce", broker.bootstrap, topic, "poison", 1)
    share_tool.run("produce", broker.bootstrap, topic, "ok", 1)
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "explicit", 99, 12))
    poison = [r[2] for r in recs if r[1] == "poison-0"]
    assert poison == [1, 2, 3, 4, 5]  # group.share.delivery.count.limit=5, then archived
    assert [r for r in recs if r[1] == "ok-0"] == [(1, "ok-0", 1, "ACCEPT")]
    assert got(share_tool.run("consume", broker.bootstrap, topic, group, "explicit", 1, 5)) == []


# ---- on the wire ---------------------------------------------------------------------

def heartbeat(sock, group, member, topic, cid):
    body = (wire.compact_string(group) + wire.compact_string(member) + struct.pack(">i", 0)
            + wire.compact_string(None) + wire.compact_array([wire.compact_string(topic)])
            + b"\x00")
    r = wire.flex_call(sock, SHARE_GROUP_HEARTBEAT, 1, body, cid)
    r.take(">i")
    err = r.take(">h")
    assert err == 0, err


def topic_id(sock, topic, cid):
    body = (wire.compact_array([b"\x00" * 16 + wire.compact_string(topic) + b"\x00"])
            + b"\x01" + b"\x00" + b"\x00")
    r = wire.flex_call(sock, 3, 12, body, cid)
    r.take(">i")
    r.array(lambda r: (r.take(">i"), r.string(), r.take(">i"), r.string(), r.skip_tags()))
    r.string()
    r.take(">i")
    tid = [None]

    def topic(r):
        r.take(">h")
        r.string()
        tid[0] = r.uuid()
        r.take(">b")
        r.array(lambda r: (r.take(">hiii"), r.array(lambda r: r.take(">i")),
                           r.array(lambda r: r.take(">i")), r.array(lambda r: r.take(">i")),
                           r.skip_tags()))
        r.take(">i")
        r.skip_tags()
    r.array(topic)
    return tid[0]


def batch(first, last, types):
    return (struct.pack(">qq", first, last)
            + wire.compact_array([struct.pack(">b", t) for t in types]) + b"\x00")


def share_fetch(sock, group, member, epoch, tid, batches, cid, max_records=100):
    part = struct.pack(">i", 0) + wire.compact_array(batches) + b"\x00"
    topics = wire.compact_array([tid + wire.compact_array([part]) + b"\x00"])
    body = (wire.compact_string(group) + wire.compact_string(member)
            + struct.pack(">iiiiii", epoch, 0, 1, 1 << 20, max_records, max_records)
            + topics + wire.compact_array([]) + b"\x00")
    r = wire.flex_call(sock, SHARE_FETCH, 1, body, cid)
    r.take(">i")
    top = r.take(">h")
    r.string()
    r.take(">i")
    parts = []

    def partition(r):
        idx, err = r.take(">i"), r.take(">h")
        r.string()
        ack_err = r.take(">h")
        r.string()
        r.take(">ii")
        r.skip_tags()
        n = r.uvarint() - 1
        r.off += max(n, 0)
        acquired = r.array(lambda r: (r.take(">q"), r.take(">q"), r.take(">h"), r.skip_tags())[:3])
        r.skip_tags()
        parts.append((idx, err, ack_err, acquired))
    r.array(lambda r: (r.uuid(), r.array(partition), r.skip_tags()))
    return top, parts


def share_ack(sock, group, member, epoch, tid, batches, cid):
    part = struct.pack(">i", 0) + wire.compact_array(batches) + b"\x00"
    body = (wire.compact_string(group) + wire.compact_string(member) + struct.pack(">i", epoch)
            + wire.compact_array([tid + wire.compact_array([part]) + b"\x00"]) + b"\x00")
    r = wire.flex_call(sock, SHARE_ACKNOWLEDGE, 1, body, cid)
    r.take(">i")
    top = r.take(">h")
    r.string()
    errs = []
    r.array(lambda r: (r.uuid(), r.array(lambda r: errs.append(
        (r.take(">i"), r.take(">h"), r.string(), r.take(">ii"), r.skip_tags())[1])),
        r.skip_tags()))
    return top, errs


@pytest.fixture()
def wire_session(broker, share_tool):
    """A member of a fresh group holding offsets 0-4 of a fresh topic of 10
    records: (sock, group, member, topic id, next epoch)."""
    topic, group = setup_topic(share_tool, broker, "w", 10)
    member = str(uuid.uuid4())
    sock = wire.connect(broker.host, broker.port)
    heartbeat(sock, group, member, topic, 1)
    tid = topic_id(sock, topic, 2)
    top, parts = share_fetch(sock, group, member, 0, tid, [], 3, max_records=5)
    assert top == 0 and parts and parts[0][3] == [(0, 4, 1)], parts
    yield sock, group, member, tid
    sock.close()


def test_wire_ack_of_records_never_acquired_is_invalid_record_state(wire_session):
    sock, group, member, tid = wire_session
    top, errs = share_ack(sock, group, member, 1, tid, [batch(5, 7, [1])], 10)
    assert (top, errs) == (0, [INVALID_RECORD_STATE])
    top, errs = share_ack(sock, group, member, 2, tid, [batch(0, 4, [1])], 11)
    assert (top, errs) == (0, [0])


def test_wire_ack_twice_is_invalid_record_state(wire_session):
    sock, group, member, tid = wire_session
    assert share_ack(sock, group, member, 1, tid, [batch(0, 1, [1])], 10) == (0, [0])
    assert share_ack(sock, group, member, 2, tid, [batch(1, 1, [1])], 11) == (
        0, [INVALID_RECORD_STATE])


@pytest.mark.parametrize("batches", [
    [batch(2, 3, [1]), batch(0, 1, [1])],     # out of order
    [batch(0, 2, [1]), batch(2, 3, [1])],     # overlapping
    [batch(0, 1, [9])],                       # unknown type
    [batch(0, 2, [1, 1])],                    # neither one type nor one per offset
    [batch(3, 1, [1])],                       # last before first
])
def test_wire_malformed_ack_batches_are_refused(wire_session, batches):
    sock, group, member, tid = wire_session
    top, errs = share_ack(sock, group, member, 1, tid, batches, 10)
    assert (top, errs) == (0, [INVALID_REQUEST])
    # Nothing of a refused partition was applied: 0-4 are still ours to accept.
    assert share_ack(sock, group, member, 2, tid, [batch(0, 4, [1])], 11) == (0, [0])


def test_wire_session_epochs(wire_session):
    sock, group, member, tid = wire_session
    top, _ = share_ack(sock, group, member, 5, tid, [batch(0, 0, [1])], 10)
    assert top == 123  # INVALID_SHARE_SESSION_EPOCH
    top, _ = share_ack(sock, group, str(uuid.uuid4()), 1, tid, [batch(0, 0, [1])], 11)
    assert top == 122  # SHARE_SESSION_NOT_FOUND
    top, _ = share_fetch(sock, group, member, 0, tid, [batch(0, 0, [1])], 12)
    assert top == INVALID_REQUEST  # acknowledgements in a session's first fetch
