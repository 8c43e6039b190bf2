"""Delegation tokens are off, as on a Kafka broker without
delegation.token.secret.key (its default). The four token APIs are served
and refuse as Kafka refuses, by hand on every version clients use: on a
listener that did not authenticate with SASL, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
after a SASL login, DELEGATION_TOKEN_AUTH_DISABLED. Kafka's own
kafka-delegation-tokens tool then prints Kafka's error, not an unsupported
version. Every test passes against Apache Kafka 4.1 (--target=kafka).
"""

import struct

import pytest

import procs
import wire
from conftest import missing, require_exe
from kafka_real import jars_present
from security import plain_login, sasl_plain_broker

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
AUTH_DISABLED, REQUEST_NOT_ALLOWED = 61, 64
USERS = {"admin": "admin-secret", "dora": "dora-secret"}
NO_TIMESTAMP = -1


@pytest.fixture(scope="module")
def sasl(target, tmp_path_factory):
    if target == "kafka":
        require_exe("java")
        if not jars_present():
            missing("Kafka jars in %s" % procs.JARS)
    yield from procs.serving(sasl_plain_broker(target, tmp_path_factory.mktemp("tokens") / "data", USERS))


def call(sock, key, version, body, corr=5):
    """One request (v2+ are flexible) -> a reader past the response header."""
    flexible = version >= 2
    sock.sendall(wire.frame(wire.request_header(key, version, corr, flexible=flexible) + body))
    r = (wire.FlexReader if flexible else wire.Reader)(wire.recv_frame(sock))
    assert r.take(">i") == corr
    if flexible:
        r.skip_tags()
    return r


def blob(b, flexible):
    return wire.uvarint(len(b) + 1) + b if flexible else struct.pack(">i", len(b)) + b


def tags(flexible):
    return b"\x00" if flexible else b""


def create(sock, version, owner=(None, None)):
    """CreateDelegationToken, no renewers, the default lifetime -> the response's
    fields. owner (v3): (type, name), None for the requester."""
    flex = version >= 2
    body = b""
    if version >= 3:
        body += wire.compact_string(owner[0]) + wire.compact_string(owner[1])
    body += (wire.uvarint(1) if flex else struct.pack(">i", 0))
    body += struct.pack(">q", -1) + tags(flex)
    r = call(sock, CREATE, version, body)
    out = {"error": r.take(">h"), "owner": (r.string(), r.string())}
    if version >= 3:
        out["requester"] = (r.string(), r.string())
    out["times"] = (r.take(">q"), r.take(">q"), r.take(">q"))
    out["token_id"] = r.string()
    n = r.uvarint() - 1 if flex else r.take(">i")
    out["hmac"] = r.data[r.off:r.off + n]
    r.off += n
    out["throttle"] = r.take(">i")
    return out


def renew_or_expire(sock, key, version):
    flex = version >= 2
    body = blob(b"no-such-token", flex) + struct.pack(">q", 60000) + tags(flex)
    r = call(sock, key, version, body)
    return r.take(">h"), r.take(">q")


def describe(sock, version):
    """DescribeDelegationToken for every owner -> (error, tokens)."""
    flex = version >= 2
    body = (wire.compact_array(None) if flex else struct.pack(">i", -1)) + tags(flex)
    r = call(sock, DESCRIBE, version, body)
    err = r.take(">h")
    n = r.uvarint() - 1 if flex else r.take(">i")
    return err, n


def expected_create(version, error, principal, timestamp):
    out = {"error": error, "owner": ("User", principal),
           "times": (timestamp,) * 3, "token_id": "", "hmac": b"", "throttle": 0}
    if version >= 3:
        out["requester"] = ("User", principal)
    return out


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_not_allowed_without_sasl(broker, version):
    with wire.connect(broker.host, broker.port) as s:
        assert create(s, version) == expected_create(version, REQUEST_NOT_ALLOWED, "ANONYMOUS",
                                                     NO_TIMESTAMP)


def test_create_for_another_owner_names_that_owner(broker):
    with wire.connect(broker.host, broker.port) as s:
        got = create(s, 3, owner=("User", "erin"))
    want = expected_create(3, REQUEST_NOT_ALLOWED, "ANONYMOUS", NO_TIMESTAMP)
    want["owner"] = ("User", "erin")
    assert got == want


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("key", [RENEW, EXPIRE])
def test_renew_and_expire_not_allowed_without_sasl(broker, key, version):
    with wire.connect(broker.host, broker.port) as s:
        assert renew_or_expire(s, key, version) == (REQUEST_NOT_ALLOWED, NO_TIMESTAMP)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_not_allowed_without_sasl(broker, version):
    with wire.connect(broker.host, broker.port) as s:
        assert describe(s, version) == (REQUEST_NOT_ALLOWED, 0)


def test_token_apis_disabled_after_sasl_login(sasl):
    with plain_login(sasl, "dora", USERS["dora"]) as s:
        for version in (1, 2, 3):
            # Kafka's controller answers create, renew and expire: zero timestamps.
            assert create(s, version) == expected_create(version, AUTH_DISABLED, "dora", 0)
            assert describe(s, version) == (AUTH_DISABLED, 0)
        for version in (1, 2):
            for key in (RENEW, EXPIRE):
                assert renew_or_expire(s, key, version) == (AUTH_DISABLED, 0)


def test_api_versions_serve_token_apis(broker):
    with wire.connect(broker.host, broker.port) as s:
        err, apis = wire.api_versions_v0(s, 1)
    assert err == 0
    assert {k: apis.get(k) for k in (CREATE, RENEW, EXPIRE, DESCRIBE)} == {
        CREATE: (1, 3), RENEW: (1, 2), EXPIRE: (1, 2), DESCRIBE: (1, 3)}


def test_delegation_tokens_tool_prints_kafka_error(sasl, kafka_jars, tmp_path):
    conf = tmp_path / "client.properties"
    conf.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                    'required username="dora" password="%s";\n' % USERS["dora"])
    res = procs.run_java("org.apache.kafka.tools.DelegationTokenCommand",
                         ["--bootstrap-server", sasl.addr("SASL_PLAINTEXT"), "--create",
                          "--max-life-time-period", "-1", "--command-config", str(conf)],
                         timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0, procs.describe(res)
    assert "DelegationTokenDisabledException" in out, procs.describe(res)
