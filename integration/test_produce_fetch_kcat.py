"""kcat -P / kcat -C (librdkafka from Debian): keyed text records with every
codec, read back from the beginning of every partition (no group).

Input is split with -D '\\x1e' (message) and -K '\\x1f' (key), so keys and
values may hold newlines' neighbours, commas, tabs and UTF-8; -Z sends an
empty key or value as null. -H adds the same headers to every record. The
producer uses librdkafka's murmur2_random partitioner, the Java client's for
keyed records. Output is framed with the key and value lengths (%K, %S), so
it parses without ambiguity.
"""

import re

import pytest

from roundtrip import (CODECS, Got, assert_stored_codec, check_roundtrip, create_topic,
                       make_records)

PARTITIONS = 3
COUNT = 200
HEADERS = (("a", b"b"), ("dup", b"1"), ("dup", b"2"), ("empty", b""))
FORMAT = "#%p %o %T %K %S|%k%s|%h\\n"
_META = re.compile(rb"#(\d+) (\d+) (-?\d+) (-?\d+) (-?\d+)\|")


def kcat_produce(kcat, broker, topic, records, *extra):
    data = b"".join((r.key or b"") + b"\x1f" + (r.value or b"") + b"\x1e" for r in records)
    cmd = [kcat, "-b", broker.bootstrap, "-m", "15", "-P", "-t", topic, "-D", "\\x1e",
           "-K", "\\x1f", "-Z", "-X", "partitioner=murmur2_random"]
    for name, val in HEADERS:
        cmd += ["-H", "%s=%s" % (name, val.decode())]
    cmd += list(extra)
    res = run_bytes(cmd, data, timeout=60)
    assert res[0] == 0, "kcat -P exit %d: %s" % (res[0], res[2].decode(errors="replace"))
    assert b"ERROR" not in res[2] and b"failed" not in res[2].lower(), res[2].decode(
        errors="replace")


def run_bytes(cmd, data, timeout):
    """Run with bytes on stdin; -> (exit code, stdout bytes, stderr bytes)."""
    import subprocess

    p = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        raise TimeoutError("timed out: %s\n%s" % (" ".join(map(str, cmd)), err[-3000:]))
    return p.returncode, out, err


def parse_headers(text):
    if not text:
        return ()
    out = []
    for item in text.split(b","):
        name, _, val = item.partition(b"=")
        out.append((name.decode(), val))
    return tuple(out)


def parse_kcat_output(out):
    """Records printed with FORMAT -> [Got]."""
    got = []
    pos = 0
    while pos < len(out):
        m = _META.match(out, pos)
        assert m, "unparsable kcat output at byte %d: %r" % (pos, out[pos:pos + 80])
        part, off, ts, klen, vlen = (int(x) for x in m.groups())
        pos = m.end()
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        assert out[pos:pos + 1] == b"|", "no header separator at byte %d" % pos
        end = out.index(b"\n", pos)
        got.append(Got(part, off, key, value, parse_headers(out[pos + 1:end]), ts))
        pos = end + 1
    return got


def kcat_consume(kcat, broker, topic, *extra, offset="beginning"):
    cmd = [kcat, "-b", broker.bootstrap, "-m", "15", "-C", "-t", topic, "-o", offset,
           "-e", "-q", "-f", FORMAT] + list(extra)
    code, out, err = run_bytes(cmd, b"", timeout=60)
    assert code == 0, "kcat -C exit %d: %s" % (code, err.decode(errors="replace"))
    return parse_kcat_output(out)


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kcat, broker, topic_name, codec):
    topic = create_topic(broker.bootstrap, topic_name(codec), PARTITIONS)
    records = [r._replace(headers=HEADERS) for r in make_records(
        "kcat-" + codec, COUNT, binary=False, empty_values=False, headers=False,
        text_separators="\x1e\x1f")]
    kcat_produce(kcat, broker, topic, records, "-X", "compression.codec=" + codec)
    got = kcat_consume(kcat, broker, topic)
    check_roundtrip(records, got, PARTITIONS)
    assert_stored_codec(broker, topic, got, codec)


def test_consume_one_partition_from_offset(kcat, broker, topic_name):
    """-p and an absolute -o: exactly the records from that offset on."""
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    records = make_records("kcat-offset", 40, binary=False, empty_values=False,
                           null_keys=False, headers=False, text_separators="\x1e\x1f")
    records = [r._replace(headers=HEADERS) for r in records]
    kcat_produce(kcat, broker, topic, records)
    got = kcat_consume(kcat, broker, topic, "-p", "0", offset="25")
    assert [g.offset for g in got] == list(range(25, 40))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in records[25:]]
