"""pytest fixtures for Runnel's integration tests.

Each test module gets its own broker (`broker` fixture): the real runnel
binary ($RUNNEL_BIN, default build/broker/runnel) on 127.0.0.1 with an
ephemeral port and a temporary data directory. With `--target=kafka` the same
tests run against a real Apache Kafka 4.x started from the Maven jars, which
shows that they assert Kafka's behaviour and nothing Runnel-specific.

Clients come from `.ci/install-deps --test`. A missing client fails the test
when CI=true; a local run skips it with a loud reason.
"""

import importlib
import itertools
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kafka_cli  # noqa: E402
import procs  # noqa: E402
from kafka_real import KafkaReal, jars_present  # noqa: E402
from runnel_broker import RunnelBroker, runnel_bin  # noqa: E402

JS_DIR = HERE / "js"
JAVA_DIR = HERE / "java"

_brokers = []  # live broker objects, for failure reports


def pytest_addoption(parser):
    parser.addoption(
        "--target",
        choices=("runnel", "kafka"),
        default=os.environ.get("RUNNEL_TARGET", "runnel"),
        help="broker to test: the runnel binary (default) or real Apache Kafka 4.x",
    )


def pytest_report_header(config):
    target = config.getoption("--target")
    if target == "kafka":
        return "target: Apache Kafka from %s" % procs.JARS
    return "target: runnel %s" % runnel_bin()


def in_ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(what, hint="run: bash .ci/install-deps --test"):
    """Fail (CI) or skip loudly (local run) because a test client is missing."""
    msg = "CLIENT MISSING: %s (%s)" % (what, hint)
    if in_ci():
        pytest.fail(msg + " -- CI=true, so this fails instead of skipping", pytrace=False)
    sys.stderr.write("\n*** %s: skipping ***\n" % msg)
    pytest.skip(msg)


