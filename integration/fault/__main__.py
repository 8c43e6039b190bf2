"""python -m integration.fault [--nemesis NAME ...] [--soak --seed N --minutes M]

Starts a FaultCluster (RUNNEL_BIN is the broker binary), runs each named
nemesis once on its own topic (all of them by default), or with --soak a
random schedule drawn from the seed on one topic, prints each report and
exits 1 when any property failed.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from . import nemesis, runner
from .cluster import FaultCluster


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m integration.fault")
    ap.add_argument("--nemesis", action="append", choices=sorted(nemesis.NEMESES))
    ap.add_argument("--soak", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--producers", type=int, default=runner.PRODUCERS)
    ap.add_argument("--base-port", type=int, default=20100)
    ap.add_argument("--dir", help="where the cluster and histories go (default: a temp dir)")
    a = ap.parse_args(argv)
    work = Path(a.dir or tempfile.mkdtemp(prefix="runnel-fault-"))
    print("fault run in %s" % work, flush=True)
    cluster = FaultCluster(work / "cluster", base=a.base_port).start()
    valid = True
    try:
        if a.soak:
            plan = [("soak-%d" % a.seed, runner.soak_schedule(a.seed, a.minutes))]
        else:
            plan = [(n.replace("-", "_"), [n]) for n in (a.nemesis or sorted(nemesis.NEMESES))]
        for topic, schedule in plan:
            t0 = time.monotonic()
            print("== %s: %s" % (topic, " ".join(schedule)), flush=True)
            rep, hpath = runner.run(cluster, topic, schedule, work / "histories",
                                     producers=a.producers)
            print(rep.text())
            print("history %s (%.0f s)" % (hpath, time.monotonic() - t0), flush=True)
            valid &= rep.valid
            dead = cluster.crashed()
            if dead:
                print("CRASHED brokers %s: see their logs in %s" % (dead, work), flush=True)
                valid = False
                cluster.revive()
    finally:
        cluster.close()
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main())
