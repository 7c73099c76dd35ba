#!/bin/bash
# Heron with [metrics] on and /metrics scraped every second, for the
# suite's paired A/B against the same build with it off:
#   HERON_ON_BIN=target/release/heron target/release/heron-bench run --paired-only \
#     --heron bench/metrics-cost/heron-metrics-on.sh --baseline target/release/heron \
#     --servers heron --workloads small --sched nice --pairs 30
if [ "$1" = serve ]; then
  for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = --config ]; then j=$((i + 1)); config=${!j}; fi
  done
  if [ -n "$config" ]; then
    port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    printf '\n[metrics]\nlisten = "127.0.0.1:%s"\n' "$port" >> "$config"
    me=$$
    (while kill -0 $me 2>/dev/null; do sleep 1; curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; done) &
  fi
fi
exec "${HERON_ON_BIN:-target/release/heron}" "$@"
