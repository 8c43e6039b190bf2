"""The KIP-848 consumer group protocol (group.protocol=consumer).

- The Java client 4.1 (integration/java/Kip848Tool.java): three consumers of
  one group share a topic's partitions with no record read twice; one leaves
  and the others take its partitions over; the group as Admin describes it
  (ConsumerGroupDescribe); the committed offsets; kafka-consumer-groups
  --list/--describe on the group; a regex subscription resolved by the
  broker, with the range assignor.
- Hand-built ConsumerGroupHeartbeat / ConsumerGroupDescribe requests
  (cgwire.py): the error codes, epochs and assignments Kafka 4.1 gives, and
  how the classic protocol and this one share group ids.
- ApiVersions: the API ranges and the group.version feature.

Every assertion holds on Kafka 4.1.1 too (pytest --target=kafka).
"""

import struct
import time

import pytest

import cgwire
import procs
import wire
from roundtrip import create_topic

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 6
PER_PHASE = 120


def parse(out):
    lines = {}
    for ln in out.splitlines():
        key, _, rest = ln.partition(" ")
        lines.setdefault(key, []).append(rest)
    return lines


def members(rows):
    return {int(r.split(" ")[0]): sorted(int(p) for p in r.split(" ")[1].split(",") if p)
            for r in rows}


