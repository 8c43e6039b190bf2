"""TLS and SASL listeners, driven by real clients.

One broker for the module (security.SecureBroker: PLAINTEXT, SSL, MTLS,
SASL_SSL, SASL_PLAINTEXT), certificates made by openssl for the module. Covered:
kcat and confluent-kafka over SSL with and without a client certificate; the
Java client and kafkajs over SASL_SSL with SCRAM-SHA-512 and PLAIN; a SCRAM
user created by kafka-configs (ConfigCommand) logging in, and again after a
restart; large records over TLS on both fetch paths; and each refusal (wrong
password, unknown user, wrong mechanism, no client certificate where one is
required, an untrusted one, a request before authentication, an oversized
pre-authentication frame) while an authenticated client carries on.

The raw SASL exchanges (SaslHandshake/SaslAuthenticate by hand on a
SASL_PLAINTEXT listener) also run against Apache Kafka with --target=kafka;
the rest configures Runnel's listeners itself and is skipped there.
"""

import hashlib
import struct
import time

import pytest

import procs
import wire
from conftest import require_exe, require_module
from kafka_real import KafkaReal, jars_present
from runnel_broker import runnel_bin
from security import (PLAIN_USERS, SASL_AUTHENTICATE, SASL_HANDSHAKE, Certs, SaslPlainKafka,
                      SecureBroker, authenticate, handshake)

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-scram-pw"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    require_exe("openssl")
    return Certs(tmp_path_factory.mktemp("certs"))


def _running(tmp_path_factory, name, certs, extra=None):
    """Yields a started SecureBroker and stops it (clean exit asserted)."""
    b = SecureBroker(tmp_path_factory.mktemp(name) / "data", certs, extra=extra,
                     binary=runnel_bin())
    yield from procs.serving(b)


@pytest.fixture(scope="module")
def sec(tmp_path_factory, certs, target):
    if target != "runnel":
        pytest.skip("configures Runnel's TLS and SASL listeners itself")
    yield from _running(tmp_path_factory, "security", certs)


@pytest.fixture(scope="module")
def ck():
    return require_module("confluent_kafka")


def kcat_args(b, listener, certs, **extra):
    args = ["-b", b.addr(listener), "-m", "10"]
    conf = {}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        conf["ssl.ca.location"] = str(certs.ca)
    conf["security.protocol"] = {"MTLS": "ssl"}.get(listener, listener.lower())
    conf.update(extra)
    for k, v in conf.items():
        args += ["-X", "%s=%s" % (k, v)]
    return args


def run_kcat(kcat, args, stdin=None, timeout=60):
    return procs.run([kcat] + args, timeout=timeout) if stdin is None else \
        _run_input([kcat] + args, stdin, timeout)


def _run_input(cmd, data, timeout):
    import subprocess
    return subprocess.run([str(c) for c in cmd], input=data, capture_output=True, text=True,
                          timeout=timeout)


def ck_conf(b, listener, certs, **extra):
    conf = {"bootstrap.servers": b.addr(listener),
            "security.protocol": {"MTLS": "SSL"}.get(listener, listener)}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        conf["ssl.ca.location"] = str(certs.ca)
    conf.update(extra)
    return conf


def ck_roundtrip(ck, conf, topic, values, timeout=60):
    """Produce values to partition 0 and read them back with assign()."""
    p = ck.Producer(dict(conf, **{"message.max.bytes": 4 << 20, "acks": "all"}))
    errs = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(timeout) == 0 and not errs, errs
    c = ck.Consumer(dict(conf, **{"group.id": "it-security", "enable.auto.commit": False,
                                  "fetch.max.bytes": 8 << 20}))
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


# --- TLS ----------------------------------------------------------------------------


def test_kcat_over_ssl(sec, certs, kcat, topic_name):
    """Metadata over SSL names the SSL listener's advertised address; a record
    produced over SSL is consumed over SSL."""
    res = run_kcat(kcat, ["-L"] + kcat_args(sec, "SSL", certs))
    assert res.returncode == 0, procs.describe(res)
    assert "at %s" % sec.addr("SSL") in res.stdout, res.stdout
    topic = topic_name()
    res = run_kcat(kcat, ["-P", "-t", topic, "-p", "0"] + kcat_args(sec, "SSL", certs),
                   stdin="over-tls\n")
    assert res.returncode == 0, res.stderr
    res = run_kcat(kcat, ["-C", "-t", topic, "-e", "-o", "beginning", "-f", "%s\n"]
                   + kcat_args(sec, "SSL", certs))
    assert res.stdout.splitlines() == ["over-tls"], procs.describe(res)


