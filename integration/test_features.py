"""Feature flags (KIP-584): `kafka-features describe/upgrade/downgrade` and
UpdateFeatures on the wire, as a Kafka 4.4 node answers them.

describe lists what ApiVersions reports (supported ranges, finalized
levels); a downgrade needs the downgrade flag, an upgrade past the
supported range, an unknown feature, a bad upgrade type, a negative level
and any metadata.version downgrade are refused with INVALID_UPDATE_VERSION
and Kafka's text, all updates of a request or none; validate_only changes
nothing (v0, which has no upgrade type, downgrades nothing); a change raises the finalized-features epoch and survives a
restart. With group.version finalized 0 the consumer protocol's heartbeat
answers UNSUPPORTED_VERSION, with share.version 0 the share group's, with
streams.version 0 the streams group's, and each works again after the upgrade. Everything also runs against Apache
Kafka with --target=kafka.
"""

import itertools
import re
import struct

import pytest

import procs
import sgwire
import wire
from test_api_versions_kafka44 import api_versions_v4
from wire import compact_array, compact_string, flex_call

UPDATE_FEATURES, CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 57, 68, 76
INVALID_UPDATE_VERSION, UNSUPPORTED_VERSION = 95, 35
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
JARS44 = procs.DEPS / "jars-4.4"
PREFIX = "The update failed for all features since the following feature had an error: "

_corr = itertools.count(1)


def update_features(broker, version, updates, validate_only=False):
    """UpdateFeatures at version with updates [(feature, level, upgrade type)]
    (v0 sends AllowDowngrade for a downgrade type): (error, message, results)
    with results [(feature, error, message)] for v0-1, None for v2."""
    items = []
    for name, level, kind in updates:
        b = compact_string(name) + struct.pack(">h", level)
        b += struct.pack(">?", kind != UPGRADE) if version == 0 else struct.pack(">b", kind)
        items.append(b + b"\x00")
    body = struct.pack(">i", 30000) + compact_array(items)
    if version >= 1:
        body += struct.pack(">?", validate_only)
    body += b"\x00"
    with wire.connect(broker.host, broker.port) as s:
        r = flex_call(s, UPDATE_FEATURES, version, body, next(_corr))
        r.take(">i")  # throttle
        err, msg = r.take(">h"), r.string()
        results = None
        if version < 2:
            def result(rr):
                out = (rr.string(), rr.take(">h"), rr.string())
                rr.skip_tags()
                return out
            results = r.array(result)
    return err, msg, results


def features(broker):
    return api_versions_v4(broker.host, broker.port)


def finalized(broker, name):
    """The finalized level of name (0 when not listed, as level 0 is)."""
    got = features(broker)["finalized"].get(name)
    return got[0] if got else 0


@pytest.fixture(scope="module")
def tool(broker):
    """run(*args, check=True): Kafka 4.4.0's kafka-features (FeatureCommand,
    which names metadata.version 33 as 4.4-IV2) against this module's broker."""
    if not any(JARS44.glob("kafka-tools-4.4*.jar")):
        pytest.skip("no Kafka 4.4 tools jar in %s" % JARS44)

    def run(*args, check=True):
        res = procs.run(["java"] + procs.JAVA_TOOL_OPTS
                        + ["-cp", str(JARS44 / "*"), "org.apache.kafka.tools.FeatureCommand",
                           "--bootstrap-server", broker.bootstrap] + list(args), timeout=120)
        if check:
            assert res.returncode == 0, procs.describe(res)
        return res

    return run


def feature_command(tool, *args, check=True):
    return tool(*args, check=check)


def describe_lines(tool):
    """FeatureCommand describe as {feature: {column: value}}."""
    out = {}
    for line in feature_command(tool, "describe").stdout.splitlines():
        cols = dict(re.findall(r"(\w+): (\S+)", line))
        if "Feature" in cols:
            out[cols.pop("Feature")] = cols
    return out


@pytest.fixture
def restore(broker):
    """Puts every finalized level back as it was when the test began."""
    before = features(broker)["finalized"]
    supported = features(broker)["supported"]
    yield
    now = features(broker)["finalized"]
    updates = []
    for name in supported:
        if name in ("metadata.version", "kraft.version"):
            continue
        want = before.get(name, (0, 0))[0]
        have = now.get(name, (0, 0))[0]
        if want != have:
            updates.append((name, want, UPGRADE if want > have else UNSAFE_DOWNGRADE))
    if updates:
        assert update_features(broker, 2, updates)[0] == 0