def test_java_consumers_share_partitions(broker, java_runner, topic_name):
    t = topic_name()
    group = t + "-group"
    create_topic(broker.bootstrap, t, PARTITIONS)
    res = java_runner("Kip848Tool", "share", broker.bootstrap, t, group, "3", str(PARTITIONS),
                      str(PER_PHASE), timeout=300)
    assert res.returncode == 0, procs.describe(res)
    out = parse(res.stdout)
    assert out["phase1"] == ["consumed=%d dupes=0" % PER_PHASE]
    assert out["phase2"] == ["consumed=%d dupes=0" % (2 * PER_PHASE)]
    desc = out["describe"][0].lower()
    assert "state=stable" in desc and "type=consumer" in desc and "members=3" in desc, desc
    assert "assignor=uniform" in desc, desc
    assert sorted(int(r.split(" ")[0]) for r in out["described-member"]) == [2, 2, 2]
    phase1 = members(out["member"][:3])
    assert sorted(p for ps in phase1.values() for p in ps) == list(range(PARTITIONS))
    assert sorted(len(ps) for ps in phase1.values()) == [2, 2, 2]
    phase2 = members(out["member"][3:])
    assert set(phase2) == {1, 2}
    assert sorted(p for ps in phase2.values() for p in ps) == list(range(PARTITIONS))
    assert sorted(len(ps) for ps in phase2.values()) == [3, 3]
    per_partition = 2 * PER_PHASE // PARTITIONS
    assert out["committed"] == ["%d %d" % (p, per_partition) for p in range(PARTITIONS)]

    def tool(*args):
        r = java_runner(GROUP_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    assert group in tool("--list").split()
    rows = [ln.split() for ln in tool("--describe", "--group", group).splitlines()
            if ln.startswith(group + " ")]
    assert sorted(int(r[2]) for r in rows) == list(range(PARTITIONS))
    for row in rows:  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        assert row[1] == t and row[3] == str(per_partition) and row[5] == "0", row
    state = tool("--describe", "--group", group, "--state")
    assert any(ln.split()[:1] == [group] and "Empty" in ln.split() for ln in state.splitlines()), \
        state


def test_java_regex_subscription_range_assignor(broker, java_runner, topic_name):
    base = topic_name("rx")
    names = [base + "-a", base + "-b"]
    for n in names:
        create_topic(broker.bootstrap, n, 2)
    create_topic(broker.bootstrap, base + "x-c", 1)  # does not match
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for n in names + [base + "x-c"]:
        for i in range(10):
            p.send(n, value=b"r%d" % i, partition=i % 2 if not n.endswith("-c") else 0)
    p.flush(timeout=60)
    p.close()
    res = java_runner("Kip848Tool", "regex", broker.bootstrap, base.replace("-", "\\-") + "-[ab]",
                      "20", "range", base + "-group", timeout=200)
    assert res.returncode == 0, procs.describe(res)
    assert parse(res.stdout)["topic"] == ["%s 10" % names[0], "%s 10" % names[1]]


# --- hand-built requests ----------------------------------------------------------------------

@pytest.fixture()
def sock(broker, topic_name):
    s = wire.connect(broker.host, broker.port, timeout=30)
    assert cgwire.find_coordinator(s, "x") == 0
    yield s
    s.close()


def join(s, group, member, topics, **kw):
    return cgwire.heartbeat(s, group, member_id=member, epoch=0, rebalance=30000, topics=topics,
                            owned=[], **kw)


def test_heartbeat_validation_errors(sock):
    hb = cgwire.heartbeat
    assert hb(sock, "")["error"] == 42                        # INVALID_REQUEST: no group id
    assert hb(sock, "g", member_id="")["error"] == 42         # v1: the client names itself
    assert hb(sock, "g", member_id="m", epoch=-3)["error"] == 42
    assert hb(sock, "g", member_id="m", topics=["t"], owned=[])["error"] == 42  # no rebalance
    assert hb(sock, "g", member_id="m", rebalance=1, topics=["t"])["error"] == 42  # owned null
    assert hb(sock, "g", member_id="m", rebalance=1, owned=[])["error"] == 42     # no subs
    assert hb(sock, "g", member_id="m", rebalance=1, regex="[", owned=[])["error"] == 128
    r = hb(sock, "g", member_id="m", rebalance=1, topics=["t"], assignor="foo", owned=[])
    assert r["error"] == 112                                  # UNSUPPORTED_ASSIGNOR
    r = hb(sock, "it-848-nogroup", member_id="m", epoch=3)
    assert r["error"] == 69 and r["member_id"] is None and r["interval"] == 0


def test_heartbeat_epochs_and_reconciliation(sock, broker, topic_name):
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 4)
    a = join(sock, group, "ma", [t])
    assert a["error"] == 0 and a["epoch"] == 1 and a["interval"] == 5000
    (tid, parts), = a["assignment"].items()
    assert parts == [0, 1, 2, 3]
    b = join(sock, group, "mb", [t])
    # Group epoch 2; b's target partitions are still a's: it gets none yet.
    assert b["error"] == 0 and b["epoch"] == 2 and b["assignment"] == {}
    # a must give up two partitions; it keeps epoch 1 until it does.
    r = cgwire.heartbeat(sock, group, member_id="ma", epoch=1)
    assert r["error"] == 0 and r["epoch"] == 1
    keep = r["assignment"][tid]
    assert len(keep) == 2
    assert cgwire.heartbeat(sock, group, member_id="ma", epoch=5)["error"] == 110  # FENCED
    assert cgwire.heartbeat(sock, group, member_id="zz", epoch=1)["error"] == 25
    # b cannot have a's partitions before a released them.
    r = cgwire.heartbeat(sock, group, member_id="mb", epoch=2)
    assert r["error"] == 0 and r["assignment"] is None
    r = cgwire.heartbeat(sock, group, member_id="ma", epoch=1, owned=[(tid, keep)])
    assert r["error"] == 0 and r["epoch"] == 2
    r = cgwire.heartbeat(sock, group, member_id="mb", epoch=2)
    assert r["error"] == 0 and sorted(r["assignment"][tid] + keep) == [0, 1, 2, 3]
    (g,) = cgwire.describe(sock, [group])
    assert g["error"] == 0 and g["state"] == "Stable" and g["epoch"] == 2
    assert g["assignor"] == "uniform"
    assert sorted(m["member_id"] for m in g["members"]) == ["ma", "mb"]
    for m in g["members"]:
        assert m["assignment"] == m["target"] and m["epoch"] == 2
    r = cgwire.heartbeat(sock, group, member_id="ma", epoch=-1)
    assert (r["error"], r["member_id"], r["epoch"]) == (0, "ma", -1)
    assert cgwire.heartbeat(sock, group, member_id="ma", epoch=-1)["error"] == 25


