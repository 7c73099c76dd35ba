#!/bin/bash
# burst.sh heron|knot HERON_BIN CONNS BURST ROUNDS
kind=$1; heron=$2
here=$(dirname "$(readlink -f "$0")")
# Knot's configuration names /tmp/tcpcost for its state; both zone files
# are the cost matrix's root zone (`heron-bench run --data /work/matrix-data`).
mkdir -p /tmp/tcpcost/heron /tmp/tcpcost/knot && cd /tmp/tcpcost
cp "$here/heron.toml" heron/ && cp "$here/knot.conf" knot/
if [ $kind = heron ]; then port=5391; taskset -c 0 nice -n -20 $heron serve --config heron/heron.toml >heron/log 2>&1 &
else port=5392; taskset -c 0 nice -n -20 /usr/sbin/knotd -c knot/knot.conf >knot/log 2>&1 & fi
pid=$!
for i in $(seq 50); do dig +short +tries=1 +time=1 @127.0.0.1 -p $port . SOA >/dev/null 2>&1 && break; sleep 0.2; done
echo -n "$kind ($(basename $heron)): "; taskset -c 1 python3 "$here/burst.py" $port $pid $3 $4 $5
kill $pid; wait $pid 2>/dev/null
