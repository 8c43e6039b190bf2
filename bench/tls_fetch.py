#!/usr/bin/env python3
"""Fetch throughput over plaintext and TLS, with runnel.fetch.zerocopy on and off.

    bench/tls_fetch.py [--mb 128] [--reps 3]

Starts two Runnel brokers (zero-copy on, zero-copy off) with the listeners of
integration/security.py (certificates made by openssl in a temporary
directory), fills one topic per broker with --mb MiB of 64 KiB records over
PLAINTEXT, then times kcat reading the whole topic from the beginning on the
PLAINTEXT and the SSL listener, --reps times each, interleaved. Prints MiB/s
(median [min-max]) per path and the TLS fetch path the broker chose
(kernel TLS + SSL_sendfile, or pread + SSL_write). Figures, never a verdict:
the exit status is 0 whenever the table was printed.

The binary is $RUNNEL_BIN, else build/broker/runnel.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from security import Certs, SecureBroker  # noqa: E402

RECORD = 64 * 1024


def kcat_conf(b, listener, certs):
    conf = ["-b", b.addr(listener)]
    if listener == "SSL":
        conf += ["-X", "security.protocol=ssl", "-X", "ssl.ca.location=%s" % certs.ca]
    return conf


def fill(b, certs, topic, mb):
    payload = ("x" * (RECORD - 1) + "\n") * (mb * 1024 * 1024 // RECORD)
    subprocess.run(["kcat", "-P", "-t", topic, "-p", "0", "-X", "linger.ms=20",
                    "-X", "message.max.bytes=1000000"] + kcat_conf(b, "PLAINTEXT", certs),
                   input=payload, text=True, check=True, timeout=600)


def read_all(b, certs, listener, topic, count):
    t0 = time.monotonic()
    out = subprocess.run(["kcat", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                          "-f", "%o\\n", "-X", "fetch.max.bytes=52428800",
                          "-X", "max.partition.fetch.bytes=8388608"]
                         + kcat_conf(b, listener, certs),
                         capture_output=True, text=True, check=True, timeout=600)
    dt = time.monotonic() - t0
    got = len(out.stdout.split())
    if got != count:
        raise RuntimeError("read %d records of %d over %s" % (got, count, listener))
    return count * RECORD / dt / (1 << 20)


def fetch_path(b):
    for line in b.log_path.read_text(errors="replace").splitlines():
        if 'msg="TLS fetch path"' in line:
            return line.split("path=", 1)[1]
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    binary = os.environ.get("RUNNEL_BIN") or str(HERE.parent / "build" / "broker" / "runnel")
    count = args.mb * 1024 * 1024 // RECORD
    with tempfile.TemporaryDirectory(prefix="runnel-tls-bench-") as tmp:
        tmp = Path(tmp)
        certs = Certs(tmp / "certs")
        brokers = {}
        try:
            for zc in ("true", "false"):
                b = SecureBroker(tmp / ("zc-" + zc) / "data", certs, binary=binary,
                                 extra={"runnel.fetch.zerocopy": zc})
                b.start()
                brokers[zc] = b
                fill(b, certs, "bench", args.mb)
            results = {}
            for _ in range(args.reps):
                for zc, b in brokers.items():
                    for listener in ("PLAINTEXT", "SSL"):
                        key = "%-9s zerocopy=%s" % (listener, zc)
                        results.setdefault(key, []).append(
                            read_all(b, certs, listener, "bench", count))
            print("fetch of %d MiB in %d KiB records, kcat, %d reps (MiB/s)" %
                  (args.mb, RECORD // 1024, args.reps))
            for key, v in results.items():
                print("  %-26s %8.1f  [%.1f-%.1f]" % (key, statistics.median(v), min(v), max(v)))
            print("TLS fetch path: %s" % fetch_path(brokers["true"]))
        finally:
            for b in brokers.values():
                b.close()


if __name__ == "__main__":
    main()
