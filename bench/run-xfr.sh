#!/usr/bin/env bash
# Runs the zone transfer benchmarks: a secondary's cold start with 1k to
# 100k zones (Heron, NSD, Knot, BIND as secondaries of a Heron primary),
# a catalog consumer's cold start with 1k to 100k member zones (Heron and
# Knot consuming one catalog zone a Knot primary serves) and then members
# added to that catalog one at a time (NOTIFY to new member answering), change
# propagation primary -> secondary for each server, a 2,000,000-record
# zone between pairs of servers, and TSIG's cost on that transfer. Installs
# the peers when missing, builds in release mode, and writes
# docs/benchmarks/transfers.md and transfers.json.
#
#   bench/run-xfr.sh                                     # everything, about 40 minutes
#   bench/run-xfr.sh --sizes 1000,10000 --records 200000 # a quicker look
#   bench/run-xfr.sh --parts cold-start,propagation      # some parts; the others are kept
#
# Extra arguments go to `heron-bench xfr` (see `heron-bench xfr --help`).
# Needs root and 2 CPUs: the suite runs in a network namespace of its own
# (loopback only: the primary on 127.0.0.1, the secondary on 127.0.0.2).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-packages.sh nsd knot bind9 iproute2

target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
cargo build --release -p heron -p heron-bench
exec "$target/release/heron-bench" xfr \
    --heron "$target/release/heron" \
    --data "$target/bench-data/xfr" \
    --out docs/benchmarks \
    "$@"
