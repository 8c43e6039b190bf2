"""The first five minutes: the README's lines as written, the sample configs,
`runnel --help` and the one-line errors a newcomer meets first.

The quick start runs `bash .ci/start` itself (it installs, builds only the
broker in build/, serves 127.0.0.1:9092), then the README's kcat and Python
lines, then stops it with Ctrl-C (SIGINT). Port 9092 must be free. The data
directory is a fresh temporary one (KAFKA_LOG_DIRS; the README's line itself
is unchanged). Runnel only: these are Runnel's own commands and files.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import procs
from runnel_broker import runnel_bin

REPO = procs.REPO
README = (REPO / "README.md").read_text()
READY = re.compile(r"^runnel: serving (?P<listeners>[^;]+); data in (?P<dirs>[^;]+); "
                   r"stop with Ctrl-C or kill -TERM (?P<pid>\d+)$", re.M)


pytestmark = pytest.mark.usefixtures("runnel_only")


def readme_block(heading, lang):
    """The first ```lang block under the README heading `## heading`."""
    section = README.split("## " + heading + "\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```" + lang + "\n", 1)[1].split("```", 1)[0]


def readme_commands(heading):
    """The shell lines of the first sh block under heading, comments removed."""
    return [ln.split("  #")[0].strip() for ln in readme_block(heading, "sh").splitlines()
            if ln.strip() and not ln.startswith("#")]


class Started:
    """A broker process started by a command; a thread collects its stderr lines
    (so a chatty broker never blocks on a full pipe)."""

    def __init__(self, cmd, env=None, cwd=REPO):
        self.log = []
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))

    def wait_ready(self, timeout):
        """The ready line's match; fails if the process exits or times out first."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for line in self.log[seen:]:
                m = READY.match(line)
                if m:
                    return m
            seen = len(self.log)
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        self.stop(signal.SIGKILL)
        pytest.fail("no ready line within %ss (exit %s):\n%s"
                    % (timeout, self.proc.poll(), "\n".join(self.log[-40:])), pytrace=False)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            # The start script execs runnel, so the group is the broker alone.
            os.killpg(self.proc.pid, sig)
        rc = self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
        return rc


def shell(line, timeout=60, env=None):
    res = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert res.returncode == 0, "%r failed (exit %d):\n%s%s" % (line, res.returncode,
                                                                res.stdout, res.stderr)
    return res.stdout


def test_readme_quick_start_as_written(tmp_path, kcat):
    start, test_cmd = readme_commands("Start it, test it")
    assert (start, test_cmd) == ("bash .ci/start", "bash .ci/test")
    if procs.port_accepts("127.0.0.1", 9092):
        pytest.fail("port 9092 is in use: the quick start needs it", pytrace=False)
    data = tmp_path / "data"
    env = dict(os.environ, KAFKA_LOG_DIRS=str(data))
    broker = Started(["bash", "-c", start], env=env)
    try:
        m = broker.wait_ready(timeout=900)  # the first start installs and builds
        assert m["listeners"] == "PLAINTEXT://127.0.0.1:9092"
        assert m["dirs"] == str(data)
        assert int(m["pid"]) == broker.proc.pid  # the script execs the broker
        assert data.is_dir()

        produce, consume = readme_commands("Produce and consume")
        shell(produce)
        assert shell(consume).strip() == "hello runnel"

        snippet = readme_block("Produce and consume", "python")
        out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["b'hello", "runnel'", "b'hello", "again'"]
    finally:
        rc = broker.stop(signal.SIGINT)  # Ctrl-C
    assert rc == 0, "\n".join(broker.log[-40:])
    # .ci/start built the broker alone, not the test runners.
    assert (REPO / "build" / "broker" / "runnel").exists()
    assert not list((REPO / "build").glob("tests/**/test_*")), "test targets were built"


def test_start_script_serves_loopback_only(tmp_path):
    """With no configuration .ci/start binds 127.0.0.1 only: this machine's other
    addresses are refused. A listeners override replaces that default."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    others = [w.split("/")[0] for ln in out.stdout.splitlines() for w in ln.split()[3:4]
              if not w.startswith("127.")]
    if procs.port_accepts("127.0.0.1", 9092):
        pytest.fail("port 9092 is in use", pytrace=False)
    env = dict(os.environ, KAFKA_LOG_DIRS=str(tmp_path / "a"))
    b = Started(["bash", ".ci/start"], env=env)
    try:
        b.wait_ready(timeout=900)
        assert procs.port_accepts("127.0.0.1", 9092)
        for addr in others:
            assert not procs.port_accepts(addr, 9092), "reachable on %s" % addr
    finally:
        assert b.stop() == 0
    port = procs.free_port()
    b = Started(["bash", ".ci/start", "--override", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                 "--override", "log.dirs=%s" % (tmp_path / "b")])
    try:
        assert b.wait_ready(timeout=900)["listeners"] == "PLAINTEXT://127.0.0.1:%d" % port
    finally:
        assert b.stop() == 0
    if not others:
        pytest.skip("no non-loopback address here to check the loopback-only bind against")


