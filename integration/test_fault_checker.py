"""The fault suite's checker (integration/fault/checker.py) on synthetic
histories: a clean history is valid, and each kind of anomaly is reported
under its property and makes the run invalid (exit 1 from the command line).
No broker is needed.
"""

import json
import subprocess
import sys

from fault import checker
from procs import REPO


def send(t, proc, value, partition, offset, ok=True):
    inv = {"t": t, "process": proc, "type": "invoke", "f": "send", "value": value,
           "partition": partition}
    done = {"t": t + 0.01, "process": proc, "type": "ok" if ok else "info", "f": "send",
            "value": value, "partition": partition}
    if ok:
        done["offset"] = offset
    return [inv, done]


def read(t, proc, partition, offset, value, session=1):
    return {"t": t, "process": proc, "type": "ok", "f": "read", "partition": partition,
            "offset": offset, "value": value, "session": session}


def clean():
    ev = []
    for i in range(6):
        ev += send(i, "p0", "p0-%06d" % i, i % 2, i // 2)
    for i in range(6):
        ev.append(read(10 + i, "c0", i % 2, i // 2, "p0-%06d" % i))
    ev.append({"t": 20, "process": "c0", "type": "invoke", "f": "commit",
               "offsets": {0: 3, 1: 3}})
    ev.append({"t": 20.1, "process": "c0", "type": "ok", "f": "commit", "offsets": {0: 3, 1: 3}})
    for i in range(6):
        ev.append(read(30 + i, "drain", i % 2, i // 2, "p0-%06d" % i))
    ev.append({"t": 40, "process": "drain", "type": "ok", "f": "done",
               "offsets": {0: 3, 1: 3}, "reached": {0: 3, 1: 3}})
    return ev


def without(ev, pred):
    return [e for e in ev if not pred(e)]


def test_clean_history_is_valid():
    r = checker.check(clean())
    assert r.valid, r.text()
    assert r.passed["lost"] == 6 and r.passed["duplicates"] == 6
    assert r.availability == [("before", 6, 6)]


def test_lost_acknowledged_write():
    ev = without(clean(), lambda e: e["process"] == "drain" and e.get("value") == "p0-000004")
    r = checker.check(ev)
    assert not r.valid
    assert r.failed["lost"] == 1 and r.failed["acked-offset"] == 1
    assert "p0-000004" in r.examples["lost"][0]


def test_unacknowledged_write_may_be_missing():
    ev = clean()
    ev += send(50, "p0", "p0-000099", 0, None, ok=False)
    assert checker.check(ev).valid


def test_duplicate():
    ev = clean()
    ev.insert(-1, read(39, "drain", 0, 3, "p0-000002"))
    r = checker.check(ev)
    assert r.failed["duplicates"] == 1 and not r.valid


def test_two_reads_disagree():
    ev = clean()
    ev.append(read(16, "c1", 1, 0, "p0-000077"))
    r = checker.check(ev)
    assert r.failed["agreement"] == 1 and not r.valid


def test_producer_order():
    ev = []
    ev += send(0, "p0", "p0-000001", 0, 0)
    ev += send(1, "p0", "p0-000000", 0, 1)
    ev += [read(5, "drain", 0, 0, "p0-000001"), read(6, "drain", 0, 1, "p0-000000")]
    r = checker.check(ev)
    assert r.failed["order"] == 1


def test_skip_and_regress_in_a_session():
    ev = clean()
    ev += [read(17, "c0", 0, 5, "p0-000000"), read(18, "c0", 0, 1, "p0-000002")]
    r = checker.check(ev)
    assert r.failed["skipped"] == 1 and r.failed["read-regress"] == 1
    # a new session may re-read from its committed offset
    ev = clean() + [read(17, "c0", 0, 0, "p0-000000", session=2)]
    assert checker.check(ev).valid


def test_commit_backwards():
    ev = clean()
    ev.append({"t": 21, "process": "c0", "type": "ok", "f": "commit", "offsets": {0: 1}})
    ev.append({"t": 22, "process": "c0", "type": "invoke", "f": "committed"})
    ev.append({"t": 22.1, "process": "c0", "type": "ok", "f": "committed", "offsets": {"1": 2}})
    r = checker.check(sorted(ev, key=lambda e: e["t"]))
    assert r.failed["commits"] == 2, r.text()


def test_short_drain():
    ev = clean()
    ev[-1] = dict(ev[-1], reached={0: 3, 1: 2})
    assert checker.check(ev).failed["drain"] == 1


def test_availability_by_phase():
    ev = send(0, "p0", "p0-000000", 0, 0)
    ev.append({"t": 1, "process": "nemesis", "type": "info", "f": "start", "value": "kill-leader"})
    ev += send(2, "p0", "p0-000001", 0, None, ok=False)
    ev.append({"t": 3, "process": "nemesis", "type": "info", "f": "stop", "value": "kill-leader"})
    ev += send(4, "p0", "p0-000002", 0, 1)
    r = checker.check(ev)
    assert r.availability == [("before", 1, 1), ("during kill-leader", 0, 1),
                              ("after kill-leader", 1, 1)]


def test_command_line_exits_1_on_a_loss(tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("".join(json.dumps(e) + "\n" for e in clean()))
    lossy = without(clean(), lambda e: e["process"] == "drain" and e.get("offset") == 0)
    bad.write_text("".join(json.dumps(e) + "\n" for e in lossy))
    for path, code in ((good, 0), (bad, 1)):
        res = subprocess.run([sys.executable, "-m", "integration.fault.checker", str(path)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert res.returncode == code, res.stdout + res.stderr
        assert "lost          " in res.stdout
    assert "lost          4 passed, 2 failed" in res.stdout