def test_confluent_ssl_without_and_with_client_cert(sec, certs, ck, topic_name):
    topic = topic_name()
    assert ck_roundtrip(ck, ck_conf(sec, "SSL", certs), topic, [b"a", b"b"]) == [b"a", b"b"]
    mtls = ck_conf(sec, "MTLS", certs, **{"ssl.certificate.location": str(certs.client_cert),
                                          "ssl.key.location": str(certs.client_key)})
    topic = topic_name()
    assert ck_roundtrip(ck, mtls, topic, [b"mutual"]) == [b"mutual"]


def test_kcat_client_cert_required(sec, certs, kcat, topic_name):
    """MTLS refuses a client without a certificate, and one from an untrusted
    CA, while a client with a good certificate carries on."""
    good = kcat_args(sec, "MTLS", certs, **{"ssl.certificate.location": str(certs.client_cert),
                                            "ssl.key.location": str(certs.client_key)})
    assert run_kcat(kcat, ["-L"] + good).returncode == 0
    for extra in ({}, {"ssl.certificate.location": str(certs.rogue_cert),
                       "ssl.key.location": str(certs.rogue_key)}):
        res = run_kcat(kcat, ["-L", "-m", "3"] + kcat_args(sec, "MTLS", certs, **extra))
        assert res.returncode != 0, procs.describe(res)
    topic = topic_name()
    res = run_kcat(kcat, ["-P", "-t", topic, "-p", "0"] + good, stdin="still-here\n")
    assert res.returncode == 0, res.stderr
    assert "TLS handshake failed" in procs.tail(sec.log_path, 200000)


@pytest.fixture(scope="module")
def nocopy(tmp_path_factory, certs, target):
    if target != "runnel":
        pytest.skip("configures Runnel's TLS and SASL listeners itself")
    yield from _running(tmp_path_factory, "security-copy", certs, {
        "runnel.fetch.zerocopy": "false",
        "listener.name.ssl.ssl.enabled.protocols": "TLSv1.3",
        "runnel.log.level": "DEBUG",
        "runnel.log.subsystems": "net,main,config"})


@pytest.mark.parametrize("zerocopy", [True, False])
def test_large_records_over_tls(request, certs, ck, topic_name, zerocopy):
    """Records near 1 MB produced and fetched over TLS, byte for byte, with
    runnel.fetch.zerocopy on and off. Which path carried the file ranges is in
    the log (kTLS when the kernel offers it, else pread + SSL_write)."""
    b = request.getfixturevalue("sec" if zerocopy else "nocopy")
    values = [hashlib.sha256(b"%d" % i).digest() * (900000 // 32 + i) for i in range(4)]
    got = ck_roundtrip(ck, ck_conf(b, "SSL", certs), topic_name(), values)
    assert [hashlib.sha256(v).hexdigest() for v in got] == \
        [hashlib.sha256(v).hexdigest() for v in values]
    log = procs.tail(b.log_path, 400000)
    assert 'msg="TLS fetch path"' in log
    print([line for line in log.splitlines() if "TLS fetch path" in line][0])


def s_client(b, listener, certs, *args):
    import subprocess
    cmd = ["openssl", "s_client", "-connect", b.addr(listener), "-CAfile", str(certs.ca),
           "-verify_return_error"] + list(args)
    return subprocess.run(cmd, input="", capture_output=True, text=True, timeout=30)


def test_enabled_protocols(nocopy, certs):
    """ssl.enabled.protocols=TLSv1.3 on the SSL listener refuses a TLS 1.2
    client; the SASL_SSL listener keeps the default (1.2 and 1.3)."""
    assert s_client(nocopy, "SSL", certs, "-tls1_3").returncode == 0
    assert s_client(nocopy, "SSL", certs, "-tls1_2").returncode != 0
    assert s_client(nocopy, "SASL_SSL", certs, "-tls1_2").returncode == 0
    assert s_client(nocopy, "SSL", certs, "-tls1_1").returncode != 0


def test_stalled_handshake_blocks_nobody(sec, certs, kcat):
    """A client that opens a TLS connection and stops mid-handshake holds up
    no one: the handshake is driven by socket events."""
    s = wire.connect("127.0.0.1", sec.ports["SSL"])
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
    t0 = time.monotonic()
    res = run_kcat(kcat, ["-L"] + kcat_args(sec, "SSL", certs))
    assert res.returncode == 0 and time.monotonic() - t0 < 10, procs.describe(res)
    s.close()


def test_principals(nocopy, certs, ck, topic_name):
    """The principal: the client certificate's subject on mutual TLS, the SASL
    user name after SASL (logged at DEBUG)."""
    mtls = ck_conf(nocopy, "MTLS", certs, **{"ssl.certificate.location": str(certs.client_cert),
                                             "ssl.key.location": str(certs.client_key)})
    assert ck_roundtrip(ck, mtls, topic_name(), [b"x"]) == [b"x"]
    sasl = ck_conf(nocopy, "SASL_SSL", certs, **{
        "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"]})
    assert ck_roundtrip(ck, sasl, topic_name(), [b"y"]) == [b"y"]
    log = procs.tail(nocopy.log_path, 2000000)
    assert 'principal="User:CN=client-1,O=Runnel Tests"' in log
    assert 'msg="SASL authenticated"' in log and 'principal="User:alice"' in log


# --- SASL: real clients ------------------------------------------------------------------


@pytest.fixture(scope="module")
def scram_user(sec, kafka_jars):
    """carol gets SCRAM-SHA-256 and SCRAM-SHA-512 credentials through
    kafka-configs (ConfigCommand), over the PLAINTEXT listener."""
    # One mechanism a call: Kafka refuses a user named twice in one request.
    for mech in ("SCRAM-SHA-256=[iterations=8192,password=%s]" % SCRAM_PASSWORD,
                 "SCRAM-SHA-512=[password=%s]" % SCRAM_PASSWORD):
        res = procs.run_java("kafka.admin.ConfigCommand", [
            "--bootstrap-server", sec.addr("PLAINTEXT"), "--alter", "--entity-type", "users",
            "--entity-name", SCRAM_USER, "--add-config", mech], timeout=120)
        assert res.returncode == 0 and "Completed updating config" in res.stdout, \
            procs.describe(res)
    res = procs.run_java("kafka.admin.ConfigCommand", [
        "--bootstrap-server", sec.addr("PLAINTEXT"), "--describe", "--entity-type", "users",
        "--entity-name", SCRAM_USER], timeout=120)
    assert "SCRAM-SHA-256=iterations=8192" in res.stdout, procs.describe(res)
    assert "SCRAM-SHA-512=iterations=4096" in res.stdout, procs.describe(res)
    return SCRAM_USER


def test_credentials_stored_hashed(sec, scram_user):
    stored = (sec.datadir / "runnel-scram-credentials").read_text()
    assert len(stored.splitlines()) == 2
    assert SCRAM_PASSWORD not in stored


def js(node_runner, b, listener, certs, mech, user, password, topic, count=5):
    import json
    ca = str(certs.ca) if "SSL" in listener else "-"
    res = node_runner("secure.js", b.addr(listener), mech, user, password, ca, topic, str(count))
    assert res.returncode == 0, procs.describe(res)
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mech,user,password", [
    ("scram-sha-512", SCRAM_USER, SCRAM_PASSWORD),
    ("scram-sha-256", SCRAM_USER, SCRAM_PASSWORD),
    ("plain", "alice", PLAIN_USERS["alice"]),
])
def test_kafkajs_sasl_ssl(sec, certs, node_runner, scram_user, topic_name, mech, user, password):
    out = js(node_runner, sec, "SASL_SSL", certs, mech, user, password, topic_name())
    assert out == {"ok": True, "high": 5}, out


