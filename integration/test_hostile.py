"""Hostile requests, frame by frame: each gets Kafka's exact answer or a closed
connection, and the broker keeps serving everyone else.

test_malformed.py covers bad frame lengths, garbage, one huge Metadata array
and one endless varint; this file adds the rest of the catalogue:

- requests whose array counts claim 2^31-1 elements in a few bytes, for
  several APIs (the CVE-2022-34917 pattern), strings and bytes whose lengths
  run past the frame, over-long varints in flexible versions, unknown API
  keys, versions out of range, and a frame cut short by a client that then
  disconnects: each closes the connection (as Kafka's SocketServer does when a
  request does not parse), and peak broker memory stays within a small bound
  during a flood of them;
- Produce v3 batches that parse but are wrong (bad CRC, wrong magic,
  inconsistent lengths, record counts, offset deltas, base offset): each gets
  the partition error code of protocol/kp_validate.h's table and the
  connection stays usable;
- compression bombs, one per codec: a small payload that expands past the
  broker's cap is refused, and the broker's peak memory (VmHWM) grows by no
  more than that cap;
- Produce with acks outside -1, 0, 1: INVALID_REQUIRED_ACKS.

Frames are built by hand (wire.py, wire_data.py). Run with --target=kafka to
check the expectations against Apache Kafka (memory bounds are Runnel's own
and are skipped there).
"""

import socket
import struct
import time
import zlib

import pytest

import wire
import wire_data
from conftest import require_module
from procs import wait_until
from wire_data import crc32c, encode_record, varint

UNKNOWN_SERVER_ERROR = -1
NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
INVALID_RECORD = 87

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, JOIN_GROUP, CREATE_TOPICS = 8, 11, 19

HUGE = 2 ** 31 - 1
# Runnel's decompressed cap for a partition's records (kb_h_produce.c):
# 256 times the bytes received, at least 16 MiB, at most 256 MiB.
def bomb_cap(received):
    return min(256 << 20, max(16 << 20, 256 * received))
BOMB_SIZE = (256 << 20) + (16 << 20)  # past the largest cap
MIB = 1 << 20


def hdr(api, version, flexible=False):
    return wire.request_header(api, version, 7, flexible=flexible)


def s16(b):
    return struct.pack(">h", len(b)) + b


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


