#!/bin/bash
# Instructions per query with dnstap off and at 1% sampling: callgrind's
# count (Ir) over every thread of a release `heron serve` with one UDP
# worker, zeroed once it answers and dumped after dnsperf sent 40,000
# queries (2,000/s for 20 s). Counts, not times: valid on a busy machine,
# and usable where `perf stat -e instructions` has no hardware counter.
#
# Usage: bench/dnstap-cost.sh [RUNS]   (after cargo build --release -p heron)
# Needs valgrind, dnsperf, dig. Port 25399 on 127.0.0.1.
set -euo pipefail
runs=${1:-3}
heron=${HERON:-$(cd "$(dirname "$0")/.." && pwd)/target/release/heron}
work=$(mktemp -d /tmp/dnstap-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
{
  printf '$ORIGIN perf.test.\n$TTL 300\n@ SOA ns h 1 7200 3600 86400 300\n@ NS ns\nns A 192.0.2.1\n'
  for i in $(seq 0 999); do echo "h$i A 192.0.2.$((i % 250 + 1))"; done
} > perf.test.zone
for i in $(seq 0 999); do echo "h$i.perf.test A"; done > queries
base="[server]\nlisten = [\"127.0.0.1:25399\"]\nworkers = 1\n[[zone]]\norigin = \"perf.test\"\nfile = \"$work/perf.test.zone\"\n"
printf "$base" > off.toml
printf "$base[dnstap]\nfile = \"$work/log.dnstap\"\nsample = 100\n" > on.toml

measure() {
  rm -f cg.out.*
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out.%p" \
    "$heron" serve --config "$1.toml" 2>"server-$1.log" &
  local vg=$!
  for _ in $(seq 60); do
    dig +short +time=1 +tries=1 -p 25399 @127.0.0.1 h1.perf.test A >/dev/null 2>&1 && break
    sleep 1
  done
  callgrind_control -z $vg >/dev/null 2>&1
  dnsperf -s 127.0.0.1 -p 25399 -d queries -Q 2000 -l 20 -q 100 > "dnsperf-$1.txt"
  callgrind_control -d $vg >/dev/null 2>&1
  sleep 1
  kill -TERM $vg; wait $vg || true
  local completed ir
  completed=$(awk '/Queries completed/ {print $3}' "dnsperf-$1.txt")
  ir=$(cat cg.out.*.[0-9]* | awk '/^summary:/ {s += $2} END {print s}')
  echo "$1: $completed queries, $ir instructions, $((ir / completed)) per query"
}

for _ in $(seq "$runs"); do
  measure off
  measure on
done
