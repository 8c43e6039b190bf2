"""The fetch path over kernel TLS: SSL_sendfile, run for real.

The host kernel may have no `tls` module, so the broker here always falls
back to pread + SSL_write. These tests boot a Debian kernel that has it under
qemu (integration/ktls_vm.py) with the broker under test and kcat inside, and
check, from the broker's own per-connection byte counters, which path carried
the records:

- runnel.fetch.zerocopy=true on a TLS 1.3 and a TLS 1.2 listener: every
  record byte goes out through SSL_sendfile (kernel TLS), none through a
  user-space copy, and the consumer reads back exactly what was produced;
- on the PLAINTEXT listener of the same broker: plain sendfile(2);
- runnel.fetch.zerocopy=false: the copy path (pread, then SSL_write, which
  the kernel encrypts), same bytes read back.

Large records (256 KiB) and 8 MiB fetch responses over a socket with a small
send buffer make SSL_sendfile stop on a full socket many times, so partial
sends and retries are exercised too. Runnel only: Kafka has no such counters
(and runs on the JVM, which has no kernel TLS).
"""

import base64
import hashlib
import os
import re

import pytest

from conftest import missing, require_exe
from ktls_vm import KtlsVm, kernel_present, tools_present
from runnel_broker import runnel_bin
from security import Certs

BIG_RECORDS = 24  # of 256 KiB each
SMALL_RECORDS = 2000


def _records(path):
    """Writes the records file (one record a line) and returns (bytes, md5 of
    what a consumer printing one record a line reads back)."""
    rng = hashlib.sha256(b"runnel-ktls")
    lines = []
    for i in range(BIG_RECORDS):
        chunk = b""
        while len(chunk) < 192 * 1024:
            rng.update(b"%d" % i)
            chunk += rng.digest() * 64
        lines.append(base64.b64encode(chunk[:192 * 1024]))  # 256 KiB of text
    lines += [b"small-record-%06d" % i for i in range(SMALL_RECORDS)]
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    return len(data), hashlib.md5(data).hexdigest()


# The job the machine runs. $1-less shell: every value is spelled out here.
JOB = r"""
set -u
BROKER_PROPS="--override log.dirs=/tmp/data --override runnel.log.level=DEBUG
  --override listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,TLS12://127.0.0.1:9094
  --override advertised.listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,TLS12://127.0.0.1:9094
  --override listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,TLS12:SSL
  --override listener.name.tls12.ssl.enabled.protocols=TLSv1.2
  --override socket.send.buffer.bytes=32768
  --override ssl.keystore.type=PEM --override ssl.keystore.location=/job/keystore.pem"

start_broker() {  # $1: value of runnel.fetch.zerocopy; $2: log file
    runnel $BROKER_PROPS --override runnel.fetch.zerocopy=$1 > $2 2>&1 &
    BROKER=$!
    wait_for_broker $BROKER $2
}

stop_broker() {
    kill -TERM $BROKER; wait $BROKER; echo "broker exit $?"
}

consume() {  # $1: port; $2: label; further args: kcat options
    port=$1; label=$2; shift 2
    sum=$(kcat -C -b 127.0.0.1:$port -t records -p 0 -o beginning -e -q -f '%s\n' \
          -X fetch.max.bytes=52428800 -X max.partition.fetch.bytes=8388608 "$@" | md5sum)
    echo "MD5 $label ${sum%% *}"
}

SSL="-X security.protocol=ssl -X ssl.ca.location=/job/ca.pem"

start_broker true /tmp/zerocopy.log || exit 1
kcat -P -b 127.0.0.1:9092 -t records -p 0 -X linger.ms=50 -X message.max.bytes=1000000 \
     < /job/records.txt || exit 1
consume 9092 plaintext
consume 9093 tls13 $SSL
consume 9094 tls12 $SSL
stop_broker
start_broker false /tmp/copy.log || exit 1
consume 9093 copy $SSL
stop_broker
grep -h -E 'TLS fetch path|TLS established|connection closed' /tmp/zerocopy.log | sed 's/^/ZEROCOPY /'
grep -h -E 'TLS fetch path|TLS established|connection closed' /tmp/copy.log | sed 's/^/COPY /'
grep -h -E 'ERROR|runtime error|AddressSanitizer' /tmp/zerocopy.log /tmp/copy.log
exit 0
"""


