"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on a BROKER
resource) checked as Kafka 4.1 checks them: every value parsed by its type
and range, refused with INVALID_REQUEST and ConfigDef's text; per-broker keys
(the Kerberos and login refresh settings librdkafka's test 0081 alters) set
on the broker id but refused as a cluster default ("").
"""

import struct

import pytest

import wire
from conftest import require_module
from procs import wait_until
from roundtrip import admin as make_admin

INCREMENTAL_ALTER_CONFIGS = 44
BROKER = 4
INVALID_REQUEST = 42
DYNAMIC_BROKER_CONFIG = 2
DEFAULT_CONFIG = 5


def _s(x):
    b = x.encode()
    return struct.pack(">h", len(b)) + b


def alter_raw(broker, name, pairs):
    """IncrementalAlterConfigs v0, SET each (key, value) on BROKER `name`;
    returns (error_code, error_message)."""
    body = struct.pack(">ibh", 1, BROKER, len(name)) + name.encode()
    body += struct.pack(">i", len(pairs))
    for k, v in pairs:
        body += _s(k) + struct.pack(">b", 0) + _s(v)
    body += b"\x00"  # validate_only
    with wire.connect(broker.host, broker.port) as s:
        s.sendall(wire.frame(wire.request_header(INCREMENTAL_ALTER_CONFIGS, 0, 9) + body))
        r = wire.Reader(wire.recv_frame(s))
    assert r.take(">i") == 9
    r.take(">i")  # throttle
    (code, message, rtype, rname), = r.array(
        lambda r: (r.take(">h"), r.string(), r.take(">b"), r.string()))
    assert (rtype, rname) == (BROKER, name)
    return code, message


@pytest.fixture(scope="module")
def node(broker):
    """The broker's id, as its resource name."""
    ck = require_module("confluent_kafka")
    md = make_admin(broker.bootstrap).list_topics(timeout=10)
    assert isinstance(md.brokers, dict) and ck is not None
    (bid,) = md.brokers
    return str(bid)


def test_per_broker_keys(broker, node):
    ck = require_module("confluent_kafka")
    a = make_admin(broker.bootstrap)
    r = ck.admin.ConfigResource(
        "broker", node, incremental_configs=[
            ck.admin.ConfigEntry("sasl.kerberos.min.time.before.relogin", "58000",
                                 incremental_operation=ck.admin.AlterConfigOpType.SET),
            ck.admin.ConfigEntry("sasl.kerberos.kinit.cmd", "/opt/krb/kinit",
                                 incremental_operation=ck.admin.AlterConfigOpType.SET)])
    assert a.incremental_alter_configs([r], request_timeout=15)[r].result(timeout=30) is None
    d = ck.admin.ConfigResource("broker", node)
    want = {"sasl.kerberos.min.time.before.relogin": ("58000", DYNAMIC_BROKER_CONFIG, False),
            "sasl.kerberos.kinit.cmd": ("/opt/krb/kinit", DYNAMIC_BROKER_CONFIG, False),
            "sasl.login.refresh.buffer.seconds": ("300", DEFAULT_CONFIG, False)}

    def described():  # Kafka applies the change a moment after answering
        got = a.describe_configs([d], request_timeout=15)[d].result(timeout=30)
        return {k: (got[k].value, got[k].source, got[k].is_read_only) for k in want}

    wait_until(lambda: described() == want, 30, what="dynamic values described")
    assert alter_raw(broker, "", [("sasl.kerberos.min.time.before.relogin", "58000"),
                                  ("log.cleaner.backoff.ms", "100")]) == (
        INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must "
                         "be specified: Set(sasl.kerberos.min.time.before.relogin)")


@pytest.mark.parametrize("key,value,text", [
    ("log.cleaner.backoff.ms", "abc", "Not a number of type LONG"),
    ("log.retention.ms", "abc", "Not a number of type LONG"),
    ("sasl.login.refresh.buffer.seconds", "40000", "Not a number of type SHORT"),
    ("sasl.kerberos.ticket.renew.jitter", "x", "Not a number of type DOUBLE"),
    ("log.cleaner.io.buffer.load.factor", "0.5x", "Not a number of type DOUBLE"),
    ("background.threads", "0", "Value must be at least 1"),
])
def test_values_checked_by_type(broker, node, key, value, text):
    assert alter_raw(broker, node, [(key, value)]) == (
        INVALID_REQUEST, "Invalid value %s for configuration %s: %s" % (value, key, text))


def test_string_keys_take_any_text(broker, node):
    assert alter_raw(broker, node, [("max.connections.per.ip.overrides", "127.0.0.1:100")]) == (
        0, None)
    assert alter_raw(broker, node, [("sasl.kerberos.principal.to.local.rules",
                                     "RULE:[1:$1],DEFAULT")]) == (0, None)
