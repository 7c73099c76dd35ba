#!/usr/bin/env bash
# Heron-XDP vs Heron-sockets vs Knot-XDP vs Knot-sockets on a veth pair into
# a network namespace made here (removed at the end, even on failure).
# One worker each, one queue on the pair, the server confined to CPU 1 by a
# cpuset cgroup (Knot pins its UDP/XDP threads itself, by thread number: a
# plain taskset would let its XDP worker move to the generator's CPU),
# dnsperf inside the namespace pinned to CPU 0, a fixed offered rate.
# Prints, per trial: answered queries, server CPU µs per answered query
# (utime+stime of the server's process from /proc/PID/stat over the
# window), whole-machine CPU µs per answered query (the time outside the
# CPUs' idle states, from cpuidle; /proc/stat's tick-sampled busy time
# beside it, and instead where there is no cpuidle), and the server's
# context switches per query (all its threads, voluntary + involuntary).
#
#   bench/xdp.sh [RATE] [SECONDS] [TRIALS]      (defaults 50000 10 3)
#
# Environment:
#   SERVERS="heron-xdp heron-sockets knot-xdp knot-sockets"  which to run;
#              also "floor-xdp": Heron's XDP loop echoing each query with
#              QR set and no DNS work (`heron-bench xdp-reflector`), the
#              least any server pays on this path;
#              also "heronnp-MODE" (Heron with udp-coalesce-us = 0) and
#              "heronold-MODE" (the binary in $HERON_OLD), for A/B runs
#   CLIENT_NAPI=1  the namespace's end of the pair receives in its own
#              NAPI thread (GRO on, threaded NAPI) pinned to the generator's
#              CPU, as a real client's NIC would: without it, veth delivers
#              each reply through the client's IP and UDP input in the
#              sender's system call, charging the server for the client's
#              receive
#   COUNT=1    also count the server's system calls per answered query
#              (perf stat on tracepoints: poll, sendto, recvmmsg, ...);
#              their CPU figures then include perf's tracing cost
#   PROFILE=DIR  also record where the server spends its time (perf record
#              -g -e cpu-clock on its threads, kernel and user) into
#              DIR/SERVER-RATE.txt (top of perf report; perf.data beside it)
#
# Needs root, dnsperf and knot (apt-get install dnsperf knot), perf for
# COUNT/PROFILE, cgroup v1 cpuset, and a release build (cargo build
# --release -p heron).
set -euo pipefail
RATE=${1:-50000}
SECONDS_=${2:-10}
TRIALS=${3:-3}
SERVERS=${SERVERS:-heron-xdp heron-sockets knot-xdp knot-sockets}
COUNT=${COUNT:-0}
PROFILE=${PROFILE:-}
SERVER_CPU=1
GEN_CPU=0
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERON=${HERON:-$ROOT/target/release/heron}
BENCH=${BENCH:-$ROOT/target/release/heron-bench}
ZONE=$ROOT/crates/heron/tests/data/differential/edge.test.zone
PORT=5353
ID=$$
TAG=${TAG:-hb}   # names the namespace and the veth pair (a helper's own)
NS=${TAG}bench$ID
IF=$TAG$ID
WORK=$(mktemp -d /tmp/heron-xdp-bench.XXXXXX)
CPUSET=/sys/fs/cgroup/cpuset/heron-xdp-bench-$ID
SERVER_PID=

cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    ip link del "$IF" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    [ -d "$CPUSET" ] && rmdir "$CPUSET" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$HERON" ] || { echo "build first: cargo build --release -p heron" >&2; exit 1; }
command -v dnsperf >/dev/null || { echo "apt-get install dnsperf" >&2; exit 1; }

mkdir "$CPUSET"
echo "$SERVER_CPU" > "$CPUSET/cpuset.cpus"
cat "$(dirname "$CPUSET")/cpuset.mems" > "$CPUSET/cpuset.mems"

# TEST-NET-2 on the pair only: the host's own network may use TEST-NET-1.
ip netns add "$NS"
ip link add "$IF" numtxqueues 1 numrxqueues 1 type veth peer name "${IF}i" \
    numtxqueues 1 numrxqueues 1
