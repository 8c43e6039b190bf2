"""Bad frames close only the connection that sent them.

Frames are built by hand (see wire.py). For each bad frame: the offending
connection is closed, a bystander raw connection opened before it still gets
answers, an admin client keeps working, and the broker process stays up.
ApiVersions at an unknown version is not a bad frame: it gets an
UNSUPPORTED_VERSION answer in v0 form and the connection stays open (KIP-511).
"""

import struct
import threading
import time

import pytest

import wire
from conftest import require_module

MAX_REQUEST = 104857600  # socket.request.max.bytes default, in Kafka and Runnel

BAD_FRAMES = {
    # A negative or zero length, or one above socket.request.max.bytes: the
    # length alone is enough to close the connection.
    "length-minus-1": struct.pack(">i", -1),
    "length-min-int": struct.pack(">i", -(2 ** 31)),
    "length-0": struct.pack(">i", 0),
    "length-over-max": struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64,
    "length-max-int": struct.pack(">i", 2 ** 31 - 1),
    # Frames whose length is fine but whose contents are not a request.
    "header-too-short": wire.frame(b"\x00\x03"),
    "unknown-api-key": wire.frame(struct.pack(">hhih", 32000, 0, 7, -1) + b"\x01\x02\x03"),
    "garbage-bytes": wire.frame(bytes(range(200, 256)) * 2),
    # Metadata v1 whose topic array claims 2^31-1 entries in 4 bytes.
    "huge-array-count": wire.frame(wire.request_header(wire.METADATA, 1, 7)
                                   + struct.pack(">i", 2 ** 31 - 1)),
    # Metadata v12 (flexible): the compact array length is an endless varint.
    "bad-varint": wire.frame(wire.request_header(wire.METADATA, 12, 7, flexible=True)
                             + b"\xff" * 12),
}


@pytest.fixture(scope="module")
def admin(broker):
    require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})
    assert a.list_topics(timeout=10).brokers  # connected before the bad frames arrive
    return a


def admin_works(admin, name):
    from confluent_kafka.admin import NewTopic

    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == 1
    fut = admin.create_topics([NewTopic(name, 1, 1)], request_timeout=15)[name]
    assert fut.result(timeout=30) is None


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_its_connection(broker, admin, topic_name, case):
    bystander = wire.connect(broker.host, broker.port)
    try:
        err, _ = wire.api_versions_v0(bystander, 1)
        assert err == 0

        bad = wire.connect(broker.host, broker.port)
        try:
            try:
                bad.sendall(BAD_FRAMES[case])
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed even faster than we could write
            assert wire.wait_closed(bad, timeout=10), "connection left open after %s" % case
        finally:
            bad.close()

        assert broker.alive(), broker.log_tail()
        bystander.settimeout(10)
        err, apis = wire.api_versions_v0(bystander, 2)
        assert err == 0 and wire.API_VERSIONS in apis
        admin_works(admin, topic_name())
    finally:
        bystander.close()


def test_bad_frames_while_clients_keep_working(broker, admin):
    """A kafka-python admin client polls metadata in a thread while bad frames arrive."""
    require_module("kafka")
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000,
                          client_id="runnel-it-bystander")
    stop = threading.Event()
    calls, errors = [0], []

    def poll():
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                kp.describe_cluster()
                kp.list_topics()
                calls[0] += 1
            except Exception as e:  # noqa: BLE001 - recorded and asserted below
                errors.append(repr(e))
            time.sleep(0.01)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        for _ in range(3):
            for case in sorted(BAD_FRAMES):
                s = wire.connect(broker.host, broker.port)
                try:
                    try:
                        s.sendall(BAD_FRAMES[case])
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    assert wire.wait_closed(s, timeout=10), case
                finally:
                    s.close()
    finally:
        stop.set()
        t.join(timeout=30)
        kp.close()
    assert not errors, errors[:5]
    assert calls[0] > 0
    assert broker.alive(), broker.log_tail()
    assert admin.list_topics(timeout=10).brokers


def test_partial_frame_then_close_leaves_broker_up(broker, admin, topic_name):
    """A client that dies mid-frame costs the broker nothing."""
    for cut in (1, 3, 4, 10):
        payload = wire.frame(wire.request_header(wire.API_VERSIONS, 0, 9))
        s = wire.connect(broker.host, broker.port)
        s.sendall(payload[:cut])
        s.close()
    assert broker.alive(), broker.log_tail()
    admin_works(admin, topic_name())


def test_api_versions_unsupported_version_answers_in_v0(broker):
    s = wire.connect(broker.host, broker.port)
    try:
        # ApiVersions v127 (header v2, as for any flexible version), empty body.
        s.sendall(wire.frame(wire.request_header(wire.API_VERSIONS, 127, 4242, flexible=True)
                             + b"\x00"))
        resp = wire.recv_frame(s)
        err, apis = wire.parse_api_versions_v0(resp, 4242)
        assert err == wire.UNSUPPORTED_VERSION
        assert wire.API_VERSIONS in apis, apis
        lo, hi = apis[wire.API_VERSIONS]
        assert lo == 0 and hi >= 3, apis
        # v0 form: exactly correlation id, error, and the array; no throttle time.
        assert len(resp) == 10 + 6 * len(apis)

        # The connection stays open and serves the next request.
        err, apis = wire.api_versions_v0(s, 4243)
        assert err == 0 and apis[wire.API_VERSIONS][1] >= 3
    finally:
        s.close()
