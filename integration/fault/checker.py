"""The checker: reads a history (history.py) and reports, per property, how
many cases passed and how many failed, with a few examples of each failure.

Properties (docs/fault-suite.md explains them):
  lost          every acknowledged send (type ok, f send) is read by the drain
  acked-offset  the drain reads an acknowledged value at the offset its ack named
  duplicates    no value is read at two offsets by the drain
  agreement     every reader that read (partition, offset) read the same value
  order         one producer's values in one partition are in the order it sent them
  read-regress  within one consumer session an offset read never goes backwards
  skipped       within one consumer session no offset is skipped (the log has no
                holes without transactions or compaction), unless the session saw
                OFFSET_OUT_OF_RANGE first
  commits       acknowledged commits of one consumer never move backwards, and a
                committed-offset read is never below a commit acknowledged
                before it was asked
  drain         the final drain reached every partition's high watermark
Availability (not a pass/fail property): the share of sends answered ok per
phase (before the first fault, during each fault, after it was undone).

The checker is pure: a list of events in, a Report out. main() loads a
file, prints the report and exits 1 when any property has a failure.
"""

import sys
from collections import defaultdict

PROPERTIES = ("lost", "acked-offset", "duplicates", "agreement", "order", "read-regress",
              "skipped", "commits", "drain")
MAX_EXAMPLES = 5


class Report:
    def __init__(self):
        self.passed = {p: 0 for p in PROPERTIES}
        self.failed = {p: 0 for p in PROPERTIES}
        self.examples = {p: [] for p in PROPERTIES}
        self.availability = []  # [(phase, ok, total)]
        self.counts = {}

    def ok(self, prop, n=1):
        self.passed[prop] += n

    def bad(self, prop, example):
        self.failed[prop] += 1
        if len(self.examples[prop]) < MAX_EXAMPLES:
            self.examples[prop].append(example)

    @property
    def valid(self):
        return not any(self.failed.values())

    def lines(self):
        out = ["history: %s" % ", ".join("%s %d" % kv for kv in self.counts.items())]
        for p in PROPERTIES:
            out.append("%-13s %d passed, %d failed" % (p, self.passed[p], self.failed[p]))
            for ex in self.examples[p]:
                out.append("    e.g. %s" % (ex,))
        for phase, ok, total in self.availability:
            out.append("availability %-28s %5d/%-5d sends ok (%.1f%%)"
                       % (phase, ok, total, 100.0 * ok / total if total else 100.0))
        out.append("VALID" if self.valid else "INVALID: %d failures"
                   % sum(self.failed.values()))
        return out

    def text(self):
        return "\n".join(self.lines())

    def as_dict(self):
        return {"passed": self.passed, "failed": self.failed, "valid": self.valid,
                "availability": [{"phase": p, "ok": o, "total": t}
                                 for p, o, t in self.availability],
                "counts": self.counts}


def _seq(value):
    """"p3-000042" -> ("p3", 42); None when the value is not one of ours."""
    head, _, tail = str(value).rpartition("-")
    return (head, int(tail)) if head and tail.isdigit() else None


def _phases(events):
    """[(t_start, t_end, name)] from the nemesis events, in time order."""
    out, open_ = [], {}
    for e in events:
        if e["process"] != "nemesis":
            continue
        if e["f"] == "start":
            open_[e.get("value")] = e["t"]
        elif e["f"] == "stop" and e.get("value") in open_:
            out.append((open_.pop(e["value"]), e["t"], e["value"]))
    for name, t in open_.items():
        out.append((t, float("inf"), name))
    return sorted(out)


def _phase_of(t, phases):
    name = "before"
    for start, end, nem in phases:
        if t < start:
            break
        name = ("during " + nem) if t <= end else ("after " + nem)
    return name


