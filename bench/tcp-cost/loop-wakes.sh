#!/bin/bash
# loop-wakes.sh PID PORT RATE [QUERYFILE]: a running Heron (PID) asked over TCP at
# 127.0.0.1:PORT by dnsperf (100 connections, RATE queries a second, 12 s);
# prints per answered query, over 10 s of the run:
# syscalls, epoll_wait calls, epoll_wait that returned 0 events, futex, context switches (perf),
# voluntary/involuntary (/proc), CPU microseconds (utime+stime, /proc/PID/stat)
PID=$1; PORT=$2; RATE=$3; QF=${4:-q.txt}
ctx() { cat /proc/$PID/task/*/status | awk '/^voluntary/{v+=$2} /^nonvoluntary/{n+=$2} END{print v, n}'; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
dnsperf -s 127.0.0.1 -p $PORT -m tcp -c 100 -Q $RATE -l 12 -d $QF > /tmp/dp.$PORT.out 2>&1 &
DP=$!
sleep 1
read v0 n0 < <(ctx); c0=$(cpu)
perf stat -p $PID -e 'raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex' \
  -e syscalls:sys_exit_epoll_wait --filter 'ret == 0' -x, -o /tmp/perf.$PORT.out -- sleep 10
read v1 n1 < <(ctx); c1=$(cpu)
wait $DP
q=$(awk '/Queries per second/{print $4}' /tmp/dp.$PORT.out)
awk -F, -v q=$q -v vol=$((v1-v0)) -v inv=$((n1-n0)) -v cpu=$((c1-c0)) -v hz=$(getconf CLK_TCK) '$1 ~ /^[0-9]/ {c[$3]=$1/(q*10)} END {printf "qps %.0f syscalls %.3f epoll_wait %.3f (empty %.3f) futex %.3f ctx %.3f vol %.3f invol %.3f cpu_us %.1f\n", q, c["raw_syscalls:sys_enter"], c["syscalls:sys_enter_epoll_wait"], c["syscalls:sys_exit_epoll_wait"], c["syscalls:sys_enter_futex"], c["context-switches"], vol/(q*10), inv/(q*10), cpu/hz*1e6/(q*10)}' /tmp/perf.$PORT.out