def test_describe_matches_api_versions(broker, tool):
    listed = describe_lines(tool)
    av = features(broker)
    assert {"metadata.version", "transaction.version", "group.version"} <= set(listed)
    assert set(listed) == set(av["supported"])
    for name, cols in listed.items():
        if name == "metadata.version":
            continue  # printed as release names (4.4-IV2)
        lo, hi = av["supported"][name]
        assert (int(cols["SupportedMinVersion"]), int(cols["SupportedMaxVersion"])) == (lo, hi)
        assert int(cols["FinalizedVersionLevel"]) == av["finalized"].get(name, (0, 0))[0]
    assert re.fullmatch(r"\d+\.\d+-IV\d+", listed["metadata.version"]["FinalizedVersionLevel"])


def test_downgrade_then_upgrade_transaction_version(broker, tool, restore):
    if finalized(broker, "transaction.version") < 2:
        pytest.skip("transaction.version not finalized at 2 on this broker")
    epoch_before = features(broker)["epoch"]
    res = feature_command(tool, "upgrade", "--feature", "transaction.version=1", check=False)
    assert res.returncode != 0
    assert ("Invalid update version 1 for feature transaction.version. Can't downgrade the "
            "version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade.") in res.stdout + res.stderr
    assert finalized(broker, "transaction.version") == 2

    res = feature_command(tool, "downgrade", "--feature", "transaction.version=1")
    assert "transaction.version was downgraded to 1." in res.stdout
    assert features(broker)["finalized"]["transaction.version"] == (1, 1)
    assert features(broker)["epoch"] > epoch_before
    assert describe_lines(tool)["transaction.version"]["FinalizedVersionLevel"] == "1"

    res = feature_command(tool, "upgrade", "--feature", "transaction.version=2")
    assert "transaction.version was upgraded to 2." in res.stdout
    assert finalized(broker, "transaction.version") == 2


def test_refusals_on_the_wire(broker, restore):
    sup = features(broker)["supported"]
    tv_max = sup["transaction.version"][1]
    mv = finalized(broker, "metadata.version")
    cases = [
        ([("bogus.version", 1, UPGRADE)],
         r"Invalid update version 1 for feature bogus\.version\. Local controller \d+ does "
         r"not support this feature\."),
        ([("transaction.version", tv_max + 1, UPGRADE)],
         r"Invalid update version %d for feature transaction\.version\. Local controller \d+ "
         r"only supports versions 0-%d" % (tv_max + 1, tv_max)),
        ([("transaction.version", 1, 4)],
         r"Invalid update version 1 for feature transaction\.version\. The controller does "
         r"not support the given upgrade type\."),
        ([("bogus.version", 1, 0)],  # the type is checked before the name
         r"Invalid update version 1 for feature bogus\.version\. The controller does not "
         r"support the given upgrade type\."),
        ([("transaction.version", -1, SAFE_DOWNGRADE)],
         r"Invalid update version -1 for feature transaction\.version\. A feature version "
         r"cannot be less than 0\."),
    ]
    if sup["metadata.version"][1] >= 33:  # Kafka 4.1 could lower an unchanged level
        cases += [
            ([("metadata.version", mv - 1, SAFE_DOWNGRADE)],
             r"Unsupported metadata\.version downgrade from %d to %d\. Refusing to perform the "
             r"requested downgrade because it might delete metadata information\." % (mv, mv - 1)),
            ([("metadata.version", mv - 1, UNSAFE_DOWNGRADE)],
             r"Unsupported metadata\.version downgrade from %d to %d\. Unsafe metadata downgrade "
             r"is not supported in this version\." % (mv, mv - 1)),
        ]
    cases += [
        # all or nothing: the good first update is not applied
        ([("transaction.version", 0, SAFE_DOWNGRADE), ("bogus.version", 1, UPGRADE)],
         r"Invalid update version 1 for feature bogus\.version\. Local controller \d+ does "
         r"not support this feature\."),
    ]
    if finalized(broker, "transaction.version") < tv_max:
        pytest.skip("transaction.version not at its highest level on this broker")
    cases.append(([("transaction.version", tv_max, SAFE_DOWNGRADE)], None))  # same level: fine
    before = features(broker)
    for updates, want in cases:
        for version in (1, 2):
            err, msg, results = update_features(broker, version, updates)
            if want is None:
                assert (err, msg) == (0, None), (updates, version)
                continue
            assert err == INVALID_UPDATE_VERSION, (updates, version, msg)
            assert msg.startswith(PREFIX) and re.fullmatch(want, msg[len(PREFIX):]), msg
            assert results == ([] if version < 2 else None)
    # v0's AllowDowngrade is not read: its downgrades are refused
    err, msg, results = update_features(broker, 0, [("transaction.version", 1, SAFE_DOWNGRADE)])
    assert (err, results) == (INVALID_UPDATE_VERSION, [])
    assert msg.endswith("Can't downgrade the version of this feature without setting the upgrade "
                        "type to either safe or unsafe downgrade.")
    after = features(broker)
    assert after["finalized"] == before["finalized"]


