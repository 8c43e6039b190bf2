"""The Java client (kafka-clients 4.1.1) and Kafka's console producer and
consumer against the broker.

- RecordsTool (integration/java): KafkaProducer with default settings
  (idempotent, acks=all) and a compression.type per topic, then KafkaConsumer
  with assign() and seekToBeginning(); binary keys, values and headers, null
  keys and values, null and empty header values, byte for byte. One JVM
  serves every codec (fixture), each codec is its own test.
- org.apache.kafka.tools.ConsoleProducer / consumer.ConsoleConsumer: text
  records with keys and headers (null.marker for null keys and values), one
  producer run per codec into one topic, then one consumer run per partition
  (--partition, so no group rebalancing).
"""

import pytest

import procs
import wire_data
from roundtrip import (CODEC_IDS, CODECS, Got, assert_stored_codec, check_roundtrip,
                       create_topic, end_offsets, make_records, parse_tool_output,
                       write_lines)

PARTITIONS = 3
COUNT = 200


@pytest.fixture(scope="module")
def java_roundtrip(java_runner, broker, tmp_path_factory):
    """Run RecordsTool roundtrip once for all codecs: {codec: (topic, records, output)}."""
    records = make_records("java", COUNT)
    path = tmp_path_factory.mktemp("java-records") / "records.txt"
    write_lines(path, records)
    topics = {}
    for codec in CODECS:
        topics[codec] = create_topic(broker.bootstrap, "it-java-roundtrip-" + codec, PARTITIONS)
    res = java_runner("RecordsTool", "roundtrip", broker.bootstrap, path,
                      *["%s=%s" % (t, c) for c, t in topics.items()], timeout=240)
    assert res.returncode == 0, procs.describe(res)
    sections, current = {}, None
    for line in res.stdout.splitlines():
        if line.startswith("topic "):
            current = line.split(" ", 1)[1]
            sections[current] = []
        else:
            sections[current].append(line)
    return {c: (t, records, "\n".join(sections.get(t, []))) for c, t in topics.items()}


@pytest.mark.parametrize("codec", CODECS)
def test_java_client_roundtrip(java_roundtrip, broker, codec):
    topic, records, out = java_roundtrip[codec]
    acks, errors, got, other = parse_tool_output(out)
    assert not errors, "send errors: %s" % sorted(errors.items())[:5]
    assert not other, other[:5]
    check_roundtrip(records, got, PARTITIONS, acks)
    assert_stored_codec(broker, topic, got, codec)


def test_java_producer_defaults_are_idempotent(java_roundtrip, broker):
    """Java's defaults (enable.idempotence=true) put a producer id, epoch and
    sequence numbers on every batch, and the broker stores them as sent."""
    topic, _records, out = java_roundtrip["none"]
    acks, _, _, _ = parse_tool_output(out)
    for p in range(PARTITIONS):
        end = 1 + max((a.offset for a in acks.values() if a.partition == p), default=-1)
        batches = wire_data.fetch_all_batches(broker.host, broker.port, topic, p, end)
        pids = {b.producer_id for b in batches}
        assert len(pids) == 1 and min(pids) >= 0, "partition %d producer ids %s" % (p, pids)
        assert all(b.producer_epoch >= 0 for b in batches)
        # Sequences start at 0 and follow the offsets (one producer, one session).
        assert [b.base_sequence for b in batches] == [b.base_offset for b in batches], (
            "partition %d: base sequences %s at offsets %s"
            % (p, [b.base_sequence for b in batches], [b.base_offset for b in batches]))


# --- console producer / consumer ---------------------------------------------------------

CONSOLE_PARTITIONS = 2
CONSOLE_COUNT = 30
NULL = "<NULL>"


def console_line(r):
    hdrs = ",".join("%s=%s" % (n, NULL if v is None else v.decode()) for n, v in r.headers)
    key = NULL if r.key is None else r.key.decode()
    value = NULL if r.value is None else r.value.decode()
    return "%s\t%s|%s" % (hdrs, key, value)


def parse_console(out):
    got = []
    for line in out.splitlines():
        if not line.startswith("CreateTime:"):
            continue
        f = line.split("|")
        assert len(f) == 6, line
        ts, part, off = (int(x.split(":", 1)[1]) for x in f[:3])
        hdrs = ()
        if f[3] != "NO_HEADERS":
            hdrs = tuple((n, None if v == NULL else v.encode())
                         for n, v in (h.split(":", 1) for h in f[3].split(",")))
        key = None if f[4] == NULL else f[4].encode()
        value = None if f[5] == NULL else f[5].encode()
        got.append(Got(part, off, key, value, hdrs, ts))
    return got


def test_console_producer_and_consumer(kafka_jars, broker, topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), CONSOLE_PARTITIONS)
    records, codec_of = [], []
    for codec in CODECS:
        # One record with neither key nor value in all, so records stay unique.
        part = make_records("console-" + codec, CONSOLE_COUNT, binary=False, empty_values=False,
                            both_null=codec == CODECS[0], text_separators="|\t,=: ")
        # parse.headers needs at least one header on every line.
        part = [r if r.headers else r._replace(headers=(("seq", b"%d" % i),))
                for i, r in enumerate(part)]
        res = procs.run_java("org.apache.kafka.tools.ConsoleProducer", [
            "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--compression-codec", codec,
            "--property", "parse.key=true", "--property", "parse.headers=true",
            "--property", "key.separator=|", "--property", "headers.key.separator==",
            "--property", "null.marker=" + NULL,
        ], timeout=60, input="".join(console_line(r) + "\n" for r in part))
        assert res.returncode == 0, "ConsoleProducer (%s): %s" % (codec, procs.describe(res))
        records += part
        codec_of += [codec] * len(part)

    ends = end_offsets(broker.bootstrap, topic, range(CONSOLE_PARTITIONS))
    assert sum(ends.values()) == len(records), ends
    got = []
    for p in range(CONSOLE_PARTITIONS):
        res = procs.run_java("org.apache.kafka.tools.consumer.ConsoleConsumer", [
            "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", p,
            "--offset", "earliest", "--max-messages", ends[p], "--timeout-ms", "20000",
            "--property", "print.key=true", "--property", "print.partition=true",
            "--property", "print.offset=true", "--property", "print.headers=true",
            "--property", "print.timestamp=true", "--property", "key.separator=|",
            "--property", "null.literal=" + NULL], timeout=60)
        assert res.returncode == 0, "ConsoleConsumer p%d: %s" % (p, procs.describe(res))
        part = parse_console(res.stdout)
        assert len(part) == ends[p], "partition %d: %d records printed, end offset %d" % (
            p, len(part), ends[p])
        got += part

    seen = check_roundtrip(records, got, CONSOLE_PARTITIONS)
    # Each producer run's batches are stored with its codec.
    batches = {p: wire_data.fetch_all_batches(broker.host, broker.port, topic, p, ends[p])
               for p in range(CONSOLE_PARTITIONS) if ends[p]}
    for i, g in seen.items():
        (b,) = [b for b in batches[g.partition] if b.base_offset <= g.offset <= b.last_offset]
        assert b.codec == CODEC_IDS[codec_of[i]], (
            "record %d (p%d@%d) from the %s run is in a batch with codec id %d"
            % (i, g.partition, g.offset, codec_of[i], b.codec))