def check(events):
    r = Report()
    sends = defaultdict(dict)  # process -> value -> [invoke, completion]
    reads = []
    for e in events:
        if e["f"] == "send":
            slot = sends[e["process"]].setdefault(e["value"], [None, None])
            slot[0 if e["type"] == "invoke" else 1] = e
        elif e["f"] == "read":
            reads.append(e)
    completions = [c for per in sends.values() for _, c in per.values()]
    acked = [c for c in completions if c is not None and c["type"] == "ok"]
    r.counts = {"sends": sum(len(v) for v in sends.values()), "acked": len(acked),
                "failed": sum(1 for c in completions if c is not None and c["type"] == "fail"),
                "unknown": sum(1 for c in completions if c is None or c["type"] == "info"),
                "reads": len(reads)}

    drain = [e for e in reads if e["process"] == "drain"]
    drain_at = {}  # (partition, offset) -> value
    drain_values = defaultdict(list)  # value -> [(partition, offset)]
    for e in drain:
        drain_at[(e["partition"], e["offset"])] = e["value"]
        drain_values[e["value"]].append((e["partition"], e["offset"]))

    # lost / acked-offset
    for c in acked:
        if c["value"] not in drain_values:
            r.bad("lost", "%s acked at %s/%s, never read back"
                  % (c["value"], c.get("partition"), c.get("offset")))
        else:
            r.ok("lost")
        at = drain_at.get((c.get("partition"), c.get("offset")))
        if at == c["value"]:
            r.ok("acked-offset")
        else:
            r.bad("acked-offset", "%s acked at %s/%s, the drain read %r there"
                  % (c["value"], c.get("partition"), c.get("offset"), at))

    # duplicates
    for value, places in drain_values.items():
        if len(places) > 1:
            r.bad("duplicates", "%s read at %s" % (value, sorted(places)))
        else:
            r.ok("duplicates")

    # agreement across every reader
    seen = defaultdict(set)
    for e in reads:
        seen[(e["partition"], e["offset"])].add(e["value"])
    for key, values in sorted(seen.items()):
        if len(values) > 1:
            r.bad("agreement", "partition %s offset %s read as %s" % (key[0], key[1],
                                                                     sorted(values)))
        else:
            r.ok("agreement")

    # order: per partition and producer, sequence numbers rise with offsets
    last = {}
    for (p, o) in sorted(drain_at):
        s = _seq(drain_at[(p, o)])
        if s is None:
            continue
        key = (p, s[0])
        if key in last and last[key][1] >= s[1]:
            r.bad("order", "partition %s: %s at offset %s after %s-%06d at offset %s"
                  % (p, drain_at[(p, o)], o, s[0], last[key][1], last[key][0]))
        else:
            r.ok("order")
        last[key] = (o, s[1])

    # read-regress / skipped, per consumer session and partition
    pos = {}
    excused = set()
    for e in events:
        if e["process"] == "drain" or e["f"] not in ("read", "poll-error"):
            continue
        sess = (e["process"], e.get("session", 0))
        if e["f"] == "poll-error":
            if "OUT_OF_RANGE" in str(e.get("error")):
                excused.add(sess)
            continue
        key = sess + (e["partition"],)
        prev = pos.get(key)
        pos[key] = e["offset"]
        if prev is None:
            continue
        if e["offset"] <= prev:
            r.bad("read-regress", "%s session %s partition %s read %s after %s"
                  % (sess[0], sess[1], e["partition"], e["offset"], prev))
        else:
            r.ok("read-regress")
        if e["offset"] > prev + 1 and sess not in excused:
            r.bad("skipped", "%s session %s partition %s jumped from %s to %s"
                  % (sess[0], sess[1], e["partition"], prev, e["offset"]))
        elif e["offset"] > prev:
            r.ok("skipped")

    # commits
    best = {}  # partition -> highest commit acknowledged so far (one group)
    last_commit = {}  # (process, partition) -> last acked commit
    invoked = {}  # process -> t of the committed-read invoke
    for e in events:
        if e["f"] == "commit" and e["type"] == "ok":
            for p, off in (e.get("offsets") or {}).items():
                p = int(p)
                lk = (e["process"], p)
                if lk in last_commit and off < last_commit[lk]:
                    r.bad("commits", "%s committed %s on partition %s after %s"
                          % (e["process"], off, p, last_commit[lk]))
                else:
                    r.ok("commits")
                last_commit[lk] = off
                best[p] = max(best.get(p, -1), off)
        elif e["f"] == "committed" and e["type"] == "invoke":
            invoked[e["process"]] = dict(best)
        elif e["f"] == "committed" and e["type"] == "ok":
            floor = invoked.pop(e["process"], {})
            for p, off in (e.get("offsets") or {}).items():
                p = int(p)
                if off < floor.get(p, -1):
                    r.bad("commits", "committed offset of partition %s read as %s after "
                          "a commit of %s was acknowledged" % (p, off, floor[p]))
                else:
                    r.ok("commits")

    # drain reached the high watermarks
    for e in events:
        if e["process"] == "drain" and e["f"] == "done":
            for p, hw in (e.get("offsets") or {}).items():
                got = (e.get("reached") or {}).get(p)
                if got is None or got < hw:
                    r.bad("drain", "partition %s: drained to %s of high watermark %s"
                          % (p, got, hw))
                else:
                    r.ok("drain")

    # availability per phase
    phases = _phases(events)
    per = defaultdict(lambda: [0, 0])
    order = []
    for per_proc in sends.values():
        for inv, comp in per_proc.values():
            if inv is None:
                continue
            name = _phase_of(inv["t"], phases)
            if name not in per:
                order.append((inv["t"], name))
            per[name][1] += 1
            if comp is not None and comp["type"] == "ok":
                per[name][0] += 1
    seen_names = []
    for _, name in sorted(order):
        if name not in seen_names:
            seen_names.append(name)
    r.availability = [(n, per[n][0], per[n][1]) for n in seen_names]
    return r


def main(argv=None):
    from .history import load
    argv = argv if argv is not None else sys.argv[1:]
    if len(argv) != 1:
        sys.stderr.write("usage: python -m integration.fault.checker HISTORY.jsonl\n")
        return 2
    rep = check(load(argv[0]))
    print(rep.text())
    return 0 if rep.valid else 1


if __name__ == "__main__":
    sys.exit(main())
