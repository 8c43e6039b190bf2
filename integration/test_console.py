"""The built-in web console (runnel.console.listener) in a real browser:
Debian's chromium driven by playwright-core, and Debian's firefox-esr driven by
puppeteer-core over WebDriver BiDi (integration/console-js).

Two brokers, one with runnel.console.write.enable=true and one without: list
topics, open one, browse its records (a binary value shown as hex), see a
group's lag chart, reset the group's offsets (done, or refused when writes are
off); a page of another origin posting to the console is refused; with SASL
users configured the console asks for a login. Screenshots are kept under the
pytest tmp dir (their paths are printed); CONSOLE_SCREENSHOT=path copies the
group page's to path (docs/console.png for the README).
"""

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import procs
from conftest import missing, require_exe, require_module
from runnel_broker import RunnelBroker, runnel_bin
from security import SaslPlainRunnel

pytestmark = pytest.mark.usefixtures("runnel_only")

HERE = Path(__file__).resolve().parent
CONSOLE_JS = HERE / "console-js"
TOPIC = "console-demo"
GROUP = "console-readers"
BINARY = b"\x00\xff\x01\x80"


def _chromium():
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not exe:
        missing("Debian's chromium")
    return exe


def _firefox():
    exe = os.environ.get("FIREFOX") or shutil.which("firefox-esr")
    if not exe:
        missing("Debian's firefox-esr")
    if not (CONSOLE_JS / "node_modules" / "puppeteer-core").is_dir():
        missing("puppeteer-core in %s" % (CONSOLE_JS / "node_modules"))
    return exe


@pytest.fixture(scope="module")
def browser_runner(tmp_path_factory):
    node = require_exe("node")
    chromium = _chromium()
    if not (CONSOLE_JS / "node_modules" / "playwright-core").is_dir():
        missing("playwright-core in %s" % (CONSOLE_JS / "node_modules"))
    shots = tmp_path_factory.mktemp("console-screenshots")
    print("console screenshots in %s" % shots)

    def run(scenario, **args):
        args.setdefault("shots", str(shots))
        env = dict(os.environ, CHROMIUM=chromium)
        if args.get("browser") == "firefox":
            env["FIREFOX"] = _firefox()
        res = procs.run([str(node), str(CONSOLE_JS / "console.js"), scenario, json.dumps(args)],
                        timeout=120, cwd=CONSOLE_JS, env=env)
        assert res.returncode == 0, procs.describe(res)
        return json.loads(res.stdout.strip().splitlines()[-1])

    return run


def _start(tmp_path_factory, name, props, cls=RunnelBroker, **kw):
    port = procs.free_port()
    props = dict(props, **{"runnel.console.listener": "http://127.0.0.1:%d" % port})
    base = tmp_path_factory.mktemp(name)
    if cls is RunnelBroker:
        b = RunnelBroker(base / "data", binary=runnel_bin(), overrides=props)
    else:
        b = cls(base / "data", props=props, **kw)
    b.start()
    b.console_url = "http://127.0.0.1:%d/" % port
    return b


