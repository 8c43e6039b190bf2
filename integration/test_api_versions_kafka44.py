"""ApiVersions compared per API (min, max) with a real Kafka 4.4.0 node.

A single Kafka 4.4.0 node in combined mode (process.roles=broker,controller,
from integration/.deps/jars-4.4, the jars kraft.py runs its controllers
from) and Runnel both answer one ApiVersions v4 request; every API Runnel
serves must show Kafka's range, except the differences listed here, each
with its reason (docs/compatibility.md has the same reasons per API).
"""

import itertools
import struct

import pytest

import kraft
import wire

pytestmark = pytest.mark.usefixtures("runnel_only")

KAFKA44_PORT = 19710
KAFKA44_CONTROLLER_PORT = 19711

# api key: (Runnel's range, why it differs from Kafka 4.4.0's).
DELIBERATE = {}

# APIs Kafka 4.4.0 serves that Runnel does not serve yet (issue 17, items 2-5).
# (A node without a client-metrics plugin does not advertise the telemetry APIs.)
NOT_SERVED_YET = {
    34: "AlterReplicaLogDirs",
    80: "AddRaftVoter", 81: "RemoveRaftVoter",
    94: "UnregisterController",
}

_corr = itertools.count(1)


def api_versions_v4(host, port):
    """ApiVersions v4: {"apis": {key: (min, max)}, "supported": {name: (min, max)},
    "finalized": {name: (min level, max level)}, "epoch": finalized features epoch}."""
    body = wire.compact_string("runnel-it") + wire.compact_string("1.0") + b"\x00"
    with wire.connect(host, port) as sock:
        corr = next(_corr)
        cid = b"test"
        hdr = struct.pack(">hhih", 18, 4, corr, len(cid)) + cid + b"\x00"
        sock.sendall(wire.frame(hdr + body))
        r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == corr  # ApiVersions answers with response header v0
    assert r.take(">h") == 0
    apis = {}

    def api(x):
        key, lo, hi = x.take(">hhh")
        apis[key] = (lo, hi)
        x.skip_tags()

    r.array(api)
    r.take(">i")  # throttle
    out = {"apis": apis, "supported": {}, "finalized": {}, "epoch": -1}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        end = r.uvarint() + r.off
        if tag in (0, 2):
            def feature(x, into=out["supported" if tag == 0 else "finalized"], tag=tag):
                name = x.string()
                a, b = x.take(">hh")
                into[name] = (a, b) if tag == 0 else (b, a)  # finalized: max, then min
                x.skip_tags()
            r.array(feature)
        elif tag == 1:
            out["epoch"] = r.take(">q")
        r.off = end
    return out


@pytest.fixture(scope="module")
def kafka44(tmp_path_factory):
    if not kraft.jars_present():
        pytest.skip("Kafka 4.4.0 jars not in %s" % kraft.JARS_44)
    with kraft.single_node(tmp_path_factory.mktemp("kafka44"), KAFKA44_PORT,
                           KAFKA44_CONTROLLER_PORT) as k:
        yield api_versions_v4(k.host, k.port)


@pytest.fixture(scope="module")
def runnel(broker):
    return api_versions_v4(broker.host, broker.port)


def test_every_served_api_has_kafka_44_range(kafka44, runnel):
    differ = {}
    for key, rng in sorted(runnel["apis"].items()):
        want = DELIBERATE.get(key, (kafka44["apis"].get(key),))[0]
        if rng != want:
            differ[key] = {"runnel": rng, "kafka-4.4.0": kafka44["apis"].get(key),
                           "listed": DELIBERATE.get(key)}
    assert not differ


def test_deliberate_differences_are_real(kafka44, runnel):
    """Each listed difference still differs from Kafka (else drop it from the list)."""
    for key, (rng, why) in DELIBERATE.items():
        assert runnel["apis"][key] == rng, why
        assert kafka44["apis"][key] != rng, "no longer a difference: %s" % why


def test_apis_runnel_does_not_serve_are_the_listed_ones(kafka44, runnel):
    absent = {k: NOT_SERVED_YET.get(k, "?") for k in kafka44["apis"] if k not in runnel["apis"]}
    assert absent == NOT_SERVED_YET
    assert set(runnel["apis"]) <= set(kafka44["apis"])


# feature: (Runnel's supported range, Runnel's finalized level or None, why).
DELIBERATE_FEATURES = {}


def test_features_as_a_single_kafka_44_node(kafka44, runnel):
    assert set(runnel["supported"]) == set(kafka44["supported"])
    for name, rng in kafka44["supported"].items():
        fin = kafka44["finalized"].get(name)
        want_rng, want_fin = rng, fin
        if name in DELIBERATE_FEATURES:
            want_rng, level, _ = DELIBERATE_FEATURES[name]
            want_fin = None if level is None else (level, level)
            assert (want_rng, want_fin) != (rng, fin), "no longer a difference: " + name
        assert runnel["supported"][name] == want_rng, name
        assert runnel["finalized"].get(name) == want_fin, name
    assert set(runnel["finalized"]) <= set(kafka44["finalized"])
