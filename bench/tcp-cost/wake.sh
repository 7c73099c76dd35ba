#!/bin/bash
# wake.sh SERVER(heron|nsd|knot|floor) HERON_BIN CONNS INFLIGHT RATE [DURATION]
# The matrix's paced TCP cell (`heron-bench blast --tcp CONNS --in-flight
# INFLIGHT --rate RATE` for DURATION seconds), the server pinned to CPU 0
# with one worker, blast on CPU 1, both at nice -20 (the suite's `--sched
# nice`). Per answered query: every system call of
# every thread of every process of the server, by name (perf's syscall
# tracepoints), context switches (voluntary and not, from
# /proc/PID/task/*/status) and server CPU (schedstat). With PROFILE=FILE,
# instead `perf record -e cpu-clock -g` of the server's threads (kernel
# included; perf's own cost at each context switch is in it, and on this
# VM a CPU-wide recording puts most samples at idle exit instead) over the
# same run, written to FILE; with PLAIN=1, neither (CPU and
# context switches only, without perf's own cost).
set -u
kind=$1; heron=$2; conns=$3; inflight=$4; rate=$5; dur=${6:-10}
bench=${BENCH:-/work/bench-bin/heron-bench-final3}
here=$(dirname "$(readlink -f "$0")")
# The zone files are the cost matrix's root zone (`heron-bench run --data
# /work/matrix-data`); Knot's and NSD's configurations name /tmp/tcpcost.
mkdir -p /tmp/tcpcost/heron /tmp/tcpcost/knot /tmp/tcpcost/nsd && cd /tmp/tcpcost
cp "$here/heron.toml" heron/ && cp "$here/knot.conf" knot/ && cp "$here/nsd.conf" nsd/
case $kind in
heron) port=5391; taskset -c 0 nice -n -20 $heron serve --config heron/heron.toml >heron/log 2>&1 & ;;
knot) port=5392; rm -rf knot/*.mdb knot/journal knot/timers knot/catalog knot/kasp
  taskset -c 0 nice -n -20 /usr/sbin/knotd -c knot/knot.conf >knot/log 2>&1 & ;;
nsd) port=5393; rm -f nsd/*.state nsd/zone.list
  taskset -c 0 nice -n -20 /usr/sbin/nsd -d -c nsd/nsd.conf >nsd/log 2>&1 & ;;
floor) port=5394; taskset -c 0 nice -n -20 $heron 5394 ${FLOOR_TIMEOUT:--1} >floor.log 2>&1 & ;;
esac
pid=$!
[ $kind = floor ] && sleep 1 || for i in $(seq 50); do dig +short +tries=1 +time=1 @127.0.0.1 -p $port . SOA >/dev/null 2>&1 && break; sleep 0.2; done
# Every process of the server: the one started and its descendants (NSD
# forks a main process and a server process below the first).
tree() { echo $1; for c in $(ps -o pid= --ppid $1); do tree $c; done; }
sleep 1; pids=$(tree $pid | paste -sd,)
switches() { for p in ${pids//,/ }; do cat /proc/$p/task/*/status; done | awk '/^voluntary_ctxt/ {v+=$2} /^nonvoluntary_ctxt/ {n+=$2} END {printf "%.0f %.0f\n", v, n}'; }
cpu_ns() { for p in ${pids//,/ }; do cat /proc/$p/task/*/schedstat; done | awk '{s+=$1} END {printf "%.0f\n", s}'; }
# The counters cover the whole blast run, connecting and closing included
# (CONNS accepts and closes: small beside the queries), and are divided by
# the queries blast had answered: perf takes seconds to attach, so a window
# in the middle would not match a count of queries taken beside it.
if [ -n "${PLAIN:-}" ]; then
  sleep $((dur + 6)) &
elif [ -n "${PROFILE:-}" ]; then
  perf record -q -e cpu-clock -g -p $pids -o "$PROFILE" -- sleep $((dur + 6)) 2>/dev/null &
else
  ev=raw_syscalls:sys_enter
  for s in read write readv writev recvfrom sendto recvmsg sendmsg recvmmsg sendmmsg \
    epoll_wait epoll_pwait epoll_pwait2 epoll_ctl poll ppoll select pselect6 futex \
    getpeername accept accept4 close shutdown fcntl ioctl getsockopt setsockopt \
    timerfd_settime clock_gettime clock_nanosleep nanosleep sched_yield \
    mmap munmap madvise brk io_uring_enter; do ev="$ev,syscalls:sys_enter_$s"; done
  perf stat -x, -e $ev -p $pids -- sleep $((dur + 6)) 2> ./perf.out &
fi
perfpid=$!
sleep 3
read v0 n0 < <(switches); c0=$(cpu_ns)
nice -n -20 taskset -c 1 $bench blast --target 127.0.0.1:$port --queries "${QUERIES:-/work/matrix-data/queries/root.txt}" --rate $rate --duration $dur --tcp $conns --in-flight $inflight --cpus 1 > ./blast.out 2>&1
read v1 n1 < <(switches); c1=$(cpu_ns)
wait $perfpid
kill ${pids//,/ }; wait $pid 2>/dev/null
q=$(grep -o 'answered [0-9]* lost' ./blast.out | awk '{print $2}')
echo "== $kind ($(basename $heron)) conns=$conns inflight=$inflight rate=$rate for ${dur}s: $q answered (server pids $pids)"
grep -i "answered\|lost\|latency" ./blast.out | head -3
awk -v q=$q -v v=$((v1 - v0)) -v n=$((n1 - n0)) -v c=$((c1 - c0)) 'BEGIN {
  printf "  voluntary switches %.3f/query, involuntary %.3f/query, server CPU %.2f us/query\n", v/q, n/q, c/q/1000 }'
# Each call by name, then all of them (raw_syscalls), which shows any
# call not in the list as a difference.
[ -z "${PROFILE:-}${PLAIN:-}" ] && awk -F, -v q=$q '$1 ~ /^[0-9]+$/ && $1 > 0 {sub("syscalls:sys_enter_", "", $3); sub("raw_syscalls:sys_enter", "all", $3); printf "  %-20s %9d  %.3f/query\n", $3, $1, $1/q}' ./perf.out
exit 0
