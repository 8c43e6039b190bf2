"""KIP-1071 streams groups (group.protocol=streams) with Kafka Streams 4.4.0.

integration/java/StreamsApp.java (the word count of test_kafka_streams.py),
compiled against integration/.deps/jars-4.4 and run with
-Dstreams.props=group.protocol=streams: one instance counts words end to end
with the broker's assignment; two instances share the tasks (each holds
some, together all, none twice); when one leaves the other takes every task
over; Kafka's kafka-streams-groups.sh (StreamsGroupCommand) describes the
group, its members and their tasks; ListGroups shows it as a streams group
and DeleteGroups deletes it once empty.

The raw-wire story (sgwire.py) runs against Runnel and against a real Kafka
4.4.0 node (combined mode, from jars-4.4) and the answers must be equal: the
join delayed by the initial rebalance delay and the tasks after it, the
describe, DescribeGroups v6, an unknown member, a member epoch ahead, task
lists half sent, joins without a topology or with tasks, an empty member id,
MISSING_SOURCE_TOPICS, offset commits at the member's, a stale and an
unknown member's epoch, and the leave. One deliberate difference: a
repeated subtopology id (Runnel STREAMS_INVALID_TOPOLOGY, Kafka
UNKNOWN_SERVER_ERROR).
"""

import os
import re
import subprocess
import time
import types
import uuid

import pytest

import cgwire
import kraft
import procs
import sgwire
import test_kafka_streams as tks
import wire
from roundtrip import admin, create_topic
from test_kafka44_admin_wire import describe_groups
from test_kafka_streams import ck, reap_apps  # noqa: F401 (fixtures; reap_apps kills leftovers)

pytestmark = pytest.mark.usefixtures("runnel_only")

BROKER_PROPS = {
    "group.streams.session.timeout.ms": "8000",
    "group.streams.heartbeat.interval.ms": "500",
}
STREAMS_PROPS = "group.protocol=streams"
JARS44 = procs.DEPS / "jars-4.4"
KAFKA44_PORT = 19730
KAFKA44_CONTROLLER_PORT = 19731

UNKNOWN_MEMBER_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 25, 42, 69
FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, STREAMS_INVALID_TOPOLOGY = 110, 113, 130
MISSING_SOURCE_TOPICS, ASSIGNMENT_DELAYED = 1, 5
RETRIABLE = (14, 15, 16)  # coordinator loading, not available, not the coordinator
INITIAL_DELAY_S = 3  # group.streams.initial.rebalance.delay.ms, Kafka's default


def fresh(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


# ---- the applications -------------------------------------------------------


@pytest.fixture(scope="module")
def classes44(tmp_path_factory):
    """StreamsApp compiled against the Kafka Streams 4.4.0 jars."""
    if not any(JARS44.glob("kafka-streams-4.4*.jar")):
        pytest.skip("no kafka-streams 4.4 jar in %s (bash .ci/install-deps --test)" % JARS44)
    classes = tmp_path_factory.mktemp("streams44")
    src = procs.REPO / "integration" / "java" / "StreamsApp.java"
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", str(JARS44 / "*"), "-d", classes,
               src], timeout=180, check=True)
    return classes


class Run44(tks.Run):
    """test_kafka_streams' word count, its instances on the 4.4 jars with the
    streams protocol; each prints "tasks ..." when its active tasks change."""

    def start(self, instance=""):
        state_dir = self.state_dir.with_name(self.state_dir.name + instance)
        args = [self.broker.bootstrap, self.app_id, self.input, self.output,
                self.window_output, self.guarantee, state_dir]
        return tks.App(self.classes, self.tmp_path / ("streams-app%s.log" % instance), args,
                       classpath="%s%s%s" % (self.classes, os.pathsep, JARS44 / "*"),
                       jvm_opts=["-Dstreams.props=" + STREAMS_PROPS])


def tasks_of(app):
    """The app's latest active tasks ("0_1" ...), or None before any."""
    got = None
    for line in app.lines():
        if line.startswith("tasks"):
            got = set(line.split()[1:])
    return got


def all_tasks(run):
    """Every task of the word count: 3 subtopologies x tks.PARTITIONS."""
    return {"%d_%d" % (s, p) for s in range(3) for p in range(tks.PARTITIONS)}


def wait_for(what, cond, timeout=90, apps=()):
    deadline = time.monotonic() + timeout
    while True:
        for a in apps:
            a.check_alive()
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, "%s not reached in %ss\n%s" % (
            what, timeout, "\n".join(a.output() for a in apps))
        time.sleep(0.3)


def streams_groups_tool(broker, *args, timeout=120):
    cls = "org.apache.kafka.tools.streams.StreamsGroupCommand"
    res = subprocess.run(["java", "-cp", str(JARS44 / "*"), cls, "--bootstrap-server",
                          broker.bootstrap] + list(args), capture_output=True, text=True,
                         timeout=timeout)
    return res


