"""kcat (librdkafka from Debian) metadata listing: `kcat -L`."""

import json

import pytest

import procs
from conftest import require_module
from procs import wait_until


def kcat_json(kcat, broker, *args):
    res = procs.run([kcat, "-b", broker.bootstrap, "-m", "10", "-L", "-J"] + list(args),
                    timeout=60)
    assert res.returncode == 0, procs.describe(res)
    return json.loads(res.stdout)


def test_lists_broker_with_advertised_address(kcat, broker):
    md = kcat_json(kcat, broker)
    assert len(md["brokers"]) == 1, md
    (b,) = md["brokers"]
    assert b["name"] == broker.bootstrap
    assert md["controllerid"] == b["id"]
    assert md["originating_broker"]["id"] == b["id"]


def test_plain_listing(kcat, broker):
    res = procs.run([kcat, "-b", broker.bootstrap, "-m", "10", "-L"], timeout=60)
    assert res.returncode == 0, procs.describe(res)
    assert " 1 brokers:" in res.stdout
    assert "at %s (controller)" % broker.bootstrap in res.stdout


@pytest.fixture(scope="module")
def created(broker):
    """Two topics made with confluent-kafka's admin client for kcat to list."""
    require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = {"it-kcat-three": 3, "it-kcat-one": 1}
    futs = admin.create_topics([NewTopic(n, p, 1) for n, p in topics.items()],
                               request_timeout=15)
    for f in futs.values():
        assert f.result(timeout=30) is None
    wait_until(lambda: set(topics) <= set(admin.list_topics(timeout=10).topics), 10,
               what="topics listed")
    return topics


def test_lists_created_topics(kcat, broker, created):
    md = kcat_json(kcat, broker)
    node = md["brokers"][0]["id"]
    by_name = {t["topic"]: t for t in md["topics"]}
    for name, count in created.items():
        assert name in by_name, sorted(by_name)
        t = by_name[name]
        assert "error" not in t, t
        parts = sorted(t["partitions"], key=lambda p: p["partition"])
        assert [p["partition"] for p in parts] == list(range(count))
        for p in parts:
            assert p["leader"] == node
            assert [r["id"] for r in p["replicas"]] == [node]
            assert [r["id"] for r in p["isrs"]] == [node]


def test_lists_one_topic(kcat, broker, created):
    md = kcat_json(kcat, broker, "-t", "it-kcat-three")
    assert [t["topic"] for t in md["topics"]] == ["it-kcat-three"]
    assert len(md["topics"][0]["partitions"]) == 3
