"""Hand-built KIP-848 requests (ConsumerGroupHeartbeat, ConsumerGroupDescribe)
for tests that check error codes and epochs exactly, on Runnel and on Kafka."""

import itertools
import struct

import wire

_corr = itertools.count(1000)


_cstr = wire.compact_string  # a short name for the dense builders below


def _carray(items, enc):
    return wire.compact_array(None if items is None else [enc(i) for i in items])


def _call(sock, api_key, version, body):
    return wire.flex_call(sock, api_key, version, body, next(_corr))


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
    out = {"throttle": r.take(">i"), "error": r.take(">h"), "message": r.string(),
           "member_id": r.string(), "epoch": r.take(">i"), "interval": r.take(">i")}
    present = r.take(">b")
    out["assignment"] = None
    if present >= 0:
        def tp(x):
            tid = x.uuid()
            parts = x.array(lambda y: y.take(">i"))
            x.skip_tags()
            return (tid, parts)
        out["assignment"] = {tid: sorted(ps) for tid, ps in r.array(tp)}
        r.skip_tags()
    return out


def describe(sock, groups, version=0):
    body = _carray(groups, _cstr) + b"\x00" + b"\x00"
    r = _call(sock, 69, version, body)
    r.take(">i")

    def tps(x):
        tid = x.uuid()
        name = x.string()
        parts = x.array(lambda y: y.take(">i"))
        x.skip_tags()
        return (name, sorted(parts))

    def assignment(x):
        v = dict(x.array(tps))
        x.skip_tags()
        return v

    def member(x):
        m = {"member_id": x.string(), "instance_id": x.string(), "rack_id": x.string(),
             "epoch": x.take(">i"), "client_id": x.string(), "client_host": x.string(),
             "topics": x.array(lambda y: y.string()), "regex": x.string(),
             "assignment": assignment(x), "target": assignment(x)}
        if version >= 1:
            m["type"] = x.take(">b")
        x.skip_tags()
        return m

    def group(x):
        g = {"error": x.take(">h"), "message": x.string(), "group_id": x.string(),
             "state": x.string(), "epoch": x.take(">i"), "assignment_epoch": x.take(">i"),
             "assignor": x.string(), "members": x.array(member), "ops": x.take(">i")}
        x.skip_tags()
        return g

    return r.array(group)


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
        r = wire.FlexReader(wire.recv_frame(sock))
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
        x.skip_tags()
        return err

    def topic_(x):
        x.string()
        errs = x.array(partition_)
        x.skip_tags()
        return errs

    return r.array(topic_)[0][0]


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
        x.string()
        err = x.take(">h")
        x.skip_tags()
        return err, off

    def topic_(x):
        x.string()
        parts = x.array(part)
        x.skip_tags()
        return parts

    def group_(x):
        x.string()
        topics_ = x.array(topic_)
        err = x.take(">h")
        x.skip_tags()
        return err, topics_

    err, topics_ = r.array(group_)[0]
    if err != 0:
        return err, -1
    return topics_[0][0]


def finalized_features(host, port):
    """ApiVersions v3: {feature: (max level, min level)} finalized."""
    with wire.connect(host, port) as sock:
        corr = next(_corr)
        hdr = struct.pack(">hhih", 18, 3, corr, 4) + b"test" + b"\x00"
        sock.sendall(wire.frame(hdr + _cstr("runnel-it") + _cstr("1.0") + b"\x00"))
        r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == corr  # response header v0
    assert r.take(">h") == 0

    def api(x):
        x.take(">hhh")
        x.skip_tags()

    r.array(api)
    r.take(">i")
    out = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        end = r.uvarint() + r.off
        if tag == 2:
            def feature(x):
                name = x.string()
                levels = x.take(">hh")
                x.skip_tags()
                out[name] = levels
            r.array(feature)
        r.off = end
    return out
