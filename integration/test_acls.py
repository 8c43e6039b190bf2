"""ACLs as Kafka's StandardAuthorizer keeps and enforces them.

Without an authorizer (the `broker` fixture) the three ACL APIs answer
SECURITY_DISABLED, checked byte for byte on every served version, and
kafka-acls (AclCommand) prints Kafka's message. With
authorizer.class.name=StandardAuthorizer (the `authz` fixture: a PLAINTEXT
listener whose ANONYMOUS principal is a super user, and a SASL_PLAINTEXT
listener with PLAIN users admin (super user), alice and bob), kafka-acls
adds, lists and removes ACLs, and real clients see them enforced: produce,
consume with a group, metadata, DENY over ALLOW, and the ACLs survive a
restart. Every test passes against Apache Kafka 4.1 (--target=kafka).
"""

import struct
import time

import pytest

import procs
import wire
from conftest import missing, require_exe, require_module
from kafka_real import jars_present
from security import plain_login, sasl_plain_broker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
SECURITY_DISABLED, INVALID_REQUEST = 54, 42
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
CLUSTER_AUTHORIZATION_FAILED = 31

# Kafka's codes: resource TOPIC 2, GROUP 3, CLUSTER 4, ANY 1; pattern LITERAL 3,
# PREFIXED 4, MATCH 2, ANY 1; operation ANY 1, ALL 2, READ 3, WRITE 4;
# permission ANY 1, DENY 2, ALLOW 3.


# ---- wire encoding for the three ACL APIs ------------------------------------------


def enc_str(s, flexible):
    if s is None:
        return wire.uvarint(0) if flexible else struct.pack(">h", -1)
    b = s.encode()
    return (wire.uvarint(len(b) + 1) if flexible else struct.pack(">h", len(b))) + b


def enc_array(items, flexible):
    head = wire.uvarint(len(items) + 1) if flexible else struct.pack(">i", len(items))
    return head + b"".join(items)


def tags(flexible):
    return b"\x00" if flexible else b""


def enc_binding(b, flexible):
    """(rtype, name, pattern, principal, host, op, perm) as a creation or filter."""
    rt, name, pt, principal, host, op, perm = b
    return (struct.pack(">b", rt) + enc_str(name, flexible) + struct.pack(">b", pt)
            + enc_str(principal, flexible) + enc_str(host, flexible)
            + struct.pack(">bb", op, perm) + tags(flexible))


def acl_request(sock, key, version, body, corr):
    """Sends one ACL API request; returns the response after its header."""
    flexible = version >= 2
    sock.sendall(wire.frame(wire.request_header(key, version, corr, flexible=flexible) + body))
    resp = wire.recv_frame(sock)
    assert struct.unpack_from(">i", resp)[0] == corr
    return resp[5:] if flexible else resp[4:]


def create_acls(sock, version, bindings, corr=1):
    flexible = version >= 2
    body = enc_array([enc_binding(b, flexible) for b in bindings], flexible) + tags(flexible)
    return acl_request(sock, CREATE_ACLS, version, body, corr)


def delete_acls(sock, version, filters, corr=1):
    flexible = version >= 2
    body = enc_array([enc_binding(f, flexible) for f in filters], flexible) + tags(flexible)
    return acl_request(sock, DELETE_ACLS, version, body, corr)


def describe_acls(sock, version, f, corr=1):
    flexible = version >= 2
    body = enc_binding(f, flexible)
    return acl_request(sock, DESCRIBE_ACLS, version, body, corr)


def reader(resp, version):
    return wire.FlexReader(resp) if version >= 2 else wire.Reader(resp)


def end_struct(r):
    if isinstance(r, wire.FlexReader):
        r.skip_tags()


def parse_create(resp, version):
    r = reader(resp, version)
    r.take(">i")

    def result(r):
        code, msg = r.take(">h"), r.string()
        end_struct(r)
        return code, msg

    out = r.array(result)
    end_struct(r)
    return out


