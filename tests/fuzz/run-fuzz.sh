#!/bin/sh
# run-fuzz.sh BINARY CORPUS RUNS SCRATCH: runs a libFuzzer target for RUNS
# executions, starting from the committed CORPUS (read only) and writing
# new inputs to SCRATCH, with a fixed seed so a run is repeatable.
set -eu
bin=$1 corpus=$2 runs=$3 scratch=$4
mkdir -p "$scratch"
exec "$bin" -runs="$runs" -seed=1 -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch" "$corpus"
