"""Kafka's command-line tools, run from the jars by the integration tests.

- TOOLS: the package of most tool main classes (org.apache.kafka.tools.).
- run_tool(): one tool run against a broker (--bootstrap-server first), the
  body of conftest's `tool` fixture.
- perf_produce(): n records through ProducerPerformance (kafka-producer-perf-test).
- offsets(): GetOffsetShell's (kafka-get-offsets) answer as {partition: offset}.
"""

import re

import procs

TOOLS = "org.apache.kafka.tools."


def tool_class(main):
    """A main class: short names ("GetOffsetShell", "consumer.ConsoleConsumer")
    are in TOOLS, names starting with kafka. or org. are taken as they are."""
    return main if main.startswith(("kafka.", "org.")) else TOOLS + main


def run_tool(bootstrap, main, *args, timeout=120, check=True, input=None):
    """Runs a tool with --bootstrap-server bootstrap and args; check: assert exit 0."""
    res = procs.run_java(tool_class(main), ["--bootstrap-server", bootstrap] + list(args),
                         timeout=timeout, input=input)
    if check:
        assert res.returncode == 0, procs.describe(res)
    return res


def perf_produce(bootstrap, topic, n, size, client_id="it-perf", props=(), args=()):
    """n records of size bytes through ProducerPerformance (acks=1 and one
    request in flight unless props, more "k=v" producer properties, say
    otherwise); args: more tool options. Returns what it printed."""
    res = procs.run_java(TOOLS + "ProducerPerformance",
                         ["--topic", topic, "--num-records", str(n), "--record-size", str(size),
                          "--throughput", "-1", "--producer-props",
                          "bootstrap.servers=%s" % bootstrap, "acks=1",
                          "client.id=%s" % client_id, "max.in.flight.requests.per.connection=1"]
                         + list(props) + list(args), timeout=180)
    assert res.returncode == 0, procs.describe(res)
    return res.stdout


def offsets(tool, topic, time_spec="-1", *args):
    """{partition: offset} of topic at time_spec (-1 latest, -2 earliest, -3 max
    timestamp, or a timestamp in ms), through GetOffsetShell run by tool."""
    out = tool("GetOffsetShell", "--topic", topic, "--time", time_spec, *args).stdout
    return {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r"^%s:(\d+):(\d+)$" % re.escape(topic), out, re.M)}
