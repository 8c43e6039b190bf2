#!/usr/bin/env python3
"""Regenerates the codecs into a temporary folder and fails on any difference
from the committed protocol/msg/ (a file changed, missing or extra); skips
(exit 77) when SCHEMA_DIR holds no messages/. Usage: drift.py SCHEMA_DIR
COMMITTED_DIR"""
import filecmp
import os
import subprocess
import sys
import tempfile


def main():
    schema_dir, committed = sys.argv[1], sys.argv[2]
    if not os.path.isdir(os.path.join(schema_dir, "messages")):
        print("no schemas in %s: skipped" % schema_dir)
        return 77  # meson's exit code for a skipped test
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kpgen.py")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, gen, schema_dir, tmp], check=True)
        cmp = filecmp.dircmp(tmp, committed)
        bad = cmp.left_only + cmp.right_only + cmp.diff_files
        if bad:
            print("codegen drift in protocol/msg: " + ", ".join(sorted(bad)))
            print("run: python3 protocol/gen/kpgen.py ../shared/kafka-protocol-4.4 protocol/msg")
            return 1
    print("protocol/msg matches the generator")
    return 0


if __name__ == "__main__":
    sys.exit(main())
