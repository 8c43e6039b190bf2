#!/usr/bin/env python3
"""Fetch throughput over kernel TLS, in a virtual machine whose kernel has it.

    bench/ktls_fetch.py [--mb 64] [--reps 3]

The host kernel may have no `tls` module; this boots Debian's kernel under
qemu (integration/ktls_vm.py) with the broker ($RUNNEL_BIN, else
build/broker/runnel) and kcat, fills one partition with --mb MiB of 64 KiB
records, then times kcat reading all of it back, --reps times each,
interleaved, over four paths:

  plaintext        sendfile(2)
  ktls-sendfile    TLS 1.3, kernel TLS, SSL_sendfile     (zerocopy=true)
  ktls-copy        TLS 1.3, kernel TLS, pread+SSL_write  (zerocopy=false)
  openssl-copy     TLS 1.3 without kernel TLS (tls module unloaded),
                   pread + SSL_write encrypting in user space

Prints MiB/s (median [min-max]) per path and each relative to openssl-copy,
the path every host without kernel TLS takes. The machine runs under
software emulation unless RUNNEL_VM_KVM=1, so only the ratios between paths
mean anything, not the absolute figures, and even the ratios carry the
emulator's cost of each instruction mix. Figures, never a verdict: the exit
status is 0 whenever the table was printed.
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from ktls_vm import KtlsVm, kernel_present, tools_present  # noqa: E402
from security import Certs  # noqa: E402

RECORD = 64 * 1024
PATHS = ("plaintext", "ktls-sendfile", "ktls-copy", "openssl-copy")

# Brokers for the four paths, each on its own data directory filled once.
# /proc/uptime (centiseconds) is the clock: busybox date has no sub-second.
JOB = r"""
set -u
MB=%(mb)d
REPS=%(reps)d
COUNT=$((MB * 16))
SSL="-X security.protocol=ssl -X ssl.ca.location=/job/ca.pem"

start_broker() {  # $1 zerocopy, $2 data dir, $3 log
    runnel --override log.dirs=$2 --override runnel.fetch.zerocopy=$1 \
      --override listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093 \
      --override advertised.listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093 \
      --override ssl.keystore.type=PEM --override ssl.keystore.location=/job/keystore.pem \
      > $3 2>&1 &
    BROKER=$!
    wait_for_broker $BROKER $3 || exit 1
}
stop_broker() { kill -TERM $BROKER; wait $BROKER; }
now_cs() { read up rest < /proc/uptime; echo ${up%%%%.*}${up##*.}; }

timed_read() {  # $1 label, $2 rep, $3 port, further args: kcat options
    label=$1; rep=$2; port=$3; shift 3
    t0=$(now_cs)
    got=$(kcat -C -b 127.0.0.1:$port -t bench -p 0 -o beginning -e -q -f '%%o\n' \
          -X fetch.max.bytes=52428800 -X max.partition.fetch.bytes=8388608 "$@" | wc -l)
    t1=$(now_cs)
    echo "RESULT $label $rep $((t1 - t0)) $got"
}

# one log filled per zerocopy setting (the log is the same either way)
head -c $RECORD_TEXT /dev/zero | tr '\0' 'x' > /tmp/record.txt
i=0; while [ $i -lt $COUNT ]; do cat /tmp/record.txt; echo; i=$((i + 1)); done > /tmp/records.txt
for zc in true false; do
    start_broker $zc /tmp/data-$zc /tmp/fill-$zc.log
    kcat -P -b 127.0.0.1:9092 -t bench -p 0 -X linger.ms=20 -X message.max.bytes=1000000 \
         < /tmp/records.txt || exit 1
    stop_broker
done
rm /tmp/records.txt

rep=1
while [ $rep -le $REPS ]; do
    start_broker true /tmp/data-true /tmp/zc.log
    timed_read plaintext $rep 9092
    timed_read ktls-sendfile $rep 9093 $SSL
    stop_broker
    start_broker false /tmp/data-false /tmp/copy.log
    timed_read ktls-copy $rep 9093 $SSL
    stop_broker
    # without the module, and without letting the broker's probe load it again
    rmmod tls || exit 1
    echo /bin/false > /proc/sys/kernel/modprobe
    start_broker true /tmp/data-true /tmp/nok.log
    timed_read openssl-copy $rep 9093 $SSL
    stop_broker
    echo /sbin/modprobe > /proc/sys/kernel/modprobe
    modprobe tls
    rep=$((rep + 1))
done
grep -h 'TLS fetch path' /tmp/zc.log /tmp/nok.log
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if not tools_present() or not kernel_present():
        sys.exit("ktls_fetch: needs qemu, busybox, cpio and the kernel: bash .ci/install-deps --test")
    binary = os.environ.get("RUNNEL_BIN") or str(HERE.parent / "build" / "broker" / "runnel")
    with tempfile.TemporaryDirectory(prefix="runnel-ktls-bench-") as tmp:
        tmp = Path(tmp)
        certs = Certs(tmp / "certs")
        keystore = tmp / "keystore.pem"
        keystore.write_text(certs.server_key.read_text() + certs.server_cert.read_text())
        vm = KtlsVm(tmp / "vm", memory_mb=1024 + 3 * args.mb,
                    binaries={"/bin/runnel": binary, "/bin/kcat": shutil.which("kcat")},
                    files={"/job/ca.pem": certs.ca, "/job/keystore.pem": keystore})
        job = ("RECORD_TEXT=%d\n" % (RECORD - 1)) + JOB % {"mb": args.mb, "reps": args.reps}
        status, console = vm.run(job, timeout=300 + 60 * args.reps * args.mb // 16)
    results = {}
    expected = args.mb * 1024 * 1024 // RECORD
    for label, _rep, cs, got in re.findall(r"RESULT (\S+) (\d+) (\d+) (\d+)", console):
        if int(got) != expected:
            sys.exit("ktls_fetch: %s read %s records of %d\n%s" % (label, got, expected, console))
        results.setdefault(label, []).append(args.mb / max(int(cs), 1) * 100)
    if status != 0 or set(results) != set(PATHS):
        sys.exit("ktls_fetch: the machine's job failed (exit %r)\n%s" % (status, console[-8000:]))
    accel = "KVM" if KtlsVm.kvm_usable() else "software emulation (qemu TCG)"
    print("fetch of %d MiB in %d KiB records, kcat, %d reps, in a VM under %s (MiB/s)"
          % (args.mb, RECORD // 1024, args.reps, accel))
    base = statistics.median(results["openssl-copy"])
    for label in PATHS:
        v = results[label]
        print("  %-14s %8.1f  [%.1f-%.1f]  %.2fx openssl-copy"
              % (label, statistics.median(v), min(v), max(v), statistics.median(v) / base))
    for line in console.splitlines():
        if 'msg="TLS fetch path"' in line:
            print("  " + line.split("msg=", 1)[1])


if __name__ == "__main__":
    main()