def require_module(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing("python module %s: %s" % (name, e))


def require_exe(name):
    path = shutil.which(name)
    if not path:
        missing("executable %s on PATH" % name)
    return path


@pytest.fixture(scope="session")
def target(pytestconfig):
    return pytestconfig.getoption("--target")


@pytest.fixture
def runnel_only(target):
    """For tests of Runnel's own commands, files and pages: skipped on --target=kafka.
    Use as `pytestmark = pytest.mark.usefixtures("runnel_only")`."""
    if target != "runnel":
        pytest.skip("tests Runnel's own commands, files or pages")


@pytest.fixture(scope="session")
def kafka_jars():
    """integration/.deps/jars: kafka-clients, kafka-tools, kafka_2.13, slf4j."""
    require_exe("java")
    if not jars_present():
        missing("Kafka jars in %s" % procs.JARS)
    return procs.JARS


def _start_broker(target, tmp_path_factory, name, props=None):
    """props: broker properties for either target (server.properties keys)."""
    base = tmp_path_factory.mktemp(name)
    if target == "kafka":
        require_exe("java")
        if not jars_present():
            missing("Kafka jars in %s (needed for --target=kafka)" % procs.JARS)
        b = KafkaReal(base / "data", extra_props=props)
    else:
        binary = runnel_bin()
        if not os.access(binary, os.X_OK):
            pytest.fail("runnel binary not found at %s (build it, or set RUNNEL_BIN)" % binary,
                        pytrace=False)
        b = RunnelBroker(base / "data", binary=binary, overrides=props)
    b.start()
    return b


@pytest.fixture(scope="module")
def broker(target, tmp_path_factory, request):
    """A broker for this test module; stopped with SIGTERM (clean exit asserted) at the end.
    A module may set BROKER_PROPS = {key: value} to start it with extra broker properties."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    b = _start_broker(target, tmp_path_factory, name, getattr(request.module, "BROKER_PROPS", None))
    _brokers.append(b)
    try:
        yield b
    finally:
        _brokers.remove(b)
        if b.alive():
            b.stop()  # asserts the clean exit code
        elif b.expect_running:
            pytest.fail("broker died during the module (exit %s)\n%s"
                        % (b.proc.returncode, b.log_tail()), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _brokers:
        for b in _brokers:
            state = "alive" if b.alive() else "exited %s" % (b.proc and b.proc.returncode)
            rep.sections.append(("broker %s (%s)" % (b.bootstrap, state), b.log_tail(4000)))


_seq = itertools.count(1)


@pytest.fixture
def topic_name(request):
    """Factory for topic names unique within the session: topic_name('x') -> 'it-x-<n>'."""
    base = request.node.name.split("[")[0].replace("test_", "")[:40]

    def make(suffix=""):
        n = next(_seq)
        return "it-%s%s-%d" % (base, ("-" + suffix) if suffix else "", n)

    return make


# --- client runners ----------------------------------------------------------------


@pytest.fixture(scope="session")
def kcat():
    return require_exe("kcat")


@pytest.fixture(scope="session")
def node_runner():
    """run(script, *args, timeout=60) -> CompletedProcess, for scripts in integration/js."""
    node = require_exe("node")
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        missing("kafkajs in %s" % (JS_DIR / "node_modules"))

    def run(script, *args, timeout=60):
        return procs.run([node, JS_DIR / script] + list(args), timeout=timeout, cwd=JS_DIR)

    return run


@pytest.fixture(scope="session")
def go_runner():
    """run(client, command, *args, timeout=90) -> the JSON object printed by
    integration/go's goclients (client: franz or sarama); built once per
    session into integration/.deps/go from the modules install-deps fetched."""
    go = procs.find_go()
    if go is None:
        missing("go >= the version integration/go/go.mod names")
    if not (procs.DEPS / "stamps" / "go").is_file():
        missing("Go modules of integration/go in %s" % procs.GO_DEPS)
    exe = procs.GO_DEPS / "goclients"
    procs.run([go, "build", "-o", exe, "."], timeout=600, env=procs.go_env(), cwd=procs.GO_SRC,
              check=True)

    def run(client, command, *args, timeout=90):
        res = procs.run([exe, client, command] + list(args), timeout=timeout)
        assert res.returncode == 0, "goclients failed: %s" % procs.describe(res)
        return json.loads(res.stdout)

    return run


@pytest.fixture(scope="module")
def tool(broker, kafka_jars):
    """run(main, *args, timeout=120, check=True, input=None): one of Kafka's
    tools ("GetOffsetShell", "consumer.group.ConsumerGroupCommand", or a full
    class name) with --bootstrap-server of this module's broker (kafka_cli.run_tool)."""
    def run(main, *args, **kw):
        return kafka_cli.run_tool(broker.bootstrap, main, *args, **kw)

    return run


def _java_sources(jars):
    """integration/java/*.java but those with a line "// needs: NAME" whose
    jar (NAME-*.jar) is not in jars, a set fetched with an older pom.xml."""
    out = []
    for src in sorted(JAVA_DIR.glob("*.java")):
        needs = [line.split(":", 1)[1].strip() for line in src.read_text().splitlines()
                 if line.startswith("// needs:")]
        if all(any(jars.glob("%s-*.jar" % n)) for n in needs):
            out.append(str(src))
    return out


@pytest.fixture(scope="session")
def java_classes(kafka_jars, tmp_path_factory):
    """The class directory of integration/java/*.java, compiled together
    against the Kafka jars (a class whose jar is missing is left out)."""
    javac = require_exe("javac")
    classes = tmp_path_factory.mktemp("java-classes")
    sources = _java_sources(kafka_jars)
    if sources:
        procs.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", procs.java_classpath(),
                   "-d", classes] + sources, timeout=180, check=True)
    return classes


@pytest.fixture(scope="session")
def java_runner(java_classes):
    """run(main_class, *args, timeout=120) with the Kafka jars and the compiled
    integration/java/*.java sources on the class path."""

    def run(main_class, *args, timeout=120):
        return procs.run_java(main_class, args, timeout=timeout, extra_cp=java_classes)

    return run
