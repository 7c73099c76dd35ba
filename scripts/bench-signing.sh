#!/bin/sh
# Full signing of a generated zone by Heron (the signer of heron-dnssec,
# through its sign_zone example), Knot (kzonesign), ldns-signzone and
# dnssec-signzone, each with one new ECDSA P-256 key (a CSK), NSEC: wall
# and CPU seconds and peak RSS from /usr/bin/time -v, the median of RUNS
# runs, each tool on THREADS cores (taskset). Then, unless CHANGES is
# empty, the re-signing after a change of N RRsets for each N in CHANGES
# (default "10 1000"): Heron signing the new version with the old one's
# signatures (as the server's reload does), Knot reloading it in a
# running knotd (CPU seconds of knotd across `knotc -b zone-reload`).
#   scripts/bench-signing.sh RECORDS [RUNS] [THREADS]
#   HERON_ONLY=1: Heron alone.  TOOLS="heron knot ldns bind": which.
#   ZONE_OUT=FILE: keep a copy of the generated zone there.
#   ZONE_IN=FILE ORIGIN=NAME: sign that zone instead of a generated one
#   (RECORDS is then only a label; no re-signing unless CHANGES is set,
#   and the changes assume the generated zone's `h` names).
#   REPEAT=K: each run is K signings back to back, its seconds divided
#   by K (for zones signed in milliseconds; time(1) counts in 10 ms).
# Needs: cargo build --release -p heron-dnssec --example sign_zone;
# packages ldnsutils, bind9-utils, knot, knot-dnssecutils, time.
set -eu
records=${1:?records}
runs=${2:-3}
threads=${3:-$(nproc)}
tools=${TOOLS:-heron knot ldns bind}
[ -z "${HERON_ONLY:-}" ] || tools=heron
changes=${CHANGES-10 1000}
root=$(cd "$(dirname "$0")/.." && pwd)
heron="$root/target/release/examples/sign_zone"
work=$(mktemp -d /tmp/bench-signing.XXXXXX)
knotd_pid=
cleanup() {
    [ -z "$knotd_pid" ] || kill "$knotd_pid" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
origin=${ORIGIN:-bench.test.}
zone="$work/zone"
[ -z "${ZONE_IN:-}" ] || changes=${CHANGES-}
cores="0-$((threads - 1))"
# One name in ten is a delegation (NS and a glue A), the rest hold an A;
# records counted as written.
if [ -n "${ZONE_IN:-}" ]; then cp "$ZONE_IN" "$zone"; else
python3 - "$records" "$zone" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("$ORIGIN bench.test.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n")
    written, i = 3, 0
    while written < n:
        if i % 10 == 9:
            f.write(f"d{i} NS ns.d{i}\nns.d{i} A 198.51.100.{i % 250 + 1}\n")
            written += 2
        else:
            f.write(f"h{i} A 192.0.2.{i % 250 + 1}\n")
            written += 1
        i += 1
PY
fi
[ -z "${ZONE_OUT:-}" ] || cp "$zone" "$ZONE_OUT"
# The zone with serial 2 and the first N A RRsets of `h` names changed.
changed() {
    awk -v n="$1" '/ SOA / { sub(/hostmaster 1 /, "hostmaster 2 ") }
        /^h/ && done < n { $3 = "203.0.113." (done % 250 + 1); done++ } { print }' "$zone"
}
cd "$work"
ldns-keygen -a ECDSAP256SHA256 -k "$origin" > ldns.key
dnssec-keygen -q -K "$work" -a ECDSAP256SHA256 -f KSK "$origin" > /dev/null
# Knot: one CSK, NSEC, no CDS/CDNSKEY (the others publish none).
mkdir -p knot/db knot/out
knot_conf() {
    cat <<CONF
server:
    rundir: $work/knot
    listen: 127.0.0.1@$1
database:
    storage: $work/knot/db
policy:
  - id: csk
    algorithm: ecdsap256sha256
    single-type-signing: on
    cds-cdnskey-publish: none
    signing-threads: $threads
zone:
  - domain: $origin
    file: $2
    dnssec-signing: on
    dnssec-policy: csk
    zonefile-load: difference-no-serial
    zonefile-sync: -1
    journal-content: all
CONF
}
knot_conf 53000 "$zone" > knot/knot.conf
keymgr -c knot/knot.conf "$origin" generate algorithm=13 ksk=yes zsk=yes > /dev/null
repeat=${REPEAT:-1}
# "wall cpu rss_kib" of one run of the command (REPEAT times over).
measure() {
    /usr/bin/time -v sh -c 'n=$1; shift; while [ "$n" -gt 0 ]; do "$@" || exit 1; n=$((n - 1)); done' \
        sh "$repeat" "$@" > /dev/null 2> time.txt || { cat time.txt >&2; exit 1; }
    awk -F': ' -v k="$repeat" '/Elapsed \(wall/ { n = split($2, t, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + t[i] }
        /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
        END { f = k > 1 ? "%.4f %.4f %d\n" : "%.2f %.2f %d\n"; printf f, w / k, (u + s) / k, r }' time.txt
}
median() { sort -n | awk '{ v[NR] = $0 } END { print v[int((NR + 1) / 2)] }'; }
run() {
    name=$1; shift
    : > runs.txt
    i=0
    while [ "$i" -lt "$runs" ]; do measure "$@" >> runs.txt; i=$((i + 1)); done
    printf '%s %s %s %s\n' "$name" "$(cut -d' ' -f1 runs.txt | median)" \
        "$(cut -d' ' -f2 runs.txt | median)" "$(cut -d' ' -f3 runs.txt | median)"
}
has() { case " $tools " in *" $1 "*) return 0 ;; esac; return 1; }
echo "# $records records, $threads threads, median of $runs: tool wall_s cpu_s peak_rss_kib"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if has heron; then
    run heron taskset -c "$cores" "$heron" "$origin" "$zone" heron.signed 13 nsec
    grep -m1 'signed zone' time.txt
    echo "signatures: $(awk '$4 == "RRSIG"' heron.signed | wc -l), records: $(grep -cv '^;' heron.signed)"
