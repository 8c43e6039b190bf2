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

import pytest

import procs
from test_share_groups import BROKER_PROPS as SHARE_PROPS
from test_share_groups import JARS44, fresh, got, share_tool  # noqa: F401
from test_share_group_offsets import sgc

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
