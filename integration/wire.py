"""Just enough of the Kafka wire protocol, by hand, for probes and bad-input tests.

Frames are a 4-byte big-endian length followed by the request or response.
Request header v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable string (int16 length). Header v2 adds an empty tagged-field
section (one 0x00 byte). Response header v0 is the correlation id alone.
"""

import socket
import struct
import time

API_VERSIONS = 18
METADATA = 3
UNSUPPORTED_VERSION = 35


def request_header(api_key, api_version, correlation_id, client_id=b"runnel-it", flexible=False):
    hdr = struct.pack(">hhi", api_key, api_version, correlation_id)
    hdr += struct.pack(">h", len(client_id)) + client_id
    if flexible:
        hdr += b"\x00"
    return hdr


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def connect(host, port, timeout=10.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def recv_frame(sock):
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 0 or size > 64 << 20:
        raise ValueError("bad response frame size %d" % size)
    return recv_exact(sock, size)


def wait_closed(sock, timeout=10.0):
    """True once the peer closes (EOF or reset); False if still open at the deadline.

    Bytes the peer sends before closing are read and dropped.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            data = sock.recv(4096)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            return True


def api_versions_v0(sock, correlation_id):
    """Send ApiVersions v0; return (error_code, {api_key: (min, max)})."""
    sock.sendall(frame(request_header(API_VERSIONS, 0, correlation_id)))
    return parse_api_versions_v0(recv_frame(sock), correlation_id)


def parse_api_versions_v0(resp, correlation_id):
    (corr, err, count) = struct.unpack_from(">ihi", resp, 0)
    if corr != correlation_id:
        raise ValueError("correlation id %d, expected %d" % (corr, correlation_id))
    apis = {}
    off = 10
    for _ in range(max(count, 0)):
        key, lo, hi = struct.unpack_from(">hhh", resp, off)
        apis[key] = (lo, hi)
        off += 6
    return err, apis


def metadata_v1_brokers(sock, correlation_id):
    """Send Metadata v1 for no topics; return ([(node_id, host, port)], controller_id)."""
    body = struct.pack(">i", 0)  # empty topic array: no topics, only brokers
    sock.sendall(frame(request_header(METADATA, 1, correlation_id) + body))
    resp = recv_frame(sock)
    (corr, count) = struct.unpack_from(">ii", resp, 0)
    if corr != correlation_id:
        raise ValueError("correlation id %d, expected %d" % (corr, correlation_id))
    off = 8
    brokers = []
    for _ in range(max(count, 0)):
        (node_id, hlen) = struct.unpack_from(">ih", resp, off)
        off += 6
        host = resp[off:off + hlen].decode()
        off += hlen
        (port, rlen) = struct.unpack_from(">ih", resp, off)
        off += 6 + max(rlen, 0)
        brokers.append((node_id, host, port))
    (controller,) = struct.unpack_from(">i", resp, off)
    return brokers, controller


class Reader:
    """Big-endian reader over a response body; raises ValueError when short."""

    def __init__(self, data, off=0):
        self.data, self.off = data, off

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.off + size > len(self.data):
            raise ValueError("response too short")
        vals = struct.unpack_from(fmt, self.data, self.off)
        self.off += size
        return vals if len(vals) > 1 else vals[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.off:self.off + n].decode()
        self.off += n
        return s

    def array(self, item):
        n = self.take(">i")
        return None if n < 0 else [item(self) for _ in range(n)]


def uvarint(n):
    """n as an unsigned varint (flexible versions' lengths and counts)."""
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def compact_string(s):
    """A compact nullable string: length + 1 as a varint, 0 for None."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_array(items):
    """A compact nullable array of already encoded items, 0 for None."""
    if items is None:
        return b"\x00"
    return uvarint(len(items) + 1) + b"".join(items)


class FlexReader(Reader):
    """Reader for flexible versions: compact strings and arrays, tags."""

    def uvarint(self):
        n, shift = 0, 0
        while True:
            b = self.take(">B")
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        if self.off + n > len(self.data):
            raise ValueError("response too short")
        s = self.data[self.off:self.off + n].decode()
        self.off += n
        return s

    def array(self, item):
        n = self.uvarint() - 1
        return None if n < 0 else [item(self) for _ in range(n)]

    def uuid(self):
        return self.take(">16s")

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.off += self.uvarint()


def flex_call(sock, api_key, version, body, correlation_id, client_id="test"):
    """Send a request of a flexible version (header v2) with body already
    encoded, and return a FlexReader past the response header (v1)."""
    cid = client_id.encode()
    hdr = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid + b"\x00"
    sock.sendall(frame(hdr + body))
    r = FlexReader(recv_frame(sock))
    assert r.take(">i") == correlation_id
    r.skip_tags()
    return r


def metadata_request(version, topics, correlation_id, allow_auto_create=True):
    """Metadata v0..v8 (non-flexible). topics=None asks for all topics (v1+)."""
    assert 0 <= version <= 8
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics))
        for t in topics:
            tb = t.encode()
            body += struct.pack(">h", len(tb)) + tb
    if version >= 4:
        body += struct.pack(">?", allow_auto_create)
    if version >= 8:
        body += struct.pack(">??", False, False)  # include cluster/topic authorized ops
    return frame(request_header(METADATA, version, correlation_id) + body)


def parse_metadata(resp, version, correlation_id):
    """Parse a Metadata v0..v8 response into a dict."""
    r = Reader(resp)
    corr = r.take(">i")
    if corr != correlation_id:
        raise ValueError("correlation id %d, expected %d" % (corr, correlation_id))
    out = {}
    if version >= 3:
        out["throttle_time_ms"] = r.take(">i")

    def broker(r):
        b = {"node_id": r.take(">i"), "host": r.string(), "port": r.take(">i")}
        if version >= 1:
            b["rack"] = r.string()
        return b

    out["brokers"] = r.array(broker)
    if version >= 2:
        out["cluster_id"] = r.string()
    if version >= 1:
        out["controller_id"] = r.take(">i")

    def partition(r):
        p = {"error_code": r.take(">h"), "partition": r.take(">i"), "leader": r.take(">i")}
        if version >= 7:
            p["leader_epoch"] = r.take(">i")
        p["replicas"] = r.array(lambda r: r.take(">i"))
        p["isr"] = r.array(lambda r: r.take(">i"))
        if version >= 5:
            p["offline"] = r.array(lambda r: r.take(">i"))
        return p

    def topic(r):
        t = {"error_code": r.take(">h"), "name": r.string()}
        if version >= 1:
            t["is_internal"] = r.take(">?")
        t["partitions"] = r.array(partition)
        if version >= 8:
            t["authorized_operations"] = r.take(">i")
        return t

    out["topics"] = r.array(topic)
    if version >= 8:
        out["cluster_authorized_operations"] = r.take(">i")
    return out


def metadata(sock, version, topics, correlation_id, allow_auto_create=True):
    sock.sendall(metadata_request(version, topics, correlation_id, allow_auto_create))
    return parse_metadata(recv_frame(sock), version, correlation_id)
