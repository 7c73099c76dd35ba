#!/usr/bin/env bash
# User-space instructions per answered query of a Heron build with RRL and
# cookies off and on (issue 25): the server runs under callgrind (this
# machine's perf has no hardware counters), its counters are zeroed once
# it answers, dnsperf offers a fixed rate, and the total is divided by the
# queries answered. The kernel's share of a query is not counted.
#
#   bench/shield-cost.sh [HERON] [RUNS] [RATE] [SECONDS]
#
# Variants: off (no [rrl]; queries without a cookie), rrl (RRL on, rate
# far above the load: never limiting), cookie-off / cookie-on (queries
# carrying a client cookie; [cookies] enabled = false / true). All four
# unless VARIANTS names some (VARIANTS="off rrl"). The queries ask for
# 2,000 names that exist (ANSWERS=positive, the default), below 2,000
# delegations (ANSWERS=referral) or that do not exist (ANSWERS=nxdomain).
# Prints one line per run: variant, run, instructions, answered, per query
# in all and in the UDP worker's handler (`handle_batch`: the DNS work,
# without the system calls' user-space side, whose share per query moves
# with how many datagrams a receive brings).
#
# CACHE_SIM=1 also simulates the data caches (callgrind --cache-sim=yes)
# and prints data misses per query, in all and in handle_batch: D1 (the
# first-level data cache) and LL, which is the core's own 1 MiB L2 unless
# LL says otherwise (valgrind's --LL=size,ways,line; callgrind models two
# levels, and the table of a worker is as large as that L2). Only user
# space is simulated: the kernel's share of a query, which in a real run
# evicts some of the table between receives, is not in it. NAMES (2,000)
# is how many names the zone and the query file hold, so how many RRL
# buckets the queries touch. KEEP=DIR keeps each run's callgrind output
# of the worker's thread there (VARIANT-RUN.callgrind). OUTSTANDING=1
# keeps one query in flight (dnsperf -q 1), so that every receive brings
# exactly one: per-batch work then counts once per query in every run,
# and two builds compare without their batching differing.
set -euo pipefail
heron=$(realpath "${1:-target/release/heron}")
runs=${2:-3}
rate=${3:-2000}
seconds=${4:-10}
port=${PORT:-5391}
work=$(mktemp -d /tmp/shield-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT

names=${NAMES:-2000}
{
    printf '$ORIGIN example.test.\n$TTL 3600\n'
    printf '@ SOA ns1 hostmaster 1 3600 900 604800 300\n@ NS ns1\nns1 A 192.0.2.1\n'
    for i in $(seq 0 $((names - 1))); do printf 'www%d A 192.0.2.%d\n' "$i" $((i % 250)); done
    for i in $(seq 0 $((names - 1))); do printf 'sub%d NS ns1\n' "$i"; done
} > "$work/example.zone"
case ${ANSWERS:-positive} in
    positive) query='www%d.example.test A\n' ;;
    referral) query='www.sub%d.example.test A\n' ;;
    nxdomain) query='nx%d.example.test A\n' ;;
    *) echo "ANSWERS is positive, referral or nxdomain" >&2; exit 2 ;;
esac
for i in $(seq 0 $((names - 1))); do printf "$query" "$i"; done > "$work/queries"

config() { # $1: extra sections
    cat > "$work/heron.toml" <<CONF
[server]
listen = ["127.0.0.1:$port"]
workers = 1
$1
[[zone]]
origin = "example.test."
file = "$work/example.zone"
CONF
}

# shellcheck disable=SC2086 # $outstanding: an option or none
outstanding=${OUTSTANDING:+-q $OUTSTANDING}
events=Ir
cache_sim=
if [ -n "${CACHE_SIM:-}" ]; then
    events=Ir,D1mr,D1mw,DLmr,DLmw
    cache_sim="--cache-sim=yes --LL=${LL:-1048576,16,64}"
fi

cache_line() { # $1: variant, $2: run, $3: answered, $4: callgrind output, $5: annotated
    # Data misses: D1 read + write, LL read + write, from the summary of
    # every thread's file (in the events' order) and the handler's line.
    local all handler
    all=$(awk '/^events:/ {for (i = 2; i <= NF; i++) at[$i] = i}
        /^summary:/ {d1 += $at["D1mr"] + $at["D1mw"]; ll += $at["DLmr"] + $at["DLmw"]}
        END {print d1, ll}' "$4".*)
    handler=$(awk '/Handler>::handle_batch \[/ {gsub(",", ""); print $2 + $3, $4 + $5; exit}' "$5")
    awk -v n="$1" -v r="$2" -v a="$3" -v all="$all" -v h="$handler" 'BEGIN {
        split(all, x, " "); split(h, y, " ")
        printf "%-10s run %d: data misses per query: D1 %.2f, LL %.2f in all; D1 %.2f, LL %.2f in handle_batch\n",
            n, r, x[1] / a, x[2] / a, y[1] / a, y[2] / a}'
}

run() { # $1: variant name, $2: extra config, $3...: dnsperf options
    local name=$1 extra=$2; shift 2
    config "$extra"
    for r in $(seq 1 "$runs"); do
        local out="$work/callgrind.out"
        rm -f "$out"*
        # shellcheck disable=SC2086 # $cache_sim: several options or none
        HERON_LOG=warn taskset -c 0 valgrind --tool=callgrind $cache_sim --callgrind-out-file="$out" \
            "$heron" serve --config "$work/heron.toml" 2> "$work/server.log" &
        local pid=$!
        for _ in $(seq 1 100); do
            dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 www1.example.test A > /dev/null 2>&1 && break
            sleep 0.5
        done
        callgrind_control -z "$pid" > /dev/null 2>&1
        local answered
        answered=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" -Q "$rate" $outstanding \
            -l "$seconds" "$@" 2>&1 | awk '/Queries completed:/ {print $3}')
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 1
        kill "$pid"; wait "$pid" 2> /dev/null || true
        local ir handler
        ir=$(grep -h '^summary:' "$out".* | awk '{s += $2} END {print s}')
        callgrind_annotate --inclusive=yes --show-percs=no --show="$events" "$out".1 > "$work/annotated" 2> /dev/null
        handler=$(awk '/Handler>::handle_batch \[/ {gsub(",", ""); print $1; exit}' "$work/annotated")
        awk -v n="$name" -v r="$r" -v ir="$ir" -v h="$handler" -v a="$answered" \
            'BEGIN {printf "%-10s run %d: %d instructions, %d answered, %.0f per query, %.0f in handle_batch\n", n, r, ir, a, ir / a, h / a}'
        if [ -n "${KEEP:-}" ]; then cp "$out".1 "$KEEP/$name-$r.callgrind"; fi
        if [ -n "$cache_sim" ]; then
            cache_line "$name" "$r" "$answered" "$out" "$work/annotated"
        fi
    done
}

cookie='-E 10:0102030405060708'
for variant in ${VARIANTS:-off rrl cookie-off cookie-on}; do
    case $variant in
        off) run off '' ;;
        rrl) run rrl $'[rrl]\nresponses-per-second = 100000' ;;
        cookie-off) run cookie-off $'[cookies]\nenabled = false' $cookie ;;
        cookie-on) run cookie-on '' $cookie ;;
        *) echo "unknown variant $variant" >&2; exit 2 ;;
    esac
done
