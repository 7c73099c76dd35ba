#!/bin/bash
# Usage: cg-query.sh BINARY udp|tcp ORIGIN ZONEFILE QUERYFILE PASSES RUN
# Variant of bench/metrics-cost/callgrind.sh (mode "off"): one worker,
# one zone (ORIGIN from ZONEFILE), dnsperf from loopback sending
# QUERYFILE PASSES times with one query outstanding (-c 1 -q 1) over
# udp or tcp; prints user-space instructions (all threads, callgrind
# totals from zeroing to dump) per completed query, and for UDP the
# inclusive cost of the UDP worker's Handler::handle_batch per query.
# Instrumentation starts after the zone is loaded (--instr-atstart=no,
# switched on once the server answers), so large zones load faster.
set -e
bin=$1; transport=$2; origin=$3; zone=$(readlink -f "$4"); qfile=$(readlink -f "$5"); passes=$6; run=$7
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
cat > $dir/heron.toml <<CFG
[server]
listen = ["127.0.0.1:$port"]
workers = 1
[[zone]]
origin = "$origin"
file = "$zone"
CFG
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$dir/cg.out $bin serve --config $dir/heron.toml > $dir/log 2>&1 &
pid=$!
ready=
for i in $(seq 1 1200); do
    if dig +short +time=1 +tries=1 -p $port @127.0.0.1 "$origin" SOA > /dev/null 2>&1; then ready=1; break; fi
    kill -0 $pid 2> /dev/null || break
    sleep 0.5
done
if [ -z "$ready" ]; then echo "server not ready"; cat $dir/log; kill -TERM $pid 2> /dev/null; exit 1; fi
callgrind_control -i on $pid > /dev/null 2>&1
sleep 1
callgrind_control -z $pid > /dev/null 2>&1
dnsperf -m $transport -s 127.0.0.1 -p $port -d $qfile -n $passes -c 1 -q 1 > $dir/dnsperf 2>&1
callgrind_control -d $pid > /dev/null 2>&1
sleep 1
kill -TERM $pid; wait $pid || true
done_q=$(awk '/Queries completed/ {print $3}' $dir/dnsperf)
lost_q=$(awk '/Queries lost/ {print $3}' $dir/dnsperf)
ir=$(grep -h "^totals:\|^summary:" $dir/cg.out.1 | head -1 | awk '{print $2}')
hb=$(callgrind_annotate --inclusive=yes --threshold=100 $dir/cg.out.1 2> /dev/null | grep "Handler>::handle_batch \[" | head -1 | awk '{gsub(",","",$1); print $1}')
hbq=n/a
[ -n "$hb" ] && hbq=$(python3 -c "print(round($hb/$done_q,1))")
echo "$(basename $bin) $transport $(basename $qfile .txt) run=$run completed=$done_q lost=$lost_q Ir=$ir per_query=$(python3 -c "print(round($ir/$done_q,1))") handle_batch_per_query=$hbq"
[ -n "$KEEP" ] && cp $dir/cg.out.1 "$KEEP"
rm -rf $dir
