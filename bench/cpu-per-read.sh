#!/bin/bash
# CPU per batched read of the data node process(es) and of the bench
# client (design 0006, docs/benchmarks.md): user + system time from /proc
# over one read phase against a running cluster, divided by the reads.
#
# usage: bench/cpu-per-read.sh MGMD_PORT RECORDS [bench keylookup arguments]
#   e.g. bench/cpu-per-read.sh 11860 1000000 --duration 5 --threads 4 --inflight 64
# env:   TESSERA (binary; default target/release/tessera)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
port=$1; records=$2; shift 2
nodes=$(pgrep -f "node --mgmd 127.0.0.1:$port" | tr '\n' ' ')
[ -n "$nodes" ] || { echo "no data node of mgmd port $port running" >&2; exit 1; }
cpu() { local sum=0; for pid in "$@"; do sum=$((sum + $(awk '{print $14 + $15}' /proc/$pid/stat))); done; echo $sum; }
out=$(mktemp)
before=$(cpu $nodes)
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases read \
  --ops-per-txn 1 --json "$@" > "$out" &
bench=$!
client=0
while kill -0 $bench 2> /dev/null; do
  client=$(awk '{print $14 + $15}' /proc/$bench/stat 2> /dev/null || echo $client)
  sleep 0.05
done
wait $bench
after=$(cpu $nodes)
python3 - "$out" "$before" "$after" "$client" "$(getconf CLK_TCK)" <<'EOP'
import json, sys
report, before, after, client, hz = sys.argv[1], *map(int, sys.argv[2:6])
read = json.load(open(report))["phases"]["read"]
ops = read["operations"]
print(f'{read["ops_per_sec"]:.0f} reads/s, data node {(after - before) / hz / ops * 1e6:.2f} us/read, '
      f'client {client / hz / ops * 1e6:.2f} us/read (with its start), p50 {read["p50_us"]} us')
EOP
rm -f "$out"
