#!/bin/bash
# loop-cost.sh tcp|tls EVENT_LOOP(true|false) HERON_BIN CONNS BURST ROUNDS [perf|callgrind]
# Server cost per answered query of CONNS open connections (plain or
# TLS) that each write BURST pipelined queries per round and read the
# answers (loop_cost.py), Heron with one worker and `[tcp] event-loop` as
# given: perf counts every system call of every thread of the server
# (raw_syscalls:sys_enter) over the rounds; callgrind its user-space
# instructions. The connections (and TLS handshakes) are made before the
# counters start. The zone is a root-like zone of 1,000 delegations
# (made in /tmp/loop-cost-data unless DATA names one with root.zone and
# queries.txt); the queries are referrals and NXDOMAINs.
set -eu
mode=$1; evloop=$2; bin=$(readlink -f $3); conns=$4; burst=$5; rounds=$6; tool=${7:-perf}
here=$(dirname "$(readlink -f "$0")")
data=${DATA:-/tmp/loop-cost-data}
if [ ! -f $data/root.zone ]; then
  mkdir -p $data
  python3 - $data <<'PY'
import sys
d = sys.argv[1]
with open(f'{d}/root.zone', 'w') as z, open(f'{d}/queries.txt', 'w') as q:
    z.write('. 86400 IN SOA a.root. nstld. 2026112500 1800 900 604800 86400\n. 518400 IN NS a.root.\na.root. 518400 IN A 198.41.0.4\n')
    for i in range(1000):
        z.write(f'tld{i}. 172800 IN NS ns1.nic.tld{i}.\ntld{i}. 172800 IN NS ns2.nic.tld{i}.\n')
        z.write(f'ns1.nic.tld{i}. 172800 IN A 192.0.2.{i % 250 + 1}\nns2.nic.tld{i}. 172800 IN A 198.51.100.{i % 250 + 1}\n')
    for i in range(5000):
        q.write(f'www.example{i}.tld{(i * 7) % 1000}. A\n' if i % 10 else f'nosuch{i}. A\n')
PY
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
    -keyout $data/key.pem -out $data/cert.pem 2>/dev/null
fi
dir=$(mktemp -d); port=5397; tlsport=5398
cat > $dir/heron.toml <<TOML
[server]
listen = ["127.0.0.1:$port"]
workers = ${WORKERS:-1}
[tcp]
event-loop = $evloop
idle-timeout = 300
max-connections = 20000
max-connections-per-client = 20000
[tls]
listen = ["127.0.0.1:$tlsport"]
certificate = "$data/cert.pem"
key = "$data/key.pem"
[[zone]]
origin = "."
file = "$data/root.zone"
TOML
if [ $tool = callgrind ]; then
  valgrind --tool=callgrind --callgrind-out-file=$dir/cg.out $bin serve --config $dir/heron.toml > $dir/log 2>&1 &
else
  taskset -c 0 $bin serve --config $dir/heron.toml > $dir/log 2>&1 &
fi
pid=$!
for i in $(seq 1 300); do dig +short +time=1 +tries=1 -p $port @127.0.0.1 . SOA > /dev/null 2>&1 && break; sleep 0.5; done
target=$port; [ $mode = tls ] && target=$tlsport
coproc CLIENT { QUERIES=$data/queries.txt exec taskset -c 1 python3 "$here/loop_cost.py" $target $conns $burst $rounds $mode; }
read -r line <&${CLIENT[0]}   # connected
if [ $tool = callgrind ]; then callgrind_control -z $pid > /dev/null
else perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_futex,context-switches -p $pid 2> $dir/perf.out & perfpid=$!; sleep 0.5; fi
echo go >&${CLIENT[1]}
read -r line <&${CLIENT[0]}   # answered N
answered=${line#answered }
if [ $tool = callgrind ]; then
  callgrind_control -d $pid > /dev/null
  count=$(grep -h "^totals:\|^summary:" $dir/cg.out.1 | head -1 | awk '{print $2}'); what=instructions
else
  kill -INT $perfpid; wait $perfpid || true
  count=$(grep raw_syscalls $dir/perf.out | cut -d, -f1); what=syscalls
  futex=$(grep sys_enter_futex $dir/perf.out | cut -d, -f1); switches=$(grep context-switches $dir/perf.out | cut -d, -f1)
  what="syscalls ($(python3 -c "print(round($futex/$answered, 3))") futex, $(python3 -c "print(round($switches/$answered, 3))") context switches a query)"
fi
echo done >&${CLIENT[1]}
wait $CLIENT_PID 2>/dev/null || true
kill -TERM $pid; wait $pid || true
echo "$mode event-loop=$evloop workers=${WORKERS:-1} conns=$conns burst=$burst rounds=$rounds: $answered answered, $count $what, $(python3 -c "print(round($count/$answered, 3))")/query"
[ -n "${KEEP:-}" ] && [ $tool = callgrind ] && cp $dir/cg.out.1 "$KEEP"
rm -rf $dir
