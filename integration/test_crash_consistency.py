"""Damaged segments recover to their valid prefix.

Each cycle produces 60 batches (acks=-1) to a fresh single-partition topic
whose segments roll every 16 KiB, kills the broker with SIGKILL (an unclean
shutdown, so recovery scans), then damages one segment file at a random
place: even cycles truncate it, odd cycles flip one bit in a byte the batch
CRC covers. After the restart the partition holds exactly the batches that
lie wholly before the damage, byte for byte, and nothing after it (later
segments are dropped), and it takes new batches at the next offset.

The recovery point checkpoint is only written at a clean shutdown here
(log.flush.offset.checkpoint.interval.ms is set very high), so recovery scans
every segment, as for a broker killed before its first checkpoint. The random
choices come from a fixed seed and are printed, so a failure repeats.
"""

import random
import struct
import time

import pytest

import wire
import wire_data
from runnel_broker import RunnelBroker, runnel_bin

CYCLES = 8
BATCHES = 60
SEED = 20240229


def batch_positions(path):
    """[(base_offset, start, end)] of the whole batches in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        (last,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + last, pos, end))
        pos = end
    return out


def test_damaged_segments_recover_to_valid_prefix(tmp_path, target):
    if target != "runnel":
        pytest.skip("damages the Runnel data directory directly")
    rng = random.Random(SEED)
    data = tmp_path / "data"
    b = RunnelBroker(data, binary=runnel_bin(),
                     overrides={"log.segment.bytes": str(16 * 1024),
                                "log.flush.offset.checkpoint.interval.ms": "2147483647"})
    b.start()
    verified = 0
    try:
        for cycle in range(CYCLES):
            topic = "crash-%d" % cycle
            sent = {}
            with wire.connect(b.host, b.port, timeout=30) as s:
                wire.metadata(s, 4, [topic], 1)
                for i in range(BATCHES):
                    recs = [(b"k%d" % j, b"cycle %d batch %d record %d " % (cycle, i, j) * 8, ())
                            for j in range(3)]
                    batch = wire_data.build_batch(recs, int(time.time() * 1000))
                    for _ in range(50):
                        err, base = wire_data.produce_v3(s, i + 1, topic, 0, batch)
                        if err != 3:
                            break
                        time.sleep(0.1)
                    assert err == 0, err
                    sent[base] = [r[1] for r in recs]
            b.kill9()

            segs = sorted((data / ("%s-0" % topic)).glob("*.log"))
            assert len(segs) >= 3, segs
            victim = rng.randrange(len(segs))
            batches = batch_positions(segs[victim])
            assert batches
            if cycle % 2 == 0:
                size = segs[victim].stat().st_size
                cut = rng.randrange(size)
                with open(segs[victim], "r+b") as f:
                    f.truncate(cut)
                keep = [x for x in batches if x[3] <= cut]
                what = "truncated %s at %d of %d" % (segs[victim].name, cut, size)
            else:
                hit = rng.randrange(len(batches))
                _, _, start, end = batches[hit]
                pos = rng.randrange(start + 21, end)
                bit = rng.randrange(8)
                with open(segs[victim], "r+b") as f:
                    f.seek(pos)
                    byte = f.read(1)[0]
                    f.seek(pos)
                    f.write(bytes([byte ^ (1 << bit)]))
                keep = batches[:hit]
                what = "flipped bit %d at %d in %s" % (bit, pos, segs[victim].name)
            before = [x for seg in segs[:victim] for x in batch_positions(seg)]
            expect_end = (keep or before or [(0, -1, 0, 0)])[-1][1] + 1
            print("cycle %d: %s; expecting offsets 0..%d" % (cycle, what, expect_end - 1))

            b.start()
            with wire.connect(b.host, b.port, timeout=30) as s:
                res = wire_data.fetch_v4(s, 1, topic, 0, 0, max_wait_ms=0)
                assert res.error == 0
                assert res.high_watermark == expect_end, what
                if expect_end:
                    got = wire_data.fetch_all_batches(b.host, b.port, topic, 0, expect_end)
                    for bt in got:
                        assert [r[3] for r in bt.records] == sent[bt.base_offset], what
                    assert sum(bt.count for bt in got) == expect_end
                    verified += expect_end
                # The log takes the next batch right after the valid prefix.
                batch = wire_data.build_batch([(None, b"after", ())], int(time.time() * 1000))
                err, base = wire_data.produce_v3(s, 2, topic, 0, batch)
                assert (err, base) == (0, expect_end), what
        print("damage cycles: %d, records verified: %d" % (CYCLES, verified))
    finally:
        b.close()
