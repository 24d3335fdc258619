#!/usr/bin/env bash
# Node restart time against data size and change since the node died
# (docs/design/0018-node-restart.md; docs/benchmarks.md): 2 data nodes,
# replicas 2, 2 ldm threads each. For each case: load ROWS rows (bench
# keylookup insert), kill -9 node 3, update PERCENT% of the rows through
# node 2 while it is down, start node 3 again (from its files; the last
# case with --initial) and time it from the start to `started`, with
# what its ldms copied (rows, bytes, milliseconds) from its log.
#
#   ROWS=1000000 PERCENTS="1 10 100" bench/node-restart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -j2 -q
tessera=$PWD/target/release/tessera
rows=${ROWS:-1000000}
percents=${PERCENTS:-"1 10 100"}
port=${PORT:-23860}
pids=()
source bench/cluster.sh
trap cluster_kill EXIT

started_ms() {
  "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2> /dev/null | python3 -c '
import json, sys
node = [n for n in json.load(sys.stdin)["nodes"] if n.get("type") == "data" and n["id"] == 3]
sys.exit(0 if node and node[0].get("state") == "started" else 1)'
}

echo "rows changed_percent restart start_to_started_s copied_rows copied_mb copy_ms"
for case in $percents initial; do
  dir=$(mktemp -d /tmp/tessera-node-restart.XXXXXX)
  cluster_start "$tessera" "$dir" 2 2 'ldm = 2\ntc = 2' 4G
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$rows" --phases insert \
    --inflight 32 > "$dir/load.log"
  # Every row in a complete GCI on both nodes' disks.
  sleep 4
  victim=$(data_node_pid "$tessera" 3)
  kill -9 "$victim"
  for _ in $(seq 1 100); do
    grep -q "without {3}" "$dir/node2.log" && break
    sleep 0.1
  done
  if [ "$case" = initial ]; then
    percent=0
    args=(--initial)
  else
    percent=$case
    args=()
  fi
  changed=$((rows * percent / 100))
  if [ "$changed" -gt 0 ]; then
    "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$changed" --phases update \
      --inflight 32 > "$dir/update.log"
  fi
  start=$(date +%s.%N)
  "$tessera" node --no-angel --mgmd 127.0.0.1:$port --node-id 3 "${args[@]}" \
    >> "$dir/node3.log" 2>&1 &
  pids+=($!)
  until started_ms; do sleep 0.05; done
  end=$(date +%s.%N)
  python3 - "$dir/node3.log" "$rows" "$percent" "$case" "$start" "$end" <<'EOF'
import re, sys
log, rows, percent, case, start, end = sys.argv[1:]
copied = [tuple(map(int, m)) for m in re.findall(
    r"node restart: copied (\d+) rows \((\d+) bytes\) from the primaries in (\d+) ms", open(log).read())]
rows_copied = sum(c[0] for c in copied)
mb = sum(c[1] for c in copied) / 1e6
ms = max((c[2] for c in copied), default=0)
kind = "--initial" if case == "initial" else "files"
print(f"{rows} {percent} {kind} {float(end) - float(start):.1f} {rows_copied} {mb:.1f} {ms}")
EOF
  cluster_kill
  rm -rf "$dir"
done
