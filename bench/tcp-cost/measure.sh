#!/bin/bash
# measure.sh SERVER(heron|knot) HERON_BIN CONNS INFLIGHT RATE [DURATION]
# Starts the server pinned to CPU 0 (one worker), runs blast --tcp pinned to
# CPU 1, and over a window in the middle of the run counts the server's
# system calls (perf tracepoints), and TCP segments sent by each side (ss
# tcp_info segs_out summed over the server's and the clients' sockets).
set -u
kind=$1; heron=$2; conns=$3; inflight=$4; rate=$5; dur=${6:-14}
bench=${BENCH:-/work/bench-bin/heron-bench}
here=$(dirname "$(readlink -f "$0")")
# Knot's configuration names /tmp/tcpcost for its state; both zone files
# are the cost matrix's root zone (`heron-bench run --data /work/matrix-data`).
mkdir -p /tmp/tcpcost/heron /tmp/tcpcost/knot && cd /tmp/tcpcost
cp "$here/heron.toml" heron/ && cp "$here/knot.conf" knot/
if [ $kind = heron ]; then port=5391; taskset -c 0 nice -n -20 $heron serve --config heron/heron.toml >heron/log 2>&1 &
else port=5392; rm -rf knot/*.mdb knot/journal knot/timers knot/catalog knot/kasp; taskset -c 0 nice -n -20 /usr/sbin/knotd -c knot/knot.conf >knot/log 2>&1 & fi
pid=$!
for i in $(seq 50); do dig +short +tries=1 +time=1 @127.0.0.1 -p $port . SOA >/dev/null 2>&1 && break; sleep 0.2; done
segs() { ss -tinH state established "( $1 = :$port )" | grep -o ' segs_out:[0-9]*' | awk -F: '{s+=$2} END {print s+0}'; }
bytes() { ss -tinH state established "( sport = :$port )" | grep -o 'bytes_received:[0-9]*' | awk -F: '{s+=$2} END {print s+0}'; }
nice -n -20 $bench blast --target 127.0.0.1:$port --queries "${QUERIES:-/work/matrix-data/queries/root.txt}" --rate $rate --duration $dur --tcp $conns --in-flight $inflight --cpus 1 > ./blast.out 2>&1 &
bpid=$!
# wait until connections are up and steady
for i in $(seq 600); do n=$(ss -tnH state established "( sport = :$port )" | wc -l); [ $n -ge $conns ] && break; sleep 0.2; done
sleep 1.5
s0=$(segs sport); c0=$(segs dport); b0=$(bytes); t0=$(date +%s.%N); ev=raw_syscalls:sys_enter
for s in recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl futex getpeername read write writev io_uring_enter; do ev="$ev,syscalls:sys_enter_$s"; done
perf stat -x, -e $ev -p $pid -- sleep 3 2> ./perf.out
s1=$(segs sport); c1=$(segs dport); b1=$(bytes); t1=$(date +%s.%N);
wait $bpid
kill $pid; wait $pid 2>/dev/null
win=$(echo "$t1 - $t0" | bc)
ans=$(grep -o 'answered [0-9]* q/s' ./blast.out | awk '{print $2}')
# queries in the window: bytes the server received / mean framed query (root.txt: 32.546 bytes)
q=$(echo "($b1 - $b0) / 32.546" | bc)
echo "== $kind conns=$conns inflight=$inflight rate=$rate window=${win}s queries~$q"
grep -i "answered\|lost\|latency\|sent" ./blast.out | head -6
awk -F, -v q=$q '$1 ~ /^[0-9]+$/ && $1 > 0 {printf "  %-36s %10d  %.3f/query\n", $3, $1, $1/q}' ./perf.out
echo "  server segs_out $((s1-s0)) ($(echo "scale=3; ($s1-$s0)/$q" | bc)/query), client segs_out $((c1-c0)) ($(echo "scale=3; ($c1-$c0)/$q" | bc)/query)"