ANY_FILTER = (1, None, 1, None, None, 1, 1)
ANY_TOPIC = (2, "t", 3, "User:alice", "*", 4, 3)


# ---- without an authorizer ------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
def test_no_authorizer_answers_security_disabled(broker, version):
    """Kafka 4.1's exact answers, byte for byte, on every version it serves."""
    flex = version >= 2
    with wire.connect(broker.host, broker.port) as s:
        got = describe_acls(s, version, ANY_FILTER)
        want = (struct.pack(">ih", 0, SECURITY_DISABLED)
                + enc_str("No Authorizer is configured on the broker", flex)
                + enc_array([], flex) + tags(flex))
        assert got == want
        got = create_acls(s, version, [ANY_TOPIC, ANY_TOPIC])
        one = struct.pack(">h", SECURITY_DISABLED) + enc_str("No Authorizer is configured.", flex)
        assert got == struct.pack(">i", 0) + enc_array([one + tags(flex)] * 2, flex) + tags(flex)
        got = delete_acls(s, version, [ANY_FILTER])
        one = (struct.pack(">h", SECURITY_DISABLED) + enc_str("No Authorizer is configured.", flex)
               + enc_array([], flex) + tags(flex))
        assert got == struct.pack(">i", 0) + enc_array([one], flex) + tags(flex)


def test_api_versions_serve_acl_apis(broker):
    with wire.connect(broker.host, broker.port) as s:
        err, apis = wire.api_versions_v0(s, 1)
    assert err == 0
    for key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS):
        assert apis[key] == (1, 3), (key, apis.get(key))


def acl_command(bootstrap, *args):
    return procs.run_java("org.apache.kafka.tools.AclCommand",
                          ["--bootstrap-server", bootstrap] + list(args), timeout=120)


def test_kafka_acls_list_without_authorizer(broker, kafka_jars):
    res = acl_command(broker.bootstrap, "--list")
    assert "No Authorizer is configured on the broker" in res.stdout + res.stderr, \
        procs.describe(res)


# ---- with the StandardAuthorizer -------------------------------------------------


def authz_props():
    return {
        "authorizer.class.name": AUTHORIZER,
        # ANONYMOUS: the PLAINTEXT listener (Kafka's own controller and broker
        # talk there) and the raw-protocol probes.
        "super.users": "User:admin;User:ANONYMOUS",
    }


@pytest.fixture(scope="module")
def authz(target, tmp_path_factory):
    base = tmp_path_factory.mktemp("acls-authz")
    if target == "kafka":
        require_exe("java")
        if not jars_present():
            missing("Kafka jars in %s" % procs.JARS)
    yield from procs.serving(sasl_plain_broker(target, base / "data", USERS, authz_props()))


@pytest.fixture(scope="module")
def ck():
    require_module("confluent_kafka.admin")
    return require_module("confluent_kafka")


def conf(b, user, **extra):
    c = {"bootstrap.servers": "127.0.0.1:%d" % b.sasl_port, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}
    c.update(extra)
    return c


def binding(ck, rtype, name, principal, op, perm="ALLOW", pattern="LITERAL", host="*"):
    a = ck.admin
    return a.AclBinding(a.ResourceType[rtype], name, a.ResourcePatternType[pattern], principal,
                        host, a.AclOperation[op], a.AclPermissionType[perm])


def add_acls(ck, b, *bindings):
    a = ck.admin.AdminClient(conf(b, "admin"))
    for f in a.create_acls(list(bindings)).values():
        f.result(30)
    time.sleep(0.5)  # Kafka applies ACLs through its metadata log


def create_topic(ck, b, name, partitions=1):
    a = ck.admin.AdminClient(conf(b, "admin"))
    a.create_topics([ck.admin.NewTopic(name, partitions, 1)])[name].result(30)


def produce(ck, b, user, topic, value=b"v"):
    """Delivery results of one record: None (delivered) or the error code."""
    p = ck.Producer(conf(b, user, **{"message.timeout.ms": 8000, "linger.ms": 0}))
    got = []
    p.produce(topic, value, on_delivery=lambda e, m: got.append(e and e.code()))
    p.flush(20)
    return got


