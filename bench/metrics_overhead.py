#!/usr/bin/env python3
"""The cost of the metrics endpoint on the Kafka listener's produce throughput.

    bench/metrics_overhead.py            5 interleaved repetitions per row
    bench/metrics_overhead.py --quick    1 short repetition (a smoke test)

Builds the release Runnel and loadgen in build-bench/ (bench/run's build),
starts two Runnel brokers side by side, one with runnel.metrics.listener set
(scraped every second by a thread here, as Prometheus would) and one without,
both with runnel.flush.acks.all=page-cache, the broker pinned to CPU 0 and
loadgen to CPU 1, and runs the same produce workloads against them,
interleaved (off, on, off, on, ...), so drift of the machine hits both. Prints
median [min-max] records/s per side and the difference of the medians (the
issue's bound is 2%), and the broker's CPU time per record (steadier than
throughput on a machine shared with other work); with perf installed, the
share of the broker's CPU samples spent in the metrics code during a 100 B
produce run with the endpoint on (independent of other load). Exit status 0 when the table was produced (speed never
fails this), 1 when the harness broke.
"""

import argparse
import importlib.machinery
import importlib.util
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_bench_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(HERE / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


br = load_bench_run()


class Scraper(threading.Thread):
    """GET /metrics once a second until stopped; counts scrapes and failures."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url = "http://127.0.0.1:%d/metrics" % port
        self.stop_event = threading.Event()
        self.scrapes = self.failures = 0
        self.last_bytes = 0

    def run(self):
        while not self.stop_event.wait(1.0):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    self.last_bytes = len(r.read())
                    self.scrapes += 1
            except OSError:
                self.failures += 1


def produce(b, topic, size, parts, secs, count):
    _, err = br.run_client(["create", "-b", b.bootstrap, "-t", topic, "-p", parts], 60)
    if err:
        raise RuntimeError("create topic: " + err)
    res, err = br.run_client(["produce", "-b", b.bootstrap, "-t", topic, "-p", parts, "-s", size,
                              "-a", 1, "-n", count, "-T", secs, "-S", 6], 2 * secs + 60,
                             broker=b)
    br.run_client(["delete", "-b", b.bootstrap, "-t", topic], 60)
    if err:
        raise RuntimeError(err)
    r = res[0]
    cpu_us = 1e6 * r["broker_cpu_s"] / r["records"] if r.get("broker_cpu_s") else float("nan")
    return r["rec_s"], cpu_us


# The metrics code's symbols (static helpers included, for builds that keep them).
METRICS_SYMBOLS = re.compile(
    r"^(kb_req_metrics|kb_metric|kb_prom|kb_http|kb_observe|count_produce|count_fetch|"
    r"record_count|topic_series|api_series|block_|series_|sample_line|write_family|"
    r"write_histogram|refresh|topic_gauges|group_gauges|partition_gauges|connection_gauges|"
    r"set_gauge|join_values|format_labels|to_response|on_http|flush_out|read_in|try_parse)")


def perf_share(b, secs, tmp):
    """Produces 100 B records at full speed for secs while perf samples the
    broker; returns (percent of its samples in the metrics code, samples) or
    None without perf. Independent of other load on the machine."""
    if shutil.which("perf") is None:
        return None
    data = tmp / "perf.data"
    rec = subprocess.Popen(["perf", "record", "-F", "999", "-p", str(b.proc.pid), "-o",
                            str(data), "--", "sleep", str(secs)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    produce(b, "perf", 100, 1, secs, 1 << 30)
    rec.wait(60)
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                          "symbol", "--stdio", "-n"], capture_output=True, text=True).stdout
    total = share = 0.0
    for line in out.splitlines():
        m = re.match(r"\s+([0-9.]+)%\s+(\d+)\s+\[([.k])\]\s+(\S+)", line)
        if m:
            total += int(m.group(2))
            if m.group(3) == "." and METRICS_SYMBOLS.match(m.group(4)):
                share += float(m.group(1))
    return (share, int(total)) if total else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps, secs = (1, 1.0) if args.quick else (5, 3.0)
    br.build(None)
    tmp = Path(tempfile.mkdtemp(prefix="runnel-metrics-bench-"))
    metrics_port = br.free_port()
    common = {"runnel.flush.acks.all": "page-cache", "num.partitions": "1"}
    off = br.BenchRunnel(tmp / "off", binary=br.RUNNEL, overrides=dict(common))
    on = br.BenchRunnel(tmp / "on", binary=br.RUNNEL, overrides=dict(
        common, **{"runnel.metrics.listener": "http://127.0.0.1:%d" % metrics_port}))
    rows = [(100, 1), (1024, 1), (1024, 4)]
    results = {}
    scraper = Scraper(metrics_port)
    try:
        off.start()
        on.start()
        scraper.start()
        for b in (off, on):  # one unmeasured run each
            produce(b, "warm", 1024, 1, secs, 100000)
        for size, parts in rows:
            for rep in range(reps):
                for side, b in (("off", off), ("on", on)):
                    topic = "m-%s-%d-%d-%d" % (side, size, parts, rep)
                    rate, cpu = produce(b, topic, size, parts, secs, max(1000, (1 << 30) // size))
                    row = results.setdefault((size, parts), {})
                    row.setdefault(side, []).append(rate)
                    row.setdefault(side + "_cpu", []).append(cpu)
        profile = perf_share(on, secs * 2, tmp)
    except Exception as e:  # noqa: BLE001 - the harness broke: say so, exit 1
        print("FAIL: %s" % e, file=sys.stderr)
        return 1
    finally:
        scraper.stop_event.set()
        for b in (off, on):
            if b.alive():
                b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("produce, metrics listener off vs on (median [min-max] of %d; load average %s)"
          % (reps, " ".join(br.loadavg())))
    for (size, parts), r in results.items():
        m_off, m_on = statistics.median(r["off"]), statistics.median(r["on"])
        c_off, c_on = statistics.median(r["off_cpu"]), statistics.median(r["on_cpu"])
        print("  %5d B, acks=1, %d partition%s: records/s off %9.0f [%.0f-%.0f]  on %9.0f "
              "[%.0f-%.0f]  on/off %+.1f%%" % (size, parts, "s" if parts > 1 else " ", m_off,
                                               min(r["off"]), max(r["off"]), m_on, min(r["on"]),
                                               max(r["on"]), 100.0 * (m_on / m_off - 1)))
        print("  %s broker CPU us/record: off %.3f  on %.3f  on/off %+.1f%%"
              % (" " * 24, c_off, c_on, 100.0 * (c_on / c_off - 1)))
    print("  scrapes during the runs: %d (%d failed), last scrape %d bytes"
          % (scraper.scrapes, scraper.failures, scraper.last_bytes))
    if profile:
        print("  perf, metrics on, 100 B produce: %.2f%% of %d broker samples in the metrics "
              "code" % profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
