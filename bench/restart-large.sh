#!/bin/bash
# System restart of a large data set (design 0005): load RECORDS rows into one
# data node (replicas = 1), let the LCPs settle, kill -9 the node, drop the
# page cache, restart it and time each restore phase; then read the same
# LCP and redo files sequentially (page cache dropped again) to see how
# close the restart comes to the I/O limit. Optionally verifies every row.
#
# usage: bench/restart-large.sh [RECORDS] [DATA_MEMORY]
# env:   TESSERA (binary), WORK (scratch dir), VERIFY=1 (read every row back),
#        INDEXES (ordered indexes on the table besides the primary key's,
#        0 to 3; the restore rebuilds them from the rows), SETTLE (seconds
#        the LCPs get after the load, default 60)
# Needs root (drop_caches). Check memory (free -g) and disk (df -h) first:
# about 300 bytes of DataMemory and 250 bytes of disk per 100-byte row.
set -euo pipefail
records=${1:-40000000}
memory=${2:-14G}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/cluster.sh"
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-restart-bench}
port=${PORT:-47400}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
secret_line=$(cluster_secret "$tessera" "$work")
cat > "$work/config.toml" <<EOC
[mgmd]
node_id = 1
host = "127.0.0.1"
port = $port

[cluster]
replicas = 1
data_memory = "$memory"
redo_log_file_size = "64M"
$secret_line

[threads]
ldm = 2
tc = 1

[[data_node]]
id = 2
host = "127.0.0.1"
port = $((port + 1))
data_dir = "node2"
EOC
started() {
  "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2>/dev/null | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
print(all(n.get("state") == "started" for n in nodes if n.get("type") == "data"))' 2>/dev/null || echo False
}
wait_started() { for _ in $(seq 1 3600); do [ "$(started)" = True ] && return; sleep 0.1; done; echo "node did not start" >&2; exit 1; }
"$tessera" mgmd --config "$work/config.toml" > "$work/mgmd.log" 2>&1 &
mgmd=$!
trap 'kill $mgmd 2>/dev/null; kill -9 ${node:-0} 2>/dev/null || true' EXIT
sleep 1
"$tessera" node --mgmd 127.0.0.1:$port --node-id 2 --initial > "$work/node-load.log" 2>&1 &
node=$!
wait_started
load_start=$(date +%s.%N)
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert \
  --inflight 32 --threads 4 --indexes "${INDEXES:-0}" > "$work/insert.log"
load_end=$(date +%s.%N)
sleep "${SETTLE:-60}" # the LCPs of the last inserts complete
"$tessera" mgm --mgmd 127.0.0.1:$port -e "all report checkpoints" --json > "$work/checkpoints.json"
kill -9 $node; wait $node 2>/dev/null || true
sync; echo 3 > /proc/sys/vm/drop_caches
lcp_bytes=$(du -sb "$work/node2/lcp" | cut -f1)
redo_bytes=$(du -sb "$work/node2/redo" | cut -f1)
restart_start=$(date +%s.%N)
"$tessera" node --mgmd 127.0.0.1:$port --node-id 2 > "$work/node-restart.log" 2>&1 &
node=$!
wait_started
restart_end=$(date +%s.%N)
if [ "${VERIFY:-0}" = 1 ]; then
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --verify-only \
    --threads 4 --inflight 32 --indexes "${INDEXES:-0}" > "$work/verify.log"
fi
kill -9 $node; wait $node 2>/dev/null || true
sync; echo 3 > /proc/sys/vm/drop_caches
read_start=$(date +%s.%N)
find "$work/node2/lcp" "$work/node2/redo" -type f -print0 | xargs -0 cat > /dev/null
read_end=$(date +%s.%N)
python3 - "$records" "$load_start" "$load_end" "$restart_start" "$restart_end" "$read_start" "$read_end" \
  "$lcp_bytes" "$redo_bytes" "$work" <<'EOP'
import json, sys, re
records = int(sys.argv[1]); ls, le, rs, re_, qs, qe = map(float, sys.argv[2:8])
lcp, redo = int(sys.argv[8]), int(sys.argv[9]); work = sys.argv[10]
restart = re_ - rs; read = qe - qs
print(f"records {records:,}; load {le - ls:.1f} s; LCP files {lcp / 1e9:.2f} GB, redo files {redo / 1e9:.2f} GB")
print(f"kill -9 to started (page cache dropped): {restart:.1f} s")
print(f"sequential read of the same files (page cache dropped): {read:.1f} s "
      f"({(lcp + redo) / read / 1e6:.0f} MB/s); restart / read = {restart / read:.2f}")
for line in open(f"{work}/node-restart.log"):
    if ": " in line and " ms, " in line:
        print("  " + line.strip())
cp = json.load(open(f"{work}/checkpoints.json"))["nodes"][0]
print(f"before the kill: live {cp['live_data_bytes'] / 1e9:.2f} GB, checkpoint files "
      f"{cp['checkpoint_disk_bytes'] / 1e9:.2f} GB, LCP bytes written during the load "
      f"{cp['lcp_bytes_written'] / 1e9:.1f} GB, {cp['lcp_count']} LCPs")
EOP
if [ "${VERIFY:-0}" = 1 ]; then tail -3 "$work/verify.log"; fi
