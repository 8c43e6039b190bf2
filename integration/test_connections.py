"""Connection pressure: many idle connections, connection limits, slow readers.

- 2000 idle connections (each answered once, so the broker has accepted and
  read from it) cost a bounded, measured amount of broker memory each
  (VmRSS before and after, divided by the count).
- max.connections (Kafka's key): at the limit the broker stops accepting, so a
  new connection waits in the kernel's backlog unanswered, and is served as
  soon as another one closes (Kafka's acceptor blocks the same way).
- max.connections.per.ip: a connection past the limit from one address is
  closed by the broker (Kafka's TooManyConnectionsException); one closing
  makes room again.
- A client that pipelines Fetch and ApiVersions requests and never reads the
  responses makes the broker stop reading from it (its output backlog is
  capped), so broker memory stays bounded, and everyone else is served.

The limit tests start their own broker with the limit set.
"""

import re
import resource
import shutil
import subprocess
import socket
import struct
import time

import pytest

import wire
import wire_data
from kafka_real import KafkaReal
from runnel_broker import RunnelBroker, runnel_bin

IDLE = 2000
MIB = 1 << 20

# The broker inherits this process's descriptor limit: raise it before any
# broker of this module starts.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft < IDLE + 500:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(_hard, IDLE + 2000), _hard))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def answers(sock, corr, timeout=10.0):
    sock.settimeout(timeout)
    err, apis = wire.api_versions_v0(sock, corr)
    return err == 0 and wire.API_VERSIONS in apis


def start(target, tmp_path, props):
    if target == "kafka":
        b = KafkaReal(tmp_path / "data", extra_props=props)
    else:
        b = RunnelBroker(tmp_path / "data", binary=runnel_bin(), overrides=props)
    b.start()
    return b


def test_idle_connections_memory(broker, target):
    if target != "runnel":
        pytest.skip("measures the Runnel process")
    pid = broker.proc.pid
    warm = [wire.connect(broker.host, broker.port) for _ in range(20)]
    for i, s in enumerate(warm):
        assert answers(s, i)
    rss0 = rss_kib(pid)
    socks = []
    try:
        for i in range(IDLE):
            s = wire.connect(broker.host, broker.port)
            socks.append(s)
            assert answers(s, i), "connection %d not served" % i
        time.sleep(0.5)
        rss1 = rss_kib(pid)
        per = (rss1 - rss0) * 1024 / IDLE
        print("idle connections: %d, broker RSS %d -> %d KiB, %.0f bytes each"
              % (IDLE, rss0, rss1, per))
        # A connection keeps its 64 KiB receive buffer, mostly untouched pages,
        # and its state: a few KiB of resident memory each.
        assert per < 32 * 1024, "%.0f bytes of RSS per idle connection" % per
        # The broker still serves a new client among them.
        with wire.connect(broker.host, broker.port) as s:
            assert answers(s, 1)
    finally:
        for s in socks + warm:
            s.close()


def test_max_connections_blocks_accept(target, tmp_path):
    limit = 8
    b = start(target, tmp_path, {"max.connections": str(limit)})
    socks = []
    try:
        # Kafka counts its own inter-broker connections too; fill up to the limit.
        for i in range(limit):
            s = wire.connect(b.host, b.port)
            socks.append(s)
            try:
                if not answers(s, i, timeout=2):
                    break
            except OSError:
                break
        else:
            s = wire.connect(b.host, b.port)
            socks.append(s)
        waiting = socks[-1]
        # The last connection sits in the backlog: no answer...
        waiting.sendall(wire.frame(wire.request_header(wire.API_VERSIONS, 0, 77)))
        waiting.settimeout(1.5)
        with pytest.raises(socket.timeout):
            waiting.recv(1)
        # ...until another connection closes.
        socks[0].close()
        waiting.settimeout(15)
        resp = wire.recv_frame(waiting)
        assert wire.parse_api_versions_v0(resp, 77)[0] == 0
        assert b.alive()
    finally:
        for s in socks:
            s.close()
        b.stop()


