"""franz-go (kgo + kadm, integration/go): admin, produce, consume, groups,
offsets and transactions.

franz-go asks for the newest version of every API the broker advertises
(Fetch by topic ID, Produce v11+, Metadata v12+, ListOffsets v8+, ...), so
these tests reach request versions the other clients never send. Its
producer is idempotent with acks=all unless told otherwise, and its default
partitioner hashes keys with murmur2 as the Java client does. Records are
read back with franz-go itself, each partition from its start (no group),
except in the group tests.
"""

import itertools
import time

import pytest

from goclients import (acks_of, check_group_result, check_list_offsets, create, got_records,
                       offsets, write_records)
from procs import wait_until
from roundtrip import CODECS, Rec, assert_stored_codec, check_roundtrip, make_records

PARTITIONS = 3
COUNT = 200
_ids = itertools.count(1)


def produce(go_runner, bootstrap, topic, records, tmp_path, codec="none", *flags):
    path = write_records(tmp_path / "records.json", records)
    return acks_of(go_runner("franz", "produce", *flags, bootstrap, topic, codec, path))


def consume(go_runner, bootstrap, topic, count, *flags, partitions=PARTITIONS):
    return got_records(go_runner("franz", "consume", *flags, bootstrap, topic, str(partitions),
                                 str(count)))


def test_franz_topic_admin(go_runner, broker, topic_name):
    """CreateTopics returns the topic ID that Metadata then reports; a second
    create is refused; DeleteTopics removes the topic from Metadata."""
    topic = topic_name()
    md = create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    assert md["id"].strip("A") and md["id"] == go_runner("franz", "metadata", broker.bootstrap,
                                                        topic)["id"]
    again = go_runner("franz", "create", broker.bootstrap, topic, "1")
    assert "TOPIC_ALREADY_EXISTS" in again["error"], again
    assert go_runner("franz", "delete", broker.bootstrap, topic)["error"] is None

    def gone():
        err = go_runner("franz", "metadata", broker.bootstrap, topic)["error"]
        return err is not None and "UNKNOWN_TOPIC_OR_PARTITION" in err

    wait_until(gone, 20, interval=0.2, what="%s gone from metadata" % topic)


@pytest.mark.parametrize("codec", CODECS)
def test_franz_produce_consume(go_runner, broker, topic_name, tmp_path, codec):
    """Idempotent acks=all produce in every codec, read back by partition.
    franz-go sends a batch uncompressed when compressing does not shrink it."""
    topic = topic_name(codec)
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    records = make_records("franz-" + codec, COUNT)
    acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, codec)
    got = consume(go_runner, broker.bootstrap, topic, len(records))
    check_roundtrip(records, got, PARTITIONS, acks)
    assert_stored_codec(broker, topic, got, codec, plain_allowed=True)


@pytest.mark.parametrize("acks", ["leader", "all"])
def test_franz_produce_not_idempotent(go_runner, broker, topic_name, tmp_path, acks):
    topic = topic_name(acks)
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    records = make_records("franz-plain-" + acks, COUNT)
    got_acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, "lz4",
                       "-idempotent=false", "-acks", acks)
    check_roundtrip(records, consume(go_runner, broker.bootstrap, topic, len(records)),
                    PARTITIONS, got_acks)


def test_franz_group(go_runner, broker, topic_name, tmp_path):
    """A lone group member is assigned every partition, reads every record
    once, and its commits are the end offsets."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    records = make_records("franz-group", COUNT)
    acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, "zstd")
    group = "runnel-it-franz-%d" % next(_ids)
    out = go_runner("franz", "group", broker.bootstrap, topic, group, str(len(records)))
    check_group_result(out, records, PARTITIONS, acks)


def test_franz_group_members_share_partitions(go_runner, broker, topic_name):
    """Three members joining one after another (cooperative-sticky, so each
    join is an incremental rebalance) end up owning every partition exactly
    once between them, each at least one."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, 6)
    group = "runnel-it-franz-%d" % next(_ids)
    owned = go_runner("franz", "members", broker.bootstrap, topic, group, "6", "3")["owned"]
    assert len(owned) == 3 and all(owned), owned
    assert sorted(p for ps in owned for p in ps) == list(range(6)), owned


def test_franz_commit_fetch_offsets(go_runner, broker, topic_name):
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    group = "runnel-it-franz-%d" % next(_ids)
    out = go_runner("franz", "commit", broker.bootstrap, group, topic, "0=7", "2=0")
    assert offsets(out["committed"]) == {0: 7, 2: 0}
    out = go_runner("franz", "commit", broker.bootstrap, group, topic, "0=3", "1=12")
    assert offsets(out["committed"]) == {0: 3, 1: 12, 2: 0}


def test_franz_list_offsets(go_runner, broker, topic_name, tmp_path):
    """Start, end and by-timestamp offsets; kadm lists the end offset for a
    partition with no record at or after the time."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    check_list_offsets(go_runner, "franz", broker.bootstrap, topic, PARTITIONS,
                       lambda records: produce(go_runner, broker.bootstrap, topic, records,
                                               tmp_path),
                       none_after=None)


def test_franz_describe_configs(go_runner, broker, topic_name):
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, 1,
           **{"retention.ms": "123456", "cleanup.policy": "compact"})
    configs = go_runner("franz", "describe", broker.bootstrap, topic)["configs"]
    assert configs["retention.ms"] == "123456"
    assert configs["cleanup.policy"] == "compact"
    assert configs["compression.type"] == "producer"
    assert int(configs["segment.bytes"]) > 0


def test_franz_describe_producers(go_runner, broker, topic_name, tmp_path):
    """DescribeProducers names the idempotent producer of each partition with
    its last sequence and its last batch's largest timestamp, also after a
    restart (Runnel rebuilds the state from the log)."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    t0 = int(time.time() * 1000) - 600_000
    records = [Rec(b"key-%d" % (i % 11), b"v%d" % i, (), t0 + 10 * i) for i in range(90)]
    acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path)
    want = {}
    for i, a in acks.items():
        n, ts = want.get(a.partition, (0, -1))
        want[a.partition] = (n + 1, max(ts, records[i].timestamp))

    def check():
        found = go_runner("franz", "producers", broker.bootstrap, topic)["producers"]
        got = {int(p): [(d["last_sequence"] + 1, d["last_timestamp"]) for d in ds]
               for p, ds in found.items() if ds}
        assert got == {p: [w] for p, w in want.items()}, found
        assert len({d["producer_id"] for ds in found.values() for d in ds}) == 1, found

    check()
    broker.restart()
    check()