def test_validate_only_and_results(broker, restore):
    if finalized(broker, "transaction.version") < 2:
        pytest.skip("transaction.version not finalized at 2 on this broker")
    err, msg, results = update_features(broker, 1, [("transaction.version", 0, SAFE_DOWNGRADE)],
                                        validate_only=True)
    assert (err, msg, results) == (0, None, [("transaction.version", 0, "NONE")])
    assert finalized(broker, "transaction.version") == 2

    # a later update of the same feature wins
    err, msg, results = update_features(broker, 1, [("transaction.version", 1, SAFE_DOWNGRADE),
                                                    ("transaction.version", 0, SAFE_DOWNGRADE)])
    assert err == 0 and [r[0] for r in results] == ["transaction.version"] * 2
    assert finalized(broker, "transaction.version") == 0
    assert "transaction.version" not in features(broker)["finalized"]  # level 0: not listed
    assert update_features(broker, 2, [("transaction.version", 2, UPGRADE)])[:2] == (0, None)


def consumer_heartbeat_error(broker):
    body = (compact_string("features-cg") + compact_string("") + struct.pack(">i", 0)
            + compact_string(None) + compact_string(None) + struct.pack(">i", 45000)
            + compact_array([compact_string("features-topic")]) + compact_string(None)
            + compact_array([]) + b"\x00")
    with wire.connect(broker.host, broker.port) as s:
        r = flex_call(s, CONSUMER_GROUP_HEARTBEAT, 0, body, next(_corr))
        r.take(">i")
        return r.take(">h")


def share_heartbeat_error(broker):
    body = (compact_string("features-sg") + compact_string("m" * 22) + struct.pack(">i", 0)
            + compact_string(None) + compact_array([compact_string("features-topic")]) + b"\x00")
    with wire.connect(broker.host, broker.port) as s:
        r = flex_call(s, SHARE_GROUP_HEARTBEAT, 1, body, next(_corr))
        r.take(">i")
        return r.take(">h")


def streams_heartbeat_error(broker):
    topo = sgwire.topology(1, [sgwire.subtopology("0", sources=["features-topic"])])
    with wire.connect(broker.host, broker.port) as s:
        return sgwire.heartbeat(s, "features-stg", "m1", 0, topo)["error"]


@pytest.mark.parametrize("feature,heartbeat", [("group.version", consumer_heartbeat_error),
                                               ("share.version", share_heartbeat_error),
                                               ("streams.version", streams_heartbeat_error)])
def test_group_protocol_follows_its_feature(broker, tool, restore, feature, heartbeat):
    level = finalized(broker, feature)
    if level < 1:
        pytest.skip("%s not finalized on this broker" % feature)
    first = heartbeat(broker)
    assert first != UNSUPPORTED_VERSION
    res = feature_command(tool, "downgrade", "--unsafe", "--feature", "%s=0" % feature)
    assert "%s was downgraded to 0." % feature in res.stdout
    assert heartbeat(broker) == UNSUPPORTED_VERSION
    res = feature_command(tool, "upgrade", "--feature", "%s=%d" % (feature, level))
    assert "%s was upgraded to %d." % (feature, level) in res.stdout
    assert heartbeat(broker) != UNSUPPORTED_VERSION


def test_levels_survive_restart(broker, restore):
    if finalized(broker, "transaction.version") < 2:
        pytest.skip("transaction.version not finalized at 2 on this broker")
    assert update_features(broker, 2, [("transaction.version", 1, SAFE_DOWNGRADE)])[0] == 0
    epoch = features(broker)["epoch"]
    broker.restart()
    after = features(broker)
    assert after["finalized"]["transaction.version"] == (1, 1)
    assert after["epoch"] >= epoch