def test_new_regex_resolved_after_the_heartbeat(sock, broker, topic_name):
    """Kafka resolves a new SubscribedTopicRegex in the background: the join
    that brings it is assigned the literal topics, the next heartbeat (group
    epoch bumped) the matches too; a second member with a regex already
    resolved has it at once (librdkafka test 0045 expects this order)."""
    t = topic_name()
    lit, rx1, rx2 = t + "-lit", t + "-rx1", t + "-rx2"
    create_topic(broker.bootstrap, lit, 1)
    create_topic(broker.bootstrap, rx1, 2)
    create_topic(broker.bootstrap, rx2, 3)
    group = t + "-g"
    regex = t + "-rx.*"

    def count(r):
        return sum(len(ps) for ps in r["assignment"].values())

    a = join(sock, group, "ma", [lit], regex=regex)
    assert (a["error"], a["epoch"], count(a)) == (0, 1, 1)
    r = cgwire.heartbeat(sock, group, member_id="ma", epoch=1)
    assert (r["error"], r["epoch"], count(r)) == (0, 2, 6)
    b = join(sock, group, "mb", [], regex=regex)
    assert (b["error"], b["epoch"], b["assignment"]) == (0, 3, {})
    (g,) = cgwire.describe(sock, [group])
    targets = {m["member_id"]: sum(len(ps) for ps in m["target"].values()) for m in g["members"]}
    assert targets["mb"] > 0 and sum(targets.values()) == 6, targets


def test_static_members(sock, broker, topic_name):
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 1)
    assert join(sock, group, "s1", [t], instance="i1")["error"] == 0
    assert join(sock, group, "s2", [t], instance="i1")["error"] == 111  # UNRELEASED_INSTANCE_ID
    r = cgwire.heartbeat(sock, group, member_id="s1", epoch=-2, instance="i1")
    assert (r["error"], r["member_id"], r["epoch"]) == (0, "s1", -2)
    r = join(sock, group, "s2", [t], instance="i1")
    assert r["error"] == 0 and r["epoch"] == 1 and list(r["assignment"].values()) == [[0]]
    assert cgwire.heartbeat(sock, group, member_id="s1", epoch=-1, instance="i1")["error"] == 82


def test_classic_and_consumer_groups_share_ids(sock, broker, topic_name):
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 1)
    assert join(sock, group, "m1", [t])["error"] == 0

    def call(key, ver, body):
        hdr = struct.pack(">hhih", key, ver, 9, 4) + b"test"
        sock.sendall(wire.frame(hdr + body))
        return wire.recv_frame(sock)[4:]

    def st(x):
        return struct.pack(">h", len(x)) + x.encode()

    # Classic Heartbeat v3 and SyncGroup v3: members of a consumer group are unknown there.
    r = call(12, 3, st(group) + struct.pack(">i", 1) + st("m1") + b"\xff\xff")
    assert struct.unpack_from(">h", r, 4)[0] == 25
    r = call(14, 3, st(group) + struct.pack(">i", 1) + st("m1") + b"\xff\xff" + b"\0\0\0\0")
    assert struct.unpack_from(">h", r, 4)[0] == 25
    # DescribeGroups v4 says Dead; ListGroups v2 lists it with protocol type consumer.
    r = call(15, 4, struct.pack(">i", 1) + st(group) + b"\x00")
    assert r[:8] == b"\0" * 4 + b"\0\0\0\x01" and r[8:10] == b"\0\0"
    assert st("Dead") in r
    r = call(16, 2, b"")
    assert st(group) + st("consumer") in r
    # A consumer group heartbeat to a classic group with members: GROUP_ID_NOT_FOUND.
    classic = group + "-classic"
    proto = st("consumer") + struct.pack(">i", 1) + st("range") + struct.pack(">i", 0)
    body = st(classic) + struct.pack(">ii", 10000, 30000) + st("") + b"\xff\xff" + proto
    r = call(11, 5, body)
    assert struct.unpack_from(">h", r, 4)[0] == 79  # MEMBER_ID_REQUIRED
    mid_off = 4 + 2 + 4
    for _ in range(2):  # protocol name, leader
        mid_off += 2 + struct.unpack_from(">h", r, mid_off)[0]
    n = struct.unpack_from(">h", r, mid_off)[0]
    mid = r[mid_off + 2:mid_off + 2 + n].decode()
    body = st(classic) + struct.pack(">ii", 10000, 30000) + st(mid) + b"\xff\xff" + proto
    assert struct.unpack_from(">h", call(11, 5, body), 4)[0] == 0
    assert join(sock, classic, "m2", [t])["error"] == 69
    (g,) = cgwire.describe(sock, [classic])
    assert g["error"] == 69


