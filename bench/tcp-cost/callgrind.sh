#!/bin/bash
# callgrind.sh HERON_BIN [CONNS] [RATE] [SECONDS]
# User-space instructions per answered query of Heron's TCP path, paced
# as the matrix's low-rate cell (blast --tcp CONNS --in-flight 1) but slow
# enough (RATE, default 500 q/s) that each query still comes alone under
# callgrind: what one wake costs Heron in user space. Prints the total and
# the top functions (inclusive) per query; KEEP=FILE keeps the profile.
set -eu
bin=$1; conns=${2:-100}; rate=${3:-500}; secs=${4:-10}
bench=${BENCH:-/work/bench-bin/heron-bench-final3}
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d); port=5395
sed "s/5391/$port/" "$here/heron.toml" > $dir/heron.toml
valgrind --tool=callgrind --callgrind-out-file=$dir/cg.out $bin serve --config $dir/heron.toml > $dir/log 2>&1 &
pid=$!
for i in $(seq 1 300); do dig +short +time=1 +tries=1 -p $port @127.0.0.1 . SOA > /dev/null 2>&1 && break; sleep 0.5; done
sleep 1
callgrind_control -z $pid > /dev/null
$bench blast --target 127.0.0.1:$port --queries "${QUERIES:-/work/matrix-data/queries/root.txt}" --rate $rate --duration $secs --tcp $conns --in-flight 1 --cpus 1 > $dir/blast 2>&1
callgrind_control -d $pid > /dev/null
sleep 1
kill -TERM $pid; wait $pid || true
q=$(grep -o 'answered [0-9]* lost' $dir/blast | awk '{print $2}')
ir=$(grep -h "^totals:\|^summary:" $dir/cg.out.1 | head -1 | awk '{print $2}')
echo "$(basename $bin): $q answered, $ir instructions, $(python3 -c "print(round($ir/$q))")/query"
callgrind_annotate --inclusive=yes --threshold=99 $dir/cg.out.1 2>/dev/null | awk -v q=$q '/^ *[0-9,]+ \(/ {n=$1; gsub(",","",n); $1=""; $2=""; if (n/q >= 100) printf "  %8.0f %s\n", n/q, substr($0, 1, 140)}' | head -${TOP:-40}
[ -n "${KEEP:-}" ] && cp $dir/cg.out.1 "$KEEP"; rm -rf $dir
