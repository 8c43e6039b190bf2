"""The Java producer at its defaults (enable.idempotence=true, acks=all) keeps
sending while the broker is killed with SIGKILL and restarted, several times.
Afterwards every acknowledged record is in the log exactly once, at the
offset it was acknowledged with, in send order; no record at all is
duplicated (a retried batch that the broker had already written is
recognised by its producer id and sequence, also after a restart).

RecordsTool stream (integration/java) sends "seq-N" with key "k<N % 8>"
every 2 ms and prints each acknowledgement; the test kills the broker each
time another ROUND records were acknowledged.
"""

import subprocess
import threading
import time

import pytest

import procs
import wire
import wire_data
from roundtrip import create_topic, java_partition, read_all

PARTITIONS = 3
KILLS = 4
ROUND = 300


@pytest.fixture(scope="module")
def records_tool(kafka_jars, tmp_path_factory):
    """The compiled integration/java/RecordsTool class directory."""
    out = tmp_path_factory.mktemp("records-tool")
    src = procs.REPO / "integration" / "java" / "RecordsTool.java"
    procs.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", procs.java_classpath(), "-d",
               out, src], timeout=180, check=True)
    return out


class Stream:
    """RecordsTool stream as a child process, its output parsed as it comes."""

    def __init__(self, classes, bootstrap, topic, log_path):
        cmd = ["java"] + procs.JAVA_TOOL_OPTS + ["-cp", procs.java_classpath(classes),
                                                 "RecordsTool", "stream", bootstrap, topic]
        self.err = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, start_new_session=True)
        self.acks, self.errors, self.done = {}, {}, False
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            f = line.split()
            with self.cond:
                if f[0] == "ack":
                    self.acks[int(f[1])] = (int(f[2]), int(f[3]))
                elif f[0] == "err":
                    self.errors[int(f[1])] = f[2]
                elif f[0] == "done":
                    self.done = True
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pred, timeout, what):
        with self.cond:
            ok = self.cond.wait_for(lambda: pred() or self.proc.poll() is not None, timeout)
            assert ok and pred(), "%s within %ss (acks %d, errors %d, exit %s)" % (
                what, timeout, len(self.acks), len(self.errors), self.proc.poll())

    def finish(self, timeout):
        self.proc.stdin.close()
        self.wait_for(lambda: self.done, timeout, "producer flushed and closed")
        assert self.proc.wait(timeout=30) == 0

    def close(self):
        if self.proc.poll() is None:
            procs.stop_process(self.proc, timeout=10)
        self.err.close()


def test_idempotent_producer_across_kill9(records_tool, broker, topic_name, tmp_path):
    topic = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    s = Stream(records_tool, broker.bootstrap, topic, tmp_path / "producer.log")
    try:
        for k in range(KILLS):
            s.wait_for(lambda: len(s.acks) >= (k + 1) * ROUND, 120,
                       "%d acknowledgements before kill %d" % ((k + 1) * ROUND, k + 1))
            broker.kill9()
            broker.start()
        s.wait_for(lambda: len(s.acks) >= (KILLS + 1) * ROUND, 120,
                   "%d acknowledgements after the last restart" % ((KILLS + 1) * ROUND))
        s.finish(150)
    finally:
        s.close()
    log = (tmp_path / "producer.log").read_text(errors="replace")
    assert not s.errors, "sends failed: %s\nproducer log:\n%s" % (
        sorted(s.errors.items())[:10], log[-4000:])

    got = read_all(broker.bootstrap, topic, range(PARTITIONS))
    sent = 1 + max(list(s.acks) + list(s.errors))
    where = {}
    for g in got:
        assert g.value.startswith(b"seq-"), g
        n = int(g.value[4:])
        assert n < sent and g.key == b"k%d" % (n % 8), g
        assert n not in where, "seq %d stored twice: p%d@%d and p%d@%d" % (
            n, where[n][0], where[n][1], g.partition, g.offset)
        where[n] = (g.partition, g.offset)
    missing = sorted(n for n in s.acks if n not in where)
    assert not missing, "%d acknowledged records missing, first %s" % (len(missing), missing[:10])
    moved = [(n, a, where[n]) for n, a in sorted(s.acks.items()) if where[n] != a]
    assert not moved, "acknowledged at one offset, found at another: %s" % moved[:10]
    for n, (p, _o) in where.items():
        assert p == java_partition(b"k%d" % (n % 8), PARTITIONS)
    for p in range(PARTITIONS):
        seqs = [int(g.value[4:]) for g in sorted(got, key=lambda g: g.offset) if g.partition == p]
        assert seqs == sorted(seqs), "partition %d out of send order" % p


def init_producer_id(sock):
    """A producer id and epoch; retried while the coordinator is loading or not
    yet available (Kafka right after start-up), as clients do."""
    retriable = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
    deadline = time.monotonic() + 30
    for corr in range(100, 10_000):
        err, pid, epoch = wire_data.init_producer_id_v0(sock, corr)
        if err not in retriable or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert err == 0 and pid >= 0 and epoch >= 0, (err, pid, epoch)
    return pid, epoch


def test_sequences_by_hand_across_kill9(broker, topic_name):
    """Idempotent batches sent by hand (InitProducerId v0, Produce v3): a retried
    batch gets its original offset and is not stored again, also after a kill -9
    and restart; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older
    epoch than one already seen is INVALID_PRODUCER_EPOCH."""
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    ts = int(time.time() * 1000)
    ids = {}

    def batch(seq, n, epoch=None):
        return wire_data.build_batch(
            [(None, b"v-%d" % (seq + i), ()) for i in range(n)], ts, producer_id=ids["pid"],
            producer_epoch=ids["epoch"] if epoch is None else epoch, base_sequence=seq)

    def produce(s, corr, b):
        return wire_data.produce_v3(s, corr, topic, 0, b)

    with wire.connect(broker.host, broker.port) as s:
        ids["pid"], ids["epoch"] = init_producer_id(s)
        assert produce(s, 2, batch(0, 3)) == (0, 0)
        assert produce(s, 3, batch(3, 2)) == (0, 3)
        assert produce(s, 4, batch(3, 2)) == (0, 3), "retry of the last batch"
        assert produce(s, 5, batch(0, 3)) == (0, 0), "retry of an earlier batch"
        assert produce(s, 6, batch(7, 1))[0] == wire_data.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(s, 7, batch(5, 1)) == (0, 5)

    broker.kill9()
    broker.start()

    with wire.connect(broker.host, broker.port) as s:
        assert produce(s, 1, batch(5, 1)) == (0, 5), "retry after kill -9 and restart"
        assert produce(s, 2, batch(8, 1))[0] == wire_data.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(s, 3, batch(6, 2)) == (0, 6)
        # A bumped epoch starts again at sequence 0; the old epoch is fenced.
        assert produce(s, 4, batch(0, 1, epoch=ids["epoch"] + 1)) == (0, 8)
        assert produce(s, 5, batch(8, 1))[0] == wire_data.INVALID_PRODUCER_EPOCH
        assert init_producer_id(s)[0] != ids["pid"]

    got = read_all(broker.bootstrap, topic, [0])
    assert [(g.offset, g.value) for g in got] == [(i, b"v-%d" % i) for i in range(8)] + [
        (8, b"v-0")]