def tool_members(out, group):
    """{member id: {"sub_partition", ...}} of the tool's --members table."""
    members = {}
    for line in out.splitlines():
        f = line.split(None, 4)
        if len(f) < 4 or f[0] != group:
            continue
        active = line.split("ACTIVE:", 1)[1].split("STANDBY")[0] if "ACTIVE:" in line else ""
        members[f[1]] = {"%s_%s" % (sub, p) for sub, parts in re.findall(r"(\d+):\[([\d,]*)\]",
                                                                         active)
                         for p in parts.split(",") if p}
    return members


def test_word_count_one_instance(broker, ck, classes44, tmp_path, topic_name):
    run = Run44(broker, classes44, tmp_path, topic_name, "at_least_once")
    app = run.start()
    run.feed(ck, 60)
    run.wait_counts(ck, app)
    assert wait_for("all tasks", lambda: tasks_of(app) == all_tasks(run), apps=[app])
    with wire.connect(broker.host, broker.port) as s:
        (g,) = sgwire.describe(s, [run.app_id])
    assert g["error"] == 0 and g["state"] == "Stable", g
    assert len(g["members"]) == 1
    # the internal topics the broker made, with the partitions the topology asks
    for t in ("%s-by-word-repartition" % run.app_id, "%s-counts-changelog" % run.app_id):
        md = admin(broker.bootstrap).list_topics(t, timeout=10).topics[t]
        assert md.error is None and len(md.partitions) == tks.PARTITIONS, t
    app.stop()


def test_two_instances_share_then_one_takes_over(broker, ck, classes44, tmp_path, topic_name):
    run = Run44(broker, classes44, tmp_path, topic_name, "at_least_once")
    a = run.start()
    wait_for("a running", lambda: tasks_of(a) == all_tasks(run), apps=[a])
    b = run.start("b")

    def shared():
        ta, tb = tasks_of(a), tasks_of(b)
        return ta and tb and not (ta & tb) and ta | tb == all_tasks(run)

    wait_for("tasks shared", shared, apps=[a, b])
    run.feed(ck, 40)
    run.wait_counts(ck, a)

    # Kafka's tool: one line per member, "ACTIVE: 0:[0,1]; 1:[1];" ...
    tool = streams_groups_tool(broker, "--describe", "--group", run.app_id, "--members")
    assert tool.returncode == 0, tool.stdout + tool.stderr
    members = tool_members(tool.stdout, run.app_id)
    assert sorted(members.values(), key=sorted) == sorted([tasks_of(a), tasks_of(b)], key=sorted), \
        tool.stdout
    with wire.connect(broker.host, broker.port) as s:
        (g,) = sgwire.describe(s, [run.app_id])
    assert g["state"] == "Stable" and {m["member_id"] for m in g["members"]} == set(members)

    b.stop()
    wait_for("a takes over", lambda: tasks_of(a) == all_tasks(run), apps=[a])
    run.feed(ck, 20)
    run.wait_counts(ck, a)
    a.stop()


def test_list_and_delete_groups(broker, classes44, tmp_path, topic_name):
    run = Run44(broker, classes44, tmp_path, topic_name, "at_least_once")
    app = run.start()
    wait_for("running", lambda: tasks_of(app) == all_tasks(run), apps=[app])
    listed = streams_groups_tool(broker, "--list")
    assert listed.returncode == 0 and run.app_id in listed.stdout.split(), listed.stdout
    a = admin(broker.bootstrap)
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        a.delete_consumer_groups([run.app_id])[run.app_id].result(30)
    app.stop()
    # a closing Streams client leaves the group (else its session expires)
    deadline = time.monotonic() + 30
    while True:
        res = streams_groups_tool(broker, "--delete", "--group", run.app_id)
        with wire.connect(broker.host, broker.port) as s:
            (g,) = sgwire.describe(s, [run.app_id])
        if g["error"] == GROUP_ID_NOT_FOUND:
            break
        assert time.monotonic() < deadline, res.stdout + res.stderr
        time.sleep(1)
    listed = streams_groups_tool(broker, "--list")
    assert run.app_id not in listed.stdout.split(), listed.stdout


# ---- raw wire, compared with Kafka 4.4.0 ----------------------------------------


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory):
    if not kraft.jars_present():
        pytest.skip("Kafka 4.4.0 jars not in %s" % kraft.JARS_44)
    with kraft.single_node(tmp_path_factory.mktemp("kafka44"), KAFKA44_PORT,
                           KAFKA44_CONTROLLER_PORT) as k:
        yield k