@pytest.fixture
def clean_acls(authz):
    """Every test of the authorizer starts and ends without ACLs."""
    def wipe():
        with wire.connect(authz.host, authz.port) as s:
            delete_acls(s, 1, [ANY_FILTER])
        time.sleep(0.3)
    wipe()
    yield
    wipe()


def test_kafka_acls_add_list_remove(authz, kafka_jars, clean_acls, topic_name):
    t = topic_name()
    res = acl_command(authz.bootstrap, "--add", "--allow-principal", "User:alice",
                      "--operation", "Write", "--operation", "Describe", "--topic", t)
    assert res.returncode == 0, procs.describe(res)
    time.sleep(0.5)
    res = acl_command(authz.bootstrap, "--list", "--topic", t)
    assert res.returncode == 0, procs.describe(res)
    assert "User:alice" in res.stdout and "WRITE" in res.stdout and "DESCRIBE" in res.stdout, \
        res.stdout
    assert "name=%s, patternType=LITERAL" % t in res.stdout, res.stdout
    res = acl_command(authz.bootstrap, "--remove", "--force", "--allow-principal", "User:alice",
                      "--operation", "Write", "--topic", t)
    assert res.returncode == 0, procs.describe(res)
    time.sleep(0.5)
    res = acl_command(authz.bootstrap, "--list", "--topic", t)
    assert "DESCRIBE" in res.stdout and "WRITE" not in res.stdout, res.stdout


