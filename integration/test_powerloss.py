"""Power loss: acks=-1 records survive losing every write no fdatasync covered.

The broker runs with tests/fault/libpowerloss.so preloaded (see powerloss.c):
before each write to its data directory the shim journals the bytes it
replaces, and after each successful fdatasync/fsync it journals a sync mark.
Each cycle a producer sends acks=-1 batches in a loop; at a random moment the
broker is killed with SIGKILL; then undo() rolls every file back past each
write that no completed sync covered (what a disk holds after a power cut at
that moment); the broker restarts, and every batch acknowledged in any cycle
so far must be there, byte for byte, at the offset it was acknowledged with.

Only file contents are simulated: directory entries (segment creation, the
checkpoint renames) are assumed durable, as the broker fsyncs its
directories after creating files.
"""

import os
import random
import struct
import threading
import time
from pathlib import Path

import pytest

import wire
import wire_data
from conftest import in_ci
from runnel_broker import RunnelBroker, runnel_bin

CYCLES = 5
SEED = 4242


def shim_path():
    return Path(runnel_bin()).resolve().parent.parent / "tests" / "fault" / "libpowerloss.so"


class PreloadBroker(RunnelBroker):
    journal = None

    def env(self):
        e = dict(os.environ)
        e["LD_PRELOAD"] = str(shim_path())
        e["POWERLOSS_DIR"] = str(self.datadir.resolve())
        e["POWERLOSS_LOG"] = str(self.journal)
        # The shim comes before the ASan runtime in the preload order.
        e["ASAN_OPTIONS"] = (e.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
        return e


def read_journal(path):
    """Parses the shim's journal. SIGKILL can cut its last record short; the
    shim journals before it writes, so a cut undo record's write never
    happened and a cut sync mark's sync is treated as not done: both are
    dropped."""
    data = Path(path).read_bytes()
    recs, pos = [], 0
    try:
        while pos < len(data):
            tag = data[pos:pos + 1]
            if tag == b"U":
                seq, plen = struct.unpack_from("=QH", data, pos + 1)
                p = pos + 11
                name = data[p:p + plen].decode()
                off, size, n = struct.unpack_from("=qqI", data, p + plen)
                q = p + plen + 20
                if q + n > len(data):
                    break
                recs.append(("U", seq, name, off, size, data[q:q + n]))
                pos = q + n
            elif tag == b"S":
                start, plen = struct.unpack_from("=QH", data, pos + 1)
                p = pos + 11
                if p + plen > len(data):
                    break
                recs.append(("S", start, data[p:p + plen].decode()))
                pos = p + plen
            else:
                raise AssertionError("bad journal record at %d" % pos)
    except (struct.error, UnicodeDecodeError):
        pass  # the final record was cut short by the kill
    return recs


def undo(journal):
    """Reverts every write not covered by a later completed sync of its file."""
    recs = read_journal(journal)
    synced = {}
    for r in recs:
        if r[0] == "S":
            synced[r[2]] = max(synced.get(r[2], 0), r[1])
    undone = 0
    for r in reversed(recs):
        if r[0] != "U":
            continue
        _, seq, name, off, size, old = r
        if seq < synced.get(name, 0) or not os.path.exists(name):
            continue
        with open(name, "r+b") as f:
            if old:
                f.seek(off)
                f.write(old)
            f.truncate(min(size, os.fstat(f.fileno()).st_size) if old else size)
        undone += 1
    return undone


def test_acks_all_survive_power_loss(tmp_path, target):
    if target != "runnel":
        pytest.skip("preloads a shim into the Runnel binary")
    if not shim_path().exists():
        msg = "%s not built" % shim_path()
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
    rng = random.Random(SEED)
    b = PreloadBroker(tmp_path / "data", binary=runnel_bin())
    topic = "powerloss"
    acked = {}
    total_undone = 0
    try:
        for cycle in range(CYCLES):
            b.journal = tmp_path / ("journal-%d" % cycle)
            b.start()
            stop = threading.Event()

            def produce():
                try:
                    with wire.connect(b.host, b.port, timeout=10) as s:
                        wire.metadata(s, 4, [topic], 1)
                        i = 0
                        while not stop.is_set():
                            value = b"cycle %d batch %d " % (cycle, i) * 20
                            batch = wire_data.build_batch([(None, value, ())],
                                                          int(time.time() * 1000))
                            err, base = wire_data.produce_v3(s, i + 1, topic, 0, batch)
                            if err == 0:
                                acked[base] = value
                            i += 1
                except (OSError, ValueError, AssertionError):
                    pass  # the broker died under us

            t = threading.Thread(target=produce, daemon=True)
            t.start()
            time.sleep(rng.uniform(0.3, 1.2))
            b.kill9()
            stop.set()
            t.join(timeout=15)
            n = undo(b.journal)
            total_undone += n
            print("cycle %d: %d batches acknowledged so far, %d unsynced writes undone"
                  % (cycle, len(acked), n))

        b.journal = tmp_path / "journal-final"
        b.start()
        end = max(acked) + 1
        got = wire_data.fetch_all_batches(b.host, b.port, topic, 0, end)
        values = {bt.base_offset: bt.records[0][3] for bt in got}
        missing = [o for o in acked if values.get(o) != acked[o]]
        assert not missing, "acknowledged batches lost or changed at offsets %s" % missing[:10]
        print("power loss: %d cycles, %d acknowledged batches verified, %d writes undone"
              % (CYCLES, len(acked), total_undone))
    finally:
        b.close()


def test_journal_cut_mid_record_is_dropped(tmp_path):
    """SIGKILL may land between the shim's writes of one record: every cut
    of the final record parses to the records before it."""
    name = b"/data/p-0/00000000000000000000.log"
    undo_rec = (b"U" + struct.pack("=QH", 7, len(name)) + name +
                struct.pack("=qqI", 100, 120, 4) + b"abcd")
    sync_rec = b"S" + struct.pack("=QH", 8, len(name)) + name
    journal = tmp_path / "journal"
    for last in (undo_rec, sync_rec):
        whole = sync_rec + last
        journal.write_bytes(whole)
        assert len(read_journal(journal)) == 2
        for cut in range(len(sync_rec), len(whole)):
            journal.write_bytes(whole[:cut])
            assert read_journal(journal) == [("S", 8, name.decode())], cut
