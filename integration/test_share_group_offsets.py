"""Share-group offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets
and DeleteShareGroupOffsets through Kafka 4.4.0's own `kafka-share-groups.sh`
(org.apache.kafka.tools.consumer.group.ShareGroupCommand from the 4.4 jars),
with the Java 4.4 KafkaShareConsumer (ShareTool) reading before and after, and
by hand on the wire for the errors Kafka gives to bad input.
"""

import json
import time
import re
import struct
import urllib.error
import urllib.request

import pytest

import procs
import wire
from test_share_groups import BROKER_PROPS as SHARE_PROPS
from test_share_groups import JARS44, fresh, got, hold, share_tool  # noqa: F401

pytestmark = pytest.mark.usefixtures("runnel_only")

METRICS_PORT, CONSOLE_PORT = procs.free_port(), procs.free_port()
BROKER_PROPS = dict(SHARE_PROPS, **{
    "runnel.metrics.listener": "http://127.0.0.1:%d" % METRICS_PORT,
    "runnel.console.listener": "http://127.0.0.1:%d" % CONSOLE_PORT,
})

SGC = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
DESCRIBE, ALTER, DELETE = 90, 91, 92
GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NON_EMPTY_GROUP = 69, 24, 68
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 3, 42

def sgc(broker, *args, check=True):
    """kafka-share-groups.sh of Kafka 4.4.0: (exit code, the lines it printed
    but the log lines)."""
    res = procs.run(["java"] + procs.JAVA_TOOL_OPTS
                    + ["-cp", str(JARS44 / "*"), SGC, "--bootstrap-server", broker.bootstrap]
                    + [str(a) for a in args], timeout=120)
    lines = [l for l in (res.stdout + res.stderr).splitlines()
             if l.strip() and not l.startswith(("\t", "[", "SLF4J"))]
    if check:
        assert res.returncode == 0, procs.describe(res)
    return res.returncode, lines


def table(lines, header):
    """The rows (split on spaces) under the line starting with header."""
    rows, on = [], False
    for l in lines:
        if l.startswith(header):
            on = True
        elif on and l.split():
            rows.append(l.split())
    return rows


def consumed_group(tool, broker, n_read, n_more):
    """A topic with n_read records a share group read and acknowledged, then
    n_more records nobody read."""
    topic, group = fresh("sgo"), fresh("sgo")
    tool.run("produce", broker.bootstrap, topic, "r", n_read)
    tool.run("earliest", broker.bootstrap, group)
    recs = got(tool.run("consume", broker.bootstrap, topic, group, "implicit", n_read, 60))
    assert sorted(r[0] for r in recs) == list(range(n_read))
    if n_more:
        tool.run("produce", broker.bootstrap, topic, "u", n_more)
    return topic, group


def test_describe_shows_start_offset_and_lag(broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 20, 10)
    _, lines = sgc(broker, "--describe", "--group", group)
    assert table(lines, "GROUP") == [[group, topic, "0", "20", "10"]], lines
    _, lines = sgc(broker, "--list")
    assert group in lines


def test_reset_offsets_moves_the_start_and_redelivers_from_it(broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 20, 10)
    _, lines = sgc(broker, "--reset-offsets", "--to-offset", 25, "--execute", "--topic", topic,
                   "--group", group)
    assert table(lines, "GROUP") == [[group, topic, "0", "25"]], lines
    _, lines = sgc(broker, "--describe", "--group", group)
    assert table(lines, "GROUP") == [[group, topic, "0", "25", "5"]], lines
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 5, 30))
    assert sorted(r[0] for r in recs) == list(range(25, 30))
    _, lines = sgc(broker, "--reset-offsets", "--to-earliest", "--execute", "--topic", topic,
                   "--group", group)
    _, lines = sgc(broker, "--describe", "--group", group)
    assert table(lines, "GROUP") == [[group, topic, "0", "0", "30"]], lines
    recs = got(share_tool.run("consume", broker.bootstrap, topic, group, "implicit", 30, 60))
    assert sorted(r[0] for r in recs) == list(range(30))


