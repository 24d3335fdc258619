#!/usr/bin/env bash
# Node restart time against data size and change since the node died
# (docs/design/0018-node-restart.md; docs/benchmarks.md): 2 data nodes,
# replicas 2, 2 ldm threads each. For each case: load ROWS rows (bench
# keylookup insert), kill -9 node 3, update PERCENT% of the rows through
# node 2 while it is down, start node 3 again (from its files; the last
# case with --initial) and time it from the start to `started`, split by
# phase (the node logs each phase's start), with what its ldms copied
# (rows, bytes, milliseconds). A read load runs on node 2 meanwhile: its
# reads per second with node 3 down before the restart, and during the
# copy.
#
#   ROWS=1000000 PERCENTS="1 10 100" bench/node-restart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -j2 -q
tessera=$PWD/target/release/tessera
rows=${ROWS:-1000000}
percents=${PERCENTS:-"1 10 100"}
memory=${DATA_MEMORY:-4G}
port=${PORT:-23860}
pids=()
source bench/cluster.sh
trap cluster_kill EXIT

node3_state() {
  "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2> /dev/null | python3 -c '
import json, sys
node = [n for n in json.load(sys.stdin)["nodes"] if n.get("type") == "data" and n["id"] == 3]
print(node[0].get("state") if node else "")'
}

reads() {
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$rows" --phases read \
    --threads 2 --inflight 4 --duration "$1" --json
}

echo "rows changed_percent start start_to_started_s restore_s join_gci_s copy_s checkpoint_s record_gci_s copied_rows copied_mb copy_ms reads_per_s_before reads_per_s_during_copy"
for case in $percents initial; do
  dir=$(mktemp -d /tmp/tessera-node-restart.XXXXXX)
  cluster_start "$tessera" "$dir" 2 2 'ldm = 2\ntc = 2' "$memory"
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
  reads 5 > "$dir/reads-before.json"
  # Long enough to span the copy (at well under 1 M rows/s) and more.
  reads $((rows / 250000 + 15)) > "$dir/reads-during.json" &
  reader=$!
  start=$(date +%s.%N)
  "$tessera" node --no-angel --mgmd 127.0.0.1:$port --node-id 3 "${args[@]}" \
    >> "$dir/node3.log" 2>&1 &
  pids+=($!)
  copy_from="" copy_to=""
  until [ "$(node3_state)" = started ]; do
    now=$(date +%s.%N)
    if [ -z "$copy_from" ] && grep -q "phase copy data" "$dir/node3.log"; then copy_from=$now; fi
    if [ -z "$copy_to" ] && grep -q "phase local checkpoint" "$dir/node3.log"; then copy_to=$now; fi
    sleep 0.05
  done
  end=$(date +%s.%N)
  wait "$reader"
  python3 - "$dir" "$rows" "$percent" "$case" "$start" "$end" "${copy_from:-$start}" "${copy_to:-$end}" <<'EOF'
import json, re, sys
dir, rows, percent, case, start, end, copy_from, copy_to = sys.argv[1:]
log = open(f"{dir}/node3.log").read()
copied = [tuple(map(int, m)) for m in re.findall(
    r"node restart: copied (\d+) rows \((\d+) bytes\) from the primaries in (\d+) ms", log)]
rows_copied = sum(c[0] for c in copied)
mb = sum(c[1] for c in copied) / 1e6
ms = max((c[2] for c in copied), default=0)
# Each phase's start, in seconds since the node's threads began.
at = {name: float(t) for name, t in re.findall(r"node restart: phase ([a-zA-Z ]+) \(at ([\d.]+) s\)", log)}
started = float(re.findall(r"started, serving \(at ([\d.]+) s\)", log)[-1])
def span(a, b):
    return at.get(b, started) - at.get(a, started)
restore = span("restart GCI", "global checkpoint")
join = span("global checkpoint", "copy data")
copy = span("copy data", "local checkpoint")
checkpoint = span("local checkpoint", "record GCI")
record = started - at.get("record GCI", started)
def ops_per_s(path, window=None):
    phase = next(iter(json.load(open(path))["phases"].values()))
    if window is None:
        return phase["ops_per_sec"]
    begin = phase["started_unix_ms"] / 1000
    buckets = phase["transactions_per_100ms"]
    first, last = (int((t - begin) * 10) for t in window)
    chosen = buckets[max(first, 0):max(last, first + 1)]
    ops_per_txn = phase["operations"] / max(phase["transactions"], 1)
    return sum(chosen) * ops_per_txn / (len(chosen) / 10) if chosen else 0
before = ops_per_s(f"{dir}/reads-before.json")
during = ops_per_s(f"{dir}/reads-during.json", (float(copy_from), float(copy_to)))
kind = "--initial" if case == "initial" else "files"
print(f"{rows} {percent} {kind} {float(end) - float(start):.1f} {restore:.2f} {join:.2f} "
      f"{copy:.2f} {checkpoint:.2f} {record:.2f} {rows_copied} {mb:.1f} {ms} "
      f"{before:.0f} {during:.0f}")
EOF
  cluster_kill
  rm -rf "$dir"
done