fi
has knot && run "kzonesign-threads$threads" taskset -c "$cores" kzonesign -c knot/knot.conf -o knot/out "$origin"
has ldns && run ldns-signzone taskset -c "$cores" ldns-signzone -f ldns.signed "$zone" "$(cat ldns.key)"
# -S: the key from -K, its DNSKEY added; -z: it signs every RRset (a CSK).
has bind && run "dnssec-signzone-n$threads" taskset -c "$cores" dnssec-signzone -q -S -n "$threads" -z -o "$origin" -f bind.signed -K "$work" "$zone"
[ -n "$changes" ] || exit 0
echo "# re-signing after N RRsets changed: tool N cpu_s (of the re-signing alone) wall_s"
for n in $changes; do
    changed "$n" > "zone.$n"
    if has heron; then
        # The second step's line: load and sign of the new version.
        taskset -c "$cores" "$heron" "$origin" "$zone" heron.signed 13 nsec "zone.$n" 2> heron.txt > /dev/null
        awk -v n="$n" '/load\+sign/ { cpu = $6; wall = $3; line = $0 } END { print "heron", n, cpu, wall, "(" line ")" }' heron.txt
    fi
done
has knot || exit 0
# knotd signs the zone as loaded, then re-signs each change as a reload.
cp "$zone" knot/live
port=$((20000 + $$ % 20000))
knot_conf "$port" "$work/knot/live" > knot/knotd.conf
rm -rf knot/db/journal knot/db/timers
taskset -c "$cores" knotd -c knot/knotd.conf > knot/knotd.log 2>&1 &
knotd_pid=$!
tries=0
until [ -n "$(kdig @127.0.0.1 -p "$port" +short +time=1 +retry=0 SOA "$origin" 2> /dev/null)" ]; do
    tries=$((tries + 1)); [ "$tries" -lt 1800 ] || { echo "knotd did not load the zone"; exit 1; }
    sleep 1
done
knotc -c knot/knotd.conf -b -t 900 zone-reload "$origin" > /dev/null
ticks() { awk '{ print $14 + $15 }' "/proc/$knotd_pid/stat"; }
for n in $changes; do
    changed "$n" > knot/live
    before=$(ticks); start=$(date +%s.%N)
    knotc -c knot/knotd.conf -b -t 900 zone-reload "$origin" > /dev/null
    after=$(ticks); end=$(date +%s.%N)
    echo "knotd $n $(echo "($after - $before) / 100" | bc -l | cut -c1-5) $(echo "$end - $start" | bc -l | cut -c1-6)"
    cp "$zone" knot/live
    knotc -c knot/knotd.conf -b -t 900 zone-reload "$origin" > /dev/null
done
