#!/usr/bin/env python3
"""Refreshes the golden frames in this folder from real clients talking to
real Apache Kafka 4.1.1 (jars from `.ci/install-deps --test`).

Run from the repository root with the integration venv:
    integration/.deps/venv/bin/python tests/data/frames/capture_all.py

Kafka advertises the proxy's port, so every client connection (bootstrap and
after Metadata) goes through capture.py and lands in a <api>-v<N>-<client>
file. Only small, deterministic exchanges are driven: metadata, topic admin,
a produce and a consume.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "integration"))

from kafka_real import KafkaReal  # noqa: E402
from procs import free_port  # noqa: E402


def proxy(client, kafka_port, proxy_port, seconds):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "capture.py"), str(proxy_port),
                             str(kafka_port), client, HERE, str(seconds)])


def drive(client, cmd, kafka, proxy_port, env=None):
    p = proxy(client, kafka.port, proxy_port, 40)
    time.sleep(0.5)
    subprocess.run(cmd, timeout=60, env=env, check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    p.terminate()
    p.wait()


def main():
    proxy_port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        k = KafkaReal(os.path.join(tmp, "kafka"),
                      extra_props={"advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % proxy_port})
        k.start()
        try:
            boot = "127.0.0.1:%d" % proxy_port
            drive("kcat", ["kcat", "-L", "-b", boot], k, proxy_port)
            drive("kcat", ["sh", "-c", "printf 'a:1\\nb:2\\n' | kcat -P -K: -b %s -t golden" % boot],
                  k, proxy_port)
            drive("kcat", ["kcat", "-C", "-e", "-b", boot, "-t", "golden"], k, proxy_port)
            py = os.path.join(ROOT, "integration", ".deps", "venv", "bin", "python")
            script = (
                "from kafka.admin import KafkaAdminClient, NewTopic\n"
                "from kafka import KafkaProducer, KafkaConsumer, TopicPartition\n"
                "a = KafkaAdminClient(bootstrap_servers='%s')\n"
                "a.create_topics([NewTopic('golden-py', 2, 1)])\n"
                "a.describe_topics(['golden-py'])\n"
                "p = KafkaProducer(bootstrap_servers='%s')\n"
                "p.send('golden-py', key=b'k', value=b'v', partition=0).get(10)\n"
                "c = KafkaConsumer(bootstrap_servers='%s', consumer_timeout_ms=2000)\n"
                "c.assign([TopicPartition('golden-py', 0)])\n"
                "c.seek_to_beginning()\n"
                "list(c)\n"
                "a.delete_topics(['golden-py'])\n" % (boot, boot, boot))
            drive("kafkapython", [py, "-c", script], k, proxy_port)
            ck = (
                "import confluent_kafka as ck\n"
                "from confluent_kafka.admin import AdminClient, NewTopic\n"
                "a = AdminClient({'bootstrap.servers': '%s'})\n"
                "[f.result() for f in a.create_topics([NewTopic('golden-ck', 1, 1)]).values()]\n"
                "p = ck.Producer({'bootstrap.servers': '%s', 'compression.type': 'zstd'})\n"
                "p.produce('golden-ck', key=b'k', value=b'v' * 100, partition=0)\n"
                "p.flush(10)\n"
                "c = ck.Consumer({'bootstrap.servers': '%s', 'group.id': 'golden'})\n"
                "c.assign([ck.TopicPartition('golden-ck', 0, 0)])\n"
                "c.poll(5)\n"
                "c.close()\n" % (boot, boot, boot))
            drive("confluent", [py, "-c", ck], k, proxy_port)
            java = ["java", "-cp", os.path.join(ROOT, "integration", ".deps", "jars", "*")]
            topics = java + ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", boot]
            drive("java", topics + ["--create", "--topic", "golden-j", "--partitions", "1"],
                  k, proxy_port)
            drive("java", topics + ["--describe", "--topic", "golden-j"], k, proxy_port)
            drive("java", ["sh", "-c", "echo hello | " + " ".join(java).replace("*", "\\*") +
                           " org.apache.kafka.tools.ConsoleProducer --bootstrap-server %s"
                           " --topic golden-j" % boot], k, proxy_port)
            drive("java", java + ["org.apache.kafka.tools.consumer.ConsoleConsumer",
                                  "--bootstrap-server", boot, "--topic", "golden-j",
                                  "--partition", "0", "--offset", "earliest",
                                  "--max-messages", "1", "--timeout-ms", "10000"],
                  k, proxy_port)
            drive("java", topics + ["--delete", "--topic", "golden-j"], k, proxy_port)
            node = ["node", os.path.join(ROOT, "integration", "js", "admin.js")]
            drive("kafkajs", node + [boot, "golden-js"], k, proxy_port)
        finally:
            k.stop()


if __name__ == "__main__":
    main()
