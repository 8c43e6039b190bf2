"""Answers where Runnel used to differ from Kafka, held to Kafka's own.

Each test runs on both targets (`--target=kafka` proves it asserts Kafka's
behaviour):
- Produce never creates a topic: a Produce to an unknown topic is
  UNKNOWN_TOPIC_OR_PARTITION and leaves no topic behind;
- the Metadata request that auto-creates a topic is answered before the topic
  has partitions (UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4.1 answers it), and a
  later one lists them;
- AlterUserScramCredentials takes the salt and salted password as given
  (any salted-password length, an empty salt) and answers DUPLICATE_RESOURCE
  for a user named twice in one request, whatever the mechanisms.
"""

import os
import struct
import time

import wire
import wire_data
from procs import wait_until

UNKNOWN_TOPIC_OR_PARTITION = 3
DUPLICATE_RESOURCE = 92
RESOURCE_NOT_FOUND = 91
UNACCEPTABLE_CREDENTIAL = 93
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
SHA_256, SHA_512 = 1, 2


def compact_bytes(b):
    return wire.uvarint(len(b) + 1) + b


def deletion(name, mech):
    return wire.compact_string(name) + struct.pack(">b", mech) + b"\x00"


def upsertion(name, mech, iterations=4096, salt=b"salt-salt", salted=b"\x01" * 32):
    return (wire.compact_string(name) + struct.pack(">bi", mech, iterations) +
            compact_bytes(salt) + compact_bytes(salted) + b"\x00")


def alter_scram(sock, corr, deletions=(), upsertions=()):
    """AlterUserScramCredentials v0; {user: error_code}, and the result count."""
    body = wire.compact_array(list(deletions)) + wire.compact_array(list(upsertions)) + b"\x00"
    r = wire.flex_call(sock, ALTER_USER_SCRAM_CREDENTIALS, 0, body, corr)
    r.take(">i")  # throttle

    def result(r):
        user, err, _msg = r.string(), r.take(">h"), r.string()
        r.skip_tags()
        return user, err

    results = r.array(result)
    return dict(results), len(results)


def described_mechanisms(sock, corr, user):
    """DescribeUserScramCredentials v0 for one user: (error, [(mech, iterations)])."""
    body = wire.compact_array([wire.compact_string(user) + b"\x00"]) + b"\x00"
    r = wire.flex_call(sock, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body, corr)
    r.take(">i")
    r.take(">h")
    r.string()

    def info(r):
        mech, it = r.take(">b"), r.take(">i")
        r.skip_tags()
        return mech, it

    def result(r):
        r.string()
        err, _msg = r.take(">h"), r.string()
        infos = r.array(info)
        r.skip_tags()
        return err, infos

    ((err, infos),) = r.array(result)
    return err, sorted(infos or [])


def topic_state(sock, name, corr):
    (t,) = wire.metadata(sock, 4, [name], corr, allow_auto_create=False)["topics"]
    return t["error_code"], len(t["partitions"])


def test_produce_to_an_unknown_topic_does_not_create_it(broker):
    name = "diff-produce-unknown-%d" % os.getpid()
    batch = wire_data.build_batch([(None, b"v", ())], int(time.time() * 1000))
    with wire.connect(broker.host, broker.port) as s:
        err, _ = wire_data.produce_v3_once(s, 1, name, 0, batch, acks=1)
        assert err == UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(1.0)
        assert topic_state(s, name, 2) == (UNKNOWN_TOPIC_OR_PARTITION, 0)


def test_metadata_that_creates_a_topic_answers_before_its_partitions(broker):
    name = "diff-md-auto-%d" % os.getpid()
    with wire.connect(broker.host, broker.port) as s:
        (t,) = wire.metadata(s, 8, [name], 1, allow_auto_create=True)["topics"]
        assert t["name"] == name
        assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, t
        assert t["partitions"] == []
        wait_until(lambda: topic_state(s, name, 3) == (0, 1), 30,
                   what="the auto-created topic's partition")
        # The topic now exists: the same request lists it at once.
        (t,) = wire.metadata(s, 8, [name], 4, allow_auto_create=True)["topics"]
        assert t["error_code"] == 0 and len(t["partitions"]) == 1


def test_scram_salted_password_of_any_length_and_empty_salt(broker):
    with wire.connect(broker.host, broker.port) as s:
        got, n = alter_scram(s, 1, upsertions=[
            upsertion("diff-short", SHA_256, salted=b"\x02" * 5),
            upsertion("diff-long", SHA_512, salted=b"\x03" * 100),
            upsertion("diff-nosalt", SHA_256, salt=b""),
        ])
        assert n == 3
        assert got == {"diff-short": 0, "diff-long": 0, "diff-nosalt": 0}
        wait_until(lambda: described_mechanisms(s, 2, "diff-nosalt") == (0, [(SHA_256, 4096)]),
                   15, what="the credential with an empty salt")
        assert described_mechanisms(s, 3, "diff-long") == (0, [(SHA_512, 4096)])
        got, _ = alter_scram(s, 4, upsertions=[upsertion("diff-few", SHA_256, iterations=100)])
        assert got == {"diff-few": UNACCEPTABLE_CREDENTIAL}


def test_scram_user_named_twice_is_a_duplicate_whatever_the_mechanisms(broker):
    with wire.connect(broker.host, broker.port) as s:
        got, n = alter_scram(s, 1, upsertions=[
            upsertion("diff-twice", SHA_256), upsertion("diff-twice", SHA_512),
            upsertion("diff-once", SHA_256),
        ])
        assert n == 2
        assert got == {"diff-twice": DUPLICATE_RESOURCE, "diff-once": 0}
        # A deletion and an upsertion of one user: a duplicate too, and
        # nothing of it is applied.
        got, _ = alter_scram(s, 2, deletions=[deletion("diff-once", SHA_256)],
                             upsertions=[upsertion("diff-once", SHA_512)])
        assert got == {"diff-once": DUPLICATE_RESOURCE}
        # The first change's own error wins over the duplicate.
        got, _ = alter_scram(s, 3, deletions=[deletion("diff-nobody", SHA_256)],
                             upsertions=[upsertion("diff-nobody", SHA_256)])
        assert got == {"diff-nobody": RESOURCE_NOT_FOUND}
        wait_until(lambda: described_mechanisms(s, 4, "diff-once") == (0, [(SHA_256, 4096)]),
                   15, what="diff-once with its one credential")
