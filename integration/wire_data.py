"""Produce v3 and Fetch v4 by hand, and record batches (magic 2) built and
parsed in Python: for tests that need exact sizes, exact timing or the stored
batch attributes, which clients hide. Builds on wire.py (framing, headers).

Layouts (non-flexible versions, request header v1, response header v0):
  Produce v3 request:  transactional_id nullable string, acks int16,
                       timeout_ms int32, [topic string, [partition int32,
                       records nullable bytes]]
  Produce v3 response: [topic, [partition, error_code int16, base_offset int64,
                       log_append_time int64]], throttle_time_ms int32
  Fetch v4 request:    replica_id int32, max_wait_ms int32, min_bytes int32,
                       max_bytes int32, isolation_level int8, [topic, [partition,
                       fetch_offset int64, partition_max_bytes int32]]
  Fetch v4 response:   throttle_time_ms, [topic, [partition, error_code,
                       high_watermark int64, last_stable_offset int64,
                       aborted nullable [producer_id int64, first_offset int64],
                       records nullable bytes]]
"""

import gzip
import struct
import time
from collections import namedtuple

import wire

PRODUCE = 0
FETCH = 1
INIT_PRODUCER_ID = 22

NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


# --- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ---------------------------

def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


# --- varints (zigzag) --------------------------------------------------------------------

def varint(n):
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(data, off):
    shift = z = 0
    while True:
        b = data[off]
        off += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (z >> 1) ^ -(z & 1), off


# --- record batches ----------------------------------------------------------------------

def encode_record(offset_delta, ts_delta, key, value, headers=()):
    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for name, val in headers:
        nb = name.encode()
        body += varint(len(nb)) + nb
        body += varint(-1) if val is None else varint(len(val)) + val
    return varint(len(body)) + body


def build_batch(records, base_timestamp, timestamps=None, codec=NONE, producer_id=-1,
                producer_epoch=-1, base_sequence=-1):
    """A magic-2 batch at base offset 0 from [(key, value, headers)]. codec 0 or 1
    (gzip); producer id, epoch and base sequence for idempotent batches."""
    timestamps = timestamps or [base_timestamp] * len(records)
    raw = b"".join(encode_record(i, timestamps[i] - base_timestamp, k, v, h)
                   for i, (k, v, h) in enumerate(records))
    if codec == 1:
        raw = gzip.compress(raw)
    after_crc = struct.pack(">hiqqqhii", codec, len(records) - 1, base_timestamp,
                            max(timestamps), producer_id, producer_epoch, base_sequence,
                            len(records)) + raw
    crc = crc32c(after_crc)
    after_length = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


Batch = namedtuple("Batch", "base_offset last_offset attributes codec count records size "
                   "producer_id producer_epoch base_sequence")


def parse_batches(data):
    """Whole batches in a Fetch response's records (a trailing partial batch is
    ignored, as clients do). Records are decoded for uncompressed and gzip
    batches as [(offset, timestamp, key, value)]; None for other codecs."""
    out = []
    off = 0
    while off + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, off)
        if off + 12 + length > len(data):
            break
        (_epoch, magic, _crc, attrs, last_delta, base_ts, _max_ts, pid, pepoch, seq,
         count) = struct.unpack_from(">ibIhiqqqhii", data, off + 12)
        assert magic == 2, "magic %d at %d" % (magic, off)
        codec = attrs & 7
        raw = data[off + 61:off + 12 + length]
        recs = None
        if codec in (0, 1):
            if codec == 1:
                raw = gzip.decompress(raw)
            recs = []
            p = 0
            for _ in range(count):
                size, p = read_varint(raw, p)
                end = p + size
                p += 1  # attributes
                ts_delta, p = read_varint(raw, p)
                off_delta, p = read_varint(raw, p)
                kl, p = read_varint(raw, p)
                key = None if kl < 0 else bytes(raw[p:p + kl])
                p += max(kl, 0)
                vl, p = read_varint(raw, p)
                value = None if vl < 0 else bytes(raw[p:p + vl])
                recs.append((base + off_delta, base_ts + ts_delta, key, value))
                p = end
        out.append(Batch(base, base + last_delta, attrs, codec, count, recs, 12 + length, pid,
                         pepoch, seq))
        off += 12 + length
    return out


# --- requests ------------------------------------------------------------------------------

