"""FindCoordinator's error message, by raw request, as Kafka 4 sends it:
v1-v3 describe the outcome ("NONE" on success, Kafka's description of an
error otherwise); from v4 on, where one request
asks for many keys, every coordinator's message is the empty string, on
success and on error alike (franz-go's kadm showed Runnel's "NONE" there).
"""

import struct
import time

import wire

FIND_COORDINATOR = 10
NONE = 0
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: the offsets topic
# is still being created.
RETRIABLE = (14, 15)


def find_v1(sock, group, key_type=0):
    """-> (error code, error message) of FindCoordinator v1 for a group."""
    g = group.encode()
    body = struct.pack(">h", len(g)) + g + struct.pack(">b", key_type)
    sock.sendall(wire.frame(wire.request_header(FIND_COORDINATOR, 1, 1) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == 1
    r.take(">i")  # throttle
    return r.take(">h"), r.string()


def find_v4(sock, groups):
    """-> [(key, error code, error message)] of FindCoordinator v4."""
    body = struct.pack(">b", 0) + bytes([len(groups) + 1])
    for g in groups:
        body += bytes([len(g) + 1]) + g.encode()
    body += b"\x00"
    sock.sendall(wire.frame(wire.request_header(FIND_COORDINATOR, 4, 2, flexible=True) + body))
    r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == 2
    r.skip_tags()  # response header
    r.take(">i")  # throttle

    def coordinator(r):
        key = r.string()
        r.take(">i")  # node id
        r.string()  # host
        r.take(">i")  # port
        code = r.take(">h")
        message = r.string()
        r.skip_tags()
        return key, code, message

    return r.array(coordinator)


def test_find_coordinator_error_message(broker):
    with wire.connect(broker.host, broker.port) as s:
        deadline = time.monotonic() + 60
        while True:
            found = find_v4(s, ["it-fc-a", "it-fc-b"])
            assert [k for k, _, _ in found] == ["it-fc-a", "it-fc-b"]
            assert [m for _, _, m in found] == ["", ""], found
            codes = {c for _, c, _ in found}
            if codes == {NONE}:
                break
            assert codes <= set(RETRIABLE) | {NONE}, found
            assert time.monotonic() < deadline, "no coordinator within 60 s: %s" % found
            time.sleep(0.3)
        assert find_v1(s, "it-fc-a") == (NONE, "NONE")


def test_find_coordinator_v1_describes_an_error(broker):
    """v1-v3 carry Kafka's description of the error, not its name."""
    with wire.connect(broker.host, broker.port) as s:
        code, message = find_v1(s, "it-fc-c", key_type=5)
    assert code == 42  # INVALID_REQUEST: no such coordinator type
    assert message.startswith("This most likely occurs because of a request being malformed")
