#!/bin/bash
# Usage: bench/metrics-cost/callgrind.sh BINARY on|off QUERIES RUN
# User-space instructions per query (callgrind), one UDP worker, dnsperf
# sending QUERIES queries; with "on", /metrics is scraped every second.
# QUERY_FILE names another query file (negative-queries.txt: NXDOMAIN and
# NODATA only).
set -e
bin=$1; mode=$2; n=$3; run=$4
port=$((20000 + RANDOM % 20000)); mport=$((port + 1))
dir=$(mktemp -d)
zone=$(cd "$(dirname "$0")/../.." && pwd)/crates/heron/src/example.com.zone
cat > $dir/heron.toml <<CFG
[server]
listen = ["127.0.0.1:$port"]
workers = 1
[[zone]]
origin = "example.com"
file = "$zone"
CFG
if [ "$mode" = on ]; then printf '[metrics]\nlisten = "127.0.0.1:%s"\n' $mport >> $dir/heron.toml; fi
valgrind --tool=callgrind --callgrind-out-file=$dir/cg.out $bin serve --config $dir/heron.toml > $dir/log 2>&1 &
pid=$!
for i in $(seq 1 300); do dig +short +time=1 +tries=1 -p $port @127.0.0.1 example.com SOA > /dev/null 2>&1 && break; sleep 0.5; done
sleep 1
callgrind_control -z $pid > /dev/null
scraper=
if [ "$mode" = on ]; then (while true; do curl -s http://127.0.0.1:$mport/metrics > /dev/null; sleep 1; done) & scraper=$!; fi
dnsperf -s 127.0.0.1 -p $port -d ${QUERY_FILE:-$(dirname "$0")/queries.txt} -n $((n / 10)) -c 1 -q 1 > $dir/dnsperf 2>&1
[ -n "$scraper" ] && kill $scraper
callgrind_control -d $pid > /dev/null
sleep 1
kill -TERM $pid; wait $pid || true
done_q=$(awk '/Queries completed/ {print $3}' $dir/dnsperf)

# summary and totals appear in each dump file; dumps: the -d one and the exit one
ir=$(grep -h "^totals:\|^summary:" $dir/cg.out.1 | head -1 | awk "{print \$2}")
hb=$(callgrind_annotate --inclusive=yes --threshold=100 $dir/cg.out.1 2>/dev/null | grep "Handler>::handle_batch \[" | head -1 | awk '{gsub(",","",$1); print $1}')
echo "$(basename $bin) $mode run=$run handle_batch_per_query=$(python3 -c "print(round($hb/$done_q,1))") completed=$done_q Ir=$ir per_query=$(python3 -c "print(round($ir/$done_q,1))")"
[ -n "$KEEP" ] && cp $dir/cg.out.1 ./keep-$(basename $bin)-$mode-$run.cg; rm -rf $dir