def _fill(b):
    """TOPIC with text, JSON and binary values; GROUP read 2 of them and stopped."""
    require_module("confluent_kafka")
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(TOPIC, value=b"plain text", key=b"k-text")
    p.produce(TOPIC, value=b'{"order": 42, "items": ["a", "b"]}', key=b"k-json")
    p.produce(TOPIC, value=BINARY, key=b"k-bin", headers=[("h", b"\x01\x02")])
    for i in range(3):
        p.produce(TOPIC, value=b"more %d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got = []
    for _ in range(100):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
            if len(got) == 2:
                break
    assert len(got) == 2
    c.commit(message=got[-1], asynchronous=False)
    c.close()


def _filled(tmp_path_factory, name, props):
    b = _start(tmp_path_factory, name, props)
    try:
        _fill(b)
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def writable(tmp_path_factory):
    yield from _filled(tmp_path_factory, "console-rw", {"runnel.console.write.enable": "true"})


@pytest.fixture(scope="module")
def writable_firefox(tmp_path_factory):
    yield from _filled(tmp_path_factory, "console-ff", {"runnel.console.write.enable": "true"})


@pytest.fixture(scope="module")
def readonly(tmp_path_factory):
    yield from _filled(tmp_path_factory, "console-ro", {})


def _get(url, headers=None, method="GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method,
                                 data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_console_browse_and_reset_with_writes(writable, browser_runner):
    out = browser_runner("browse", url=writable.console_url, topic=TOPIC, group=GROUP,
                         prefix="writable-")
    print("screenshots: %s" % out["screenshots"])
    check_browse_and_reset(writable, out)
    shot = os.environ.get("CONSOLE_SCREENSHOT")
    if shot:
        shutil.copy(out["screenshots"][2], shot)  # the group after its reset


def test_console_browse_and_reset_in_firefox(writable_firefox, browser_runner):
    out = browser_runner("browse", url=writable_firefox.console_url, topic=TOPIC, group=GROUP,
                         prefix="firefox-", browser="firefox")
    print("%s screenshots: %s" % (out["browser"], out["screenshots"]))
    assert out["browser"].startswith("firefox/")
    check_browse_and_reset(writable_firefox, out)


def check_browse_and_reset(b, out):
    assert out["pageErrors"] == []
    assert TOPIC in out["topics"]
    assert out["mode"] == "writes enabled"
    assert out["topicName"] == TOPIC
    by_offset = {r["offset"]: r for r in out["records"]}
    assert len(by_offset) == 6
    assert by_offset[0] == {"offset": 0, "kind": "text", "value": "plain text"}
    assert by_offset[1]["kind"] == "text" and '"order": 42' in by_offset[1]["value"]
    assert by_offset[2] == {"offset": 2, "kind": "hex", "value": "00 ff 01 80"}
    assert out["groupLag"] == 4  # 6 records, 2 committed
    # columns: topic, partition, committed, high watermark, lag, lag time, status, committed at
    row = out["offsetRow"]
    assert row[2:5] == ["2", "6", "4"], row
    assert row[5].endswith(" s") or row[5].endswith(" ms") or row[5].endswith(" min"), row
    assert row[6] in ("OK", "WARNING", "STALL", "STOPPED"), row
    assert out["groupStatus"] in ("OK", "WARNING", "ERROR"), out["groupStatus"]
    assert out["lagPoints"] >= 2 and out["lagLine"].startswith("M")
    assert out["reset"]["error"] is False, out["reset"]
    assert "Reset 1 partition" in out["reset"]["text"]
    assert out["lagAfterReset"] == 6
    status, g = _get(b.console_url + "api/groups/" + GROUP)
    assert status == 200 and [o["committed"] for o in g["offsets"]] == [0]


def test_console_refuses_reset_when_read_only(readonly, browser_runner):
    out = browser_runner("browse", url=readonly.console_url, topic=TOPIC, group=GROUP,
                         prefix="readonly-")
    print("screenshots: %s" % out["screenshots"])
    assert out["mode"] == "read-only"
    assert by_kind(out["records"], 2) == "hex"
    assert out["reset"]["error"] is True
    assert "read-only" in out["reset"]["text"]
    assert out["lagAfterReset"] == 4
    status, g = _get(readonly.console_url + "api/groups/" + GROUP)
    assert [o["committed"] for o in g["offsets"]] == [2]


def by_kind(records, offset):
    return next(r["kind"] for r in records if r["offset"] == offset)


def test_console_refuses_cross_origin_writes(writable, browser_runner):
    # put the group's offset somewhere known first (a same-origin write, with the token)
    status, s = _get(writable.console_url + "api/session")
    token = s["csrfToken"]
    status, _ = _get(writable.console_url + "api/groups/%s/reset?to=latest" % GROUP,
                     {"X-Runnel-Csrf": token}, method="POST")
    assert status == 200
    out = browser_runner("csrf", url=writable.console_url, group=GROUP)
    assert out["statuses"] and all(s == 403 for s in out["statuses"]), out
    status, g = _get(writable.console_url + "api/groups/" + GROUP)
    assert [o["committed"] for o in g["offsets"]] == [6]  # still at latest
    # and without a browser: no token, a wrong Origin, a foreign Host
    url = writable.console_url + "api/groups/%s/reset?to=earliest" % GROUP
    assert _get(url, method="POST")[0] == 403
    assert _get(url, {"X-Runnel-Csrf": token, "Origin": "http://evil.test"}, method="POST")[0] == 403
    assert _get(url, {"X-Runnel-Csrf": token, "Host": "evil.test:80"}, method="POST")[0] == 400


def test_console_asks_for_a_login_with_sasl_users(tmp_path_factory, browser_runner):
    users = {"alice": "alice-secret"}
    b = _start(tmp_path_factory, "console-sasl", {}, cls=SaslPlainRunnel, users=users)
    try:
        assert _get(b.console_url + "api/topics")[0] == 401
        out = browser_runner("login", url=b.console_url)
        assert out["status"] == 401
        out = browser_runner("login", url=b.console_url, user="alice", password="wrong")
        assert out["status"] == 401
        out = browser_runner("login", url=b.console_url, user="alice", password="alice-secret")
        assert out["status"] == 200 and out["who"] == "User:alice", out
    finally:
        b.stop()


def _basic(user, password):
    import base64
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def test_console_applies_acls_to_its_user(tmp_path_factory):
    """With an authorizer, the console shows and reads only what its user may."""
    require_module("confluent_kafka.admin")
    from confluent_kafka import Producer
    from confluent_kafka import admin as a

    users = {"admin": "admin-secret", "alice": "alice-secret"}
    props = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "super.users": "User:admin;User:ANONYMOUS"}  # ANONYMOUS: the PLAINTEXT listener
    b = _start(tmp_path_factory, "console-acl", props, cls=SaslPlainRunnel, users=users)
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        for t in ("acl-open", "acl-secret"):
            p.produce(t, value=b"v")
        assert p.flush(30) == 0
        admin = a.AdminClient({"bootstrap.servers": b.bootstrap})
        acls = [a.AclBinding(a.ResourceType.TOPIC, "acl-open", a.ResourcePatternType.LITERAL,
                             "User:alice", "*", op, a.AclPermissionType.ALLOW)
                for op in (a.AclOperation.DESCRIBE, a.AclOperation.READ)]
        for f in admin.create_acls(acls).values():
            f.result(timeout=30)
        alice, boss = _basic("alice", "alice-secret"), _basic("admin", "admin-secret")
        status, body = _get(b.console_url + "api/topics", alice)
        assert status == 200 and [t["name"] for t in body["topics"]] == ["acl-open"]
        status, body = _get(b.console_url + "api/topics", boss)
        assert {"acl-open", "acl-secret"} <= {t["name"] for t in body["topics"]}
        assert _get(b.console_url + "api/topics/acl-secret/records?partition=0", alice)[0] == 404
        status, body = _get(b.console_url + "api/topics/acl-open/records?partition=0", alice)
        assert status == 200 and len(body["records"]) == 1
        assert _get(b.console_url + "api/topics/acl-secret/records?partition=0", boss)[0] == 200
    finally:
        b.stop()


def test_console_refuses_bad_paths_and_methods(readonly):
    import http.client
    host, port = "127.0.0.1", int(readonly.console_url.rsplit(":", 1)[1].strip("/"))
    for method, path, want in [("GET", "/../../etc/passwd", (400, 404)),
                               ("GET", "/%2e%2e/%2e%2e/etc/passwd", (400, 404)),
                               ("GET", "/nope.html", (404,)),
                               ("PUT", "/api/topics", (403, 405)),
                               ("DELETE", "/api/groups/" + GROUP, (403, 405)),
                               ("BREW", "/", (400, 405, 501))]:
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request(method, path)
        r = c.getresponse()
        assert r.status in want, (method, path, r.status)
        assert b"root:" not in r.read()
        c.close()
    assert _get(readonly.console_url + "api/topics")[0] == 200  # still serving


def test_console_shows_a_live_consumer_group_and_refuses_its_reset(writable):
    """A KIP-848 consumer with a member: members and assignment shown; the
    reset is refused (409) while it is not empty, as Kafka's tool requires."""
    from confluent_kafka import Consumer

    group = "console-live"
    c = Consumer({"bootstrap.servers": writable.bootstrap, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([TOPIC])
        m = None
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                break
        assert m is not None and m.error() is None
        c.commit(message=m, asynchronous=False)
        status, g = _get(writable.console_url + "api/groups/" + group)
        assert status == 200 and g["type"] == "consumer" and g["empty"] is False, g
        assert [a["topic"] for a in g["members"][0]["assignment"]] == [TOPIC]
        assert g["members"][0]["assignment"][0]["partitions"] == [0]
        assert [o["committed"] for o in g["offsets"]] == [m.offset() + 1]
        token = _get(writable.console_url + "api/session")[1]["csrfToken"]
        status, body = _get(writable.console_url + "api/groups/%s/reset?to=earliest" % group,
                            {"X-Runnel-Csrf": token}, method="POST")
        assert status == 409 and "members" in body["error"]
    finally:
        c.close()
