#!/bin/bash
# Data node instructions per batched key read (design 0006,
# docs/benchmarks.md): one data node under valgrind --tool=callgrind with
# instrumentation off, 20,000 rows inserted and read once, the first local
# checkpoint let finish, then instrumentation on for two read passes
# (40,000 single-operation reads, 2 threads x 64 in flight) and the total
# divided.
#
# usage: bench/callgrind-read.sh [THREADS_LINES]   e.g. 'ldm = 1\ntc = 1\ntc_on_ldm = true'
# env:   TESSERA (binary; default target/release/tessera), PORT, WORK
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
threads=${1:-'ldm = 2\ntc = 1'}
port=${PORT:-48600}
work=${WORK:-/tmp/tessera-callgrind-read}
command -v valgrind > /dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"; cd "$work"
. "$here/bench/cluster.sh"
secret_line=$(cluster_secret "$tessera" "$work")
printf '[mgmd]\nnode_id = 1\nhost = "127.0.0.1"\nport = %d\n\n[cluster]\nreplicas = 1\ndata_memory = "512M"\n%s\n\n[threads]\n%b\n\n[[data_node]]\nid = 2\nhost = "127.0.0.1"\nport = %d\ndata_dir = "node2"\n' \
  "$port" "$secret_line" "$threads" $((port + 2)) > config.toml
"$tessera" mgmd --config config.toml > mgmd.log 2>&1 & mgmd=$!
sleep 0.5
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
  "$tessera" node --mgmd 127.0.0.1:$port --node-id 2 --initial > node.log 2>&1 & node=$!
trap 'kill $node $mgmd 2> /dev/null || true' EXIT
for _ in $(seq 1 240); do
  "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2> /dev/null | python3 -c '
import json, sys
n = [x for x in json.load(sys.stdin)["nodes"] if x.get("type") == "data"]
sys.exit(0 if n and all(x.get("state") == "started" for x in n) else 1)' 2> /dev/null && break
  sleep 1
done
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records 20000 --phases insert,read \
  --threads 2 --inflight 32 --ops-per-txn 1 > /dev/null
sleep 8   # the first local checkpoint
callgrind_control -i on $node > /dev/null
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records 20000 --phases read,read \
  --threads 2 --inflight 64 --ops-per-txn 1 | grep -E "^read"
callgrind_control -i off $node > /dev/null; callgrind_control -d $node > /dev/null; sleep 1
total=$(callgrind_annotate "$work"/cg.out.1 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$total instructions, $((total / 40000)) per read (profile: $work/cg.out.1)"