def test_reset_and_delete_are_refused_while_the_group_has_members(broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 5, 5)
    p, held = hold(share_tool, broker, topic, group, 5)
    try:
        assert len(held) == 5
        code, lines = sgc(broker, "--reset-offsets", "--to-earliest", "--execute", "--topic",
                          topic, "--group", group, check=False)
        assert "not empty" in " ".join(lines).lower() or code != 0, lines
        _, lines = sgc(broker, "--describe", "--group", group)
        assert table(lines, "GROUP")[0][3] == "5", lines  # unchanged
        code, lines = sgc(broker, "--delete-offsets", "--topic", topic, "--group", group,
                          check=False)
        assert "not empty" in " ".join(lines).lower() or code != 0, lines
    finally:
        procs.stop_process(p)


def test_delete_offsets_forgets_the_topic(broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 10, 0)
    _, lines = sgc(broker, "--delete-offsets", "--topic", topic, "--group", group)
    assert [topic, "Successful"] in table(lines, "TOPIC"), lines
    _, lines = sgc(broker, "--describe", "--group", group)
    assert any("has no offset information" in l for l in lines), lines
    _, lines = sgc(broker, "--delete-offsets", "--topic", topic, "--group", group, check=False)
    assert any("There is no offset information to delete." in l for l in lines), lines


# ---- on the wire ------------------------------------------------------------

def describe(sock, groups, cid, version=1):
    """groups: [(group, None | [(topic, [partitions])])] -> per group
    (error, message, [(topic, [(partition, start, epoch, lag, error)])])."""
    def group(g, topics):
        t = None if topics is None else [
            wire.compact_string(name) + wire.compact_array([struct.pack(">i", p) for p in ps])
            + b"\x00" for name, ps in topics]
        return wire.compact_string(g) + wire.compact_array(t) + b"\x00"
    body = wire.compact_array([group(g, t) for g, t in groups]) + b"\x00"
    r = wire.flex_call(sock, DESCRIBE, version, body, cid)
    r.take(">i")

    def part(r):
        idx, start, epoch = r.take(">i"), r.take(">q"), r.take(">i")
        lag = r.take(">q") if version >= 1 else None
        err = r.take(">h")
        r.string()
        r.skip_tags()
        return idx, start, epoch, lag, err

    def topic(r):
        name = r.string()
        r.uuid()
        parts = r.array(part)
        r.skip_tags()
        return name, parts

    def grp(r):
        r.string()
        topics = r.array(topic)
        err = r.take(">h")
        msg = r.string()
        r.skip_tags()
        return err, msg, topics
    return r.array(grp)


def alter(sock, group, topics, cid):
    """topics: [(topic, [(partition, start)])] -> (error, message, [[errors]])."""
    t = [wire.compact_string(name)
         + wire.compact_array([struct.pack(">iq", p, o) + b"\x00" for p, o in ps]) + b"\x00"
         for name, ps in topics]
    body = wire.compact_string(group) + wire.compact_array(t) + b"\x00"
    r = wire.flex_call(sock, ALTER, 0, body, cid)
    r.take(">i")
    err, msg = r.take(">h"), r.string()

    def topic(r):
        r.string()
        r.uuid()
        errs = r.array(lambda r: (r.take(">i"), r.take(">h"), r.string(), r.skip_tags())[1])
        r.skip_tags()
        return errs
    return err, msg, r.array(topic)


def delete(sock, group, topics, cid):
    body = (wire.compact_string(group)
            + wire.compact_array([wire.compact_string(t) + b"\x00" for t in topics]) + b"\x00")
    r = wire.flex_call(sock, DELETE, 0, body, cid)
    r.take(">i")
    err, msg = r.take(">h"), r.string()
    return err, msg, r.array(lambda r: (r.string(), r.uuid(), r.take(">h"), r.string(),
                                        r.skip_tags())[2])


@pytest.fixture()
def sock(broker):
    s = wire.connect(broker.host, broker.port)
    yield s
    s.close()