@pytest.mark.parametrize("mech,user,password", [
    ("scram-sha-512", SCRAM_USER, "wrong"),
    ("scram-sha-512", "nobody", "x"),
    ("plain", "alice", "wrong"),
    ("plain", "nobody", "x"),
])
def test_kafkajs_refused(sec, certs, node_runner, scram_user, topic_name, mech, user, password):
    out = js(node_runner, sec, "SASL_SSL", certs, mech, user, password, topic_name())
    assert out.get("error") == "KafkaJSSASLAuthenticationError", out


@pytest.mark.parametrize("mech,user,password,want", [
    ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD, "OK 6"),
    ("PLAIN", "alice", PLAIN_USERS["alice"], "OK 6"),
    ("SCRAM-SHA-512", SCRAM_USER, "wrong", "AUTH_FAILED"),
])
def test_java_sasl_ssl(sec, certs, java_runner, scram_user, topic_name, mech, user, password,
                       want):
    res = java_runner("SecureClient", sec.addr("SASL_SSL"), "SASL_SSL", mech, user, password,
                      str(certs.ca), topic_name(), "6", timeout=180)
    assert res.stdout.strip().startswith(want), procs.describe(res)


def test_kcat_plain_and_wrong_mechanism(sec, certs, kcat):
    ok = kcat_args(sec, "SASL_PLAINTEXT", certs, **{
        "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"]})
    assert run_kcat(kcat, ["-L"] + ok).returncode == 0
    bad = kcat_args(sec, "SASL_PLAINTEXT", certs, **{
        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "x"})
    res = run_kcat(kcat, ["-L", "-m", "3"] + bad)
    assert res.returncode != 0 and "PLAIN" in res.stderr, procs.describe(res)


def test_scram_user_survives_restart(sec, certs, node_runner, scram_user, topic_name):
    sec.restart()
    out = js(node_runner, sec, "SASL_SSL", certs, "scram-sha-256", SCRAM_USER, SCRAM_PASSWORD,
             topic_name())
    assert out == {"ok": True, "high": 5}, out