def test_api_versions_and_group_version_feature(broker):
    with wire.connect(broker.host, broker.port) as s:
        _, apis = wire.api_versions_v0(s, 1)
    assert apis[68] == (0, 1)
    assert apis[69][0] == 0
    assert cgwire.finalized_features(broker.host, broker.port).get("group.version") == (1, 1)


def test_commit_with_member_epoch(sock, broker, topic_name):
    """OffsetCommit v9 from a member: its current epoch commits; any other
    is STALE_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID."""
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 1)
    r = join(sock, group, "m1", [t])
    assert r["error"] == 0
    epoch = r["epoch"]
    assert cgwire.offset_commit(sock, group, "m1", epoch, t, 0, 5) == 0
    assert cgwire.offset_commit(sock, group, "m1", epoch + 1, t, 0, 6) == 113
    assert cgwire.offset_commit(sock, group, "zz", epoch, t, 0, 6) == 25
    time.sleep(0.1)
    assert cgwire.offset_fetch(sock, group, "m1", epoch, t, 0) == (0, 5)
    assert cgwire.offset_fetch(sock, group, "m1", epoch + 1, t, 0)[0] == 113


def test_records_readable_by_kafka_tools(broker, java_runner, topic_name):
    """The group's records in __consumer_offsets are Kafka's own: its
    DumpLogSegments --offsets-decoder reads every KIP-848 record type."""
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 4)
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        assert cgwire.find_coordinator(s, group) == 0
        assert join(s, group, "ra", [t])["error"] == 0
        assert join(s, group, "rb", [t])["error"] == 0
        assert cgwire.heartbeat(s, group, member_id="ra", epoch=1)["error"] == 0  # revoking
    logs = sorted(str(p) for p in broker.datadir.glob("__consumer_offsets-*/*.log"))
    res = java_runner("kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
                      ",".join(logs), timeout=120)
    assert res.returncode == 0, procs.describe(res)
    mine = [ln for ln in res.stdout.splitlines() if '"groupId":"%s"' % group in ln]
    types = {ln.split('"type":"')[1].split('"')[0] for ln in mine}
    assert {"3", "5", "6", "7", "8"} <= types, mine
    revoking = [ln for ln in mine if '"type":"8"' in ln and '"memberId":"ra"' in ln][-1]
    assert '"memberEpoch":1' in revoking and '"state":1' in revoking, revoking
    assert '"partitionsPendingRevocation":[{' in revoking, revoking


def test_group_survives_restart(broker, topic_name):
    """After a clean restart the group, its members, epochs and assignments
    are back: a member goes on heartbeating at its epoch, new members join.
    Last: it restarts the broker."""
    t = topic_name()
    group = t + "-g"
    create_topic(broker.bootstrap, t, 2)
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        assert cgwire.find_coordinator(s, group) == 0
        r = join(s, group, "m1", [t])
        assert r["error"] == 0
        epoch = r["epoch"]
        assert cgwire.offset_commit(s, group, "m1", epoch, t, 0, 3) == 0
    broker.restart()
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        assert cgwire.find_coordinator(s, group) == 0
        # Kafka loads its groups after it starts: NOT_COORDINATOR (16) or
        # COORDINATOR_LOAD_IN_PROGRESS (14) until then.
        deadline = time.monotonic() + 60
        while True:
            (g,) = cgwire.describe(s, [group])
            if g["error"] not in (14, 16) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert g["error"] == 0 and g["epoch"] == epoch, g
        assert [m["member_id"] for m in g["members"]] == ["m1"]
        r = cgwire.heartbeat(s, group, member_id="m1", epoch=epoch)
        assert r["error"] == 0 and r["epoch"] == epoch
        assert cgwire.offset_fetch(s, group, None, -1, t, 0) == (0, 3)
        r = join(s, group, "m2", [t])
        assert r["error"] == 0 and r["epoch"] > epoch
