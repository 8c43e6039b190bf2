"""ApiVersions advertises the APIs of a working broker, in ranges clients accept.

Checked with hand-built ApiVersions v0 requests (wire.py).
"""

import pytest

import wire

# api key: (name, highest min version clients need, lowest max version to offer).
# The maxima are the versions in the message definitions the codec is generated
# from; Kafka 4.x offers these or newer.
REQUIRED = {
    18: ("ApiVersions", 0, 3),
    3: ("Metadata", 0, 12),
    19: ("CreateTopics", 2, 7),
    20: ("DeleteTopics", 1, 6),
    37: ("CreatePartitions", 0, 3),
    60: ("DescribeCluster", 0, 1),
}

# librdkafka 2.0 turns features off unless these old versions are advertised
# (when the API is advertised at all); Kafka 4 keeps them for that reason.
LIBRDKAFKA_MINIMUMS = {
    10: ("FindCoordinator", 0),
    0: ("Produce", 3),
    1: ("Fetch", 4),
    22: ("InitProducerId", 0),
}


@pytest.fixture(scope="module")
def apis(broker):
    with wire.connect(broker.host, broker.port) as s:
        err, apis = wire.api_versions_v0(s, 1)
    assert err == 0
    return apis


@pytest.mark.parametrize("key", sorted(REQUIRED), ids=[REQUIRED[k][0] for k in sorted(REQUIRED)])
def test_required_api_advertised(apis, key):
    name, need_min, need_max = REQUIRED[key]
    assert key in apis, "%s (%d) not advertised" % (name, key)
    lo, hi = apis[key]
    assert 0 <= lo <= need_min, (name, lo, hi)
    assert hi >= need_max, (name, lo, hi)


def test_librdkafka_feature_minimums(apis):
    """Checked for each of these APIs that is advertised (some come with later issues)."""
    for key, (name, need_min) in LIBRDKAFKA_MINIMUMS.items():
        if key in apis:
            lo, hi = apis[key]
            assert lo <= need_min <= hi, (name, lo, hi)


def test_ranges_are_sane(apis):
    for key, (lo, hi) in apis.items():
        assert 0 <= key < 1000 and 0 <= lo <= hi, (key, lo, hi)