def test_create_acls_checks_each_entry(authz, clean_acls):
    """Kafka's per-entry INVALID_REQUEST answers, the valid entry stored."""
    entries = [
        (4, "not-the-cluster", 3, "User:alice", "*", 7, 3),
        (2, "", 3, "User:alice", "*", 3, 3),
        (9, "x", 3, "User:alice", "*", 3, 3),
        (2, "x", 5, "User:alice", "*", 3, 3),
        (2, "x", 3, "User:alice", "*", 16, 3),
        (2, "x", 3, "User:alice", "*", 3, 4),
        (2, "x", 3, "alice", "*", 3, 3),
        (2, "ok", 4, "User:alice", "*", 3, 3),
    ]
    with wire.connect(authz.host, authz.port) as s:
        got = parse_create(create_acls(s, 3, entries), 3)
        assert got == [
            (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (INVALID_REQUEST, "Invalid empty resource name"),
            (INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
            (INVALID_REQUEST, "Invalid patternType UNKNOWN"),
            (INVALID_REQUEST, "Invalid operation UNKNOWN"),
            (INVALID_REQUEST, "Invalid permissionType UNKNOWN"),
            (INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present "
                              "separating the principal type from the principal name)"),
            (0, ""),
        ]
        # An ANY (or MATCH) anywhere fails the whole request, as Kafka builds
        # every binding before checking any.
        got = parse_create(create_acls(s, 1, [(2, "y", 3, "User:a", "*", 3, 3),
                                              (2, "y", 2, "User:a", "*", 3, 3)], corr=2), 1)
        assert got == [(-1, None), (-1, None)]
        time.sleep(0.5)
        r = wire.Reader(describe_acls(s, 1, ANY_FILTER, corr=3))
        assert r.take(">ih") == (0, 0)  # throttle time, error code
        r.string()

        def acl(r):
            return r.string(), r.string(), r.take(">b"), r.take(">b")

        resources = r.array(lambda r: (r.take(">b"), r.string(), r.take(">b"), r.array(acl)))
        assert resources == [(2, "ok", 4, [("User:alice", "*", 3, 3)])]
        # a filter with a type out of range matches nothing
        r = wire.Reader(describe_acls(s, 1, (9, None, 1, None, None, 1, 1), corr=4))
        assert r.take(">ih") == (0, 0) and r.string() == "" and r.take(">i") == 0
        # DeleteAcls: a filter matching nothing, one matching "ok" (MATCH on
        # a longer name), an unknown operation and an unknown pattern type
        r = wire.Reader(delete_acls(s, 1, [(2, "nothing", 3, None, None, 1, 1),
                                           (2, "okay", 2, None, None, 3, 1),
                                           (2, None, 1, None, None, 16, 1),
                                           (2, None, 5, None, None, 1, 1)], corr=5))
        r.take(">i")

        def matching(r):
            return (r.take(">h"), r.string(), r.take(">b"), r.string(), r.take(">b"),
                    r.string(), r.string(), r.take(">b"), r.take(">b"))

        got = r.array(lambda r: (r.take(">h"), r.string(), r.array(matching)))
        assert got == [(0, None, []),
                       (0, None, [(0, None, 2, "ok", 4, "User:alice", "*", 3, 3)]),
                       (INVALID_REQUEST, "Unknown entryFilter.", []),
                       (INVALID_REQUEST, "Unknown patternFilter.", [])]


@pytest.mark.parametrize("api", ["describe", "create", "delete"])
def test_unknown_code_closes_connection(authz, api):
    """A code 0 (UNKNOWN) fails Kafka's request parsing: the connection closes."""
    with wire.connect(authz.host, authz.port) as s:
        f = (2, "t", 3, "User:a", "*", 0, 3)
        body = {"describe": lambda: enc_binding(f, False),
                "create": lambda: enc_array([enc_binding(f, False)], False),
                "delete": lambda: enc_array([enc_binding(f, False)], False)}[api]()
        key = {"describe": DESCRIBE_ACLS, "create": CREATE_ACLS, "delete": DELETE_ACLS}[api]
        s.sendall(wire.frame(wire.request_header(key, 1, 1) + body))
        assert wire.wait_closed(s)


def sasl_login(b, user):
    return plain_login(b, user, USERS[user])


def test_acl_apis_need_cluster_permissions(authz, ck, clean_acls):
    """DescribeAcls needs CLUSTER DESCRIBE, Create/DeleteAcls CLUSTER ALTER
    (Kafka's message names the request, so only codes are compared)."""
    with sasl_login(authz, "alice") as s:
        r = wire.Reader(describe_acls(s, 1, ANY_FILTER, corr=3))
        assert r.take(">ih") == (0, CLUSTER_AUTHORIZATION_FAILED)
        got = parse_create(create_acls(s, 1, [ANY_TOPIC], corr=4), 1)
        assert [code for code, _ in got] == [CLUSTER_AUTHORIZATION_FAILED]
        r = wire.Reader(delete_acls(s, 1, [ANY_FILTER], corr=5))
        r.take(">i")
        assert r.take(">ih") == (1, CLUSTER_AUTHORIZATION_FAILED)
    add_acls(ck, authz, binding(ck, "BROKER", "kafka-cluster", "User:alice", "DESCRIBE"))
    with sasl_login(authz, "alice") as s:
        r = wire.Reader(describe_acls(s, 1, ANY_FILTER, corr=3))
        assert r.take(">ih") == (0, 0)
        r.string()
        assert r.take(">i") == 1  # the one resource: the cluster


def test_produce_allowed_and_denied(authz, ck, clean_acls, topic_name):
    t = topic_name()
    create_topic(ck, authz, t)
    add_acls(ck, authz, binding(ck, "TOPIC", t, "User:alice", "WRITE"))
    assert produce(ck, authz, "alice", t) == [None]
    assert produce(ck, authz, "bob", t) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # admin, a super user, needs no ACL
    assert produce(ck, authz, "admin", t) == [None]


def test_deny_beats_allow(authz, ck, clean_acls, topic_name):
    t = topic_name()
    create_topic(ck, authz, t)
    add_acls(ck, authz,
             binding(ck, "TOPIC", t[:6], "User:*", "WRITE", pattern="PREFIXED"),
             binding(ck, "TOPIC", t, "User:alice", "WRITE", perm="DENY"))
    assert produce(ck, authz, "bob", t) == [None]
    assert produce(ck, authz, "alice", t) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]


def consume_one(ck, b, user, topic, group):
    """The first record's value, or the first error code the consumer reports."""
    c = ck.Consumer(conf(b, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False}))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                return m.error().code()
            c.commit(message=m, asynchronous=False)
            return m.value()
        return None
    finally:
        c.close()


