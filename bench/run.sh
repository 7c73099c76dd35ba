#!/usr/bin/env bash
# Runs Heron's benchmark suite: installs dnsperf and the peer servers (NSD,
# Knot DNS, BIND 9) when missing, builds heron and heron-bench in release
# mode, and runs every server on every workload. Writes
# docs/benchmarks/README.md, results.json and the SVG charts.
#
#   bench/run.sh            # full suite, about 30 minutes
#   bench/run.sh --quick    # smoke test, about 3 minutes
#
# Extra arguments go to `heron-bench run` (see `heron-bench run --help`).
# Needs root (cgroup CPU quotas, real-time scheduling) and 2 CPUs: the
# servers run on CPU 0 and the load generator on CPU 1. All traffic stays
# on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "bench/run.sh needs root (cgroup quotas, taskset, SCHED_RR)" >&2
    exit 1
fi
scripts/ensure-packages.sh dnsperf nsd knot bind9 valgrind

# Absolute: the servers run in their own working directories.
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
cargo build --release -p heron -p heron-bench
exec "$target/release/heron-bench" run \
    --heron "$target/release/heron" \
    --data "$target/bench-data" \
    --out docs/benchmarks \
    "$@"