def test_wire_api_versions_advertise_kafka_44s_ranges(sock):
    err, apis = wire.api_versions_v0(sock, 1)
    assert err == 0
    assert apis[DESCRIBE] == (0, 1) and apis[ALTER] == (0, 0) and apis[DELETE] == (0, 0)


def test_wire_describe_errors(sock, broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 4, 2)
    [(err, msg, _)] = describe(sock, [("no-such-" + group, None)], 2)
    assert err == GROUP_ID_NOT_FOUND and "not found" in msg
    [(err, _, _)] = describe(sock, [("", None)], 3)
    assert err == INVALID_GROUP_ID
    [(err, _, topics)] = describe(sock, [(group, [(topic, [0, 7]), ("nope-" + topic, [0])])], 4)
    assert err == 0
    assert topics[0] == (topic, [(0, 4, 0, 2, 0), (7, -1, -1, -1, UNKNOWN_TOPIC_OR_PARTITION)])
    assert topics[1][1] == [(0, -1, -1, -1, UNKNOWN_TOPIC_OR_PARTITION)]
    [(err, _, topics)] = describe(sock, [(group, None)], 5, version=0)
    assert err == 0 and topics == [(topic, [(0, 4, 0, None, 0)])]


def test_wire_alter_and_delete_errors(sock, broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 4, 0)
    assert alter(sock, "", [(topic, [(0, 0)])], 1)[0] == INVALID_GROUP_ID
    err, _, res = alter(sock, group, [(topic, [(0, -5), (3, 0)]), ("nope-" + topic, [(0, 0)])], 2)
    assert err == 0 and res == [[INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION],
                                [UNKNOWN_TOPIC_OR_PARTITION]]
    [(_, _, topics)] = describe(sock, [(group, None)], 3)
    assert topics == [(topic, [(0, 4, 0, 0, 0)])]  # nothing changed
    # a group that does not exist is made by AlterShareGroupOffsets, as Kafka does
    newg = fresh("sgo-new")
    assert alter(sock, newg, [(topic, [(0, 1)])], 4) == (0, None, [[0]])
    [(_, _, topics)] = describe(sock, [(newg, None)], 5)
    assert topics == [(topic, [(0, 1, 0, 3, 0)])]
    assert delete(sock, "", [topic], 6)[0] == INVALID_GROUP_ID
    assert delete(sock, "no-such-" + group, [topic], 7)[0] == GROUP_ID_NOT_FOUND
    assert delete(sock, newg, [topic, "nope-" + topic], 8) == (
        0, None, [0, UNKNOWN_TOPIC_OR_PARTITION])


# ---- metrics and console ------------------------------------------------------

def http_get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text, name, **labels):
    """The value of the series name{labels} in a /metrics text, or None."""
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % re.escape(name), line)
        if m and dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1))) == labels:
            return float(m.group(2))
    return None


def test_share_group_lag_on_metrics_and_in_the_console(broker, share_tool):
    topic, group = consumed_group(share_tool, broker, 12, 7)
    _, text = http_get("http://127.0.0.1:%d/metrics" % METRICS_PORT)
    labels = dict(sharegroup=group, topic=topic, partition="0")
    assert metric(text, "kafka_sharegroup_lag", **labels) == 7, text
    assert metric(text, "kafka_sharegroup_start_offset", **labels) == 12
    assert metric(text, "kafka_sharegroup_members", sharegroup=group) == 0
    assert metric(text, "kafka_sharegroup_lag_sum", sharegroup=group) == 7
    assert "# TYPE kafka_sharegroup_lag gauge" in text

    base = "http://127.0.0.1:%d/" % CONSOLE_PORT
    status, body = http_get(base + "api/groups")
    assert status == 200
    [row] = [g for g in json.loads(body)["groups"] if g["groupId"] == group]
    assert (row["type"], row["state"], row["members"], row["lag"]) == ("share", "Empty", 0, 7)
    p, held = hold(share_tool, broker, topic, group, 3)
    try:
        assert len(held) == 3
        status, body = http_get(base + "api/groups/" + group)
        g = json.loads(body)
        assert status == 200 and g["type"] == "share" and g["empty"] is False, g
        assert g["members"][0]["assignment"] == [{"topic": topic, "partitions": [0]}]
        [o] = g["offsets"]
        assert (o["topic"], o["partition"], o["committed"], o["high"], o["lag"]) == (
            topic, 0, 12, 19, 7)  # held, not acknowledged: still lag
        _, text = http_get("http://127.0.0.1:%d/metrics" % METRICS_PORT)
        assert metric(text, "kafka_sharegroup_members", sharegroup=group) == 1
    finally:
        procs.stop_process(p)