def test_kip848_heartbeat_needs_group_read_and_topic_describe(authz, ck, clean_acls, topic_name):
    """ConsumerGroupHeartbeat: GROUP READ, then TOPIC DESCRIBE on each
    subscribed name; ConsumerGroupDescribe: GROUP DESCRIBE (READ implies it)."""
    import cgwire

    t = topic_name()
    group = "g848-" + t
    create_topic(ck, authz, t)
    with wire.connect(authz.host, authz.port) as s:  # ANONYMOUS: super user
        assert cgwire.find_coordinator(s, group) == 0

    def beat():
        with sasl_login(authz, "bob") as s:
            return cgwire.heartbeat(s, group, member_id="m1", epoch=0, rebalance=30000,
                                    topics=[t], owned=[])["error"]

    def describe():
        with sasl_login(authz, "bob") as s:
            return cgwire.describe(s, [group])[0]["error"]

    assert beat() == GROUP_AUTHORIZATION_FAILED
    assert describe() == GROUP_AUTHORIZATION_FAILED
    add_acls(ck, authz, binding(ck, "GROUP", group, "User:bob", "READ"))
    assert beat() == TOPIC_AUTHORIZATION_FAILED
    add_acls(ck, authz, binding(ck, "TOPIC", t, "User:bob", "DESCRIBE"))
    assert beat() == 0
    assert describe() == 0


def test_consumer_group_needs_group_read(authz, ck, clean_acls, topic_name):
    t = topic_name()
    group = "g-" + t
    create_topic(ck, authz, t)
    assert produce(ck, authz, "admin", t, b"hello") == [None]
    add_acls(ck, authz, binding(ck, "TOPIC", t, "User:bob", "READ"))
    assert consume_one(ck, authz, "bob", t, group) == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    add_acls(ck, authz, binding(ck, "GROUP", group, "User:bob", "READ"))
    assert consume_one(ck, authz, "bob", t, group) == b"hello"


def test_metadata_hides_unauthorized_topics(authz, ck, clean_acls, topic_name):
    seen, hidden = topic_name("seen"), topic_name("hidden")
    create_topic(ck, authz, seen)
    create_topic(ck, authz, hidden)
    add_acls(ck, authz, binding(ck, "TOPIC", seen, "User:alice", "READ"))
    c = ck.Consumer(conf(authz, "alice", **{"group.id": "unused"}))
    try:
        md = c.list_topics(timeout=20)
        assert seen in md.topics and hidden not in md.topics, sorted(md.topics)
        md = c.list_topics(topic=hidden, timeout=20)
        assert md.topics[hidden].error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()
    admin_md = ck.admin.AdminClient(conf(authz, "admin")).list_topics(timeout=20)
    assert seen in admin_md.topics and hidden in admin_md.topics


def test_acls_survive_restart(authz, ck, clean_acls, topic_name):
    t = topic_name()
    create_topic(ck, authz, t)
    add_acls(ck, authz, binding(ck, "TOPIC", t, "User:alice", "WRITE"),
             binding(ck, "TOPIC", t, "User:bob", "WRITE", perm="DENY"))
    authz.restart()
    assert produce(ck, authz, "alice", t) == [None]
    assert produce(ck, authz, "bob", t) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with wire.connect(authz.host, authz.port) as s:
        r = wire.Reader(describe_acls(s, 1, (2, t, 3, None, None, 1, 1)))
        assert r.take(">ih") == (0, 0)
        r.string()
        names = r.array(lambda r: (r.take(">b"), r.string(), r.take(">b"),
                                   r.array(lambda r: (r.string(), r.string(), r.take(">bb")))))
    assert names == [(2, t, 3, [("User:alice", "*", (4, 3)), ("User:bob", "*", (4, 2))])] or \
        names == [(2, t, 3, [("User:bob", "*", (4, 2)), ("User:alice", "*", (4, 3))])]


