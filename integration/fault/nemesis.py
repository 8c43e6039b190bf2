"""Nemeses: bounded faults, each undone in a finally.

A nemesis is a function (cluster, topic, hist, hold) that injects its fault,
records `start` and `stop` events (process "nemesis", value its name), keeps
the fault for `hold` seconds and undoes it, whatever happens, before it
returns. Victims are chosen from the cluster's state at the time: the
leader of partition 0, a follower of it, the active controller.

  kill-leader      kill -9 of partition 0's leader, restarted after hold
  kill-follower    kill -9 of a follower of partition 0, restarted after hold
  pause-leader     SIGSTOP of partition 0's leader for longer than
                   broker.session.timeout.ms, then SIGCONT
  kill-controller  kill -9 of the active controller of the 3-voter quorum
  partition-leader partition 0's leader cut from the controllers and from its
                   followers (its INTERNAL and controller proxies), then healed
  slow-links       every proxied link delayed by 100 ms, then restored
"""

import os
import signal
import time

from .cluster import SESSION_MS


def _leader(cluster, topic, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = cluster.leader_of(topic)
        if n in cluster.brokers and cluster.brokers[n].alive():
            return n
        time.sleep(0.3)
    raise TimeoutError("no live leader for %s-0" % topic)


def _follower(cluster, topic):
    leader = _leader(cluster, topic)
    _, replicas, _ = cluster.describe(topic)[0]
    return [r for r in replicas if r != leader][0]


def kill_broker(cluster, n, hist, name, hold):
    hist.add("nemesis", "info", "start", value=name, node=n)
    cluster.brokers[n].kill9()
    try:
        time.sleep(hold)
    finally:
        cluster.restart_broker(n)
        hist.add("nemesis", "info", "stop", value=name, node=n)


def kill_leader(cluster, topic, hist, hold):
    kill_broker(cluster, _leader(cluster, topic), hist, "kill-leader", hold)


def kill_follower(cluster, topic, hist, hold):
    kill_broker(cluster, _follower(cluster, topic), hist, "kill-follower", hold)


def pause_leader(cluster, topic, hist, hold):
    n = _leader(cluster, topic)
    pid = cluster.brokers[n].proc.pid
    hold = max(hold, SESSION_MS / 1000.0 * 2 + 1)
    hist.add("nemesis", "info", "start", value="pause-leader", node=n)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(hold)
    finally:
        os.kill(pid, signal.SIGCONT)
        hist.add("nemesis", "info", "stop", value="pause-leader", node=n)


def kill_controller(cluster, topic, hist, hold):
    lid = cluster.quorum.leader_id()
    ctl = [c for c in cluster.quorum.controllers if c.node_id == lid][0]
    hist.add("nemesis", "info", "start", value="kill-controller", node=lid)
    ctl.kill9()
    try:
        time.sleep(hold)
    finally:
        ctl.start()
        hist.add("nemesis", "info", "stop", value="kill-controller", node=lid)


def partition_leader(cluster, topic, hist, hold):
    n = _leader(cluster, topic)
    links = [p for name, p in cluster.proxies.proxies.items()
             if name == "int-%d" % n or name.startswith("ctl-%d-" % n)]
    hist.add("nemesis", "info", "start", value="partition-leader", node=n)
    for p in links:
        p.cut(True)
    try:
        time.sleep(max(hold, SESSION_MS / 1000.0 * 2 + 1))
    finally:
        for p in links:
            p.cut(False)
        hist.add("nemesis", "info", "stop", value="partition-leader", node=n)


def slow_links(cluster, topic, hist, hold):
    hist.add("nemesis", "info", "start", value="slow-links")
    for p in cluster.proxies.proxies.values():
        p.delay(0.1)
    try:
        time.sleep(hold)
    finally:
        for p in cluster.proxies.proxies.values():
            p.delay(0)
        hist.add("nemesis", "info", "stop", value="slow-links")


NEMESES = {
    "kill-leader": kill_leader,
    "kill-follower": kill_follower,
    "pause-leader": pause_leader,
    "kill-controller": kill_controller,
    "partition-leader": partition_leader,
    "slow-links": slow_links,
}
