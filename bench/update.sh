#!/usr/bin/env bash
# Dynamic updates per second (issue 39): Heron, Knot and BIND on the same
# zone (10,000 names), each taking TSIG-signed UPDATEs (hmac-sha256) with
# its journal on disk and synced (Heron: FILE.jnl, one fsync per batch;
# Knot: its LMDB journal, zonefile-sync -1; BIND: FILE.jnl). One record
# added per update, each to a name of its own, sent by `dnsperf -u` over
# UDP with 1 and with 64 updates in flight. Each server gets 2 worker
# threads on CPUs 0-1 (the machine has 2); dnsperf shares them. Each
# trial starts every server afresh (fresh zone, no journal); the trials
# alternate servers, and the table gives each cell's median and range.
#
# With SIGNED=1 each server signs the zone (Heron: dnssec-policy
# "default"; Knot: dnssec-signing: on; BIND: dnssec-policy default,
# inline-signing yes) and a run starts once the last name is signed.
# With MODE=latency, instead of updates per second: update-to-served
# latency, bench/update_latency.py (COUNT updates one at a time, each
# timed from its answer to the moment 16 query sockets, spread over the
# server's workers by SO_REUSEPORT, are all answered the new record).
#
#   bench/update.sh [HERON] [TRIALS] [SECONDS]
#   SERVERS="heron" SIGNED=1 bench/update.sh ...   # Heron signing the zone
#   MODE=latency COUNT=200 SIGNED=1 bench/update.sh target/release/heron 3
set -euo pipefail
heron=$(realpath "${1:-target/release/heron}")
tools=$(dirname "$(realpath "$0")")
trials=${2:-3}
seconds=${3:-8}
work=$(mktemp -d /tmp/update-bench.XXXXXX)
port=${PORT:-5394}
secret="q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k="
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2> /dev/null || true
    wait 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

zone() { # the zone file, fresh
    {
        printf '$ORIGIN upd.test.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n'
        for i in $(seq 1 10000); do printf 'h%d A 198.51.%d.%d\n' "$i" $((i / 250)) $((i % 250)); done
    } > "$1"
}

# The updates: more than any server sends in SECONDS, each a name of its
# own (a repeated add would change nothing and skip the journal).
updates=$work/updates.txt
python3 - "$updates" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(400_000):
        f.write(f"upd.test\nadd u{i}.upd.test 300 A 203.0.{(i >> 8) & 255}.{i & 255}\nsend\n")
PY

start_heron() { # $1: folder
    zone "$1/upd.zone"
    cat > "$1/heron.toml" <<CONF
[server]
listen = ["127.0.0.1:$port"]
workers = 2
[[key]]
name = "ops"
secret = "$secret"
[[zone]]
origin = "upd.test"
file = "$1/upd.zone"
allow-update = ["key ops zonesub ANY"]
zonefile-sync = "never"
CONF
    if [ -n "${SIGNED:-}" ]; then
        printf 'dnssec-policy = "default"\nkey-directory = "%s/keys"\n' "$1" >> "$1/heron.toml"
    fi
    HERON_LOG=warn taskset -c 0-1 "$heron" serve --config "$1/heron.toml" 2> "$1/server.log" &
    pid=$!
}

start_knot() {
    zone "$1/upd.zone"
    cat > "$1/knot.conf" <<CONF
server:
  rundir: "$1"
  listen: 127.0.0.1@$port
  udp-workers: 2
  tcp-workers: 1
  background-workers: 1
log:
  - target: stderr
    any: warning
database:
  storage: "$1"
key:
  - id: ops
    algorithm: hmac-sha256
    secret: $secret
acl:
  - id: update
    key: ops
    action: update
template:
  - id: default
    storage: "$1"
zone:
  - domain: upd.test
    file: "$1/upd.zone"
    acl: update
    zonefile-sync: -1
    journal-content: changes
CONF
    if [ -n "${SIGNED:-}" ]; then
        printf '    dnssec-signing: on\n' >> "$1/knot.conf"
    fi
    taskset -c 0-1 knotd -c "$1/knot.conf" 2> "$1/server.log" &
    pid=$!
}

