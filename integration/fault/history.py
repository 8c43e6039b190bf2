"""The history of one fault run: a JSONL file, one operation event a line.

Every operation a workload performs is written twice, as in Jepsen: an
`invoke` event when the client is asked, and a completion when it answers:
`ok` (it happened), `fail` (it certainly did not happen) or `info` (unknown:
a timeout or a lost connection; it may have happened). Reads, which change
nothing, are written once, as `ok` completions. Nemesis actions are events
of process "nemesis".

Fields: t (seconds since the run began, monotonic), process (the client:
"p0", "c0", "drain", "nemesis"), type, f (send, read, commit, committed,
poll-error, start, stop), and as they apply: partition, offset, value,
error, offsets ({partition: offset} for commits).

Invariant: events are appended under a lock, so lines never interleave;
the file is flushed at close. The History owns its file.
"""

import json
import threading
import time


class History:
    def __init__(self, path):
        self.path = path
        self._f = open(path, "w")
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self.events = []

    def now(self):
        return round(time.monotonic() - self._t0, 6)

    def add(self, process, type_, f, **fields):
        ev = {"t": self.now(), "process": process, "type": type_, "f": f}
        ev.update({k: v for k, v in fields.items() if v is not None})
        with self._lock:
            self.events.append(ev)
            self._f.write(json.dumps(ev, sort_keys=True) + "\n")
        return ev

    def close(self):
        with self._lock:
            if not self._f.closed:
                self._f.close()


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
