#!/usr/bin/env python3
"""Writes the golden record batches that tests/protocol/test_validate.c reads.

Each file is one v2 record batch exactly as kafka-python 2.3.0 builds it for
a Produce request (DefaultRecordBatchBuilder), one per codec; snappy comes out
in the xerial framing that kafka-python and the Java client send. Regenerate
with a Python that has kafka-python==2.3.0, python-snappy, lz4 and zstandard:

    python3 tests/data/batches/gen.py tests/data/batches

The record pattern must match golden_expect() in test_validate.c.
"""
import os
import sys

from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = 10
BASE_TS = 1700000000000


def record(i):
    key = None if i == 3 else b"key-%d" % i
    value = (b"value %d " % i) * 20
    headers = [("h", b"v%d" % i)] if i % 2 == 0 else []
    return BASE_TS + 10 * i, key, value, headers


def build(codec):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=4242, producer_epoch=7, base_sequence=100,
        batch_size=1 << 20)
    for i in range(RECORDS):
        ts, key, value, headers = record(i)
        assert b.append(i, ts, key, value, headers) is not None
    return bytes(b.build())


def main(out_dir):
    for name, codec in CODECS.items():
        data = build(codec)
        assert (data[22] & 7) == codec, "%s was not compressed" % name
        with open(os.path.join(out_dir, "kafka-python-%s.bin" % name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