# --- SASL: the exchange by hand ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sasl_broker(target, tmp_path_factory, request):
    """The broker the raw exchanges talk to: Runnel's SecureBroker, or Kafka."""
    if target == "runnel":
        yield request.getfixturevalue("sec")
        return
    require_exe("java")
    if not jars_present():
        pytest.skip("Kafka jars missing")
    yield from procs.serving(
        SaslPlainKafka(tmp_path_factory.mktemp("security-kafka") / "data", PLAIN_USERS))


@pytest.fixture
def steady(sasl_broker, certs, ck):
    """An authenticated producer kept open across a refusal test; it must still
    deliver afterwards."""
    p = ck.Producer(ck_conf(sasl_broker, "SASL_PLAINTEXT", certs, **{
        "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"]}))
    errs = []
    p.produce("it-security-steady", b"before", on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(30) == 0 and not errs, errs
    yield
    p.produce("it-security-steady", b"after", on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(30) == 0 and not errs, errs


def sasl_sock(b):
    return wire.connect("127.0.0.1", b.ports["SASL_PLAINTEXT"])


def test_raw_plain_ok_then_requests_allowed(sasl_broker):
    s = sasl_sock(sasl_broker)
    err, apis = wire.api_versions_v0(s, 7)
    assert err == 0 and SASL_HANDSHAKE in apis and SASL_AUTHENTICATE in apis
    assert handshake(s, "PLAIN") == (0, ["PLAIN"])
    assert authenticate(s, b"\0alice\0" + PLAIN_USERS["alice"].encode())[0] == 0
    brokers, _ = wire.metadata_v1_brokers(s, 9)
    assert brokers == [(1, "127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])]
    # once authenticated, another handshake is an illegal state, not a close
    assert handshake(s, "PLAIN", corr=10)[0] == ILLEGAL_SASL_STATE
    s.close()


def test_raw_handshake_v0_tokens(sasl_broker):
    """After SaslHandshake v0 the token travels without Kafka headers."""
    s = sasl_sock(sasl_broker)
    assert handshake(s, "PLAIN", version=0)[0] == 0
    s.sendall(wire.frame(b"\0alice\0" + PLAIN_USERS["alice"].encode()))
    assert wire.recv_frame(s) == b""
    assert wire.metadata_v1_brokers(s, 3)[0][0][2] == sasl_broker.ports["SASL_PLAINTEXT"]
    s.close()


def test_raw_wrong_password_closes_and_logs(sasl_broker, steady):
    s = sasl_sock(sasl_broker)
    peer = "127.0.0.1:%d" % s.getsockname()[1]
    assert handshake(s, "PLAIN")[0] == 0
    err, msg = authenticate(s, b"\0alice\0nope")
    assert err == SASL_AUTHENTICATION_FAILED and "Invalid username or password" in msg
    assert wire.wait_closed(s)
    if isinstance(sasl_broker, KafkaReal):
        return  # Kafka logs it in its own words
    time.sleep(0.2)
    lines = [ln for ln in procs.tail(sasl_broker.log_path, 400000).splitlines()
             if "SASL authentication failed" in ln and peer in ln]
    assert len(lines) == 1, lines


def test_raw_unsupported_mechanism(sasl_broker, steady):
    s = sasl_sock(sasl_broker)
    err, mechs = handshake(s, "SCRAM-SHA-512")  # not enabled on this listener
    assert err == UNSUPPORTED_SASL_MECHANISM and mechs == ["PLAIN"]
    assert wire.wait_closed(s)


@pytest.mark.parametrize("what", ["metadata", "authenticate-first", "api-after-handshake"])
def test_raw_request_before_auth_closes(sasl_broker, steady, what):
    s = sasl_sock(sasl_broker)
    if what == "metadata":
        s.sendall(wire.frame(wire.request_header(wire.METADATA, 1, 1) + struct.pack(">i", 0)))
    elif what == "authenticate-first":
        s.sendall(wire.frame(wire.request_header(SASL_AUTHENTICATE, 1, 1) + struct.pack(">i", 0)))
    else:
        assert handshake(s, "PLAIN")[0] == 0
        s.sendall(wire.frame(wire.request_header(wire.API_VERSIONS, 0, 2)))
    assert wire.wait_closed(s)


def test_raw_oversized_frame_before_auth(sasl_broker, steady):
    """sasl.server.max.receive.size (512 KiB): a bigger frame closes the
    connection before the broker reads or allocates it."""
    s = sasl_sock(sasl_broker)
    s.sendall(struct.pack(">i", 512 * 1024 + 1) + wire.request_header(SASL_HANDSHAKE, 1, 1))
    assert wire.wait_closed(s)