def metadata_with_operations(sock, topics, corr):
    """Metadata v8 asking for the cluster's and the topics' authorized operations."""
    req = wire.metadata_request(8, topics, corr, allow_auto_create=False)
    sock.sendall(req[:-2] + b"\x01\x01")
    return wire.parse_metadata(wire.recv_frame(sock), 8, corr)


OMITTED = -2147483648  # Kafka's "authorized operations not computed"
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def test_metadata_authorized_operations(authz, ck, clean_acls, topic_name):
    mine, other = topic_name("mine"), topic_name("other")
    create_topic(ck, authz, mine)
    create_topic(ck, authz, other)
    add_acls(ck, authz, binding(ck, "TOPIC", mine, "User:alice", "READ"))
    with sasl_login(authz, "alice") as s:
        md = metadata_with_operations(s, [mine, other, "it-acls-absent"], 3)
    got = {t["name"]: (t["error_code"], t["authorized_operations"]) for t in md["topics"]}
    assert got == {mine: (0, (1 << 3) | (1 << 8)),  # READ implies DESCRIBE
                   other: (TOPIC_AUTHORIZATION_FAILED, OMITTED),
                   "it-acls-absent": (TOPIC_AUTHORIZATION_FAILED, OMITTED)}
    assert md["cluster_authorized_operations"] == 0  # no CLUSTER DESCRIBE
    with sasl_login(authz, "admin") as s:
        md = metadata_with_operations(s, [mine], 3)
    assert [(t["error_code"], t["authorized_operations"]) for t in md["topics"]] == \
        [(0, TOPIC_OPS)]
    assert md["cluster_authorized_operations"] == CLUSTER_OPS


def init_producer_id(sock, txn_id, corr):
    """(error, producer id, epoch); retried while Kafka's transaction
    coordinator is still loading (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR)."""
    deadline = time.monotonic() + 30
    while True:
        body = enc_str(txn_id, False) + struct.pack(">i", 60000)
        sock.sendall(wire.frame(wire.request_header(22, 1, corr) + body))
        r = wire.Reader(wire.recv_frame(sock))
        assert r.take(">i") == corr
        r.take(">i")
        got = r.take(">h"), r.take(">q"), r.take(">h")
        if got[0] not in (14, 15, 16) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def find_coordinator(sock, key, key_type, corr):
    """FindCoordinator v1's error code, retried while the coordinator loads."""
    deadline = time.monotonic() + 30
    while True:
        body = enc_str(key, False) + struct.pack(">b", key_type)
        sock.sendall(wire.frame(wire.request_header(10, 1, corr) + body))
        r = wire.Reader(wire.recv_frame(sock))
        assert r.take(">i") == corr
        r.take(">i")
        err = r.take(">h")
        if err not in (14, 15) or time.monotonic() > deadline:
            return err
        time.sleep(0.3)


def test_init_producer_id(authz, ck, clean_acls, topic_name):
    """Idempotent producers need WRITE on some topic (or CLUSTER
    IDEMPOTENT_WRITE); transactional ones TRANSACTIONAL_ID WRITE."""
    t = topic_name()
    add_acls(ck, authz, binding(ck, "TOPIC", t, "User:alice", "WRITE"),
             binding(ck, "TRANSACTIONAL_ID", "tx-", "User:alice", "WRITE", pattern="PREFIXED"))
    with sasl_login(authz, "alice") as s:
        err, pid, _ = init_producer_id(s, None, 3)
        assert err == 0 and pid >= 0
        assert init_producer_id(s, "other-tx", 4) == (53, -1, -1)
        # FindCoordinator makes Kafka create its transaction state topic
        assert find_coordinator(s, "other-tx", 1, 6) == 53
        assert find_coordinator(s, "tx-alice", 1, 7) == 0
        err, pid, _ = init_producer_id(s, "tx-alice", 8)
        assert err == 0 and pid >= 0
    with sasl_login(authz, "bob") as s:
        assert init_producer_id(s, None, 3) == (CLUSTER_AUTHORIZATION_FAILED, -1, -1)


