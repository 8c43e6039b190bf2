"""Share-partition state persisted in __share_group_state (Kafka 4.4's share
coordinator records), with the Java 4.4.0 KafkaShareConsumer (ShareTool).

A share group reads a topic and acknowledges part of it (ACCEPT, REJECT,
RELEASE) while keeping some records acquired; the broker stops (SIGTERM, or
SIGKILL after the acknowledgements were answered) and starts again: only the
records not acknowledged come back, a released record with its delivery
count kept, archived (rejected) and accepted ones never. Kafka's own
DumpLogSegments --share-group-state-decoder (kafka-tools 4.4.0) decodes the
segments Runnel wrote, and deleting a group writes tombstones.
"""

import os
import signal
import struct
import time

import pytest

import procs
import wire
from test_share_groups import BROKER_PROPS as SHARE_PROPS
from test_share_groups import JARS44, fresh, got, share_tool  # noqa: F401
from test_share_group_offsets import sgc, authz  # noqa: F401

pytestmark = pytest.mark.usefixtures("runnel_only")

STATE_PARTITIONS = 5
BROKER_PROPS = dict(SHARE_PROPS, **{
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    # one ShareSnapshot after every 3 ShareUpdates, so both kinds replay
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
})

# offsets 0-1 accepted, 2-3 rejected, 4 released, 5-7 kept acquired, 8 accepted
VALUES = ["a", "a", "reject", "reject", "release", "keep", "keep", "keep", "a"]
ACCEPTED, REJECTED, RELEASED, KEPT = {0, 1, 8}, {2, 3}, {4}, {5, 6, 7}


def produce_each(tool, broker, topic):
    for v in VALUES:
        tool.run("produce", broker.bootstrap, topic, v, 1)


def read_part(tool, broker):
    """A topic whose share group acknowledged part of it and holds the rest;
    (topic, group, the holding consumer)."""
    topic, group = fresh("sgs"), fresh("sgs")
    tool.run("earliest", broker.bootstrap, group)
    produce_each(tool, broker, topic)
    p = tool.popen("partial", broker.bootstrap, topic, group, 100)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("holding"):
            break
    recs = got(lines)
    assert sorted(r[0] for r in recs) == list(range(len(VALUES))), lines
    assert {r[0] for r in recs if r[3] == "KEEP"} == KEPT
    assert {r[0] for r in recs if r[3] == "REJECT"} == REJECTED
    assert {r[0] for r in recs if r[3] == "RELEASE"} == RELEASED
    return topic, group, p


def kill_tool(p):
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def check_redelivery(tool, broker, topic, group):
    """After the restart: the kept records (delivered again, as at their
    first delivery: acquisition is not persisted) and the released one
    (its second delivery); nothing accepted or rejected."""
    want = len(KEPT) + len(RELEASED)
    recs = got(tool.run("consume", broker.bootstrap, topic, group, "implicit", want, 60))
    assert sorted(r[0] for r in recs) == sorted(KEPT | RELEASED), recs
    counts = {r[0]: r[2] for r in recs}
    assert all(counts[o] == 1 for o in KEPT), counts
    assert all(counts[o] == 2 for o in RELEASED), counts
    assert got(tool.run("consume", broker.bootstrap, topic, group, "implicit", 1, 5)) == []


def test_state_survives_a_clean_restart(broker, share_tool):
    topic, group, p = read_part(share_tool, broker)
    broker.stop()  # SIGTERM while the consumer still holds 5-7
    kill_tool(p)
    broker.start()
    check_redelivery(share_tool, broker, topic, group)


def test_acknowledgements_answered_survive_sigkill(broker, share_tool):
    topic, group, p = read_part(share_tool, broker)
    broker.kill9()  # "holding" printed: commitSync had its answer
    kill_tool(p)
    broker.start()
    check_redelivery(share_tool, broker, topic, group)


def test_reset_offsets_survive_a_restart(broker, share_tool):
    topic, group = fresh("sgs"), fresh("sgs")
    share_tool.run("earliest", broker.bootstrap, group)
    share_tool.run("produce", broker.bootstrap, topic, "r", 10)
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 10, 60))
    assert len(recs) == 10
    sgc(broker, "--reset-offsets", "--group", group, "--topic", "%s:0" % topic,
        "--to-offset", "4", "--execute")
    broker.restart()
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 6, 60))
    assert sorted(r[0] for r in recs) == list(range(4, 10))