start_bind() {
    zone "$1/upd.zone"
    local signed=""
    if [ -n "${SIGNED:-}" ]; then
        signed=" dnssec-policy default; inline-signing yes; key-directory \"$1\";"
    fi
    cat > "$1/named.conf" <<CONF
options {
  directory "$1";
  pid-file "$1/named.pid";
  session-keyfile "$1/session.key";
  listen-on port $port { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  notify no;
};
controls { };
key "ops" { algorithm hmac-sha256; secret "$secret"; };
zone "upd.test" { type primary; file "$1/upd.zone"; allow-update { key "ops"; };$signed };
CONF
    taskset -c 0-1 named -g -n 2 -c "$1/named.conf" 2> "$1/server.log" &
    pid=$!
}

wait_ready() { # signed: until the zone's last name has its signature
    for _ in $(seq 1 600); do
        if [ -n "${SIGNED:-}" ]; then
            dig +dnssec +time=1 +tries=1 -p "$port" @127.0.0.1 h10000.upd.test A 2> /dev/null |
                grep -q 'RRSIG' && return 0
        else
            dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 ns.upd.test A > /dev/null 2>&1 && return 0
        fi
        sleep 0.2
    done
    echo "the server never answered" >&2
    return 1
}

# One run: updates per second that were answered NOERROR.
measure() { # $1: updates in flight
    local out
    out=$(taskset -c 0-1 dnsperf -u -s 127.0.0.1 -p "$port" -d "$updates" \
        -y "hmac-sha256:ops:$secret" -c "$1" -q "$1" -l "$seconds" -t 5 2>&1)
    local noerror
    noerror=$(echo "$out" | awk '/Response codes:/ {for (i = 1; i < NF; i++) if ($i == "NOERROR") print $(i + 1)}')
    echo "$out" | awk -v ok="${noerror:-0}" -v s="$seconds" \
        '/Run time \(s\):/ {t = $4} END {if (t == 0) t = s; printf "%.0f\n", ok / t}'
}

# One run of the latency tool: "p50 p99 max failed" (microseconds).
measure_latency() {
    local out
    out=$(taskset -c 0-1 "${PYTHON:-/usr/bin/python3}" "$tools/update_latency.py" 127.0.0.1 "$port" upd.test \
        "$secret" "${COUNT:-200}" 16)
    echo "$out" >&2
    echo "$out" | awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}}
        END {print v["p50_us"], v["p99_us"], v["max_us"], v["failed"], v["floor_p50_us"], v["floor_p99_us"]}'
}

mode=${MODE:-rate}
runs="1 64"
[ "$mode" = latency ] && runs="lat"
results=$work/results.txt
: > "$results"
for trial in $(seq 1 "$trials"); do
    for server in ${SERVERS:-heron knot bind}; do
        for inflight in $runs; do
            dir=$work/$server-$trial-$inflight
            mkdir -p "$dir"
            "start_$server" "$dir"
            wait_ready
            if [ "$mode" = latency ]; then
                result=$(measure_latency)
                echo "$server lat $result" >> "$results"
                echo "trial $trial: $server: p50 p99 max (µs), failed, floor p50 p99: $result" >&2
            else
                rate=$(measure "$inflight")
                echo "$server $inflight $rate" >> "$results"
                echo "trial $trial: $server, $inflight in flight: $rate updates/s" >&2
            fi
            kill "$pid"
            wait "$pid" 2> /dev/null || true
            pid=""
            rm -rf "$dir"
        done
    done
done

knot=$(knotd -V | awk '{print $NF}')
bind=$(named -v | awk '{print $2}')
heron_version=$("$heron" --version | awk '{print $NF}')
python3 - "$results" "$heron_version" "$knot" "$bind" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = {"heron": f"Heron {sys.argv[2]}", "knot": f"Knot {sys.argv[3]}", "bind": f"BIND {sys.argv[4]}"}
if rows and rows[0][1] == "lat":
    print("| server | p50 ms (median, range) | p99 ms (median, range) | max ms (median, range) | floor p50 / p99 ms (medians) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for server in ["heron", "knot", "bind"]:
        mine = [r for r in rows if r[0] == server]
        if not mine:
            continue
        cells = []
        for col in (2, 3, 4):
            v = sorted(int(r[col]) / 1000 for r in mine)
            cells.append(f"{statistics.median(v):.2f} ({v[0]:.2f}–{v[-1]:.2f})")
        floor = [statistics.median(int(r[col]) / 1000 for r in mine) for col in (6, 7)]
        cells.append(f"{floor[0]:.2f} / {floor[1]:.2f}")
        failed = sum(int(r[5]) for r in mine)
        print(f"| {names[server]} | {' | '.join(cells)} |" + (f" {failed} failed" if failed else ""))
    sys.exit(0)
print("| server | 1 in flight: updates/s (median, range) | 64 in flight: updates/s (median, range) |")
print("| --- | ---: | ---: |")
for server in ["heron", "knot", "bind"]:
    if not any(r[0] == server for r in rows):
        continue
    cells = []
    for inflight in ["1", "64"]:
        v = sorted(int(r[2]) for r in rows if r[0] == server and r[1] == inflight)
        cells.append(f"{statistics.median(v):.0f} ({v[0]}–{v[-1]})")
    print(f"| {names[server]} | {cells[0]} | {cells[1]} |")
PY