def _string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _retrying(call, error_of, timeout=30.0):
    """call() again while it answers NOT_LEADER_OR_FOLLOWER, as clients do: a
    partition whose log is still loading after a restart is not yet online
    (Kafka's retriable answer); then its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        res = call()
        if error_of(res) != NOT_LEADER_OR_FOLLOWER or time.monotonic() >= deadline:
            return res
        time.sleep(0.02)


def produce_v3_once(sock, correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    """Send one batch; return (error_code, base_offset)."""
    body = struct.pack(">hhi", -1, acks, timeout_ms)
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch
    sock.sendall(wire.frame(wire.request_header(PRODUCE, 3, correlation_id) + body))
    r = wire.Reader(wire.recv_frame(sock))
    corr = r.take(">i")
    assert corr == correlation_id, (corr, correlation_id)
    topics = r.array(lambda r: (r.string(), r.array(lambda r: r.take(">ihqq"))))
    (name, parts), = topics
    assert name == topic
    (p, err, base, _lat), = parts
    assert p == partition
    return err, base


def produce_v3(sock, correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    """produce_v3_once, retried while the partition is not yet online."""
    return _retrying(lambda: produce_v3_once(sock, correlation_id, topic, partition, batch, acks,
                                             timeout_ms), lambda res: res[0])


def init_producer_id_v0(sock, correlation_id, transaction_timeout_ms=60000):
    """InitProducerId v0 without a transactional id; -> (error_code, producer_id, epoch).
    Request: transactional_id nullable string, transaction_timeout_ms int32.
    Response: throttle_time_ms int32, error_code int16, producer_id int64, epoch int16."""
    body = struct.pack(">hi", -1, transaction_timeout_ms)
    sock.sendall(wire.frame(wire.request_header(INIT_PRODUCER_ID, 0, correlation_id) + body))
    r = wire.Reader(wire.recv_frame(sock))
    corr = r.take(">i")
    assert corr == correlation_id, (corr, correlation_id)
    _throttle, err, pid, epoch = r.take(">ihqh")
    return err, pid, epoch


FetchResult = namedtuple("FetchResult", "error high_watermark last_stable records")


def fetch_v4_send(sock, correlation_id, topic, partition, offset, max_wait_ms=500,
                  min_bytes=1, max_bytes=1 << 20, isolation_level=0):
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, isolation_level)
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes)
    sock.sendall(wire.frame(wire.request_header(FETCH, 4, correlation_id) + body))


def fetch_v4_recv(sock, correlation_id, topic, partition):
    r = wire.Reader(wire.recv_frame(sock))
    corr = r.take(">i")
    assert corr == correlation_id, (corr, correlation_id)
    r.take(">i")  # throttle

    def part(r):
        p, err, hw, lso = r.take(">ihqq")
        r.array(lambda r: r.take(">qq"))
        n = r.take(">i")
        data = b""
        if n > 0:
            data = r.data[r.off:r.off + n]
            r.off += n
        return p, FetchResult(err, hw, lso, data)

    topics = r.array(lambda r: (r.string(), r.array(part)))
    (name, parts), = topics
    assert name == topic
    (p, res), = parts
    assert p == partition
    return res


def fetch_v4_once(sock, correlation_id, topic, partition, offset, **kw):
    fetch_v4_send(sock, correlation_id, topic, partition, offset, **kw)
    return fetch_v4_recv(sock, correlation_id, topic, partition)


def fetch_v4(sock, correlation_id, topic, partition, offset, **kw):
    """fetch_v4_once, retried while the partition is not yet online."""
    return _retrying(lambda: fetch_v4_once(sock, correlation_id, topic, partition, offset, **kw),
                     lambda res: res.error)


def fetch_all_batches(host, port, topic, partition, end_offset, timeout=30.0):
    """Every batch of a partition from offset 0 up to end_offset, by repeated Fetch v4."""
    out = []
    offset = 0
    corr = 1
    with wire.connect(host, port, timeout=timeout) as s:
        while offset < end_offset:
            res = fetch_v4(s, corr, topic, partition, offset, max_wait_ms=100)
            corr += 1
            assert res.error == NONE, "fetch %s-%d@%d: error %d" % (topic, partition, offset,
                                                                   res.error)
            batches = [b for b in parse_batches(res.records) if b.last_offset >= offset]
            assert batches, "fetch %s-%d@%d returned no batch" % (topic, partition, offset)
            out += batches
            offset = batches[-1].last_offset + 1
    return out
