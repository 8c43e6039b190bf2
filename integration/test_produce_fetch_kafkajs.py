"""kafkajs 2.2.4 (integration/js/records.js): producer and consumer.

kafkajs compresses gzip itself; snappy, lz4 and zstd need codec packages
that integration/js does not install, so it covers none and gzip. Its
default partitioner is the Java client's murmur2. Headers are an object in
kafkajs (a repeated name becomes an array, and null values are not
accepted), so its records keep repeated header names adjacent and have no
null header values.

The producer test reads back with kafka-python (assign, no group). kafkajs'
consumer only runs inside a consumer group, so the consumer test uses one
with a unique group id; it reads records produced by kafka-python.
"""

import itertools
import json

import pytest

import procs
from roundtrip import (Ack, Got, assert_stored_codec, check_roundtrip, create_topic,
                       make_records, produce_kafka_python, read_all, to_json_records, unb64)

PARTITIONS = 3
COUNT = 200
KAFKAJS_CODECS = ("none", "gzip")
_groups = itertools.count(1)


def records_for(tag):
    # kafka-python, which writes the consumer test's records, sends no record
    # with neither key nor value.
    return make_records(tag, COUNT, null_header_values=False, adjacent_duplicate_headers=True,
                        both_null=False)


def run_js(node_runner, *args):
    res = node_runner("records.js", *args, timeout=120)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    assert res.returncode == 0 and lines, "records.js failed: %s" % procs.describe(res)
    return json.loads(lines[-1])


@pytest.mark.parametrize("codec", KAFKAJS_CODECS)
def test_kafkajs_producer(node_runner, broker, topic_name, tmp_path, codec):
    topic = create_topic(broker.bootstrap, topic_name(codec), PARTITIONS)
    records = records_for("kafkajs-p-" + codec)
    path = tmp_path / "records.json"
    path.write_text(to_json_records(records))
    out = run_js(node_runner, "produce", broker.bootstrap, topic, codec, path)
    acks = {i: Ack(p, int(o), None) for i, p, o in out["acks"]}
    got = read_all(broker.bootstrap, topic, range(PARTITIONS))
    check_roundtrip(records, got, PARTITIONS, acks)
    assert_stored_codec(broker, topic, got, codec)


@pytest.mark.parametrize("codec", KAFKAJS_CODECS)
def test_kafkajs_consumer(node_runner, broker, topic_name, codec):
    topic = create_topic(broker.bootstrap, topic_name(codec), PARTITIONS)
    records = records_for("kafkajs-c-" + codec)
    acks = produce_kafka_python(broker.bootstrap, topic, records,
                                compression_type=None if codec == "none" else codec)
    group = "runnel-it-kafkajs-%s-%d" % (codec, next(_groups))
    out = run_js(node_runner, "consume", broker.bootstrap, topic, len(records), group)
    got = [Got(r["partition"], int(r["offset"]), unb64(r["key"]), unb64(r["value"]),
               tuple((n, unb64(v)) for n, v in r["headers"]), int(r["timestamp"]))
           for r in out["records"]]
    check_roundtrip(records, got, PARTITIONS, acks)