# Requests that do not parse. Each must close its connection.
UNPARSABLE = {
    # Array counts of 2^31-1 with a handful of bytes behind them.
    "produce-v3-topics": hdr(PRODUCE, 3) + struct.pack(">hhii", -1, -1, 1000, HUGE),
    "produce-v3-partitions": hdr(PRODUCE, 3) + struct.pack(">hhii", -1, -1, 1000, 1)
    + s16(b"t") + struct.pack(">i", HUGE),
    "fetch-v4-topics": hdr(FETCH, 4) + struct.pack(">iiiibi", -1, 100, 1, 1 << 20, 0, HUGE),
    "list-offsets-v2-topics": hdr(LIST_OFFSETS, 2) + struct.pack(">ibi", -1, 0, HUGE),
    "offset-commit-v2-topics": hdr(OFFSET_COMMIT, 2) + s16(b"g") + struct.pack(">i", 1)
    + s16(b"m") + struct.pack(">qi", -1, HUGE),
    "join-group-v5-protocols": hdr(JOIN_GROUP, 5) + s16(b"g") + struct.pack(">ii", 10000, 10000)
    + s16(b"") + struct.pack(">h", -1) + s16(b"consumer") + struct.pack(">i", HUGE),
    "create-topics-v2-topics": hdr(CREATE_TOPICS, 2) + struct.pack(">i", HUGE),
    "metadata-v12-compact-topics": hdr(METADATA, 12, True) + uvarint(HUGE),
    "create-topics-v5-compact-topics": hdr(CREATE_TOPICS, 5, True) + uvarint(HUGE),
    # Lengths past the end of the frame.
    "metadata-v1-topic-name": hdr(METADATA, 1) + struct.pack(">ih", 1, 30000) + b"abc",
    "header-client-id": struct.pack(">hhih", METADATA, 1, 7, 500) + b"abc",
    "produce-v3-records": hdr(PRODUCE, 3) + struct.pack(">hhii", -1, -1, 1000, 1) + s16(b"t")
    + struct.pack(">iii", 1, 0, MIB) + b"\x00" * 10,
    "metadata-v9-compact-name": hdr(METADATA, 9, True) + uvarint(2) + uvarint(1001) + b"abc",
    # Over-long varints (more than 5 bytes for 32 bits) in flexible versions.
    "metadata-v9-name-varint": hdr(METADATA, 9, True) + uvarint(2) + b"\x80" * 5 + b"\x01",
    "header-tag-count-varint": struct.pack(">hhi", METADATA, 12, 7) + s16(b"c")
    + b"\xff" * 6 + b"\x01",
    "create-topics-v5-tag-varint": hdr(CREATE_TOPICS, 5, True) + uvarint(1)
    + struct.pack(">ib", 1000, 0) + b"\xff" * 7,
    # API keys that do not exist, and versions no broker serves.
    "api-key-88": struct.pack(">hhi", 88, 0, 7) + s16(b"c"),
    "api-key-67": struct.pack(">hhi", 67, 0, 7) + s16(b"c"),
    "api-key-minus-1": struct.pack(">hhi", -1, 0, 7) + s16(b"c"),
    "api-key-1000": struct.pack(">hhi", 1000, 3, 7) + s16(b"c"),
    "produce-v99": struct.pack(">hhi", PRODUCE, 99, 7) + s16(b"c") + b"\x00" * 12,
    "fetch-v-1": struct.pack(">hhi", FETCH, -1, 7) + s16(b"c") + b"\x00" * 12,
    "metadata-v32767": struct.pack(">hhi", METADATA, 32767, 7) + s16(b"c") + b"\x00",
    "list-offsets-v-32768": struct.pack(">hhi", LIST_OFFSETS, -32768, 7) + s16(b"c"),
}


# ---- helpers --------------------------------------------------------------------------


def rss_kib(pid):
    """(VmHWM, VmRSS) of a process, in KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])
    return out["VmHWM"], out["VmRSS"]


def reset_peak(pid):
    """Restart VmHWM counting from the current RSS (Linux >= 4.0, our own child)."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def asan_build(broker):
    """True when the broker binary is built with AddressSanitizer."""
    binary = getattr(broker, "binary", None)
    if binary is None:
        return False
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def serves(broker):
    """A new connection gets an ApiVersions answer."""
    with wire.connect(broker.host, broker.port) as s:
        err, apis = wire.api_versions_v0(s, 99)
    return err == 0 and PRODUCE in apis


def send_expect_close(broker, payload):
    s = wire.connect(broker.host, broker.port)
    try:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return wire.wait_closed(s, timeout=10)
    finally:
        s.close()


def batch_bytes(records_blob, count, last_delta, codec=0, magic=2, base_offset=0,
                base_ts=None, fix_crc=True, crc=None):
    """A record batch around an already encoded (and maybe compressed) records blob."""
    base_ts = base_ts if base_ts is not None else int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", codec, last_delta, base_ts, base_ts, -1, -1, -1,
                            count) + records_blob
    if crc is None:
        crc = crc32c(after_crc) if fix_crc else 0
    after_length = struct.pack(">ibI", -1, magic, crc) + after_crc
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def records(n, offset_deltas=None):
    deltas = offset_deltas or list(range(n))
    return b"".join(encode_record(d, 0, b"k%d" % i, b"v%d" % i) for i, d in enumerate(deltas))


@pytest.fixture(scope="module")
def admin(broker):
    require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def create_topic(admin, name, configs=None):
    from confluent_kafka.admin import NewTopic

    fut = admin.create_topics([NewTopic(name, 1, 1, config=configs or {})],
                              request_timeout=15)[name]
    assert fut.result(timeout=30) is None
    wait_until(lambda: name in admin.list_topics(timeout=10).topics, 15, what="topic listed")


