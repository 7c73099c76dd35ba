#!/bin/bash
# run-ab.sh SET...  (sets: example-udp example-tcp root-udp root-tcp mix40-udp big-udp)
# 3 runs per binary, alternating base/new; results appended to results.txt
cd "$(dirname "$0")"; repo=$(cd ../.. && pwd)
ex_zone=$repo/crates/heron/src/example.com.zone
ex_q=$repo/bench/metrics-cost/queries.txt
for set in "$@"; do
  case $set in
    example-udp) args=(udp example.com $ex_zone $ex_q 400);;
    example-tcp) args=(tcp example.com $ex_zone $ex_q 400);;
    root-udp)    args=(udp . data/root.zone data/queries/root-4k.txt 1);;
    root-tcp)    args=(tcp . data/root.zone data/queries/root-4k.txt 1);;
    mix40-udp)   args=(udp edge.test. data/edge.test.zone data/queries/mix40-4k.txt 1);;
    big-udp)     args=(udp big.test. data/big.test.zone data/queries/big-4k.txt 1);;
  esac
  for run in 1 2 3; do
    for b in base new; do
      echo "$set $(./cg-query.sh /tmp/heron-$b "${args[@]}" $run)" | tee -a results.txt
    done
  done
done