def test_franz_describe_producers_open_transaction(go_runner, broker, topic_name, tmp_path):
    """While a transaction is open, DescribeProducers gives, per partition it
    wrote, the offset where the transaction started there."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    produce(go_runner, broker.bootstrap, topic, make_records("franz-before-txn", 30), tmp_path)
    path = write_records(tmp_path / "txn.json", make_records("franz-open-txn", 30))
    out = go_runner("franz", "txn", broker.bootstrap, topic,
                    "runnel-it-franz-open-%d" % next(_ids), path, "open")
    first = {}
    for _, p, o, _ in out["acks"]:
        first[p] = min(first.get(p, o), o)
    starts = {int(p): [d["txn_start"] for d in ds if d["txn_start"] >= 0]
              for p, ds in out["producers"].items()}
    assert starts == {p: [first[p]] if p in first else [] for p in range(PARTITIONS)}, out


def test_franz_describe_producers_after_commit(go_runner, broker, topic_name, tmp_path):
    """After a transaction ends, each partition it wrote names the producer
    with the marker's coordinator epoch and the marker's time as its last
    timestamp (later than the records', which are an hour old), also after a
    restart."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    t0 = int(time.time() * 1000) - 3_600_000
    records = [Rec(b"key-%d" % i, b"v%d" % i, (), t0 + i) for i in range(12)]
    path = write_records(tmp_path / "txn.json", records)
    before = int(time.time() * 1000)
    out = go_runner("franz", "txn", broker.bootstrap, topic,
                    "runnel-it-franz-ended-%d" % next(_ids), path, "commit")
    after = int(time.time() * 1000)
    written = {p for _, p, _, _ in out["acks"]}

    def check():
        found = go_runner("franz", "producers", broker.bootstrap, topic)["producers"]
        for p, ds in found.items():
            if int(p) not in written:
                assert ds == [], found
                continue
            assert len(ds) == 1 and ds[0]["coordinator_epoch"] == 0, found
            assert before - 1000 <= ds[0]["last_timestamp"] <= after + 1000, found
            assert ds[0]["txn_start"] == -1, found

    check()
    broker.restart()
    check()


def test_franz_transactions(go_runner, broker, topic_name, tmp_path):
    """A committed and an aborted transaction, then a plain record: a
    read_committed reader sees the committed records and the plain one, a
    read_uncommitted reader sees all."""
    topic = topic_name()
    create(go_runner, "franz", broker.bootstrap, topic, PARTITIONS)
    txn_id = "runnel-it-franz-txn-%d" % next(_ids)
    kept = make_records("franz-txn-commit", 60)
    dropped = make_records("franz-txn-abort", 40)
    plain = make_records("franz-txn-plain", 20)
    for records, end in ((kept, "commit"), (dropped, "abort")):
        path = write_records(tmp_path / ("%s.json" % end), records)
        go_runner("franz", "txn", broker.bootstrap, topic, txn_id, path, end)
    produce(go_runner, broker.bootstrap, topic, plain, tmp_path)

    got = consume(go_runner, broker.bootstrap, topic, len(kept) + len(plain), "-read-committed")
    want = {(r.key, r.value) for r in kept + plain}
    assert {(g.key, g.value) for g in got} == want
    got = consume(go_runner, broker.bootstrap, topic, len(kept) + len(dropped) + len(plain))
    assert {(g.key, g.value) for g in got} == want | {(r.key, r.value) for r in dropped}


def test_franz_group_transact_session(go_runner, broker, topic_name, tmp_path):
    """consume-transform-produce with GroupTransactSession: every input record
    copied once, the group's offsets committed with the transactions."""
    src, dst = topic_name("in"), topic_name("out")
    create(go_runner, "franz", broker.bootstrap, src, PARTITIONS)
    create(go_runner, "franz", broker.bootstrap, dst, PARTITIONS)
    records = make_records("franz-eos", COUNT)
    acks = produce(go_runner, broker.bootstrap, src, records, tmp_path, "snappy")
    group = "runnel-it-franz-eos-%d" % next(_ids)
    out = go_runner("franz", "transact", broker.bootstrap, src, dst, group,
                    "runnel-it-franz-eos-%d" % next(_ids), str(len(records)))
    assert out["copied"] == len(records)
    ends = {}
    for a in acks.values():
        ends[a.partition] = max(ends.get(a.partition, 0), a.offset + 1)
    # Kafka may answer EndTxn before the commit marker reaches the offsets.
    committed = {}

    def caught_up():
        committed.update(offsets(go_runner("franz", "commit", broker.bootstrap, group,
                                           src)["committed"]))
        return committed == ends

    wait_until(caught_up, 20, interval=0.2, what="group %s committed %s" % (group, ends))
    got = consume(go_runner, broker.bootstrap, dst, len(records), "-read-committed")
    assert sorted((g.key or b"", g.value or b"") for g in got) == sorted(
        (r.key or b"", r.value or b"") for r in records)