# ---- ACLs ------------------------------------------------------------------------

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
GROUP_RES, TOPIC_RES, LITERAL, ALLOW = 3, 2, 3, 3
OP_READ, OP_DELETE, OP_DESCRIBE = 3, 6, 8


@pytest.fixture(scope="module")
def authz(target, tmp_path_factory):
    from security import sasl_plain_broker
    from test_acls import USERS, authz_props
    base = tmp_path_factory.mktemp("share-offsets-authz")
    yield from procs.serving(sasl_plain_broker(target, base / "data", USERS, authz_props()))


def test_acls_are_checked_as_kafka_checks_them(authz, share_tool):
    from security import plain_login
    from test_acls import USERS, create_acls
    topic, group = fresh("sgo-acl"), fresh("sgo-acl")
    share_tool.run("produce", authz.bootstrap, topic, "a", 3)  # PLAINTEXT: a super user
    admin = wire.connect(authz.host, authz.port)
    assert alter(admin, group, [(topic, [(0, 1)])], 1) == (0, None, [[0]])
    alice = plain_login(authz, "alice", USERS["alice"])

    def grant(rtype, name, op):
        create_acls(admin, 1, [(rtype, name, LITERAL, "User:alice", "*", op, ALLOW)])
        time.sleep(0.3)

    # nothing granted: the group's ACL first
    [(err, _, _)] = describe(alice, [(group, [(topic, [0])])], 2)
    assert err == GROUP_AUTHORIZATION_FAILED
    assert alter(alice, group, [(topic, [(0, 0)])], 3)[0] == GROUP_AUTHORIZATION_FAILED
    assert delete(alice, group, [topic], 4)[0] == GROUP_AUTHORIZATION_FAILED
    # DESCRIBE on the group, nothing on the topic
    grant(GROUP_RES, group, OP_DESCRIBE)
    [(err, _, topics)] = describe(alice, [(group, [(topic, [0])])], 5)
    assert err == 0 and topics[0][1][0][4] == TOPIC_AUTHORIZATION_FAILED
    [(err, _, topics)] = describe(alice, [(group, None)], 6)
    assert err == 0 and topics == []  # what alice may not describe is left out
    assert alter(alice, group, [(topic, [(0, 0)])], 7)[0] == GROUP_AUTHORIZATION_FAILED
    # READ on the group: alter wants READ on the topic; DELETE on the group for delete
    grant(GROUP_RES, group, OP_READ)
    assert alter(alice, group, [(topic, [(0, 0)])], 8) == (0, None, [[TOPIC_AUTHORIZATION_FAILED]])
    assert delete(alice, group, [topic], 9)[0] == GROUP_AUTHORIZATION_FAILED
    grant(GROUP_RES, group, OP_DELETE)
    assert delete(alice, group, [topic], 10) == (0, None, [TOPIC_AUTHORIZATION_FAILED])
    # READ on the topic (which implies DESCRIBE): all three go through
    grant(TOPIC_RES, topic, OP_READ)
    assert alter(alice, group, [(topic, [(0, 2)])], 11) == (0, None, [[0]])
    [(err, _, topics)] = describe(alice, [(group, None)], 12)
    assert err == 0 and topics == [(topic, [(0, 2, 0, 1, 0)])]
    assert delete(alice, group, [topic], 13) == (0, None, [0])
    alice.close()
    admin.close()