@pytest.fixture(scope="module")
def topic(admin):
    name = "hostile-produce"
    create_topic(admin, name)
    return name


@pytest.fixture
def conn(broker):
    s = wire.connect(broker.host, broker.port, timeout=30)
    yield s
    s.close()


# ---- unparsable requests -------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(UNPARSABLE))
def test_unparsable_request_closes_connection(broker, case):
    bystander = wire.connect(broker.host, broker.port)
    try:
        assert wire.api_versions_v0(bystander, 1)[0] == 0
        assert send_expect_close(broker, wire.frame(UNPARSABLE[case])), \
            "connection left open after %s" % case
        assert broker.alive(), broker.log_tail()
        assert wire.api_versions_v0(bystander, 2)[0] == 0
        assert serves(broker)
    finally:
        bystander.close()


def test_frame_cut_short_then_closed(broker):
    """A Produce frame announcing 1 MiB, of which 100 bytes arrive before the
    client goes away, many times over: nothing leaks, the broker keeps serving."""
    payload = hdr(PRODUCE, 3) + b"\x00" * 100
    for _ in range(50):
        s = wire.connect(broker.host, broker.port)
        s.sendall(struct.pack(">i", MIB) + payload)
        s.close()
    for cut in (5, 17, 60):
        s = wire.connect(broker.host, broker.port)
        frame = wire.frame(UNPARSABLE["fetch-v4-topics"])
        s.sendall(frame[:cut])
        s.shutdown(socket.SHUT_WR)
        # Half a frame and EOF: the broker closes its side too.
        assert wire.wait_closed(s, timeout=10)
        s.close()
    assert broker.alive(), broker.log_tail()
    assert serves(broker)


def test_flood_of_unparsable_requests_bounded_memory(broker, target):
    """100 connections each sending the whole catalogue, 4 times over: peak
    broker memory grows by less than 64 MiB (a request can cost at most a small
    multiple of its frame)."""
    pid = broker.proc.pid
    if target == "runnel":
        reset_peak(pid)
        hwm0, rss0 = rss_kib(pid)
    frames = [wire.frame(p) for _, p in sorted(UNPARSABLE.items())]
    for _ in range(4):
        socks = []
        for i in range(100):
            s = wire.connect(broker.host, broker.port)
            try:
                s.sendall(frames[i % len(frames)])
            except (BrokenPipeError, ConnectionResetError):
                pass
            socks.append(s)
        for s in socks:
            assert wire.wait_closed(s, timeout=15)
            s.close()
    assert broker.alive(), broker.log_tail()
    assert serves(broker)
    if target == "runnel":
        hwm1, _ = rss_kib(pid)
        assert hwm1 - hwm0 < 64 * 1024, "peak RSS grew %d KiB (from %d)" % (hwm1 - hwm0, rss0)


# ---- Produce: batches that parse but are wrong --------------------------------------------


