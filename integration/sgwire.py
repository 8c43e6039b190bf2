"""Hand-built KIP-1071 requests (StreamsGroupHeartbeat, StreamsGroupDescribe)
for tests that check error codes, statuses and epochs exactly, on Runnel and
on a real Kafka 4.4.0 node."""

import itertools
import struct

import wire

_corr = itertools.count(5000)
_cstr = wire.compact_string

HEARTBEAT, DESCRIBE = 88, 89


def _carray(items, enc):
    return wire.compact_array(None if items is None else [enc(i) for i in items])


def _i16s(v):
    return _carray(v, lambda i: struct.pack(">h", i))


def _topic_info(t):
    """(name, partitions, {config: value})."""
    name, partitions, configs = t
    return (_cstr(name) + struct.pack(">ih", partitions, -1)
            + _carray(sorted(configs.items()), lambda kv: _cstr(kv[0]) + _cstr(kv[1]) + b"\x00")
            + b"\x00")


def subtopology(sid, sources=(), changelogs=(), sinks=(), rsources=(), copartition=()):
    """One subtopology: changelogs and rsources as (name, partitions, configs);
    copartition: lists of source topic indexes."""
    return (_cstr(sid) + _carray(list(sources), _cstr) + _carray([], _cstr)
            + _carray(list(changelogs), _topic_info) + _carray(list(sinks), _cstr)
            + _carray(list(rsources), _topic_info)
            + _carray(list(copartition), lambda c: _i16s(c) + _i16s([]) + _i16s([]) + b"\x00")
            + b"\x00")


def topology(epoch, subtopologies):
    return b"\x01" + struct.pack(">i", epoch) + wire.compact_array(subtopologies) + b"\x00"


def _tasks(tasks):
    """{subtopology id: [partitions]} or None."""
    if tasks is None:
        return wire.compact_array(None)
    return _carray(sorted(tasks.items()), lambda kv: _cstr(kv[0]) + _carray(
        kv[1], lambda p: struct.pack(">i", p)) + b"\x00")


JOIN = object()  # the default task lists: empty when joining, else null


def heartbeat(sock, group, member_id, epoch=0, topo=None, active=JOIN, standby=JOIN,
              warmup=JOIN, process_id="p1", rebalance=-1, instance=None, shutdown=False,
              version=1):
    """topo: bytes from topology(), or None. Returns the response as a dict."""
    if epoch == 0 and rebalance == -1:
        rebalance = 30000
    active, standby, warmup = [({} if epoch == 0 else None) if t is JOIN else t
                               for t in (active, standby, warmup)]
    body = (_cstr(group) + _cstr(member_id) + struct.pack(">ii", epoch, -1) + _cstr(instance)
            + _cstr(None) + struct.pack(">i", rebalance) + (topo if topo is not None else b"\xff")
            + _tasks(active) + _tasks(standby) + _tasks(warmup) + _cstr(process_id)
            + b"\xff" + wire.compact_array(None) + wire.compact_array(None)
            + wire.compact_array(None) + (b"\x01" if shutdown else b"\x00") + b"\x00")
    r = wire.flex_call(sock, HEARTBEAT, version, body, next(_corr))
    out = {"throttle": r.take(">i"), "error": r.take(">h"), "message": r.string(),
           "member_id": r.string(), "epoch": r.take(">i"), "interval": r.take(">i")}
    if version == 0:
        r.take(">i")
    out["task_offset_interval"] = r.take(">i")
    if version >= 1:
        out["recovery_lag"] = r.take(">q")

    def status(x):
        s = (x.take(">b"), x.string())
        x.skip_tags()
        return s

    def task_ids(x):
        sid = x.string()
        parts = x.array(lambda y: y.take(">i"))
        x.skip_tags()
        return sid, sorted(parts)

    out["status"] = r.array(status)
    for k in ("active", "standby", "warmup"):
        v = r.array(task_ids)
        out[k] = None if v is None else dict(v)
    return out


def describe(sock, groups, version=1):
    body = _carray(groups, _cstr) + b"\x00"
    if version >= 1:
        body += b"\x00"
    body += b"\x00"
    r = wire.flex_call(sock, DESCRIBE, version, body, next(_corr))
    r.take(">i")

    def task_ids(x):
        sid = x.string()
        parts = x.array(lambda y: y.take(">i"))
        x.skip_tags()
        return sid, sorted(parts)

    def assignment(x):
        a = {k: dict(x.array(task_ids)) for k in ("active", "standby", "warmup")}
        x.skip_tags()
        return a

    def kv(x):
        p = (x.string(), x.string())
        x.skip_tags()
        return p

    def topic_info(x):
        t = {"name": x.string(), "partitions": x.take(">i"), "rf": x.take(">h"),
             "configs": dict(x.array(kv))}
        x.skip_tags()
        return t

    def sub(x):
        s = {"id": x.string(), "sources": x.array(lambda y: y.string()),
             "sinks": x.array(lambda y: y.string()), "changelogs": x.array(topic_info),
             "rsources": x.array(topic_info)}
        x.skip_tags()
        return s

    def offset(x):
        o = (x.string(), x.take(">i"), x.take(">q"))
        x.skip_tags()
        return o

    def member(x):
        m = {"member_id": x.string(), "epoch": x.take(">i"), "instance_id": x.string(),
             "rack_id": x.string(), "client_id": x.string(), "client_host": x.string(),
             "topology_epoch": x.take(">i"), "process_id": x.string()}
        if x.take(">b") >= 0:
            m["endpoint"] = (x.string(), x.take(">H"))
            x.skip_tags()
        m["tags"] = x.array(kv)
        m["offsets"] = x.array(offset)
        m["end_offsets"] = x.array(offset)
        m["assignment"] = assignment(x)
        m["target"] = assignment(x)
        m["classic"] = x.take(">b")
        x.skip_tags()
        return m

    def group(x):
        g = {"error": x.take(">h"), "message": x.string(), "group_id": x.string(),
             "state": x.string(), "epoch": x.take(">i"), "assignment_epoch": x.take(">i")}
        g["topology"] = None
        if x.take(">b") >= 0:
            g["topology"] = {"epoch": x.take(">i"), "subtopologies": x.array(sub)}
            x.skip_tags()
        g["members"] = x.array(member)
        g["ops"] = x.take(">i")
        if version >= 1:
            assert x.take(">b") < 0, "topology description not requested"
            g["description_status"] = x.take(">b")
            g["assignor"] = x.string()
        x.skip_tags()
        return g

    return r.array(group)