def dump(broker):
    """DumpLogSegments --share-group-state-decoder over every non-empty
    segment of __share_group_state: the lines it printed."""
    files = sorted(str(f) for f in broker.datadir.glob("__share_group_state-*/*.log")
                   if f.stat().st_size > 0)
    assert files, "no __share_group_state segment"
    res = procs.run(["java"] + procs.JAVA_TOOL_OPTS
                    + ["-cp", str(JARS44 / "*"), "org.apache.kafka.tools.DumpLogSegments",
                       "--share-group-state-decoder", "--print-data-log",
                       "--files", ",".join(files)], timeout=120)
    assert res.returncode == 0, procs.describe(res)
    return res.stdout.splitlines()


def test_kafka_dump_log_segments_decodes_the_state(broker, share_tool):
    topic, group, p = read_part(share_tool, broker)
    kill_tool(p)
    lines = [l for l in dump(broker) if '"groupId":"%s"' % group in l]
    assert lines, "no record of the group decoded"
    assert any('"type":"0"' in l or "ShareSnapshot" in l for l in lines), lines[:3]
    assert any('"type":"1"' in l or "ShareUpdate" in l for l in lines), lines[:3]
    text = "\n".join(lines)
    # 0-1 accepted and 2-3 rejected (archived): the start moved past them
    assert '"startOffset":4' in text, text
    # the released one: available (0) again, delivered once; 8 acknowledged (2)
    assert '"firstOffset":4,"lastOffset":4,"deliveryState":0,"deliveryCount":1' in text, text
    assert '"firstOffset":8,"lastOffset":8,"deliveryState":2,"deliveryCount":1' in text, text
    # 5-7 are still acquired: written as never delivered, so in no batch
    assert '"firstOffset":5' not in text and '"lastOffset":7' not in text, text


def test_deleting_the_group_writes_tombstones(broker, share_tool):
    topic, group = fresh("sgs"), fresh("sgs")
    share_tool.run("earliest", broker.bootstrap, group)
    share_tool.run("produce", broker.bootstrap, topic, "d", 3)
    assert len(got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 3,
                                  60))) == 3
    sgc(broker, "--delete", "--group", group)
    lines = [l for l in dump(broker) if '"groupId":"%s"' % group in l]
    assert lines and lines[-1].endswith("payload: <DELETE>"), lines[-1:]
    broker.restart()
    _, listed = sgc(broker, "--list")
    assert group not in listed
    # the group starts again from scratch: from the earliest offset, all again
    share_tool.run("earliest", broker.bootstrap, group)
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 3, 60))
    assert sorted(r[0] for r in recs) == [0, 1, 2]


# ---- the persister APIs on the wire ------------------------------------------------

INIT, READ, WRITE, DELETE_STATE, SUMMARY = 83, 84, 85, 86, 87
FENCED_STATE_EPOCH, INVALID_GROUP_ID, UNKNOWN_TOPIC_OR_PARTITION = 124, 24, 3
ACKED, ARCHIVED, AVAILABLE = 2, 4, 0


def persister(sock, api, version, group, tid, part_body, cid, result):
    """One topic, one partition (part_body after the partition index); the
    partition's result parsed by result(reader) after its error code."""
    part = struct.pack(">i", 0) + part_body + b"\x00"
    body = (wire.compact_string(group)
            + wire.compact_array([tid + wire.compact_array([part]) + b"\x00"]) + b"\x00")
    r = wire.flex_call(sock, api, version, body, cid)
    out = []

    def partition(r):
        r.take(">i")
        err = r.take(">h")
        r.string()
        out.append((err,) + tuple(result(r)))
        r.skip_tags()

    r.array(lambda r: (r.uuid(), r.array(partition), r.skip_tags()))
    return out[0]


def read_state(sock, group, tid, cid):
    def result(r):
        epoch, start = r.take(">i"), r.take(">q")
        batches = r.array(lambda r: (r.take(">q"), r.take(">q"), r.take(">b"), r.take(">h"),
                                     r.skip_tags())[:4])
        return epoch, start, batches
    return persister(sock, READ, 0, group, tid, struct.pack(">i", 0), cid, result)


