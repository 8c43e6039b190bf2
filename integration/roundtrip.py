"""Shared pieces of the Produce/Fetch tests (test_produce_fetch_*.py and the
timestamp, size, long-poll, idempotence and crash tests).

- murmur2() and java_partition(): the Java client's partitioner for keyed
  records, so a test can check where each keyed record landed.
- make_records(): a deterministic set of records (binary or text keys and
  values, null keys and values, empty values, headers with duplicate keys,
  empty and null header values) in which every record is unique, so consumed
  records map back to the produced ones without ambiguity.
- check_roundtrip(): what every client's produce-then-consume must satisfy.
- Line and JSON encodings of records shared with the Java and node programs.
- Topic creation and an assign()-based reader (kafka-python, no group).
"""

import base64
import json
import random
import time
import zlib
from collections import namedtuple

from procs import wait_until

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# The codec id in the low three bits of a record batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# headers: tuple of (str name, bytes-or-None value), in record order.
Rec = namedtuple("Rec", "key value headers timestamp")
Rec.__new__.__defaults__ = ((), None)
# A record as a consumer saw it.
Got = namedtuple("Got", "partition offset key value headers timestamp")
# What a producer reported for the record at index i.
Ack = namedtuple("Ack", "partition offset timestamp")


# --- the Java client's partitioner ------------------------------------------------

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data):
    """MurmurHash2 as the Java client computes it for keys (seed 0x9747b28c),
    as a signed 32-bit int."""
    n = len(data)
    h = (0x9747B28C ^ n) & _MASK
    whole = n & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    left = n & 3
    if left == 3:
        h ^= data[whole + 2] << 16
    if left >= 2:
        h ^= data[whole + 1] << 8
    if left >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key, partitions):
    """The partition the Java client's default partitioner picks for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# --- deterministic record sets ------------------------------------------------------


def _rng(tag):
    return random.Random(zlib.crc32(tag.encode()))


_TEXT = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;-_=+()[]{}"


def make_records(tag, count, *, binary=True, empty_values=True, null_keys=True,
                 null_values=True, both_null=True, headers=True, null_header_values=True,
                 adjacent_duplicate_headers=False, text_separators=""):
    """count records for the test `tag`, the same on every run.

    binary=False keeps keys, values and headers printable text (UTF-8, with a
    few non-ASCII letters) for line-oriented tools; text_separators lists
    characters the text must avoid. Every record differs from every other in
    its key or its value. About one in twelve records has a null key, one in
    twelve a null value, and (if allowed) one in twenty an empty value;
    both_null allows one record with neither key nor value.
    """
    rnd = _rng(tag)
    bad = set(text_separators) | {"\n", "\r"}

    def text(n):
        alphabet = [c for c in _TEXT + "äöüßéλжж" if c not in bad]
        return "".join(rnd.choice(alphabet) for _ in range(n)).encode()

    def blob(n):
        return bytes(rnd.getrandbits(8) for _ in range(n))

    if binary:
        key_pool = [blob(rnd.randint(1, 40)) for _ in range(8)] + [
            b"\x00", b"\xff" * 3, "schlüssel".encode(), b"user-1", b"user-2"]
    else:
        key_pool = [text(rnd.randint(1, 24)) for _ in range(8)] + [
            "schlüssel".encode(), b"user-1", b"user-2"]
    header_pool = [("trace", lambda: blob(16) if binary else text(16)),
                   ("dup", lambda: b"first"), ("dup", lambda: b"second"),
                   ("empty", lambda: b""), ("größe", lambda: "värde".encode())]
    if null_header_values:
        header_pool.append(("null", lambda: None))

    out = []
    both_null_done = False
    for i in range(count):
        kind = rnd.randrange(60)
        key = rnd.choice(key_pool)
        # A unique, partly compressible value: the index, then filler.
        filler = rnd.randrange(3)
        if filler == 0:
            body = (tag.encode() + b"-") * rnd.randint(1, 200)
        elif filler == 1:
            body = blob(rnd.randint(0, 300)) if binary else text(rnd.randint(0, 300))
        else:
            body = b""
        value = b"%s#%d " % (tag.encode(), i) + body
        if null_keys and kind < 5:
            key = None
            if null_values and both_null and kind == 0 and not both_null_done:
                value = None
                both_null_done = True
        elif null_values and kind < 10:
            key = key + b"/tomb/%s/%d" % (tag.encode(), i)
            value = None
        elif empty_values and kind < 13:
            key = key + b"/empty/%s/%d" % (tag.encode(), i)
            value = b""
        hdrs = ()
        if headers and rnd.randrange(3):
            picks = sorted(rnd.sample(range(len(header_pool)), rnd.randint(1, 3)))
            hdrs = tuple((header_pool[j][0], header_pool[j][1]()) for j in picks)
            if adjacent_duplicate_headers:
                order = []
                for name, _ in hdrs:
                    if name not in order:
                        order.append(name)
                hdrs = tuple(h for name in order for h in hdrs if h[0] == name)
        out.append(Rec(key, value, hdrs))
    return out


# --- checks ---------------------------------------------------------------------------


def _show(b):
    if b is None:
        return "null"
    return repr(b if len(b) <= 40 else b[:40] + b"...(%d bytes)" % len(b))


def identity(key, value):
    return (key, value)


def check_roundtrip(produced, got, partitions, acks=None, *, first_offset=0,
                    compare_headers=True, normalize_headers=None, timestamps=None):
    """Assert that `got` (the consumed Got records of a topic that holds exactly
    `produced`, written in that order by one producer) is a faithful copy.

    - every produced record was consumed exactly once, byte for byte: key,
      value, headers (names, values, order; null distinct from empty);
    - per partition, offsets are contiguous from first_offset and the records
      appear in the order they were produced;
    - each keyed record sits in java_partition(key, partitions);
    - acks ({index: Ack}) from the producer name the same partition and
      offset (and timestamp, when given) as the consumer saw;
    - timestamps ({index: ms}), when given, are the consumed timestamps.

    Returns {index: Got}.
    """
    index = {}
    for i, r in enumerate(produced):
        k = identity(r.key, r.value)
        assert k not in index, "test data not unique at %d and %d" % (index[k], i)
        index[k] = i

    seen = {}
    by_part = {}
    for g in got:
        k = identity(g.key, g.value)
        assert k in index, ("consumed a record that was never produced: p%d@%d key=%s value=%s"
                            % (g.partition, g.offset, _show(g.key), _show(g.value)))
        i = index[k]
        assert i not in seen, ("record %d (key=%s) consumed twice: p%d@%d and p%d@%d"
                               % (i, _show(g.key), seen[i].partition, seen[i].offset,
                                  g.partition, g.offset))
        seen[i] = g
        by_part.setdefault(g.partition, []).append((g.offset, i))

    lost = [i for i in range(len(produced)) if i not in seen]
    assert not lost, "%d of %d records never consumed, first: #%d key=%s value=%s" % (
        len(lost), len(produced), lost[0], _show(produced[lost[0]].key),
        _show(produced[lost[0]].value))

    for p, lst in sorted(by_part.items()):
        assert 0 <= p < partitions, "record in partition %d of %d" % (p, partitions)
        offsets = [o for o, _ in lst]
        want = list(range(first_offset, first_offset + len(lst)))
        assert sorted(offsets) == want, (
            "partition %d offsets not contiguous from %d: %s" % (p, first_offset, offsets[:50]))
        idx = [i for _, i in sorted(lst)]
        assert idx == sorted(idx), (
            "partition %d: produce order not preserved (record indices by offset: %s)"
            % (p, idx[:50]))

    for i, r in enumerate(produced):
        g = seen[i]
        if r.key is not None:
            want = java_partition(r.key, partitions)
            assert g.partition == want, ("record %d key=%s in partition %d, murmur2 says %d"
                                         % (i, _show(r.key), g.partition, want))
        if compare_headers:
            want_h = list(r.headers)
            got_h = list(g.headers)
            if normalize_headers:
                want_h, got_h = normalize_headers(want_h), normalize_headers(got_h)
            assert got_h == want_h, "record %d headers: got %r, produced %r" % (i, got_h, want_h)
        if acks is not None:
            a = acks.get(i)
            assert a is not None, "record %d was never acknowledged" % i
            assert (a.partition, a.offset) == (g.partition, g.offset), (
                "record %d: producer reported p%d@%d, consumer found it at p%d@%d"
                % (i, a.partition, a.offset, g.partition, g.offset))
            if a.timestamp is not None:
                assert g.timestamp == a.timestamp, (
                    "record %d: producer reported timestamp %s, consumed %s"
                    % (i, a.timestamp, g.timestamp))
        if timestamps is not None and i in timestamps:
            assert g.timestamp == timestamps[i], (
                "record %d: produced with timestamp %s, consumed %s"
                % (i, timestamps[i], g.timestamp))
    return seen


def assert_stored_codec(broker, topic, got, codec, plain_allowed=False):
    """The broker kept the batches holding the consumed records `got` ([Got])
    compressed as the producer sent them (topic compression.type=producer, the
    default): read back with raw Fetch v4 requests, every batch's attributes
    name `codec`. plain_allowed: for a producer that sends a batch
    uncompressed when compressing would not shrink it, uncompressed batches
    may sit beside those in `codec` (at least one per partition)."""
    import wire_data

    ends = {}
    for g in got:
        ends[g.partition] = max(ends.get(g.partition, 0), g.offset + 1)
    for p, end in sorted(ends.items()):
        batches = wire_data.fetch_all_batches(broker.host, broker.port, topic, p, end)
        codecs = sorted({b.codec for b in batches})
        if plain_allowed:
            codecs = [c for c in codecs if c != CODEC_IDS["none"]] or codecs
        assert codecs == [CODEC_IDS[codec]], (
            "partition %d: stored batches have codec ids %s, the producer used %s (%d)"
            % (p, codecs, codec, CODEC_IDS[codec]))


# --- record encodings shared with integration/java and integration/js ---------------
#
# Line format (Java): fields separated by single spaces; bytes are "b:" plus
# base64 (so empty is "b:"), null is "-":
#   input:  <key> <value> <timestamp|-> <partition|-> <nheaders> (<name> <value>)*
#   output: ack <i> <partition> <offset> <timestamp>
#           err <i> <ExceptionSimpleName> <base64 message>
#           rec <partition> <offset> <timestamp> <key> <value> <nheaders> (<name> <value>)*


def enc(b):
    return "-" if b is None else "b:" + base64.b64encode(b).decode()


def dec(s):
    if s == "-":
        return None
    assert s.startswith("b:"), s
    return base64.b64decode(s[2:])


def to_line(rec, partition=None):
    f = [enc(rec.key), enc(rec.value),
         "-" if rec.timestamp is None else str(rec.timestamp),
         "-" if partition is None else str(partition), str(len(rec.headers))]
    for name, val in rec.headers:
        f += [enc(name.encode()), enc(val)]
    return " ".join(f)


def write_lines(path, records, partitions=None):
    with open(path, "w") as fh:
        for i, r in enumerate(records):
            fh.write(to_line(r, None if partitions is None else partitions[i]) + "\n")


def parse_tool_output(text):
    """-> (acks {i: Ack}, errors {i: (name, message)}, records [Got], other lines)"""
    acks, errors, got, other = {}, {}, [], []
    for line in text.splitlines():
        f = line.split(" ")
        if f[0] == "ack":
            acks[int(f[1])] = Ack(int(f[2]), int(f[3]), int(f[4]))
        elif f[0] == "err":
            errors[int(f[1])] = (f[2], base64.b64decode(f[3]).decode(errors="replace"))
        elif f[0] == "rec":
            n = int(f[6])
            hdrs = tuple((dec(f[7 + 2 * j]).decode(), dec(f[8 + 2 * j])) for j in range(n))
            got.append(Got(int(f[1]), int(f[2]), dec(f[4]), dec(f[5]), hdrs, int(f[3])))
        else:
            other.append(line)
    return acks, errors, got, other


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def unb64(s):
    return None if s is None else base64.b64decode(s)


def to_json_records(records):
    return json.dumps([{"key": b64(r.key), "value": b64(r.value),
                        "headers": [[n, b64(v)] for n, v in r.headers]} for r in records])


# --- topics and a group-less reader ----------------------------------------------------


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap, name, partitions, config=None):
    """Create a topic (confluent-kafka AdminClient) and wait until metadata shows
    every partition with a leader."""
    from confluent_kafka.admin import NewTopic

    a = admin(bootstrap)
    fut = a.create_topics([NewTopic(name, partitions, 1, config=dict(config or {}))],
                          request_timeout=15)[name]
    assert fut.result(timeout=30) is None

    def ready():
        t = a.list_topics(topic=name, timeout=10).topics.get(name)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values()))

    wait_until(ready, 20, interval=0.1, what="topic %s ready" % name)
    # Kafka may list a new partition's leader a moment before that leader
    # serves it (NOT_LEADER_OR_FOLLOWER): wait until a Fetch of each works.
    import wire
    import wire_data

    host, port = bootstrap.rsplit(":", 1)
    errors = []

    def fetchable():
        with wire.connect(host, int(port)) as s:
            errors[:] = [wire_data.fetch_v4(s, 1 + p, name, p, 0, max_wait_ms=0).error
                         for p in range(partitions)]
        return not any(errors)

    wait_until(fetchable, 20, interval=0.1, what="fetch from every partition of %s" % name)
    return name


def produce_kafka_python(bootstrap, topic, records, **conf):
    """Send records in order with kafka-python's KafkaProducer (acks=all,
    murmur2 partitioner); return {index: Ack}. Raises on any send error."""
    from kafka import KafkaProducer

    cfg = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=20, request_timeout_ms=30000,
               client_id="runnel-it-kafka-python")
    cfg.update(conf)
    p = KafkaProducer(**cfg)
    try:
        futs = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                       timestamp_ms=r.timestamp) for r in records]
        p.flush(timeout=60)
        acks = {}
        for i, f in enumerate(futs):
            md = f.get(timeout=30)
            acks[i] = Ack(md.partition, md.offset, md.timestamp)
        return acks
    finally:
        p.close(timeout=10)


def last_stable_offset(bootstrap, topic, partition=0):
    """The end offset a read_committed consumer sees (ListOffsets, isolation 1)."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "it-lso",
                     "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def end_offsets(bootstrap, topic, partitions):
    """{partition: end offset} via kafka-python (ListOffsets latest), no group."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=30000, client_id="runnel-it-offsets")
    try:
        res = c.end_offsets([TopicPartition(topic, p) for p in partitions])
        return {tp.partition: o for tp, o in res.items()}
    finally:
        c.close()


def read_all(bootstrap, topic, partitions, timeout=60.0, isolation="read_uncommitted"):
    """Every record of the given partitions of `topic`, from the earliest offset
    to the end offset found at the start, via kafka-python with assign() (no
    group). Returns [Got]."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level=isolation,
                      request_timeout_ms=30000, fetch_max_wait_ms=200,
                      consumer_timeout_ms=1000, client_id="runnel-it-reader")
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, (
                "reading %s: positions %s never reached end offsets %s"
                % (topic, {tp.partition: c.position(tp) for tp in tps},
                   {tp.partition: o for tp, o in end.items()}))
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    if m.offset < end[tp]:
                        out.append(Got(m.partition, m.offset, m.key, m.value,
                                       tuple(m.headers or ()), m.timestamp))
        return out
    finally:
        c.close()
