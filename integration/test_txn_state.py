"""A producer with a transaction open on a partition may not write a
non-transactional batch there: Kafka answers INVALID_TXN_STATE (48), and the
transactional batch before it stays the only one stored. Raw requests, so the
exact codes are checked."""

import struct
import time

import wire
import wire_data
from roundtrip import create_topic

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, PRODUCE, FIND_COORDINATOR = 22, 24, 0, 10
TRANSACTIONAL = 0x10
INVALID_TXN_STATE = 48
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS: a new transaction coordinator is still starting.
RETRIABLE = (14, 15, 16, 51)


def call(sock, api, version, corr, body):
    sock.sendall(wire.frame(wire.request_header(api, version, corr) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == corr
    return r


def find_txn_coordinator(sock, txn_id):
    """FindCoordinator v1 for a transactional id (creates the state topic on first use)."""
    r = call(sock, FIND_COORDINATOR, 1, 3, wire_data._string(txn_id) + struct.pack(">b", 1))
    _throttle, err = r.take(">ih")
    return err


def init_txn_producer(sock, txn_id):
    """InitProducerId v1 with a transactional id, retried while the coordinator loads."""
    deadline = time.time() + 60
    while find_txn_coordinator(sock, txn_id) in RETRIABLE:
        assert time.time() < deadline
        time.sleep(0.3)
    while True:
        r = call(sock, INIT_PRODUCER_ID, 1, 1, wire_data._string(txn_id) + struct.pack(">i", 60000))
        _throttle, err, pid, epoch = r.take(">ihqh")
        if err not in RETRIABLE or time.time() > deadline:
            assert err == 0, err
            return pid, epoch
        time.sleep(0.3)


def add_partition(sock, txn_id, pid, epoch, topic):
    """AddPartitionsToTxn v1 for partition 0."""
    body = wire_data._string(txn_id) + struct.pack(">qh", pid, epoch)
    body += struct.pack(">i", 1) + wire_data._string(topic) + struct.pack(">ii", 1, 0)
    r = call(sock, ADD_PARTITIONS_TO_TXN, 1, 2, body)
    r.take(">i")  # throttle
    ((_name, ((_p, err),)),) = r.array(lambda r: (r.string(), r.array(lambda r: r.take(">ih"))))
    return err


def produce(sock, corr, txn_id, topic, batch):
    """Produce v3 with a transactional id (or None); -> partition error code."""
    head = wire_data._string(txn_id) if txn_id is not None else struct.pack(">h", -1)
    body = head + struct.pack(">hi", -1, 10000)
    body += struct.pack(">i", 1) + wire_data._string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch)) + batch
    r = call(sock, PRODUCE, 3, corr, body)
    ((_name, ((_p, err, _base, _time),)),) = r.array(
        lambda r: (r.string(), r.array(lambda r: r.take(">ihqq"))))
    return err


def test_non_transactional_write_during_open_transaction_refused(broker, topic_name):
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    txn_id = "raw-" + topic
    now = int(time.time() * 1000)
    with wire.connect(broker.host, broker.port, timeout=30) as s:
        pid, epoch = init_txn_producer(s, txn_id)
        deadline = time.time() + 30
        while (err := add_partition(s, txn_id, pid, epoch, topic)) in RETRIABLE:
            assert time.time() < deadline
            time.sleep(0.3)
        assert err == 0
        txn = wire_data.build_batch([(b"k", b"in-txn", ())], now, codec=TRANSACTIONAL,
                                    producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(s, 10, txn_id, topic, txn) == 0
        plain = wire_data.build_batch([(b"k", b"outside", ())], now, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=1)
        assert produce(s, 11, None, topic, plain) == INVALID_TXN_STATE
