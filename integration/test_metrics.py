"""The Prometheus endpoint (runnel.metrics.listener), scraped by a real
Prometheus (Debian's `prometheus`, run here on loopback with a 1 s scrape
interval and its TSDB in a temp dir):

- after producing N records, Prometheus' HTTP API answers exactly N for
  kafka_server_brokertopicmetrics_messagesin_total{topic=...};
- a group that committed offset C and stopped has kafka_consumergroup_lag
  exactly (records - C);
- hostile input on the HTTP listener (over-long request line and headers,
  1000 headers, path traversal, unknown methods, a slowloris connection,
  hundreds of connections) gets a 4xx or a closed connection, the broker's
  memory stays bounded, other HTTP clients are served at once and the Kafka
  listener keeps working;
- with a small runnel.metrics.max.series, many topics leave the series count
  at the cap and raise runnel_metrics_series_dropped_total.
"""

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from conftest import require_module
from procs import free_port, wait_until
from runnel_broker import RunnelBroker, runnel_bin

pytestmark = pytest.mark.usefixtures("runnel_only")

METRICS_PORT = free_port()
BROKER_PROPS = {"runnel.metrics.listener": "http://127.0.0.1:%d" % METRICS_PORT}


def http_get(port, path="/metrics", timeout=5):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.status, r.read().decode()


