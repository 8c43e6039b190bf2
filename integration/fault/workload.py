"""Workloads that write every operation into a History (history.py).

Producer: an idempotent acks=all confluent-kafka producer writing unique
values "<process>-<seq>" round-robin over the topic's partitions. A send is
`invoke`d when handed to the client and completed in the delivery report:
ok with its partition and offset, or info (an error: it may still have been
written). A fatal producer error ends that producer instance; a new one
takes over under a new process name, so one process is one idempotent
producer session.
GroupConsumer: one member of a consumer group reading the topic; every read
is an ok `read` with a session number that grows at each assignment; about
once a second it commits its position synchronously (commit) and reads the
group's committed offsets back (committed).
drain(): after the run, reads every partition from the earliest offset to
the high watermark, as process "drain", then a `done` event with the high
watermarks and the offsets reached.

Each worker runs in its own thread until stop is set; the threads own their
clients and close them.
"""

import threading
import time

SEND_ERRORS_DEFINITE = ()  # every send error is "info": the write may have happened


class Worker(threading.Thread):
    """A workload thread: _run() until stop; an exception ends up in .error."""
    error = None

    def run(self):
        try:
            self._run()
        except Exception as e:  # noqa: BLE001 - reported by the runner
            self.error = e


class Producer(Worker):
    def __init__(self, hist, bootstrap, topic, partitions, pid, stop, rate=150):
        super().__init__(name="producer-%d" % pid, daemon=True)
        self.hist, self.bootstrap, self.topic = hist, bootstrap, topic
        self.partitions, self.pid, self.stop, self.rate = partitions, pid, stop, rate
        self.gen = 0
        self.error = None

    def _client(self):
        import confluent_kafka
        return confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 30000, "retry.backoff.ms": 100,
            "socket.timeout.ms": 10000})

    def _run(self):
        import confluent_kafka
        while not self.stop.is_set():
            proc = "p%d" % self.pid if self.gen == 0 else "p%d.%d" % (self.pid, self.gen)
            fatal = threading.Event()
            p = self._client()

            def done(err, msg, proc=proc, fatal=fatal):
                v = msg.value().decode()
                if err is None:
                    self.hist.add(proc, "ok", "send", value=v, partition=msg.partition(),
                                  offset=msg.offset())
                else:
                    self.hist.add(proc, "info", "send", value=v, partition=msg.partition(),
                                  error=err.name())
                    if err.fatal():
                        fatal.set()

            seq = 0
            gap = 1.0 / self.rate
            while not self.stop.is_set() and not fatal.is_set():
                v = "%s-%06d" % (proc, seq)
                part = seq % self.partitions
                self.hist.add(proc, "invoke", "send", value=v, partition=part)
                while True:
                    try:
                        p.produce(self.topic, value=v.encode(), partition=part,
                                  on_delivery=done)
                        break
                    except BufferError:
                        p.poll(0.1)
                    except confluent_kafka.KafkaException as e:
                        self.hist.add(proc, "info", "send", value=v, partition=part,
                                      error=str(e))
                        fatal.set()
                        break
                seq += 1
                try:
                    p.poll(gap)
                except confluent_kafka.KafkaException as e:
                    self.hist.add(proc, "info", "fatal", error=str(e.args[0]))
                    fatal.set()
            try:
                p.flush(40)
            except confluent_kafka.KafkaException as e:
                self.hist.add(proc, "info", "fatal", error=str(e.args[0]))
            self.gen += 1


class GroupConsumer(Worker):
    def __init__(self, hist, bootstrap, topic, group, name, stop):
        super().__init__(name="consumer-" + name, daemon=True)
        self.hist, self.bootstrap, self.topic, self.group = hist, bootstrap, topic, group
        self.proc, self.stop = name, stop
        self.session = 0
        self.error = None

    def _run(self):
        import confluent_kafka
        c = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "socket.timeout.ms": 10000})

        def on_assign(consumer, parts):
            self.session += 1
            self.hist.add(self.proc, "ok", "assign", session=self.session,
                          value=sorted(p.partition for p in parts))

        c.subscribe([self.topic], on_assign=on_assign)
        next_commit = time.monotonic() + 1.0
        try:
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is not None:
                    if m.error() is not None:
                        self.hist.add(self.proc, "info", "poll-error", session=self.session,
                                      error=m.error().name())
                    else:
                        self.hist.add(self.proc, "ok", "read", session=self.session,
                                      partition=m.partition(), offset=m.offset(),
                                      value=m.value().decode())
                if time.monotonic() >= next_commit:
                    next_commit = time.monotonic() + 1.0
                    self._commit(c)
        finally:
            c.close()

    def _commit(self, c):
        import confluent_kafka
        try:
            pos = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
        except confluent_kafka.KafkaException:
            return
        if not pos:
            return
        want = {tp.partition: tp.offset for tp in pos}
        self.hist.add(self.proc, "invoke", "commit", offsets=want)
        try:
            res = c.commit(offsets=pos, asynchronous=False)
            self.hist.add(self.proc, "ok", "commit",
                          offsets={tp.partition: tp.offset for tp in res if tp.error is None})
        except confluent_kafka.KafkaException as e:
            self.hist.add(self.proc, "info", "commit", error=str(e.args[0]))
            return
        parts = [confluent_kafka.TopicPartition(self.topic, p) for p in want]
        self.hist.add(self.proc, "invoke", "committed")
        try:
            got = c.committed(parts, timeout=10)
            self.hist.add(self.proc, "ok", "committed",
                          offsets={tp.partition: tp.offset for tp in got
                                   if tp.error is None and tp.offset >= 0})
        except confluent_kafka.KafkaException as e:
            self.hist.add(self.proc, "info", "committed", error=str(e.args[0]))


def drain(hist, bootstrap, topic, partitions, timeout=90):
    """Reads every partition from the earliest offset up to its high watermark."""
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-drain",
                                  "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    hw = {}
    try:
        for p in range(partitions):
            while p not in hw:
                try:
                    hw[p] = c.get_watermark_offsets(
                        confluent_kafka.TopicPartition(topic, p), timeout=5)[1]
                except confluent_kafka.KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(partitions)])
        reached = {p: 0 for p in range(partitions)}
        while time.monotonic() < deadline and any(reached[p] < hw[p] for p in hw):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                hist.add("drain", "info", "poll-error", error=m.error().name())
                continue
            hist.add("drain", "ok", "read", partition=m.partition(), offset=m.offset(),
                     value=m.value().decode())
            reached[m.partition()] = max(reached[m.partition()], m.offset() + 1)
        hist.add("drain", "ok", "done", offsets=hw, reached=reached)
    finally:
        c.close()