def start_binary(tmp_path, *args):
    return Started([str(runnel_bin()), *args])


def test_sample_server_properties_starts(tmp_path, kcat):
    if procs.port_accepts("127.0.0.1", 9092):
        pytest.fail("port 9092 is in use", pytrace=False)
    b = start_binary(tmp_path, "config/server.properties",
                     "--override", "log.dirs=%s" % (tmp_path / "d"))
    try:
        m = b.wait_ready(timeout=20)
        assert m["listeners"] == "PLAINTEXT://127.0.0.1:9092"
        shell("echo sample | %s -P -b 127.0.0.1:9092 -t sample" % kcat)
        assert shell("%s -C -b 127.0.0.1:9092 -t sample -o beginning -e" % kcat).strip() == "sample"
    finally:
        assert b.stop() == 0
    assert not any("unknown configuration key" in ln for ln in b.log), "\n".join(b.log)


def test_sample_sasl_ssl_properties_starts(tmp_path, kcat):
    """The TLS/SASL sample, as its header says: dev-certs.sh, start, kcat over SASL_SSL."""
    for port in (9092, 9094):
        if procs.port_accepts("127.0.0.1", port):
            pytest.fail("port %d is in use" % port, pytrace=False)
    shutil.rmtree(REPO / "config" / "dev-certs", ignore_errors=True)
    shell("bash config/dev-certs.sh")
    b = start_binary(tmp_path, "config/server-sasl-ssl.properties",
                     "--override", "log.dirs=%s" % (tmp_path / "d"))
    try:
        m = b.wait_ready(timeout=20)
        assert m["listeners"] == "PLAINTEXT://127.0.0.1:9092, SASL_SSL://127.0.0.1:9094"
        sasl = ("-b 127.0.0.1:9094 -X security.protocol=sasl_ssl "
                "-X ssl.ca.location=config/dev-certs/ca.pem -X sasl.mechanisms=PLAIN "
                "-X sasl.username=alice -X sasl.password=")
        shell("echo secret | %s -P %salice-secret -t s" % (kcat, sasl))
        assert shell("%s -C %salice-secret -t s -o beginning -e" % (kcat, sasl)).strip() == "secret"
        bad = subprocess.run(["bash", "-c", "%s -L %swrong -m 5" % (kcat, sasl)], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "Authentication failed" in bad.stderr, bad.stderr
    finally:
        assert b.stop() == 0
        shutil.rmtree(REPO / "config" / "dev-certs", ignore_errors=True)


def test_help_lists_the_common_keys():
    out = subprocess.run([str(runnel_bin()), "--help"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0
    for key in ("listeners=PLAINTEXT://:9092", "advertised.listeners=", "log.dirs=/tmp/runnel-logs",
                "num.partitions=1", "log.retention.hours=168", "runnel.flush.acks.all=fsync"):
        assert key in out.stdout
    assert "docs/configuration.md" in out.stdout and "config/server.properties" in out.stdout


def run_fails(args, user=None, binary=None):
    cmd = [str(binary or runnel_bin()), *args]
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups", *cmd]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    assert res.returncode != 0
    return [ln for ln in res.stderr.splitlines() if ln.startswith("runnel: ")]


def test_error_bad_value():
    assert run_fails(["--override", "num.partitions=abc"]) == [
        "runnel: config: num.partitions=abc: expected an integer >= 1; fix it in the "
        "properties file or on the command line (runnel --help lists the keys)"]


def test_error_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        lines = run_fails(["--override", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                           "--override", "log.dirs=%s" % tmp_path])
    assert lines == [
        "runnel: config: listeners=PLAINTEXT://127.0.0.1:%d: cannot listen: Address already "
        "in use; stop whatever holds the port or choose another "
        "(--override listeners=PLAINTEXT://HOST:PORT)" % port]


def test_error_unwritable_data_dir():
    top = Path(tempfile.mkdtemp(prefix="runnel-ro-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        locked = top / "locked"
        locked.mkdir(mode=0o555)
        binary, user = runnel_bin(), None
        if os.geteuid() == 0:  # root writes anywhere: run a copy of the binary as nobody
            if shutil.which("setpriv") is None:
                pytest.fail("setpriv (util-linux) is needed to drop root", pytrace=False)
            binary, user = top / "runnel", 65534
            shutil.copy(runnel_bin(), binary)
        lines = run_fails(["--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", "log.dirs=%s/data" % locked], user=user, binary=binary)
        assert lines == [
            "runnel: config: log.dirs=%s/data: expected a writable directory: Permission "
            "denied; make it writable for this user or choose another "
            "(--override log.dirs=DIR)" % locked]
    finally:
        shutil.rmtree(top, ignore_errors=True)
