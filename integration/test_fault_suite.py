"""The short CI run of the fault suite (issue 16, integration/fault/): one
cluster of three Kafka 4.4 KRaft controllers and three Runnel brokers with
proxied links; each nemesis once, on its own RF=3 topic (3 partitions,
min.insync.replicas=2), under two idempotent acks=all producers and a
consumer group; then the drain and the checker, which must find every
property clean. The last test is the checker's self-test on a real run:
segment files of every replica are cut short while the brokers are stopped,
and the checker must report the acknowledged writes as lost.

Reports and histories go to the test's tmp dir; the report is printed (-s).
Ports: 20100-20199.
"""

import time

import pytest

from fault import nemesis, runner
from fault.cluster import FaultCluster
from test_cluster_join import need_jars  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("runnel_only")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, need_jars):  # noqa: F811
    pytest.importorskip("confluent_kafka")
    c = FaultCluster(tmp_path_factory.mktemp("fault"), base=20100)
    try:
        c.start()
        yield c
    finally:
        c.close()


def run_and_report(cluster, topic, schedule, **kw):
    rep, hpath = runner.run(cluster, topic, schedule, cluster.basedir / "histories", **kw)
    print("\n[fault] %s %s\n%s\nhistory: %s" % (topic, schedule, rep.text(), hpath))
    return rep


@pytest.mark.parametrize("name", sorted(nemesis.NEMESES))
def test_nemesis_keeps_every_property(cluster, name):
    rep = run_and_report(cluster, "t_" + name.replace("-", "_"), [name])
    assert rep.counts["acked"] > 500, rep.text()
    assert rep.valid, rep.text()
    assert not cluster.crashed(), sanitizer_reports(cluster)


def sanitizer_reports(cluster):
    return {n: b.log_text().count("ERROR: AddressSanitizer") for n, b in cluster.brokers.items()
            if "ERROR: AddressSanitizer" in b.log_text()}


def test_no_broker_crashed(cluster):
    """An acks=all produce whose high watermark wait timed out (after
    slow-links) once freed its request before cancelling the wait: the
    produce timeouts of the last nemesis come due, and no broker died."""
    time.sleep(35)
    assert not cluster.crashed() and not sanitizer_reports(cluster), sanitizer_reports(cluster)


def test_brokers_hand_out_distinct_producer_ids(cluster):
    """Producer ids come in blocks from the controller (AllocateProducerIds):
    two brokers handing out one id let two idempotent producers dedupe each
    other's batches (51 of 6726 acked writes lost before the blocks)."""
    import wire
    from test_idempotence import init_producer_id
    cluster.revive()
    pids = {}
    for n, b in cluster.brokers.items():
        with wire.connect(b.host, b.port) as s:
            pids[n] = {init_producer_id(s)[0] for _ in range(3)}
    assert not (pids[1] & pids[2]) and not (pids[2] & pids[3]) and not (pids[1] & pids[3]), pids


def truncate_partition(cluster, topic, partition=0):
    """Stops every broker, cuts partition's segment files to half, restarts."""
    for b in cluster.brokers.values():
        b.close()
    cut = 0
    for b in cluster.brokers.values():
        for seg in sorted((b.datadir / ("%s-%d" % (topic, partition))).glob("*.log")):
            size = seg.stat().st_size
            with open(seg, "r+b") as f:
                f.truncate(size // 2)
            cut += size - size // 2
    assert cut > 0
    for n in cluster.brokers:
        cluster.restart_broker(n)


def test_checker_reports_an_injected_loss(cluster):
    cluster.revive()
    rep = run_and_report(cluster, "t_injected_loss", [], warmup=5.0, create_isr=2,
                         before_drain=truncate_partition)
    assert not rep.valid
    assert rep.failed["lost"] > 0, rep.text()
    assert rep.failed["duplicates"] == 0