def test_max_connections_per_ip_closes_excess(target, tmp_path):
    if target == "kafka":
        pytest.skip("Kafka's own connections from 127.0.0.1 count against the limit")
    limit = 5
    b = start(target, tmp_path, {"max.connections.per.ip": str(limit)})
    socks = []
    try:
        for i in range(limit):
            s = wire.connect(b.host, b.port)
            socks.append(s)
            assert answers(s, i)
        for _ in range(3):
            extra = wire.connect(b.host, b.port)
            try:
                extra.sendall(wire.frame(wire.request_header(wire.API_VERSIONS, 0, 9)))
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert wire.wait_closed(extra, timeout=10)
            extra.close()
        for i, s in enumerate(socks):
            assert answers(s, 100 + i)  # the first ones are untouched
        socks.pop(0).close()
        time.sleep(0.2)
        s = wire.connect(b.host, b.port)
        socks.append(s)
        assert answers(s, 200)
    finally:
        for s in socks:
            s.close()
        b.stop()


def produce_filler(broker, topic, nbatches=8, size=256 * 1024):
    with wire.connect(broker.host, broker.port) as s:
        value = b"x" * size
        for i in range(nbatches):
            batch = wire_data.build_batch([(None, value, ())], int(time.time() * 1000))
            for _ in range(50):
                err, _ = wire_data.produce_v3(s, i + 1, topic, 0, batch)
                if err == 0:
                    break
                time.sleep(0.1)  # the topic is being auto-created
            assert err == 0, err


def flood_without_reading(broker, frames, seconds=4.0):
    """Send frames round-robin until the broker stops reading (our sends block)."""
    s = wire.connect(broker.host, broker.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.settimeout(0.5)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            s.sendall(frames[sent % len(frames)])
            sent += 1
    except socket.timeout:
        pass
    return s, sent


def test_slow_reader_bounded(broker, target):
    topic = "slow-reader"
    with wire.connect(broker.host, broker.port) as s:
        wire.metadata(s, 4, [topic], 1)  # auto-create
    produce_filler(broker, topic)
    pid = broker.proc.pid if target == "runnel" else None
    rss0 = rss_kib(pid) if pid else 0
    fetch = []
    for i in range(16):
        body = struct.pack(">iiiib", -1, 0, 1, 4 * MIB, 0) + struct.pack(">i", 1)
        body += struct.pack(">h", len(topic)) + topic.encode()
        body += struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 4 * MIB)
        fetch.append(wire.frame(wire.request_header(wire_data.FETCH, 4, i) + body))
    small = [wire.frame(wire.request_header(wire.API_VERSIONS, 0, 1000 + i)) for i in range(16)]
    readers = []
    try:
        for frames in (fetch, small):
            s, sent = flood_without_reading(broker, frames)
            readers.append(s)
            print("slow reader: %d requests sent before the broker stopped reading" % sent)
        # Everyone else is served meanwhile.
        with wire.connect(broker.host, broker.port) as s:
            assert answers(s, 5)
            res = wire_data.fetch_v4(s, 6, topic, 0, 0, max_bytes=MIB)
            assert res.error == 0 and res.high_watermark == 8
        if pid:
            grew = rss_kib(pid) - rss0
            print("slow readers: broker RSS +%d KiB" % grew)
            assert grew < 96 * 1024, "broker RSS grew %d KiB for two slow readers" % grew
    finally:
        for s in readers:
            s.close()
    assert broker.alive(), broker.log_tail()


def _broker_side_buffers(port, client_port):
    """(rcvbuf, sndbuf) of the broker's end of one connection, from ss(8): the
    kernel reports twice the value set with SO_RCVBUF / SO_SNDBUF."""
    out = subprocess.run(["ss", "-tmnH", "state", "established",
                          "( sport = :%d and dport = :%d )" % (port, client_port)],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    m = re.search(r"skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)", out)
    assert m, "no socket memory for the broker's end in: %r" % out
    return int(m.group(1)), int(m.group(2))


def test_socket_buffer_sizes_applied(target, tmp_path):
    """socket.send.buffer.bytes / socket.receive.buffer.bytes size the
    broker's end of each client connection, as Kafka sets SO_SNDBUF and
    SO_RCVBUF (the kernel doubles what is set)."""
    if not shutil.which("ss"):
        pytest.skip("ss (iproute2) is not installed")
    b = start(target, tmp_path, {"socket.send.buffer.bytes": "65536",
                                 "socket.receive.buffer.bytes": "49152"})
    try:
        with wire.connect(b.host, b.port) as s:
            assert answers(s, 1)
            rcv, snd = _broker_side_buffers(b.port, s.getsockname()[1])
            assert (rcv, snd) == (2 * 49152, 2 * 65536)
    finally:
        b.stop()
