"""Start the Runnel binary for tests and benchmarks."""

import os
from pathlib import Path

from procs import REPO, BrokerProcess


def runnel_bin():
    """The binary under test: $RUNNEL_BIN, else build/broker/runnel in the repo."""
    return Path(os.environ.get("RUNNEL_BIN") or REPO / "build" / "broker" / "runnel")


class RunnelBroker(BrokerProcess):
    """runnel on 127.0.0.1:port with log.dirs=datadir, configured by --override."""

    start_timeout = 10.0

    def __init__(self, datadir, port=None, binary=None, overrides=None, log_path=None):
        super().__init__(datadir, port=port, log_path=log_path)
        self.binary = Path(binary or runnel_bin())
        self.overrides = dict(overrides or {})

    def command(self):
        listener = "PLAINTEXT://%s:%d" % (self.host, self.port)
        props = {
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.datadir),
        }
        props.update(self.overrides)
        cmd = [str(self.binary)]
        for k, v in props.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        return cmd
