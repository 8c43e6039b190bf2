"""sarama (integration/go): ClusterAdmin, SyncProducer, partition consumer,
ConsumerGroup, offset manager and offset listing.

sarama is configured as for Kafka 4.1, so it uses the newest version of each
API it implements. It sends each record to the partition the test names
(murmur2 of the key, as the Java client), since its own default partitioner
hashes with FNV. Records are read back with sarama's partition consumer,
except in the group test.
"""

import itertools

import pytest

from goclients import (acks_of, check_group_result, check_list_offsets, create, got_records,
                       offsets, write_records)
from procs import wait_until
from roundtrip import CODECS, assert_stored_codec, check_roundtrip, make_records

PARTITIONS = 3
COUNT = 200
_ids = itertools.count(1)


def produce(go_runner, bootstrap, topic, records, tmp_path, codec="none", *flags):
    """-> {i: Ack}; sarama reports no timestamp for a record it stamped itself."""
    path = write_records(tmp_path / "records.json", records, PARTITIONS)
    out = go_runner("sarama", "produce", *flags, bootstrap, topic, codec, path)
    return acks_of(out, with_timestamps=False)


def consume(go_runner, bootstrap, topic, count, *flags):
    return got_records(go_runner("sarama", "consume", *flags, bootstrap, topic, str(PARTITIONS),
                                 str(count)))


def test_sarama_topic_admin(go_runner, broker, topic_name):
    topic = topic_name()
    md = create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    assert [p["partition"] for p in md["partitions"]] == list(range(PARTITIONS))
    again = go_runner("sarama", "create", broker.bootstrap, topic, "1")
    assert "already exists" in again["error"], again
    assert go_runner("sarama", "delete", broker.bootstrap, topic)["error"] is None

    def gone():
        err = go_runner("sarama", "metadata", broker.bootstrap, topic)["error"]
        return err is not None and "does not exist" in err

    wait_until(gone, 20, interval=0.2, what="%s gone from metadata" % topic)


@pytest.mark.parametrize("codec", CODECS)
def test_sarama_produce_consume(go_runner, broker, topic_name, tmp_path, codec):
    """acks=all produce in every codec, read back by partition."""
    topic = topic_name(codec)
    create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    records = make_records("sarama-" + codec, COUNT)
    acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, codec)
    got = consume(go_runner, broker.bootstrap, topic, len(records))
    check_roundtrip(records, got, PARTITIONS, acks)
    assert_stored_codec(broker, topic, got, codec)


@pytest.mark.parametrize("acks", ["leader", "all"])
def test_sarama_produce_idempotent(go_runner, broker, topic_name, tmp_path, acks):
    topic = topic_name(acks)
    create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    records = make_records("sarama-idem-" + acks, COUNT)
    flags = ["-idempotent=%s" % ("true" if acks == "all" else "false"), "-acks", acks]
    got_acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, "gzip", *flags)
    check_roundtrip(records, consume(go_runner, broker.bootstrap, topic, len(records)),
                    PARTITIONS, got_acks)


def test_sarama_group(go_runner, broker, topic_name, tmp_path):
    topic = topic_name()
    create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    records = make_records("sarama-group", COUNT)
    acks = produce(go_runner, broker.bootstrap, topic, records, tmp_path, "snappy")
    group = "runnel-it-sarama-%d" % next(_ids)
    out = go_runner("sarama", "group", broker.bootstrap, topic, group, str(len(records)))
    check_group_result(out, records, PARTITIONS, acks)


def test_sarama_commit_fetch_offsets(go_runner, broker, topic_name):
    topic = topic_name()
    create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    group = "runnel-it-sarama-%d" % next(_ids)
    out = go_runner("sarama", "commit", broker.bootstrap, group, topic, "0=7", "2=1")
    committed = offsets(out["committed"])
    assert (committed[0], committed[2]) == (7, 1)
    # Partitions the group never committed list -1.
    assert committed.get(1, -1) == -1


def test_sarama_list_offsets(go_runner, broker, topic_name, tmp_path):
    """Start, end and by-timestamp offsets; ListOffsets by time answers -1
    for a partition with no record that late."""
    topic = topic_name()
    create(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS)
    check_list_offsets(go_runner, "sarama", broker.bootstrap, topic, PARTITIONS,
                       lambda records: produce(go_runner, broker.bootstrap, topic, records,
                                               tmp_path),
                       none_after=-1)


def test_sarama_describe_configs(go_runner, broker, topic_name):
    topic = topic_name()
    create(go_runner, "sarama", broker.bootstrap, topic, 1,
           **{"retention.ms": "654321", "max.message.bytes": "200000"})
    configs = go_runner("sarama", "describe", broker.bootstrap, topic)["configs"]
    assert configs["retention.ms"] == "654321"
    assert configs["max.message.bytes"] == "200000"
    assert configs["cleanup.policy"] == "delete"