def test_create_acls_bounded_per_request(authz, clean_acls):
    """At most 10,000 ACLs per request (Kafka's records per controller
    operation): one more fails every entry with POLICY_VIOLATION."""
    many = [(2, "bound-%d" % i, 3, "User:a", "*", 3, 3) for i in range(10001)]
    with wire.connect(authz.host, authz.port) as s:
        got = parse_create(create_acls(s, 3, many, corr=1), 3)
        assert len(got) == 10001
        assert set(got) == {(44, "Unable to perform excessively large batch operation.")}
        got = parse_create(create_acls(s, 3, many[:10000], corr=2), 3)
        assert set(got) == {(0, "")}
        time.sleep(0.5)
        r = wire.Reader(delete_acls(s, 1, [ANY_FILTER], corr=3))
        r.take(">i")
        r.take(">i")
        assert (r.take(">h"), r.string(), r.take(">i")) == (0, None, 10000)


def describe_quorum(sock, corr):
    """DescribeQuorum v0 for __cluster_metadata partition 0 -> (error, topics)."""
    name = b"__cluster_metadata"
    body = b"\x02" + bytes([len(name) + 1]) + name + b"\x02" + struct.pack(">i", 0)
    body += b"\x00\x00\x00"
    sock.sendall(wire.frame(wire.request_header(55, 0, corr, flexible=True) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == corr
    r.take(">B")  # response header tags
    return r.take(">h"), r.take(">B") - 1


def test_describe_quorum_needs_cluster_describe(authz, ck, clean_acls):
    with sasl_login(authz, "alice") as s:
        assert describe_quorum(s, 7) == (CLUSTER_AUTHORIZATION_FAILED, 0)
    add_acls(ck, authz, binding(ck, "BROKER", "kafka-cluster", "User:alice", "DESCRIBE"))
    with sasl_login(authz, "alice") as s:
        assert describe_quorum(s, 8) == (0, 1)


def write_txn_markers(sock, topic, corr):
    """WriteTxnMarkers v1: an abort marker of producer 9999 (epoch 0) on
    partition 0 of topic -> that partition's error code."""
    part = wire.compact_string(topic) + b"\x02" + struct.pack(">i", 0) + b"\x00"
    marker = struct.pack(">qh?", 9999, 0, False) + b"\x02" + part + struct.pack(">i", 0) + b"\x00"
    body = b"\x02" + marker + b"\x00"
    sock.sendall(wire.frame(wire.request_header(27, 1, corr, flexible=True) + body))
    r = wire.FlexReader(wire.recv_frame(sock))
    assert r.take(">i") == corr
    r.skip_tags()
    assert r.uvarint() == 2 and r.take(">q") == 9999
    assert r.uvarint() == 2 and r.string() == topic
    assert r.uvarint() == 2 and r.take(">i") == 0
    return r.take(">h")


def test_write_txn_markers_needs_cluster_action(authz, ck, clean_acls, topic_name):
    """WriteTxnMarkers (kafka-transactions abort) needs CLUSTER CLUSTER_ACTION."""
    t = topic_name()
    create_topic(ck, authz, t)
    with sasl_login(authz, "alice") as s:
        assert write_txn_markers(s, t, 9) == CLUSTER_AUTHORIZATION_FAILED
    add_acls(ck, authz, binding(ck, "BROKER", "kafka-cluster", "User:alice", "CLUSTER_ACTION"))
    with sasl_login(authz, "alice") as s:
        assert write_txn_markers(s, t, 10) == 0
