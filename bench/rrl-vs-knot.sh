#!/usr/bin/env bash
# Heron's RRL against Knot's mod-rrl under the same flood (issue 25):
# each server alone on CPU 0 with one UDP worker, the same zone, the same
# rate and slip; bench/rrl_flood.py on CPU 1 floods www.example.test/A
# from one address (127.0.0.2) and from 64 /24 prefixes (127.1.N.1-4),
# and counts answers, slipped (TC) and unanswered queries, and the
# server's CPU per query. Writes a Markdown table to stdout.
#
#   bench/rrl-vs-knot.sh [HERON] [RATE_LIMIT] [SLIP] [QPS] [SECONDS]
set -euo pipefail
heron=$(realpath "${1:-target/release/heron}")
limit=${2:-20}
slip=${3:-2}
qps=${4:-10000}
seconds=${5:-10}
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d /tmp/rrl-vs-knot.XXXXXX)
port_heron=${PORT_HERON:-5392}
port_knot=${PORT_KNOT:-5393}
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    wait 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/example.zone" <<ZONE
\$ORIGIN example.test.
\$TTL 3600
@ SOA ns1 hostmaster 1 3600 900 604800 300
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.80
ZONE

cat > "$work/heron.toml" <<CONF
[server]
listen = ["127.0.0.1:$port_heron"]
workers = 1
[rrl]
responses-per-second = $limit
slip = $slip
[[zone]]
origin = "example.test."
file = "$work/example.zone"
CONF

cat > "$work/knot.conf" <<CONF
server:
  rundir: "$work"
  listen: 127.0.0.1@$port_knot
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
log:
  - target: stderr
    any: warning
database:
  storage: "$work"
mod-rrl:
  - id: flood
    rate-limit: $limit
    slip: $slip
template:
  - id: default
    storage: "$work"
    global-module: mod-rrl/flood
zone:
  - domain: example.test
    file: "$work/example.zone"
CONF

wait_ready() { # $1: port
    for _ in $(seq 1 100); do
        dig +short +time=1 +tries=1 -p "$1" @127.0.0.1 ns1.example.test A > /dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "server on port $1 never answered" >&2
    return 1
}

echo "| server | flood from | sent | answered | slipped (TC) | no answer | server CPU µs / query |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
run() { # $1: name, $2: port, $3: pid
    for prefixes in 1 64; do
        sleep 2 # buckets refill
        local r
        r=$(taskset -c 1 python3 "$here/rrl_flood.py" "$2" "$3" "$qps" "$seconds" "$prefixes")
        python3 - "$1" "$prefixes" "$r" <<'PY'
import json, sys
name, prefixes, r = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
pct = lambda n: f"{n} ({100 * n / r['sent']:.1f}%)"
source = "127.0.0.2" if prefixes == 1 else f"{prefixes} /24s"
print(f"| {name} | {source} | {r['sent']} | {pct(r['answers'])} | {pct(r['slipped'])} | "
      f"{pct(r['none'])} | {r['server_cpu_us_per_query']} |")
PY
    done
}

HERON_LOG=warn taskset -c 0 "$heron" serve --config "$work/heron.toml" 2> "$work/heron.log" &
pids+=($!)
wait_ready "$port_heron"
run Heron "$port_heron" "${pids[-1]}"
kill "${pids[-1]}"

taskset -c 0 knotd -c "$work/knot.conf" 2> "$work/knot.log" &
pids+=($!)
wait_ready "$port_knot"
run "Knot $(knotd -V | awk '{print $NF}')" "$port_knot" "${pids[-1]}"