def write_state(sock, group, tid, epoch, start, batches, cid):
    enc = [struct.pack(">qqbh", *b) + b"\x00" for b in batches]
    body = struct.pack(">iiq", epoch, 0, start) + wire.compact_array(enc)
    return persister(sock, WRITE, 0, group, tid, body, cid, lambda r: ())[0]


def test_persister_apis_read_write_initialize_delete(broker, share_tool):
    from test_share_groups import topic_id
    topic, group = fresh("sgs"), fresh("sgs")
    share_tool.run("produce", broker.bootstrap, topic, "p", 10)
    sock = wire.connect(broker.host, broker.port)
    try:
        tid = topic_id(sock, topic, 1)
        assert read_state(sock, group, tid, 2) == (0, 0, -1, [])  # uninitialized
        init = persister(sock, INIT, 0, group, tid, struct.pack(">iq", 1, 2), 3, lambda r: ())
        assert init == (0,)
        assert read_state(sock, group, tid, 4) == (0, 1, 2, [])
        assert write_state(sock, group, tid, 1, 2, [(2, 3, ACKED, 1), (5, 5, ARCHIVED, 2),
                                                    (6, 6, AVAILABLE, 1)], 5) == 0
        want = (0, 1, 4, [(5, 5, ARCHIVED, 2), (6, 6, AVAILABLE, 1)])  # 2-3 done: start 4
        assert read_state(sock, group, tid, 6) == want
        assert write_state(sock, group, tid, 0, -1, [], 7) == FENCED_STATE_EPOCH
        assert write_state(sock, "", tid, 1, -1, [], 8) == INVALID_GROUP_ID
        assert write_state(sock, group, b"\x07" * 16, 1, -1, [], 9) == UNKNOWN_TOPIC_OR_PARTITION
        summary = persister(sock, SUMMARY, 1, group, tid, struct.pack(">i", 0), 10,
                            lambda r: r.take(">iiqi"))
        assert summary == (0, 1, 0, 4, 1)  # epochs 1 and 0, start 4, one offset done
    finally:
        sock.close()
    broker.restart()
    sock = wire.connect(broker.host, broker.port)
    try:
        assert read_state(sock, group, tid, 11) == want  # what the RPCs wrote was persisted
    finally:
        sock.close()
    # a share consumer of the group reads from that state: 5 archived, 6 a redelivery
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 5, 60))
    assert sorted(r[0] for r in recs) == [4, 6, 7, 8, 9]
    assert {r[0]: r[2] for r in recs}[6] == 2
    sock = wire.connect(broker.host, broker.port)
    try:
        assert persister(sock, DELETE_STATE, 0, group, tid, b"", 12, lambda r: ()) == (0,)
        assert read_state(sock, group, tid, 13) == (0, 0, -1, [])
    finally:
        sock.close()


def test_persister_apis_need_cluster_action(authz, share_tool):
    from security import plain_login
    from test_acls import USERS, create_acls
    from test_share_groups import topic_id
    CLUSTER_RES, LITERAL, ALLOW, OP_CLUSTER_ACTION, CLUSTER_AUTHORIZATION_FAILED = 4, 3, 3, 9, 31
    topic, group = fresh("sgs-acl"), fresh("sgs-acl")
    share_tool.run("produce", authz.bootstrap, topic, "a", 3)  # PLAINTEXT: a super user
    admin = wire.connect(authz.host, authz.port)
    tid = topic_id(admin, topic, 1)
    alice = plain_login(authz, "alice", USERS["alice"])
    try:
        assert read_state(alice, group, tid, 2)[0] == CLUSTER_AUTHORIZATION_FAILED
        assert write_state(alice, group, tid, 0, 0, [], 3) == CLUSTER_AUTHORIZATION_FAILED
        create_acls(admin, 1, [(CLUSTER_RES, "kafka-cluster", LITERAL, "User:alice", "*",
                                OP_CLUSTER_ACTION, ALLOW)])
        wait = 50
        while read_state(alice, group, tid, 5)[0] != 0 and wait > 0:
            time.sleep(0.1)
            wait -= 1
        assert write_state(alice, group, tid, 0, 1, [], 6) == 0
        assert read_state(alice, group, tid, 7) == (0, 0, 1, [])
    finally:
        alice.close()
        admin.close()
