"""Shared pieces of the Go client tests (test_franz_go.py, test_sarama.py),
which drive integration/go's goclients program through the go_runner
fixture: records to and from its JSON, and the checks both clients share.
"""

import json
import time

from procs import wait_until
from roundtrip import Ack, Got, Rec, b64, check_roundtrip, java_partition, unb64


def records_json(records, partitions=None):
    """goclients' input: keys, values and header values in base64; with
    partitions (a topic's partition count) each record names its partition,
    murmur2 of the key as the Java client would pick it, round-robin for
    null keys."""
    out = []
    for i, r in enumerate(records):
        rec = {"key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp,
               "headers": [[n, b64(v)] for n, v in r.headers]}
        if partitions is not None:
            rec["partition"] = (i % partitions if r.key is None
                                else java_partition(r.key, partitions))
        out.append(rec)
    return json.dumps(out)


def write_records(path, records, partitions=None):
    path.write_text(records_json(records, partitions))
    return path


def got_records(out):
    """goclients' consumed records -> [Got]."""
    return [Got(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                tuple((n, unb64(v)) for n, v in r["headers"]), r["timestamp"])
            for r in out["records"]]


def acks_of(out, with_timestamps=True):
    """goclients' [[i, partition, offset, timestamp]] -> {i: Ack}."""
    return {i: Ack(p, o, ts if with_timestamps else None) for i, p, o, ts in out["acks"]}


def offsets(m):
    """{"p": offset} from JSON -> {p: offset}."""
    return {int(p): o for p, o in m.items()}


def check_group_result(out, produced, partitions, acks):
    """A group consumer that read a whole topic alone: every partition was
    assigned to it, it read every record exactly once, and what it committed
    is each partition's end offset."""
    assert out["assigned"] == list(range(partitions)), out["assigned"]
    got = got_records(out)
    check_roundtrip(produced, got, partitions, acks)
    ends = {}
    for g in got:
        ends[g.partition] = max(ends.get(g.partition, 0), g.offset + 1)
    assert offsets(out["committed"]) == ends


def create(go_runner, client, bootstrap, topic, partitions, **configs):
    """Create topic with the client's admin API and wait until its metadata
    shows every partition with a leader; returns the metadata."""
    out = go_runner(client, "create", bootstrap, topic, str(partitions),
                    *("%s=%s" % kv for kv in configs.items()))
    assert out["error"] is None, out
    md = {}

    def ready():
        md.update(go_runner(client, "metadata", bootstrap, topic))
        return (md["error"] is None and len(md["partitions"]) == partitions
                and all(p["leader"] >= 0 for p in md["partitions"]))

    wait_until(ready, 20, interval=0.2, what="metadata of %s" % topic)
    return md


def check_list_offsets(go_runner, client, bootstrap, topic, partitions, produce, none_after):
    """Start, end and by-timestamp offsets of records with explicit,
    increasing timestamps, one second apart, produced with produce(records)
    -> {i: Ack}. none_after: what the client lists, by time, for a
    partition with no record that late (None: its end offset)."""
    t0 = int(time.time() * 1000) - 3_600_000
    records = [Rec(b"k%d" % (i % 7), b"v%d" % i, (), t0 + 1000 * i) for i in range(60)]
    acks = produce(records)
    cut = t0 + 1000 * 30 + 500  # between records 30 and 31
    out = go_runner(client, "offsets", bootstrap, topic, str(partitions), str(cut))
    ends = {p: 0 for p in range(partitions)}
    after = {}
    for i, a in acks.items():
        ends[a.partition] = max(ends[a.partition], a.offset + 1)
        if records[i].timestamp >= cut:
            after[a.partition] = min(after.get(a.partition, a.offset), a.offset)
    assert offsets(out["start"]) == {p: 0 for p in range(partitions)}
    assert offsets(out["end"]) == ends
    assert offsets(out["after"]) == {
        p: after.get(p, ends[p] if none_after is None else none_after) for p in range(partitions)}