def bad_batches():
    ok = records(3)
    valid = batch_bytes(ok, 3, 2)
    flipped = bytearray(valid)
    flipped[-1] ^= 0x01
    cases = {
        "bad-crc": (bytes(flipped), CORRUPT_MESSAGE),
        "crc-zero": (batch_bytes(ok, 3, 2, crc=0), CORRUPT_MESSAGE),
        "magic-3": (batch_bytes(ok, 3, 2, magic=3), CORRUPT_MESSAGE),
        "magic-1": (batch_bytes(ok, 3, 2, magic=1), INVALID_RECORD),
        "length-past-data": (valid[:8] + struct.pack(">i", len(valid) + 88) + valid[12:],
                             INVALID_RECORD),
        "length-below-header": (valid[:8] + struct.pack(">i", 10) + valid[12:], CORRUPT_MESSAGE),
        "trailing-bytes": (valid + b"\x00\x01\x02\x03\x04", (CORRUPT_MESSAGE, NONE)),
        "cut-short": (valid[:-7], INVALID_RECORD),
        "count-above-delta": (batch_bytes(ok, 4, 2), INVALID_RECORD),
        "count-below-records": (batch_bytes(ok, 2, 1), INVALID_RECORD),
        "empty-batch": (batch_bytes(b"", 0, -1), INVALID_RECORD),
        "offset-deltas-gap": (batch_bytes(records(3, [0, 1, 5]), 3, 2), (INVALID_RECORD, NONE)),
        "offset-deltas-repeat": (batch_bytes(records(3, [0, 0, 1]), 3, 2),
                                 (INVALID_RECORD, NONE)),
        "base-offset-nonzero": (batch_bytes(ok, 3, 2, base_offset=100), INVALID_RECORD),
        "two-batches": (valid + valid, INVALID_RECORD),
        "record-cut": (batch_bytes(ok[:-3], 3, 2), INVALID_RECORD),
    }
    return cases


BAD_BATCHES = bad_batches()


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_gets_kafka_error(broker, topic, conn, target, case):
    """Two cases differ from Kafka on purpose (kp_validate.h): Kafka drops bytes
    after the last whole batch and rewrites offset deltas, where Runnel, which
    stores batches as received, refuses them."""
    batch, expected = BAD_BATCHES[case]
    if isinstance(expected, tuple):
        expected = expected[0] if target == "runnel" else expected[1]
    err, _ = wire_data.produce_v3(conn, 11, topic, 0, batch)
    assert err == expected, "%s: error %d, expected %d" % (case, err, expected)
    # The connection stays usable, and a refused batch appended nothing.
    res = wire_data.fetch_v4(conn, 12, topic, 0, 0, max_wait_ms=0)
    hw0 = res.high_watermark
    err, base = wire_data.produce_v3(conn, 13, topic, 0, batch_bytes(records(1), 1, 0))
    assert err == NONE and base == hw0
    res = wire_data.fetch_v4(conn, 14, topic, 0, 0, max_wait_ms=0)
    assert res.error == NONE and res.high_watermark == hw0 + 1
    got = wire_data.parse_batches(res.records)
    assert sum(b.count for b in got) == hw0 + 1


@pytest.mark.parametrize("acks", [2, -2, 100, -32768])
def test_produce_acks_out_of_range(broker, topic, conn, acks):
    err, _ = wire_data.produce_v3(conn, 21, topic, 0, batch_bytes(records(1), 1, 0), acks=acks)
    assert err == INVALID_REQUIRED_ACKS
    assert serves(broker)


# ---- compression bombs --------------------------------------------------------------------


