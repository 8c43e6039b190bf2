#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/.

    python3 tests/fuzz/gen_corpus.py

request_decode:   the golden request frames captured from real clients
                  (tests/data/frames/*-req.bin, header + body without the
                  length), plus, for every API in protocol/msg/kp_msg_table.c,
                  a header-only frame at its lowest, first flexible and
                  highest version, so the fuzzer starts inside every decoder.
record_batch:     the kafka-python golden batches (tests/data/batches, one per
                  codec) behind option bytes; a two-batch buffer; a batch with
                  a bad CRC.
segment_recover:  segments built from those batches: whole, cut mid-batch,
                  with a flipped byte, with a stale index.
internal_records: __consumer_offsets keys and values in Kafka's formats.
The output is deterministic; the script needs only the standard library.
"""
import re
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "corpus"


def put(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def header(key, version, flexible):
    h = struct.pack(">hhih", key, version, 1, 4) + b"fuzz"
    return h + (b"\x00" if flexible else b"")


def request_decode():
    for f in sorted((ROOT / "tests" / "data" / "frames").glob("*-req.bin")):
        put("request_decode", "golden-" + f.name, f.read_bytes())
    table = (ROOT / "protocol" / "msg" / "kp_msg_table.c").read_text()
    for key, name, lo, hi, flex in re.findall(r'\{(\d+), "(\w+)", (\d+), (\d+), (-?\d+),', table):
        key, lo, hi, flex = int(key), int(lo), int(hi), int(flex)
        versions = sorted({lo, hi} | ({flex} if flex >= 0 else set()))
        for v in versions:
            fl = 0 <= flex <= v
            # An empty body: zero counts / empty strings / no tags for most
            # messages, so the decoder gets a little way in.
            body = (b"\x00" if fl else b"") + b"\x00" * 8
            put("request_decode", "hdr-%s-v%d.bin" % (name, v), header(key, v, fl) + body)


def batches():
    out = {}
    for f in sorted((ROOT / "tests" / "data" / "batches").glob("kafka-python-*.bin")):
        out[f.stem.split("-")[-1]] = f.read_bytes()
    return out


def record_batch():
    codec_id = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    for name, b in batches().items():
        c = codec_id[name]
        # single batch, allow zstd, recompute CRCs; direct decompress with its codec
        put("record_batch", "batch-%s.bin" % name, bytes([0x15 | c << 5]) + b)
        # the compressed records alone, for the direct decompressor
        put("record_batch", "raw-%s.bin" % name, bytes([c << 5]) + b[61:])
    two = batches()["none"] * 2
    put("record_batch", "two-batches.bin", b"\x04" + two)
    bad = bytearray(batches()["gzip"])
    bad[30] ^= 0xFF
    put("record_batch", "bad-crc.bin", b"\x05" + bytes(bad))


def segment_recover():
    bs = batches()
    # Consecutive offsets, as the log stores them: rewrite each base offset.
    seg, base = b"", 0
    for name in ("none", "gzip", "lz4"):
        b = bytearray(bs[name])
        b[0:8] = struct.pack(">q", base)
        (last,) = struct.unpack_from(">i", b, 23)
        base += last + 1
        seg += bytes(b)
    put("segment_recover", "whole.bin", b"\x00\x00" + seg)
    put("segment_recover", "whole-clean.bin", b"\x01\x00" + seg)
    put("segment_recover", "torn.bin", b"\x00\x00" + seg[:len(seg) - 37])
    flipped = bytearray(seg)
    flipped[len(bs["none"]) + 70] ^= 0x20
    put("segment_recover", "flipped.bin", b"\x00\x00" + bytes(flipped))
    # An index entry (relative offset 10, position 4096) past the data.
    index = struct.pack(">ii", 10, 4096)
    put("segment_recover", "stale-index.bin", b"\x01" + bytes([len(index)]) + index + seg)


def s16(s):
    return struct.pack(">h", len(s)) + s


def internal_records():
    ck = s16(b"group-1") + s16(b"topic-a") + struct.pack(">i", 3)
    put("internal_records", "commit-key-gen.bin", b"\x00\x01" + ck)
    put("internal_records", "commit-key-kb.bin", b"\x04\x00" + struct.pack(">h", 1) + ck)
    v3 = struct.pack(">qi", 42, 5) + s16(b"meta") + struct.pack(">q", 1700000000000)
    put("internal_records", "commit-value-gen.bin", b"\x01\x03" + v3)
    put("internal_records", "commit-value-kb.bin", b"\x05\x00" + struct.pack(">h", 3) + v3)
    v1 = struct.pack(">q", 7) + s16(b"") + struct.pack(">qq", 1700000000000, 1700000060000)
    put("internal_records", "commit-value-v1-kb.bin", b"\x05\x00" + struct.pack(">h", 1) + v1)
    gk = s16(b"group-1")
    put("internal_records", "group-key-gen.bin", b"\x02\x02" + gk)
    put("internal_records", "group-key-kb.bin", b"\x04\x00" + struct.pack(">h", 2) + gk)
    member = (s16(b"member-1") + struct.pack(">h", -1) + s16(b"client") + s16(b"/127.0.0.1")
              + struct.pack(">ii", 300000, 45000) + struct.pack(">i", 4) + b"subs"
              + struct.pack(">i", 3) + b"asg")
    gv = (s16(b"consumer") + struct.pack(">i", 2) + s16(b"range") + s16(b"member-1")
          + struct.pack(">q", 1700000000000) + struct.pack(">i", 1) + member)
    put("internal_records", "group-value-gen.bin", b"\x03\x03" + gv)
    put("internal_records", "group-value-kb.bin", b"\x07\x00" + struct.pack(">h", 3) + gv)


if __name__ == "__main__":
    request_decode()
    record_batch()
    segment_recover()
    internal_records()
