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
set -euo pipefail
heron=$(realpath "${1:-target/release/heron}")
runs=${2:-3}
rate=${3:-2000}
seconds=${4:-10}
port=${PORT:-5391}
work=$(mktemp -d /tmp/shield-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT

names=2000
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

run() { # $1: variant name, $2: extra config, $3...: dnsperf options
    local name=$1 extra=$2; shift 2
    config "$extra"
    for r in $(seq 1 "$runs"); do
        local out="$work/callgrind.out"
        rm -f "$out"*
        HERON_LOG=warn taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$heron" serve --config "$work/heron.toml" 2> "$work/server.log" &
        local pid=$!
        for _ in $(seq 1 100); do
            dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 www1.example.test A > /dev/null 2>&1 && break
            sleep 0.5
        done
        callgrind_control -z "$pid" > /dev/null 2>&1
        local answered
        answered=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" -Q "$rate" \
            -l "$seconds" "$@" 2>&1 | awk '/Queries completed:/ {print $3}')
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 1
        kill "$pid"; wait "$pid" 2> /dev/null || true
        local ir handler
        ir=$(grep -h '^summary:' "$out".* | awk '{s += $2} END {print s}')
        callgrind_annotate --inclusive=yes "$out".1 > "$work/annotated" 2> /dev/null
        handler=$(awk '/Handler>::handle_batch \[/ {gsub(",", "", $1); print $1; exit}' "$work/annotated")
        awk -v n="$name" -v r="$r" -v ir="$ir" -v h="$handler" -v a="$answered" \
            'BEGIN {printf "%-10s run %d: %d instructions, %d answered, %.0f per query, %.0f in handle_batch\n", n, r, ir, a, ir / a, h / a}'
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
