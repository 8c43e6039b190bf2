"""Hand-built KIP-848 requests (ConsumerGroupHeartbeat, ConsumerGroupDescribe)
for tests that check error codes and epochs exactly, on Runnel and on Kafka."""

import itertools
import struct

import wire

_corr = itertools.count(1000)


def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _cstr(s):
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items, enc):
    if items is None:
        return b"\x00"
    return _uvarint(len(items) + 1) + b"".join(enc(i) for i in items)


class _R:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.o)
        self.o += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def uvarint(self):
        r = s = 0
        while True:
            c = self.d[self.o]
            self.o += 1
            r |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return r

    def cstr(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        v = self.d[self.o:self.o + n].decode()
        self.o += n
        return v

    def carray(self, item):
        n = self.uvarint() - 1
        return None if n < 0 else [item(self) for _ in range(n)]

    def uuid(self):
        v = self.d[self.o:self.o + 16]
        self.o += 16
        return v

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.o += self.uvarint()


def _call(sock, api_key, version, body):
    corr = next(_corr)
    hdr = struct.pack(">hhih", api_key, version, corr, 4) + b"test" + b"\x00"
    sock.sendall(wire.frame(hdr + body))
    resp = wire.recv_frame(sock)
    r = _R(resp)
    assert r.take(">i") == corr
    r.tags()
    return r


def heartbeat(sock, group, member_id="", epoch=0, instance=None, rack=None, rebalance=-1,
              topics=None, regex=None, assignor=None, owned=None, version=1):
    """owned: list of (topic_id bytes, [partitions]) or None."""
    body = (_cstr(group) + _cstr(member_id) + struct.pack(">i", epoch) + _cstr(instance)
            + _cstr(rack) + struct.pack(">i", rebalance) + _carray(topics, _cstr))
    if version >= 1:
        body += _cstr(regex)
    body += _cstr(assignor)
    body += _carray(owned, lambda tp: tp[0] + _carray(tp[1], lambda p: struct.pack(">i", p))
                    + b"\x00")
    body += b"\x00"
    r = _call(sock, 68, version, body)
    out = {"throttle": r.take(">i"), "error": r.take(">h"), "message": r.cstr(),
           "member_id": r.cstr(), "epoch": r.take(">i"), "interval": r.take(">i")}
    present = r.take(">b")
    out["assignment"] = None
    if present >= 0:
        def tp(x):
            tid = x.uuid()
            parts = x.carray(lambda y: y.take(">i"))
            x.tags()
            return (tid, parts)
        out["assignment"] = {tid: sorted(ps) for tid, ps in r.carray(tp)}
        r.tags()
    return out


def describe(sock, groups, version=0):
    body = _carray(groups, _cstr) + b"\x00" + b"\x00"
    r = _call(sock, 69, version, body)
    r.take(">i")

    def tps(x):
        tid = x.uuid()
        name = x.cstr()
        parts = x.carray(lambda y: y.take(">i"))
        x.tags()
        return (name, sorted(parts))

    def assignment(x):
        v = dict(x.carray(tps))
        x.tags()
        return v

    def member(x):
        m = {"member_id": x.cstr(), "instance_id": x.cstr(), "rack_id": x.cstr(),
             "epoch": x.take(">i"), "client_id": x.cstr(), "client_host": x.cstr(),
             "topics": x.carray(lambda y: y.cstr()), "regex": x.cstr(),
             "assignment": assignment(x), "target": assignment(x)}
        if version >= 1:
            m["type"] = x.take(">b")
        x.tags()
        return m

    def group(x):
        g = {"error": x.take(">h"), "message": x.cstr(), "group_id": x.cstr(),
             "state": x.cstr(), "epoch": x.take(">i"), "assignment_epoch": x.take(">i"),
             "assignor": x.cstr(), "members": x.carray(member), "ops": x.take(">i")}
        x.tags()
        return g

    return r.carray(group)


def find_coordinator(sock, group, timeout=30.0):
    """FindCoordinator v0 until the coordinator answers (Kafka creates
    __consumer_offsets on the first one)."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        corr = next(_corr)
        hdr = struct.pack(">hhih", 10, 0, corr, 4) + b"test"
        g = group.encode()
        sock.sendall(wire.frame(hdr + struct.pack(">h", len(g)) + g))
        r = _R(wire.recv_frame(sock))
        assert r.take(">i") == corr
        err = r.take(">h")
        if err == 0 or time.monotonic() > deadline:
            return err
        time.sleep(0.2)


def offset_commit(sock, group, member_id, epoch, topic, partition, offset):
    """OffsetCommit v9: the partition's error code."""
    part = struct.pack(">iqi", partition, offset, -1) + _cstr("") + b"\x00"
    body = (_cstr(group) + struct.pack(">i", epoch) + _cstr(member_id) + _cstr(None)
            + _carray([topic], lambda t: _cstr(t) + _carray([part], lambda p: p) + b"\x00")
            + b"\x00")
    r = _call(sock, 8, 9, body)
    r.take(">i")

    def partition_(x):
        x.take(">i")
        err = x.take(">h")
        x.tags()
        return err

    def topic_(x):
        x.cstr()
        errs = x.carray(partition_)
        x.tags()
        return errs

    return r.carray(topic_)[0][0]


def offset_fetch(sock, group, member_id, epoch, topic, partition):
    """OffsetFetch v9 for one partition: (error, committed offset); the
    group's error when it has one."""
    topics = _carray([topic], lambda t: _cstr(t) + _carray([partition],
                                                          lambda p: struct.pack(">i", p))
                     + b"\x00")
    body = (_carray([group], lambda g: _cstr(g) + _cstr(member_id) + struct.pack(">i", epoch)
                    + topics + b"\x00") + b"\x00" + b"\x00")
    r = _call(sock, 9, 9, body)
    r.take(">i")

    def part(x):
        x.take(">i")
        off = x.take(">q")
        x.take(">i")
        x.cstr()
        err = x.take(">h")
        x.tags()
        return err, off

    def topic_(x):
        x.cstr()
        parts = x.carray(part)
        x.tags()
        return parts

    def group_(x):
        x.cstr()
        topics_ = x.carray(topic_)
        err = x.take(">h")
        x.tags()
        return err, topics_

    err, topics_ = r.carray(group_)[0]
    if err != 0:
        return err, -1
    return topics_[0][0]


def finalized_features(host, port):
    """ApiVersions v3: {feature: (max level, min level)} finalized."""
    with wire.connect(host, port) as sock:
        corr = next(_corr)
        hdr = struct.pack(">hhih", 18, 3, corr, 4) + b"test" + b"\x00"
        sock.sendall(wire.frame(hdr + _cstr("runnel-it") + _cstr("1.0") + b"\x00"))
        r = _R(wire.recv_frame(sock))
    assert r.take(">i") == corr  # response header v0
    assert r.take(">h") == 0

    def api(x):
        x.take(">hhh")
        x.tags()

    r.carray(api)
    r.take(">i")
    out = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        end = r.uvarint() + r.o
        if tag == 2:
            def feature(x):
                name = x.cstr()
                levels = x.take(">hh")
                x.tags()
                out[name] = levels
            r.carray(feature)
        r.o = end
    return out
