#!/bin/sh
# The signing bound and Heron against it, in rounds: each round measures
# one P-256 signature on one thread and on two at once (sign_cost), then
# signs ZONE (sign_zone, 2 cores), and prints the load and signing's CPU
# and wall time over `signatures x cost` and `signatures x cost / 2`.
# Taking all three in one round keeps a slow spell of the machine in the
# bound as well as in the signing.
#   scripts/bench-signing-bound.sh ZONE ORIGIN [ROUNDS]
# Needs: cargo build --release -p heron-dnssec --example sign_zone --example sign_cost
set -eu
zone=${1:?zone file}
origin=${2:?origin}
rounds=${3:-5}
bin=$(cd "$(dirname "$0")/.." && pwd)/target/release/examples
out=$(mktemp /tmp/bench-signing-bound.XXXXXX)
trap 'rm -f "$out"' EXIT
cost() { taskset -c "$1" "$bin/sign_cost" 100000 13 "$2" | sed 's/.*wall: \([0-9.]*\).*/\1/'; }
echo "# one thread us, two threads us, wall s, CPU s, CPU/bound(1), CPU/bound(2), wall/bound(1), wall/bound(2)"
for _ in $(seq "$rounds"); do
    one=$(cost 0 1)
    two=$(cost 0-1 2)
    line=$(taskset -c 0-1 "$bin/sign_zone" "$origin" "$zone" "$out" 13 nsec 2>&1 | grep 'load+sign')
    echo "$line" | awk -v one="$one" -v two="$two" '{
        wall = $3; cpu = $6; sigs = $10
        b1 = sigs * one / 1e6; b2 = sigs * two / 1e6
        printf "%.2f %.2f %.3f %.2f %.3f %.3f %.3f %.3f\n", one, two, wall, cpu, cpu / b1, cpu / b2, wall / (b1 / 2), wall / (b2 / 2)
    }'
done
