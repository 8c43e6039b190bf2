#!/usr/bin/env bash
# Storage append and recovery benchmark, printed beside raw dd writes of the
# same run as ratios. Usage: bench/storage.sh [BUILD_DIR] [MIB] [DATA_DIR]
# Defaults: build-storage, 1024 MiB, a mktemp dir under /tmp (removed after).
# Figures, not a test: nothing here fails on speed.
set -euo pipefail
build=${1:-build-storage}
mib=${2:-1024}
base=$(mktemp -d "${3:-/tmp}/runnel-bench-XXXXXX")
trap 'rm -rf "$base"' EXIT
bin="$build/bench/storage_bench"
[ -x "$bin" ] || { echo "build first: ninja -C $build" >&2; exit 2; }
sync_mib=$(( mib / 8 > 16 ? mib / 8 : 16 ))

# dd prints "... copied, S s, R MB/s"; take bytes and seconds for MB/s.
dd_mbps() {
    rm -f "$base/dd"
    dd if=/dev/zero of="$base/dd" bs="$1" count="$2" "${@:3}" 2>&1 |
        awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i-1); print $1 / s / 1e6 }'
    rm -f "$base/dd"
}

run() { # mode mib
    rm -rf "$base/log"; mkdir -p "$base/log"
    "$bin" "$base/log" "$2" "$1" | sed -n 's/.*mb_per_s=\([0-9.]*\).*/\1/p'
}

raw=$(dd_mbps 1M "$mib")
raw_sync=$(dd_mbps 1M "$mib" conv=fdatasync)
raw_dsync16=$(dd_mbps 16k $(( sync_mib * 64 )) oflag=dsync)
raw_dsync1m=$(dd_mbps 1M "$sync_mib" oflag=dsync)
printf '%-34s %10s %10s %8s\n' workload "MB/s" "dd MB/s" ratio
row() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%-34s %10.1f %10.1f %8.2f\n", n, a, b, a / b }'; }
row "append 16KiB batches, no sync" "$(run append16 "$mib")" "$raw"
row "append 1MiB batches, no sync" "$(run append1m "$mib")" "$raw"
row "append 1MiB, one final fdatasync" "$(run final1m "$mib")" "$raw_sync"
row "append 16KiB + fdatasync each" "$(run sync16 "$sync_mib")" "$raw_dsync16"
row "append 1MiB + fdatasync each" "$(run sync1m "$sync_mib")" "$raw_dsync1m"
rm -rf "$base/log"; mkdir -p "$base/log"
"$bin" "$base/log" "$mib" append1m > /dev/null
"$bin" "$base/log" "$mib" recover
