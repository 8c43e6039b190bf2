"""One fault run: a workload on a fresh RF=3 topic of a running FaultCluster,
a schedule of nemeses, the drain, and the check.

run() returns (Report, history path). The workload threads are stopped and
joined before the drain, whatever the nemeses did; each nemesis undoes its
own fault (nemesis.py), and the runner heals every proxy on the way out too.
"""

import random
import threading
import time
from pathlib import Path

from . import checker, nemesis, workload
from .history import History

PARTITIONS = 3
# Two idempotent producers: their ids come from distinct blocks the
# controller hands each broker (AllocateProducerIds), so their batches on one
# partition never look like retries of each other.
PRODUCERS = 2


def run(cluster, topic, schedule, outdir, warmup=3.0, cooldown=6.0, hold=6.0,
        before_drain=None, rate=150, producers=PRODUCERS, create_isr=3):
    """schedule: nemesis names, run one after the other with a pause between.
    before_drain(cluster, topic): a hook run after the workload stopped (the
    self-test injects its loss there)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    hpath = outdir / ("%s.history.jsonl" % topic)
    hist = History(hpath)
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_healthy(topic, PARTITIONS, isr=create_isr)
    stop = threading.Event()
    boot = cluster.all_bootstrap
    workers = [workload.Producer(hist, boot, topic, PARTITIONS, i, stop, rate=rate)
               for i in range(producers)]
    workers.append(workload.GroupConsumer(hist, boot, topic, "fault-%s" % topic, "c0", stop))
    for w in workers:
        w.start()
    try:
        time.sleep(warmup)
        for name in schedule:
            nemesis.NEMESES[name](cluster, topic, hist, hold)
            time.sleep(cooldown)
    finally:
        cluster.proxies.heal()
        stop.set()
        for w in workers:
            w.join(90)
    errors = [(w.name, w.error) for w in workers if w.error is not None]
    for name, err in errors:
        hist.add(name, "info", "worker-error", error=repr(err))
    if before_drain is not None:
        before_drain(cluster, topic)
    cluster.wait_healthy(topic, PARTITIONS, timeout=90, isr=1)
    workload.drain(hist, cluster.all_bootstrap, topic, PARTITIONS)
    hist.close()
    rep = checker.check(hist.events)
    rep.counts["crashed brokers"] = len(cluster.crashed())
    (outdir / ("%s.report.txt" % topic)).write_text(rep.text() + "\n")
    return rep, hpath


def soak_schedule(seed, minutes):
    """A random nemesis schedule, about `minutes` long, from the seed."""
    rng = random.Random(seed)
    names = sorted(nemesis.NEMESES)
    out, total = [], 0.0
    while total < minutes * 60:
        out.append(rng.choice(names))
        total += 25.0
    return out