ip link set "${IF}i" netns "$NS"
ip addr add 198.51.100.1/24 dev "$IF"
ip link set "$IF" up
ip netns exec "$NS" ip addr add 198.51.100.2/24 dev "${IF}i"
ip netns exec "$NS" ip link set "${IF}i" up
ip netns exec "$NS" ip link set lo up
if [ "${CLIENT_NAPI:-0}" = 1 ]; then
    ip netns exec "$NS" ethtool -K "${IF}i" gro on >/dev/null
    # veth hands a packet to the peer's NAPI only if it cannot be a TSO
    # packet (or comes from a UDP socket): XSK replies need TSO off here.
    ethtool -K "$IF" tso off >/dev/null
    ip netns exec "$NS" sh -c "echo 1 > /sys/class/net/${IF}i/threaded"
    for pid in $(ps -eo pid=,comm= | awk -v n="napi/${IF}i-" 'index($2, n) == 1 {print $1}'); do
        taskset -pc "$GEN_CPU" "$pid" >/dev/null
    done
fi

for q in "www.edge.test A" "edge.test SOA" "mail.edge.test AAAA" "nx.edge.test A" \
         "x.wild.edge.test A" "txt.edge.test TXT" "edge.test NS" "a.b.c.ent.edge.test A"; do
    echo "$q"
done > "$WORK/queries"

heron_conf() { # $1: xdp|sockets  $2: extra [server] lines
    {
        printf '[server]\nlisten = ["198.51.100.1:%s"]\nworkers = 1\n%s' "$PORT" "$2"
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
    local cmd
    case "$1" in
        heron) heron_conf "$2" ""; cmd=("$HERON" serve --config "$WORK/heron.toml") ;;
        heronnp) heron_conf "$2" $'udp-coalesce-us = 0\n'
                 cmd=("$HERON" serve --config "$WORK/heron.toml") ;;
        heronold) heron_conf "$2" ""; cmd=("$HERON_OLD" serve --config "$WORK/heron.toml") ;;
        knot) knot_conf "$2"; cmd=(knotd -c "$WORK/knot.conf") ;;
        floor) [ "$2" = xdp ] || { echo "the floor is XDP only" >&2; exit 1; }
               cmd=("$BENCH" xdp-reflector --listen "$IF@$PORT") ;;
        *) echo "unknown server $1" >&2; exit 1 ;;
    esac
    sh -c 'echo $$ > "$0/tasks" && exec "$@"' "$CPUSET" "${cmd[@]}" 2>"$WORK/log" &
    SERVER_PID=$!
    # The floor echoes the query: an answer with no records is its sign.
    local ready=192.0.2.80
    [ "$1" = floor ] && ready='status: NOERROR'
    for _ in $(seq 50); do
        ip netns exec "$NS" dig @198.51.100.1 -p "$PORT" +tries=1 +time=1 www.edge.test A \
            | grep -q "$ready" && return 0
        sleep 0.2
    done
    echo "$1 $2 did not answer:" >&2; cat "$WORK/log" >&2; exit 1
}

stop() { # $1: heron|knot
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
    if ip link show "$IF" | grep -qw 'xdp\|xdpgeneric'; then
        # Knot 3.2 leaves its program attached when it exits (it reuses it
        # at the next start); Heron's goes with its process.
        [ "$1" != knot ] && { echo "XDP left on $IF by Heron" >&2; exit 1; }
        ip link set dev "$IF" xdp off
    fi
}

proc_cpu() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
proc_user() { awk '{print $14}' "/proc/$SERVER_PID/stat"; }
# Busy µs of the whole machine so far (only differences mean anything):
# where the CPUs report idle states, the time outside them (cpuidle keeps
# their residency in µs: exact, and each wake's entry and exit counts);
# else /proc/stat's busy time, which the scheduler tick samples (at HZ 250
# a 20k q/s load's short bursts are misread by half, trial to trial).
machine_busy() {
    local cpus
    cpus=$(ls -d /sys/devices/system/cpu/cpu[0-9]*/cpuidle 2> /dev/null | wc -l)
    if [ "$cpus" -gt 0 ]; then
        cat /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/time \
            | awk -v now="$(date +%s%N)" -v n="$cpus" '{ i += $1 } END { printf "%.0f\n", now / 1000 * n - i }'
    else
        machine_ticks_us
    fi
}
machine_ticks_us() { awk -v hz="$hz" '/^cpu /{printf "%.0f\n", ($2+$3+$4+$7+$8+$9) * 1e6 / hz}' /proc/stat; }
switches() {
    cat /proc/"$SERVER_PID"/task/*/status 2>/dev/null \
        | awk '/^(non)?voluntary_ctxt_switches/{n += $2} END {print n}'
}
# Voluntary switches of all the server's threads: its sleeps, so its wakes.
wakes() {
    cat /proc/"$SERVER_PID"/task/*/status 2>/dev/null \
        | awk '/^voluntary_ctxt_switches/{n += $2} END {print n}'
}

EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll
EVENTS=$EVENTS,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sendto
EVENTS=$EVENTS,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg
EVENTS=$EVENTS,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg
EVENTS=$EVENTS,syscalls:sys_enter_clock_nanosleep,sched:sched_switch

trial() { # $1: heron|knot  $2: xdp|sockets
    start "$1" "$2"
    local p0 m0 s0 u0 w0 p1 m1 s1 u1 w1 answered hz name="$1-$2" watcher=
    hz=$(getconf CLK_TCK)
    if [ "$COUNT" = 1 ]; then
        perf stat -x, -e "$EVENTS" -p "$SERVER_PID" -o "$WORK/perfstat" &
        watcher=$!
    elif [ -n "$PROFILE" ]; then
        mkdir -p "$PROFILE"
        perf record -q -e cpu-clock -g -p "$SERVER_PID" -o "$WORK/perf.data" &
        watcher=$!
    fi
    sleep 0.5
    p0=$(proc_cpu); m0=$(machine_busy); t0=$(machine_ticks_us); s0=$(switches); u0=$(proc_user); w0=$(wakes)
    ip netns exec "$NS" taskset -c "$GEN_CPU" dnsperf -s 198.51.100.1 -p "$PORT" \
        -d "$WORK/queries" -l "$SECONDS_" -Q "$RATE" -c 4 -q 1000 > "$WORK/dnsperf" 2>&1
    p1=$(proc_cpu); m1=$(machine_busy); t1=$(machine_ticks_us); s1=$(switches); u1=$(proc_user); w1=$(wakes)
    if [ -n "$watcher" ]; then kill -INT "$watcher"; wait "$watcher" 2>/dev/null || true; fi
    # Which CPUs the server's threads were allowed (the cpuset holds).
    local cpus
    cpus=$(cat /proc/"$SERVER_PID"/task/*/status | awk '/Cpus_allowed_list/{print $2}' | sort -u | tr '\n' ' ')
    stop "$1"
    grep -i 'xdp' "$WORK/log" | sed 's/^/    # /' >&2 || true
    answered=$(awk '/Queries completed:/{print $3}' "$WORK/dnsperf")
    awk -v s="$name" -v a="$answered" -v p=$((p1 - p0)) -v m=$((m1 - m0)) -v hz="$hz" -v t=$((t1 - t0)) \
        -v cs=$((s1 - s0)) -v cpus="$cpus" -v u=$((u1 - u0)) -v w=$((w1 - w0)) 'BEGIN {
        printf "%-14s answered %8d  server %6.2f us/q (user %4.2f)  machine %6.2f us/q (ticks %6.2f)  switches %5.3f/q  wakes %5.3f/q  cpus %s\n",
            s, a, p * 1e6 / hz / a, u * 1e6 / hz / a, m / a, t / a, cs / a, w / a, cpus }'
    if [ "$COUNT" = 1 ]; then
        # The perf window (0.5 s idle before, the stop after) adds a few
        # idle wakes: counts are per answered query of the dnsperf window.
        awk -F, -v a="$answered" '$1 ~ /^[0-9]+$/ {
            sub(/^(raw_)?syscalls:sys_enter_?/, "", $3); sub(/^sched:/, "", $3)
            printf "    %-16s %7.3f per query\n", ($3 == "" ? "all syscalls" : $3), $1 / a }' \
            "$WORK/perfstat"
    fi
    if [ -n "$PROFILE" ]; then
        perf report -i "$WORK/perf.data" --no-children --sort dso,sym -g none --stdio 2>/dev/null \
            | grep -v '^$' | head -150 > "$PROFILE/$name-$RATE.txt" || true
        mv "$WORK/perf.data" "$PROFILE/$name-$RATE.data"
    fi
}

echo "rate $RATE q/s for $SECONDS_ s, $TRIALS alternating trials; kernel $(uname -r)"
for t in $(seq "$TRIALS"); do
    for s in $SERVERS; do
        trial "${s%-*}" "${s#*-}"
    done
done
