#!/usr/bin/env bash
# Heron-XDP vs Heron-sockets vs Knot-XDP vs Knot-sockets on a veth pair into
# a network namespace made here (removed at the end, even on failure).
# One worker each, server pinned to CPU 1, dnsperf inside the namespace
# pinned to CPU 0, a fixed offered rate. Prints, per trial: answered
# queries, server CPU µs per answered query (utime+stime of the server's
# process from /proc/PID/stat over the window) and whole-machine CPU µs
# per answered query (/proc/stat, everything but idle and iowait).
#
#   bench/xdp.sh [RATE] [SECONDS] [TRIALS]      (defaults 50000 10 3)
#
# Needs root, dnsperf and knot (apt-get install dnsperf knot), and a
# release build (cargo build --release -p heron).
set -euo pipefail
RATE=${1:-50000}
SECONDS_=${2:-10}
TRIALS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERON=$ROOT/target/release/heron
ZONE=$ROOT/crates/heron/tests/data/differential/edge.test.zone
PORT=5353
ID=$$
NS=heronbench$ID
IF=hb$ID
WORK=$(mktemp -d /tmp/heron-xdp-bench.XXXXXX)
SERVER_PID=

cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    ip link del "$IF" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$HERON" ] || { echo "build first: cargo build --release -p heron" >&2; exit 1; }
command -v dnsperf >/dev/null || { echo "apt-get install dnsperf" >&2; exit 1; }

# TEST-NET-2 on the pair only: the host's own network may use TEST-NET-1.
ip netns add "$NS"
ip link add "$IF" type veth peer name "${IF}i"
ip link set "${IF}i" netns "$NS"
ip addr add 198.51.100.1/24 dev "$IF"
ip link set "$IF" up
ip netns exec "$NS" ip addr add 198.51.100.2/24 dev "${IF}i"
ip netns exec "$NS" ip link set "${IF}i" up
ip netns exec "$NS" ip link set lo up

for q in "www.edge.test A" "edge.test SOA" "mail.edge.test AAAA" "nx.edge.test A" \
         "x.wild.edge.test A" "txt.edge.test TXT" "edge.test NS" "a.b.c.ent.edge.test A"; do
    echo "$q"
done > "$WORK/queries"

heron_conf() { # $1: xdp|sockets
    {
        printf '[server]\nlisten = ["198.51.100.1:%s"]\nworkers = 1\n' "$PORT"
        [ "$1" = xdp ] && printf '[xdp]\nlisten = ["%s@%s"]\n' "$IF" "$PORT"
        printf '[[zone]]\norigin = "edge.test."\nfile = "%s"\n' "$ZONE"
    } > "$WORK/heron.toml"
}

knot_conf() { # $1: xdp|sockets
    mkdir -p "$WORK/knot"
    {
        printf 'server:\n    rundir: "%s/knot"\n    listen: 198.51.100.1@%s\n' "$WORK" "$PORT"
        printf '    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n'
        [ "$1" = xdp ] && printf 'xdp:\n    listen: %s@%s\n' "$IF" "$PORT"
        printf 'database:\n    storage: "%s/knot"\n' "$WORK"
        printf 'log:\n  - target: stderr\n    any: info\n'
        printf 'zone:\n  - domain: edge.test.\n    file: "%s"\n' "$ZONE"
    } > "$WORK/knot.conf"
}

start() { # $1: heron|knot  $2: xdp|sockets
    if [ "$1" = heron ]; then
        heron_conf "$2"
        taskset -c 1 "$HERON" serve --config "$WORK/heron.toml" 2>"$WORK/log" &
    else
        knot_conf "$2"
        taskset -c 1 knotd -c "$WORK/knot.conf" 2>"$WORK/log" &
    fi
    SERVER_PID=$!
    for _ in $(seq 50); do
        ip netns exec "$NS" dig @198.51.100.1 -p "$PORT" +short +tries=1 +time=1 www.edge.test A \
            | grep -q 192.0.2.80 && return 0
        sleep 0.2
    done
    echo "$1 $2 did not answer:" >&2; cat "$WORK/log" >&2; exit 1
}

stop() { # $1: heron|knot
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
    if ip link show "$IF" | grep -qw 'xdp\|xdpgeneric'; then
        # Knot 3.2 leaves its program attached when it exits (it reuses it
        # at the next start); Heron's goes with its process.
        [ "$1" = heron ] && { echo "XDP left on $IF by Heron" >&2; exit 1; }
        ip link set dev "$IF" xdp off
    fi
}

proc_cpu() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
machine_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

trial() { # $1: heron|knot  $2: xdp|sockets
    start "$1" "$2"
    local p0 m0 p1 m1 answered hz
    hz=$(getconf CLK_TCK)
    p0=$(proc_cpu); m0=$(machine_busy)
    ip netns exec "$NS" taskset -c 0 dnsperf -s 198.51.100.1 -p "$PORT" -d "$WORK/queries" \
        -l "$SECONDS_" -Q "$RATE" -c 4 -q 1000 > "$WORK/dnsperf" 2>&1
    p1=$(proc_cpu); m1=$(machine_busy)
    stop "$1"
    grep -i 'xdp' "$WORK/log" | sed 's/^/    # /' >&2 || true
    answered=$(awk '/Queries completed:/{print $3}' "$WORK/dnsperf")
    awk -v s="$1-$2" -v a="$answered" -v p=$((p1 - p0)) -v m=$((m1 - m0)) -v hz="$hz" 'BEGIN {
        printf "%-14s answered %8d  server %6.2f us/q  machine %6.2f us/q\n",
            s, a, p * 1e6 / hz / a, m * 1e6 / hz / a }'
}

echo "rate $RATE q/s for $SECONDS_ s, $TRIALS alternating trials; kernel $(uname -r)"
for t in $(seq "$TRIALS"); do
    for server in heron knot; do
        for mode in xdp sockets; do
            trial "$server" "$mode"
        done
    done
done