def gzip_bomb(n):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\x00" * MIB
    out = [z.compress(chunk) for _ in range(n // MIB)]
    out.append(z.flush())
    return b"".join(out)


def zstd_bomb(n):
    """One zstd frame of RLE blocks (4 bytes for each 128 KiB of zeros)."""
    frame = struct.pack("<I", 0xFD2FB528) + b"\x00" + b"\x38"  # no size; 128 KiB window
    block = 128 * 1024
    count = n // block
    body = bytearray()
    for i in range(count):
        h = block << 3 | 1 << 1 | (1 if i == count - 1 else 0)
        body += struct.pack("<I", h)[:3] + b"\x00"
    return frame + bytes(body)


def xxh32(data, seed=0):
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4 & m
        i += 4
    while i < len(data):
        h = rotl((h + data[i] * p5) & m, 11) * p1 & m
        i += 1
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    h ^= h >> 16
    return h


def lz4_bomb(n):
    """An lz4 frame of 4 MiB blocks, each one literal and one long match of zeros."""
    desc = bytes([0x60, 0x70])  # version 1, independent blocks; 4 MiB max block
    frame = struct.pack("<I", 0x184D2204) + desc + bytes([(xxh32(desc) >> 8) & 0xFF])
    block_size = 4 * MIB
    match = block_size - 1 - 5
    extra = match - 4 - 15
    seq = b"\x1f\x00" + struct.pack("<H", 1) + b"\xff" * (extra // 255) + bytes([extra % 255])
    seq += b"\x50" + b"\x00" * 5  # the last five bytes are literals
    block = struct.pack("<I", len(seq)) + seq
    return frame + block * (n // block_size) + b"\x00\x00\x00\x00"


def snappy_bomb(n):
    """Raw snappy announcing n bytes with a one-byte body: the size may not be trusted."""
    return uvarint(n) + b"\x00\x00"


BOMBS = {"gzip": (1, gzip_bomb), "snappy": (2, snappy_bomb), "lz4": (3, lz4_bomb),
         "zstd": (4, zstd_bomb)}
UNSUPPORTED_COMPRESSION_TYPE = 76


def produce_v7(sock, correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    """Produce v7 (the first version allowing zstd); same request layout as v3, the
    response adds log_start_offset. Returns the partition's error code."""
    body = struct.pack(">hhi", -1, acks, timeout_ms) + struct.pack(">i", 1) + s16(topic.encode())
    body += struct.pack(">iii", 1, partition, len(batch)) + batch
    sock.sendall(wire.frame(wire.request_header(PRODUCE, 7, correlation_id) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == correlation_id
    (name, parts), = r.array(lambda r: (r.string(), r.array(lambda r: r.take(">ihqqq"))))
    assert name == topic
    (p, err, _base, _lat, _lso), = parts
    assert p == partition
    return err


def test_zstd_needs_produce_v7(broker, topic, conn):
    """Kafka refuses zstd batches in Produce below v7."""
    batch = batch_bytes(zstd_bomb(1 << 20), 1, 0, codec=4)
    err, _ = wire_data.produce_v3(conn, 41, topic, 0, batch)
    assert err == UNSUPPORTED_COMPRESSION_TYPE


@pytest.fixture(scope="module")
def bomb_topic(admin):
    name = "hostile-bombs"
    create_topic(admin, name, {"max.message.bytes": str(8 * MIB)})
    return name


@pytest.mark.parametrize("codec", sorted(BOMBS))
def test_compression_bomb(broker, bomb_topic, conn, target, codec):
    codec_id, make = BOMBS[codec]
    payload = make(BOMB_SIZE)
    assert len(payload) < 2 * MIB, len(payload)
    batch = batch_bytes(payload, 1, 0, codec=codec_id)
    pid = broker.proc.pid
    if target == "runnel":
        reset_peak(pid)
        hwm0, rss0 = rss_kib(pid)
    err = produce_v7(conn, 31, bomb_topic, 0, batch)
    if target == "runnel":
        # Runnel stops at its cap; Kafka, which streams, fails on the first record.
        assert err == MESSAGE_TOO_LARGE, err
    else:
        assert err in (CORRUPT_MESSAGE, INVALID_RECORD, UNKNOWN_SERVER_ERROR), err
    assert broker.alive(), broker.log_tail()
    assert serves(broker)
    if target == "runnel":
        hwm1, rss1 = rss_kib(pid)
        grew = hwm1 - hwm0
        print("bomb %s: %d compressed bytes, peak RSS +%d KiB, RSS after +%d KiB"
              % (codec, len(payload), grew, rss1 - rss0))
        # The decompression buffer doubles up to the cap: a plain build peaks at
        # the cap (realloc moves pages); under AddressSanitizer every realloc
        # copies and the freed blocks sit in quarantine, about three caps.
        cap = bomb_cap(len(batch))
        bound = cap * 7 // 2 if asan_build(broker) else cap + 64 * MIB
        assert grew < bound // 1024, "peak RSS grew %d KiB" % grew
        # AddressSanitizer keeps freed blocks in quarantine, so its RSS stays up.
        after = bound if asan_build(broker) else 64 * MIB
        assert rss1 - rss0 < after // 1024, "RSS stayed %d KiB higher" % (rss1 - rss0)
