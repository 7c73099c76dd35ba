#!/bin/bash
# Usage: cg-query-knot.sh ORIGIN ZONEFILE QUERYFILE PASSES
# Knot's counterpart of cg-query.sh (udp): knotd with one UDP worker under
# callgrind, instrumentation on once it answers, dnsperf -c 1 -q 1 sending
# QUERYFILE PASSES times; prints user-space instructions (all threads)
# per completed query.
set -e
origin=$1; zone=$(readlink -f "$2"); qfile=$(readlink -f "$3"); passes=$4
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
cat > $dir/knot.conf <<CFG
server:
  rundir: "$dir"
  listen: 127.0.0.1@$port
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
log:
  - target: stderr
    any: warning
database:
  storage: "$dir"
template:
  - id: default
    storage: "$dir"
    zonefile-sync: -1
    journal-content: none
    semantic-checks: off
zone:
  - domain: "$origin"
    file: "$zone"
CFG
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$dir/cg.out knotd -c $dir/knot.conf > $dir/log 2>&1 &
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
dnsperf -m udp -s 127.0.0.1 -p $port -d $qfile -n $passes -c 1 -q 1 > $dir/dnsperf 2>&1
callgrind_control -d $pid > /dev/null 2>&1
sleep 1
kill -TERM $pid; wait $pid || true
done_q=$(awk '/Queries completed/ {print $3}' $dir/dnsperf)
lost_q=$(awk '/Queries lost/ {print $3}' $dir/dnsperf)
ir=$(grep -h "^totals:\|^summary:" $dir/cg.out.1 | head -1 | awk '{print $2}')
echo "knotd udp $(basename $qfile .txt) completed=$done_q lost=$lost_q Ir=$ir per_query=$(python3 -c "print(round($ir/$done_q,1))")"
[ -n "$KEEP" ] && cp $dir/cg.out.1 "$KEEP"
rm -rf $dir
