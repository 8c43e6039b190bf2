"""Disk full: the data directory on an 8 MiB tmpfs mounted by the test.

A 3 MiB file is put there first to take space. Producing (acks=-1, 64 KiB
batches) until the file system is full gets KAFKA_STORAGE_ERROR; every batch
acknowledged before that reads back byte for byte; other partitions and
ApiVersions keep working; once the filler file is deleted, producing to the
same partition succeeds again, at the next offset; and after a restart every
acknowledged batch is still there. Needs root (mount); unmounted in teardown.
"""

import os
import subprocess
import time

import pytest

import wire
import wire_data
from conftest import in_ci
from runnel_broker import RunnelBroker, runnel_bin

KAFKA_STORAGE_ERROR = 56
MIB = 1 << 20
VALUE = 64 * 1024


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        msg = "cannot mount a tmpfs (needs root): %s" % res.stderr.strip()
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def produce(sock, corr, topic, partition, value):
    batch = wire_data.build_batch([(b"k", value, ())], int(time.time() * 1000))
    return wire_data.produce_v3(sock, corr, topic, partition, batch)


def test_disk_full(small_fs, target):
    if target != "runnel":
        pytest.skip("starts the Runnel binary on its own file system")
    filler = small_fs / "filler"
    filler.write_bytes(b"\x00" * (3 * MIB))
    data = small_fs / "data"
    b = RunnelBroker(data, binary=runnel_bin(),
                     overrides={"num.partitions": "2", "log.segment.bytes": str(MIB),
                                "log.index.size.max.bytes": "65536"})
    b.start()
    try:
        topic = "full"
        s = wire.connect(b.host, b.port, timeout=30)
        wire.metadata(s, 4, [topic], 1)  # auto-create
        acked = {}
        err = None
        for i in range(400):
            value = bytes([i % 251]) * VALUE
            for _ in range(50):
                err, base = produce(s, 100 + i, topic, 0, value)
                if err != 3:  # UNKNOWN_TOPIC_OR_PARTITION while being created
                    break
                time.sleep(0.1)
            if err != 0:
                break
            acked[base] = value
        assert err == KAFKA_STORAGE_ERROR, "after %d batches: error %s" % (len(acked), err)
        assert len(acked) >= 10
        print("disk full after %d acknowledged batches of %d KiB" % (len(acked), VALUE // 1024))
        # It stays full: a second attempt gets the same answer, the broker lives.
        assert produce(s, 999, topic, 0, b"y" * VALUE)[0] == KAFKA_STORAGE_ERROR
        assert b.alive(), b.log_tail()
        with wire.connect(b.host, b.port) as other:
            assert wire.api_versions_v0(other, 1)[0] == 0

        def check_all(sock):
            got = wire_data.fetch_all_batches(b.host, b.port, topic, 0, max(acked) + 1)
            values = {bt.base_offset: bt.records[0][3] for bt in got}
            assert sorted(values) == sorted(acked)
            for off, v in acked.items():
                assert values[off] == v, "batch at %d damaged" % off

        check_all(s)
        # Free space: producing resumes at the next offset.
        os.unlink(filler)
        err, base = produce(s, 2000, topic, 0, b"z" * VALUE)
        assert err == 0, err
        assert base == max(acked) + 1
        acked[base] = b"z" * VALUE
        s.close()
        b.stop()
        b.start()
        s = wire.connect(b.host, b.port, timeout=30)
        check_all(s)
        s.close()
    finally:
        b.close()