def wire_story(host, port, bootstrap):
    """The same requests on one node; returns what each answered."""
    src = fresh("sg-src")
    create_topic(bootstrap, src, 2)
    groups = {k: fresh("sg-" + k) for k in ("main", "none", "bad", "miss")}
    topo = sgwire.topology(1, [sgwire.subtopology("0", sources=[src])])
    got = {}
    with wire.connect(host, port) as s:
        for g in groups.values():
            assert cgwire.find_coordinator(s, g) == 0  # Kafka makes __consumer_offsets
        group = groups["main"]
        deadline = time.monotonic() + 30
        while True:  # a fresh Kafka loads its coordinator after FindCoordinator answered
            r = sgwire.heartbeat(s, group, "m1", 0, topo)
            if r["error"] not in RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        got["join"] = (r["error"], r["epoch"], r["status"], r["active"])
        epoch = r["epoch"]
        time.sleep(INITIAL_DELAY_S + 0.5)
        r = sgwire.heartbeat(s, group, "m1", epoch, active={}, standby={}, warmup={})
        got["after the delay"] = (r["error"], r["epoch"], r["status"], r["active"])
        epoch = r["epoch"]
        (d,) = sgwire.describe(s, [group])
        got["describe"] = (d["error"], d["state"], d["epoch"], d["assignment_epoch"],
                           repr(d["topology"]).replace(src, "SRC"),
                           [(m["member_id"], m["epoch"], m["assignment"], m["target"])
                            for m in d["members"]])
        node = types.SimpleNamespace(host=host, port=port)
        got["describe groups v6"] = [(e, m.replace(group, "G"), state, ptype)
                                     for e, m, _, state, ptype in describe_groups(node, [group], 6)]
        got["unknown member"] = sgwire.heartbeat(s, group, "nobody", epoch)["error"]
        got["one task list"] = sgwire.heartbeat(s, group, "m1", epoch, active={})["error"]
        got["epoch ahead"] = sgwire.heartbeat(s, group, "m1", epoch + 5, active={}, standby={},
                                              warmup={})["error"]
        got["no group"] = sgwire.heartbeat(s, groups["none"], "m1", 3)["error"]
        got["join without topology"] = sgwire.heartbeat(s, groups["bad"], "m1", 0)["error"]
        got["join with tasks"] = sgwire.heartbeat(s, groups["bad"], "m1", 0, topo,
                                                  active={"0": [0]})["error"]
        got["empty member id"] = sgwire.heartbeat(s, groups["bad"], "", 0, topo)["error"]
        bad = sgwire.topology(1, [sgwire.subtopology("0", sources=[src]),
                                  sgwire.subtopology("0", sources=[src])])
        got["duplicate subtopology"] = sgwire.heartbeat(s, groups["bad"], "m1", 0, bad)["error"]
        absent = fresh("sg-absent")
        missing = sgwire.topology(1, [sgwire.subtopology("0", sources=[absent])])
        r = sgwire.heartbeat(s, groups["miss"], "m1", 0, missing)
        got["missing source"] = (r["error"], sorted(c for c, _ in r["status"]), r["active"],
                                 [absent in d for c, d in r["status"] if c == MISSING_SOURCE_TOPICS])
        got["commit"] = cgwire.offset_commit(s, group, "m1", epoch, src, 0, 5)
        got["commit stale"] = cgwire.offset_commit(s, group, "m1", epoch - 1, src, 0, 5)
        got["commit unknown"] = cgwire.offset_commit(s, group, "mX", epoch, src, 0, 5)
        r = sgwire.heartbeat(s, group, "m1", -1)
        got["leave"] = (r["error"], r["member_id"], r["epoch"], r["interval"])
    return got


def test_wire_errors_as_kafka_44(broker, kafka44):
    ours = wire_story(broker.host, broker.port, broker.bootstrap)
    theirs = wire_story(kafka44.host, kafka44.port, "%s:%d" % (kafka44.host, kafka44.port))
    # Kafka 4.4.0 fails a repeated subtopology id with UNKNOWN_SERVER_ERROR
    assert (ours.pop("duplicate subtopology"), theirs.pop("duplicate subtopology")) == (
        STREAMS_INVALID_TOPOLOGY, -1)
    assert ours == theirs
    delayed = [(ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.")]
    assert ours["join"] == (0, 1, delayed, {})
    assert ours["after the delay"] == (0, 2, [], {"0": [0, 1]})
    assert ours["describe"][:4] == (0, "Stable", 2, 2)
    assert ours["describe groups v6"] == [(GROUP_ID_NOT_FOUND, "Group G is not a classic group.",
                                           "Dead", "")]
    assert ours["unknown member"] == UNKNOWN_MEMBER_ID
    assert ours["one task list"] == INVALID_REQUEST
    assert ours["epoch ahead"] == FENCED_MEMBER_EPOCH
    assert ours["no group"] == GROUP_ID_NOT_FOUND
    assert ours["join without topology"] == ours["join with tasks"] == INVALID_REQUEST
    assert ours["commit stale"] == STALE_MEMBER_EPOCH
    assert ours["commit unknown"] == UNKNOWN_MEMBER_ID
    assert ours["leave"] == (0, "m1", -1, 0)
    # the status names the missing topic
    assert ours["missing source"] == (0, [MISSING_SOURCE_TOPICS, ASSIGNMENT_DELAYED], {}, [True])
