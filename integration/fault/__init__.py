"""Runnel's Jepsen-style fault suite (issue 16).

A run starts three Kafka 4.4 KRaft controllers and three Runnel brokers
whose inter-broker and broker-to-controller links go through TCP proxies
the suite owns (proxy.py), drives workloads that record every operation in
a JSONL history (history.py, workload.py), injects one or more bounded
faults (nemesis.py) and checks the history (checker.py). runner.py ties
them together; `python -m integration.fault` is the command line, and
integration/test_fault_suite.py the short CI run. docs/fault-suite.md
describes the properties and the figures.

The modules import integration/'s helpers (kraft, procs, test_cluster_join)
as top-level modules, as the tests do, so that directory goes on sys.path.
"""

import sys
from pathlib import Path

_INTEGRATION = str(Path(__file__).resolve().parent.parent)
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)
