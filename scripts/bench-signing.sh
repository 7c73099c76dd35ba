#!/bin/sh
# Full signing of a generated zone by Heron (the signer of heron-dnssec,
# through its sign_zone example), ldns-signzone and dnssec-signzone, each
# with one new ECDSA P-256 key (a CSK), NSEC: wall and CPU seconds and peak
# RSS from /usr/bin/time -v, the median of RUNS runs.
#   scripts/bench-signing.sh RECORDS [RUNS] [THREADS]
# Needs: cargo build --release -p heron-dnssec --example sign_zone;
# packages ldnsutils, bind9-utils, time.
set -eu
records=${1:?records}
runs=${2:-3}
threads=${3:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
heron="$root/target/release/examples/sign_zone"
work=$(mktemp -d /tmp/bench-signing.XXXXXX)
trap 'rm -rf "$work"' EXIT
origin=bench.test.
zone="$work/zone"
# One name in ten is a delegation (NS and a glue A), the rest hold an A;
# records counted as written.
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
cd "$work"
ldns-keygen -a ECDSAP256SHA256 -k "$origin" > ldns.key
dnssec-keygen -q -K "$work" -a ECDSAP256SHA256 -f KSK "$origin" > /dev/null
# "wall cpu rss_kib" of one run of the command.
measure() {
    /usr/bin/time -v "$@" > /dev/null 2> time.txt || { cat time.txt; exit 1; }
    awk -F': ' '/Elapsed \(wall/ { n = split($2, t, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + t[i] }
        /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
        END { printf "%.2f %.2f %d\n", w, u + s, r }' time.txt
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
echo "# $records records, $threads threads, median of $runs: tool wall_s cpu_s peak_rss_kib"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
run heron taskset -c "0-$((threads - 1))" "$heron" "$origin" "$zone" heron.signed 13 nsec
[ -z "${HERON_ONLY:-}" ] || exit 0
run ldns-signzone taskset -c "0-$((threads - 1))" ldns-signzone -f ldns.signed "$zone" "$(cat ldns.key)"
# -S: the key from -K, its DNSKEY added; -z: it signs every RRset (a CSK).
run "dnssec-signzone-n$threads" taskset -c "0-$((threads - 1))" dnssec-signzone -q -S -n "$threads" -z -o "$origin" -f bind.signed -K "$work" "$zone"