def _connections(lines):
    """{conn id: {"tls": description or None, "sendfile": n, "ktls": n, "copied": n}}
    from the broker's DEBUG lines."""
    conns = {}
    for line in lines:
        m = re.search(r'conn=(\d+)', line)
        if not m:
            continue
        c = conns.setdefault(int(m.group(1)), {"tls": None})
        t = re.search(r'tls="([^"]*)" ktls_send=(\d)', line)
        if t:
            c["tls"], c["ktls_send"] = t.group(1), int(t.group(2))
        for key in ("sendfile", "ktls", "copied"):
            k = re.search(r"file_bytes_%s=(\d+)" % key, line)
            if k:
                c[key] = int(k.group(1))
    return conns


@pytest.fixture(scope="module")
def vm_run(tmp_path_factory, target):
    if target != "runnel":
        pytest.skip("reads Runnel's per-connection fetch-path counters")
    require_exe("kcat")
    require_exe("openssl")
    if not tools_present() or not kernel_present():
        missing("qemu, busybox, cpio or the kTLS kernel in integration/.deps/kernel")
    work = tmp_path_factory.mktemp("ktls")
    certs = Certs(work / "certs")
    keystore = work / "keystore.pem"
    keystore.write_text(certs.server_key.read_text() + certs.server_cert.read_text())
    size, md5 = _records(work / "records.txt")
    vm = KtlsVm(work / "vm",
                binaries={"/bin/runnel": runnel_bin(), "/bin/kcat": require_exe("kcat")},
                files={"/job/ca.pem": certs.ca, "/job/keystore.pem": keystore,
                       "/job/records.txt": work / "records.txt"})
    status, console = vm.run(JOB, timeout=int(os.environ.get("RUNNEL_VM_TIMEOUT", "600")))
    print(console[-20000:])
    assert status == 0, "the machine's job failed or timed out (exit %r); console above" % status
    sums = dict(re.findall(r"^MD5 (\S+) ([0-9a-f]{32})$", console, re.M))
    lines = console.splitlines()
    return {
        "size": size,
        "md5": md5,
        "sums": sums,
        "console": console,
        "zerocopy": _connections(l for l in lines if l.startswith("ZEROCOPY ")),
        "copy": _connections(l for l in lines if l.startswith("COPY ")),
    }


def _tls_conn(conns, version):
    """The one connection that fetched the records over TLS version (by bytes)."""
    found = [c for c in conns.values() if c["tls"] and c["tls"].startswith(version)
             and c.get("ktls", 0) + c.get("copied", 0) > 0]
    assert len(found) == 1, "connections over %s that fetched records: %r" % (version, conns)
    return found[0]


def test_broker_detects_kernel_tls(vm_run):
    assert re.search(r'msg="TLS fetch path" path=ktls-sendfile', vm_run["console"]), \
        "the broker inside the machine did not detect kernel TLS"
    assert "AddressSanitizer" not in vm_run["console"]
    assert "runtime error" not in vm_run["console"]


@pytest.mark.parametrize("label,version", [("tls13", "TLSv1.3"), ("tls12", "TLSv1.2")])
def test_fetch_over_ktls_is_sendfile(vm_run, label, version):
    assert vm_run["sums"].get(label) == vm_run["md5"], "records read back over %s differ" % label
    c = _tls_conn(vm_run["zerocopy"], version)
    assert c["ktls_send"] == 1
    assert c["copied"] == 0, "record bytes were copied through user space: %r" % c
    assert c["ktls"] >= vm_run["size"], "SSL_sendfile carried %d of %d bytes" % (
        c["ktls"], vm_run["size"])


def test_plaintext_fetch_is_sendfile(vm_run):
    assert vm_run["sums"].get("plaintext") == vm_run["md5"]
    plain = [c for c in vm_run["zerocopy"].values() if c["tls"] is None and c.get("sendfile")]
    assert sum(c["sendfile"] for c in plain) >= vm_run["size"]
    assert all(c.get("copied", 0) == 0 and c.get("ktls", 0) == 0 for c in plain)


def test_copy_path_over_ktls(vm_run):
    assert vm_run["sums"].get("copy") == vm_run["md5"]
    c = _tls_conn(vm_run["copy"], "TLSv1.3")
    assert c["ktls_send"] == 1  # the kernel still encrypts what SSL_write hands it
    assert c["ktls"] == 0
    assert c["copied"] >= vm_run["size"]