def sample(text, name_and_labels):
    """The value of one exposition line, or None."""
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.skip("prometheus not installed (bash .ci/install-deps --test)")
    d = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    (d / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: runnel\n    static_configs:\n"
        "      - targets: ['127.0.0.1:%d']\n" % METRICS_PORT)
    log = open(d / "prometheus.log", "w")
    proc = subprocess.Popen([exe, "--config.file=%s" % (d / "prometheus.yml"),
                             "--storage.tsdb.path=%s" % (d / "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=log, stderr=subprocess.STDOUT)

    def ready():
        try:
            return http_get(port, "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    try:
        wait_until(ready, 30, interval=0.2, what="prometheus ready")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def prom_value(port, expr):
    q = urllib.parse.urlencode({"query": expr})
    _, body = http_get(port, "/api/v1/query?" + q)
    res = json.loads(body)["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def wait_prom(port, expr, want, timeout=30):
    seen = []

    def ok():
        seen.append(prom_value(port, expr))
        return seen[-1] == want

    try:
        wait_until(ok, timeout, interval=0.5, what=expr)
    except TimeoutError:
        pytest.fail("%s: Prometheus says %s, want %s" % (expr, seen[-1:], want))


def produce(broker, topic, n):
    ck = require_module("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % (i % 7))
    assert p.flush(30) == 0


def test_prometheus_sees_exact_messagesin(broker, prometheus, topic_name):
    topic = topic_name("in")
    produce(broker, topic, 137)
    wait_prom(prometheus, 'kafka_server_brokertopicmetrics_messagesin_total{topic="%s"}' % topic,
              137.0)
    wait_prom(prometheus, 'kafka_topic_partition_current_offset{topic="%s",partition="0"}' % topic,
              137.0)
    assert prom_value(prometheus, 'kafka_server_brokertopicmetrics_totalproducerequests_total'
                      '{topic="%s"}' % topic) >= 1
    assert prom_value(prometheus, 'kafka_network_requestmetrics_requests_total'
                      '{request="Produce"}') >= 1
    assert prom_value(prometheus, 'kafka_network_requestmetrics_totaltimems_count'
                      '{request="Produce"}') >= 1


def test_prometheus_sees_stopped_group_lag(broker, prometheus, topic_name):
    ck = require_module("confluent_kafka")
    topic, group = topic_name("lag"), topic_name("group")
    produce(broker, topic, 50)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    assert got == 20
    c.commit(offsets=[ck.TopicPartition(topic, 0, 20)], asynchronous=False)
    c.close()
    labels = '{consumergroup="%s",topic="%s",partition="0"}' % (group, topic)
    wait_prom(prometheus, "kafka_consumergroup_lag" + labels, 30.0)
    wait_prom(prometheus, "kafka_consumergroup_current_offset" + labels, 20.0)
    wait_prom(prometheus, 'kafka_consumergroup_members{consumergroup="%s"}' % group, 0.0)
    _, text = http_get(METRICS_PORT)
    assert sample(text, 'kafka_server_brokertopicmetrics_bytesout_total{topic="%s"}' % topic) > 0
    assert sample(text, 'kafka_server_brokertopicmetrics_totalfetchrequests_total'
                        '{topic="%s"}' % topic) >= 1
    assert sample(text, 'kafka_server_socket_server_metrics_connection_count'
                        '{listener="PLAINTEXT"}') >= 0


# --- hostile input on the HTTP listener ------------------------------------

def raw_exchange(data, timeout=5):
    """Sends data, returns what came back until the server closed (b"" if it
    closed or reset without an answer)."""
    s = socket.create_connection(("127.0.0.1", METRICS_PORT), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return out


def status_or_close(data):
    out = raw_exchange(data)
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None


def rss_kib(broker):
    for line in open("/proc/%d/status" % broker.proc.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("data,want", [
    (b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"v" * 20000 + b"\r\n\r\n", 431),
    (b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(1000)) + b"\r\n",
     431),
    (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", 400),
    (b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\n\r\n", 400),
    (b"GET /metrics/..%2f..%2fetc HTTP/1.1\r\n\r\n", 400),
    (b"BREW /metrics HTTP/1.1\r\n\r\n", 405),
    (b"DELETE /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", 405),
    (b"GET /metrics HTTP/9.9\r\n\r\n", 505),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64, 400),
    (b"GET /etc/passwd HTTP/1.1\r\nConnection: close\r\n\r\n", 404),
])
def test_hostile_request_gets_4xx_or_close(broker, data, want):
    got = status_or_close(data)
    assert got in (want, None), "got %s, want %s or a close" % (got, want)
    assert got == want or want in (414, 431)  # only the floods may be cut by a reset
    assert http_get(METRICS_PORT)[0] == 200


def test_slowloris_is_closed_by_the_deadline_while_others_are_served(broker):
    slow = socket.create_connection(("127.0.0.1", METRICS_PORT), timeout=20)
    slow.sendall(b"GET /metrics HTTP/1.1\r\n")
    start = time.monotonic()
    closed_at, answer = None, b""
    slow.settimeout(1.0)
    while time.monotonic() - start < 20:
        try:
            slow.sendall(b"X")  # one byte a second: the head never ends
        except (BrokenPipeError, ConnectionResetError):
            closed_at = time.monotonic()
            break
        t0 = time.monotonic()
        status, _ = http_get(METRICS_PORT, timeout=2)  # another client, served at once
        assert status == 200 and time.monotonic() - t0 < 1.0
        try:
            chunk = slow.recv(4096)
            answer += chunk
            if not chunk:
                closed_at = time.monotonic()
                break
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed_at = time.monotonic()
            break
    slow.close()
    assert closed_at is not None, "the slow connection was never closed"
    assert 9 <= closed_at - start <= 14, closed_at - start
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408")


def test_many_connections_bounded(broker, topic_name):
    before = rss_kib(broker)
    socks = []
    for _ in range(300):
        try:
            s = socket.create_connection(("127.0.0.1", METRICS_PORT), timeout=2)
            s.sendall(b"GET /metrics HTTP/1.1\r\nX-Partial: ")  # heads left open
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.5)
    closed = 0
    for s in socks:
        s.settimeout(0.05)
        try:
            if s.recv(1) == b"":
                closed += 1
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed += 1
    assert closed >= 300 - 64, "connections past the cap must be closed (%d)" % closed
    assert rss_kib(broker) - before < 64 * 1024, "RSS grew by %d KiB" % (rss_kib(broker) - before)
    produce(broker, topic_name("alive"), 5)  # the Kafka listener is unaffected
    for s in socks:
        s.close()
    wait_until(lambda: http_get(METRICS_PORT)[0] == 200, 10, what="metrics served again")


def test_series_cap_counts_dropped(tmp_path):
    port = free_port()
    b = RunnelBroker(tmp_path / "data", binary=runnel_bin(), overrides={
        "runnel.metrics.listener": "http://127.0.0.1:%d" % port,
        "runnel.metrics.max.series": "150"})
    b.start()
    try:
        ck = require_module("confluent_kafka")
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(60):
            p.produce("capped-%d" % i, value=b"x")
        assert p.flush(60) == 0
        _, text = http_get(port)
        series = sample(text, "runnel_metrics_series")
        dropped = sample(text, "runnel_metrics_series_dropped_total")
        assert series is not None and series <= 150
        assert dropped > 0
        _, text = http_get(port)
        assert sample(text, "runnel_metrics_series") <= 150
        assert sample(text, "runnel_metrics_series_dropped_total") > dropped  # still refusing
        assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total") == 60
    finally:
        b.stop()
