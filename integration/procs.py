"""Process helpers shared by the integration tests and bench/.

Everything here is bounded in time, listens on loopback only, and signals
only processes it started itself (by pid, never by name).
"""

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEPS = REPO / "integration" / ".deps"
# The Kafka jars: the clients and tools the Java tests run, and the broker
# --target=kafka starts. RUNNEL_KAFKA_JARS points at another release's jars
# (e.g. fetched with integration/java/pom.xml and -Dkafka.version=...).
JARS = Path(os.environ.get("RUNNEL_KAFKA_JARS") or DEPS / "jars")
# Go: GOPATH (module cache, build cache), a toolchain when the machine's go is
# too old (both from .ci/install-deps --test), and the built goclients.
GO_DEPS = DEPS / "go"
GO_SRC = REPO / "integration" / "go"

# Kafka's tools and the server log through slf4j-simple; keep them quiet and
# start the JVM quickly (these are short-lived processes).
JAVA_TOOL_OPTS = [
    "-Xshare:auto",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xmx256m",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
]


def _die_with_parent():
    """In the child before exec: get SIGTERM if the test process dies (Linux), so
    a killed pytest leaves no broker behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, not on every platform
        pass


_port_next = [0]


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago: from the range
    RUNNEL_TEST_PORTS ("LO-HI", for runs that share a machine) when set, else
    one the kernel picks."""
    rng = os.environ.get("RUNNEL_TEST_PORTS", "")
    if rng:
        lo, hi = (int(x) for x in rng.split("-"))
        for _ in range(hi - lo + 1):
            port = lo + _port_next[0] % (hi - lo + 1)
            _port_next[0] += 1
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise RuntimeError("no free port in RUNNEL_TEST_PORTS=%s" % rng)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(host, port, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path, limit=6000):
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return "<%s: %s>" % (path, e)
    text = data[-limit:].decode(errors="replace")
    return text if len(data) <= limit else "...\n" + text


def stop_process(proc, sig=signal.SIGTERM, timeout=30.0):
    """Send sig to proc (ours) and wait; SIGKILL after timeout. Returns the exit code
    (negative signal number if it died of a signal), or None if it was already gone."""
    if proc is None:
        return None
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        raise


def run(cmd, timeout, env=None, cwd=None, check=False, input=None):
    """Run cmd (a list) capturing text output; kill it at timeout. input: text
    for its stdin (else stdin is /dev/null).

    Returns subprocess.CompletedProcess. On timeout raises TimeoutError with
    what the process printed so far.
    """
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        # The child runs in its own session: end it and whatever it spawned.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate(timeout=10)
        raise TimeoutError(
            "timed out after %ss: %s\n--- stdout ---\n%s\n--- stderr ---\n%s"
            % (timeout, " ".join(str(c) for c in cmd), out[-4000:], err[-4000:])
        )
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and res.returncode != 0:
        raise AssertionError(describe(res))
    return res


