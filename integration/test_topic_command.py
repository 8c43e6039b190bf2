"""Kafka's own topic tool, org.apache.kafka.tools.TopicCommand (kafka-topics.sh),
run with `java -cp 'jars/*'`: --create, --list, --describe, --alter, --delete."""

import re
import time

import pytest

TOOL = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture(scope="module")
def topics(kafka_jars, broker):
    import procs

    def run(*args, timeout=120):
        return procs.run_java(TOOL, ["--bootstrap-server", broker.bootstrap] + list(args),
                              timeout=timeout)

    return run


def ok(res):
    import procs

    assert res.returncode == 0, procs.describe(res)
    return res.stdout


def eventually(fn, timeout=15.0, interval=0.3):
    """Call fn until it stops raising AssertionError (Kafka's metadata may trail a create)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(interval)


def describe(topics, name):
    """Parse --describe output: (header fields, [partition field dicts])."""
    out = ok(topics("--describe", "--topic", name))
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("Topic: %s\t" % name), out
    header = dict(re.findall(r"(\w+): ?([^\t]*)", lines[0]))
    parts = [dict(re.findall(r"(\w+): ?([^\t]*)", ln)) for ln in lines[1:]]
    return header, parts


def test_create_list_describe_alter_delete(topics, topic_name):
    name = topic_name()
    out = ok(topics("--create", "--topic", name, "--partitions", "3",
                    "--replication-factor", "1", "--config", "retention.ms=3600000"))
    assert "Created topic %s." % name in out

    eventually(lambda: _assert_listed(topics, name))

    header, parts = eventually(lambda: describe(topics, name))
    assert header["PartitionCount"] == "3"
    assert header["ReplicationFactor"] == "1"
    assert header["TopicId"] and header["TopicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert "retention.ms=3600000" in header["Configs"].split(",")
    assert [p["Partition"] for p in parts] == ["0", "1", "2"]
    leaders = {p["Leader"] for p in parts}
    assert len(leaders) == 1 and leaders != {"none"} and leaders != {"-1"}
    for p in parts:
        assert p["Replicas"] == p["Leader"] and p["Isr"] == p["Leader"]

    ok(topics("--alter", "--topic", name, "--partitions", "5"))
    header, parts = eventually(lambda: _describe_with_count(topics, name, "5"))
    assert [p["Partition"] for p in parts] == ["0", "1", "2", "3", "4"]

    ok(topics("--delete", "--topic", name))
    eventually(lambda: _assert_not_listed(topics, name))


def _assert_listed(topics, name):
    assert name in ok(topics("--list")).split()


def _assert_not_listed(topics, name):
    assert name not in ok(topics("--list")).split()


def _describe_with_count(topics, name, count):
    header, parts = describe(topics, name)
    assert header["PartitionCount"] == count, header
    return header, parts


def test_create_existing_fails(topics, topic_name):
    name = topic_name()
    ok(topics("--create", "--topic", name, "--partitions", "1"))
    res = topics("--create", "--topic", name, "--partitions", "1")
    assert res.returncode != 0
    assert "already exists" in res.stdout + res.stderr
    # --if-not-exists turns it into a no-op.
    ok(topics("--create", "--topic", name, "--partitions", "1", "--if-not-exists"))


def test_alter_cannot_shrink_partitions(topics, topic_name):
    name = topic_name()
    ok(topics("--create", "--topic", name, "--partitions", "2"))
    eventually(lambda: describe(topics, name))
    res = topics("--alter", "--topic", name, "--partitions", "1")
    assert res.returncode != 0
    assert "InvalidPartitionsException" in res.stdout + res.stderr


def test_create_invalid_name_fails(topics):
    res = topics("--create", "--topic", "bad!", "--partitions", "1")
    assert res.returncode != 0
    assert "InvalidTopicException" in res.stdout + res.stderr


def test_create_invalid_replication_factor_fails(topics, topic_name):
    res = topics("--create", "--topic", topic_name(), "--replication-factor", "3")
    assert res.returncode != 0
    assert "InvalidReplicationFactorException" in res.stdout + res.stderr


def test_delete_missing_fails(topics, topic_name):
    res = topics("--delete", "--topic", topic_name("missing"))
    assert res.returncode != 0
    assert "does not exist" in res.stdout + res.stderr