@contextlib.contextmanager
def background(cmd, log_path):
    """Runs cmd while the with-block runs, its output going to log_path;
    SIGTERM at the end (SIGKILL if it lingers). Yields the Popen."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent)
    try:
        yield proc
    finally:
        try:
            stop_process(proc, timeout=30)
        except subprocess.TimeoutExpired:
            pass  # stop_process killed it


def describe(res):
    return "exit %s: %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        res.returncode,
        " ".join(res.args),
        res.stdout[-6000:],
        res.stderr[-6000:],
    )


def java_classpath(extra=None):
    cp = [str(JARS / "*")]
    if extra:
        cp.insert(0, str(extra))
    return os.pathsep.join(cp)


def java_command(main_class, args, extra_cp=None, jvm_opts=None):
    cmd = ["java"] + JAVA_TOOL_OPTS + (jvm_opts or [])
    return cmd + ["-cp", java_classpath(extra_cp), main_class] + [str(a) for a in args]


def run_java(main_class, args, timeout=120, extra_cp=None, check=False, jvm_opts=None,
             input=None):
    return run(java_command(main_class, args, extra_cp, jvm_opts), timeout=timeout, check=check,
               input=input)


def _go_version(text):
    """"go1.26.8" or "1.26" -> (1, 26, 8) / (1, 26, 0)."""
    nums = [int(n) for n in text.strip().removeprefix("go").split("-")[0].split(".")]
    return tuple((nums + [0, 0])[:3])


def go_env():
    """Environment for go commands at test time: offline, with the modules and
    toolchain .ci/install-deps put in GO_DEPS."""
    env = dict(os.environ, GOPATH=str(GO_DEPS), GOCACHE=str(GO_DEPS / "cache"), GOPROXY="off",
               GOFLAGS="-mod=readonly -modcacherw", GOTOOLCHAIN="local", GOWORK="off",
               GOENV="off", CGO_ENABLED="0")
    env.pop("GOMODCACHE", None)
    return env


def find_go():
    """The first go command new enough for integration/go/go.mod (the one
    .ci/install-deps fetched, then PATH, then /usr/local/go), or None."""
    need = None
    for line in (GO_SRC / "go.mod").read_text().splitlines():
        if line.startswith("go "):
            need = _go_version(line[3:])
    import shutil

    for go in (GO_DEPS / "toolchain" / "bin" / "go", shutil.which("go"), "/usr/local/go/bin/go"):
        if not go or not os.access(go, os.X_OK):
            continue
        res = run([go, "env", "GOVERSION"], timeout=30, env=go_env())
        if res.returncode == 0 and _go_version(res.stdout) >= need:
            return str(go)
    return None


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError("%s not met within %.1fs" % (what, timeout))
        time.sleep(interval)


def serving(broker):
    """For a module fixture: starts broker, yields it, and at the end stops it
    with SIGTERM (clean exit asserted) if it is still running."""
    broker.start()
    try:
        yield broker
    finally:
        if broker.alive():
            broker.stop()


class BrokerProcess:
    """A broker child process with a fixed address and data directory.

    Subclasses provide command() and may extend wait_ready(). The public
    surface is what the tests use: bootstrap, host, port, datadir, start(),
    stop(), restart(), kill9(), alive().
    """

    # Exit codes that count as a clean stop after SIGTERM.
    clean_exit_codes = (0,)
    start_timeout = 10.0

    def __init__(self, datadir, port=None, host="127.0.0.1", log_path=None):
        self.host = host
        self.port = port or free_port()
        self.datadir = Path(datadir)
        self.datadir.mkdir(parents=True, exist_ok=True)
        self.log_path = Path(log_path) if log_path else self.datadir.parent / (
            self.datadir.name + ".stderr.log")
        self.proc = None
        self.starts = 0
        self.expect_running = False  # False after stop()/kill9(): exit is intended

    @property
    def bootstrap(self):
        return "%s:%d" % (self.host, self.port)

    def command(self):
        raise NotImplementedError

    def env(self):
        return None

    def prepare(self):
        """Hook run before each start (e.g. formatting storage)."""

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.prepare()
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(("\n==== start #%d: %s\n" % (self.starts, " ".join(self.command()))).encode())
        log.flush()
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        self.expect_running = True
        try:
            self.wait_ready()
        except Exception:
            # Don't leave a half-started broker behind.
            stop_process(self.proc, signal.SIGKILL, timeout=10)
            raise
        return self

    def wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while not port_accepts(self.host, self.port):
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited with %s during start-up\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            if time.monotonic() >= deadline:
                raise TimeoutError("broker did not accept on %s within %.0fs\n%s"
                                   % (self.bootstrap, self.start_timeout, self.log_tail()))
            time.sleep(0.02)

    def wait_serving(self, probe, what, interval=0.2):
        """For wait_ready after the port accepts: call probe() until it says the
        process serves, within start_timeout. probe returns (ready, state),
        state being shown if time runs out; OSError and ValueError count as
        not ready."""
        deadline = time.monotonic() + self.start_timeout
        last = None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s during start-up\n%s"
                                   % (what, self.proc.returncode, self.log_tail()))
            try:
                ready, last = probe()
                if ready:
                    return
            except (OSError, ValueError) as e:
                last = e
            if time.monotonic() >= deadline:
                raise TimeoutError("%s not ready within %.0fs (last: %r)\n%s"
                                   % (what, self.start_timeout, last, self.log_tail()))
            time.sleep(interval)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=30.0):
        """SIGTERM, wait, and assert a clean exit."""
        self.expect_running = False
        code = stop_process(self.proc, signal.SIGTERM, timeout=timeout)
        assert code in self.clean_exit_codes, (
            "broker exit code after SIGTERM was %s, expected one of %s\n%s"
            % (code, self.clean_exit_codes, self.log_tail()))
        return code

    def kill9(self):
        self.expect_running = False
        return stop_process(self.proc, signal.SIGKILL, timeout=10)

    def restart(self):
        self.stop()
        return self.start()

    def log_tail(self, limit=6000):
        return "--- broker log %s ---\n%s" % (self.log_path, tail(self.log_path, limit))

    def close(self):
        """Best-effort teardown: SIGTERM, then SIGKILL if needed. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        try:
            return stop_process(self.proc, signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            return None
