#!/bin/bash
# LCP write volume and checkpoint size against recovery_work
# (docs/design/0005-partial-lcp.md).
#
# For each recovery_work setting: a fresh one-node cluster (replicas = 1),
# RECORDS rows inserted, then a steady update load of RATE rows/s for
# SECONDS; `all report checkpoints --json` before and after the update load
# gives LCP bytes written per changed-row byte over the window, and at the
# end checkpoint files on disk over live data. Prints one table, with seed
# 003's predictions beside the measured figures.
#
# usage: bench/lcp-recovery-work.sh [RECORDS] [RATE] [SECONDS]
# env:   TESSERA (binary; default target/release/tessera), SETTINGS ("25 50 100"),
#        WORK (scratch directory; default /tmp/tessera-lcp-bench)
set -euo pipefail
records=${1:-1000000}
rate=${2:-20000}
seconds=${3:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/cluster.sh"
tessera=${TESSERA:-$here/target/release/tessera}
settings=${SETTINGS:-"25 50 100"}
work=${WORK:-/tmp/tessera-lcp-bench}
port=${PORT:-47300}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }

report() { "$tessera" mgm --mgmd 127.0.0.1:$port -e "all report checkpoints" --json; }
started() {
  "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2>/dev/null | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
print(all(n.get("state") == "started" for n in nodes if n.get("type") == "data"))' 2>/dev/null || echo False
}

results=()
for work_setting in $settings; do
  dir=$work/rw$work_setting
  rm -rf "$dir"; mkdir -p "$dir"
  secret_line=$(cluster_secret "$tessera" "$dir")
  cat > "$dir/config.toml" <<EOC
[mgmd]
node_id = 1
host = "127.0.0.1"
port = $port

[cluster]
replicas = 1
data_memory = "2G"
recovery_work = $work_setting
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
  "$tessera" mgmd --config "$dir/config.toml" > "$dir/mgmd.log" 2>&1 &
  mgmd=$!
  sleep 1
  "$tessera" node --mgmd 127.0.0.1:$port --node-id 2 --initial > "$dir/node2.log" 2>&1 &
  node=$!
  for _ in $(seq 1 240); do [ "$(started)" = True ] && break; sleep 0.5; done
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert > "$dir/insert.log"
  sleep 20 # the insert load's LCPs settle
  report > "$dir/before.json"
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases update \
    --duration "$seconds" --rate "$rate" > "$dir/update.log"
  sleep 20 # the LCPs of the last changes complete
  report > "$dir/after.json"
  kill "$node" "$mgmd"; wait "$node" "$mgmd" 2>/dev/null || true
  du_bytes=$(du -sb "$dir/node2/lcp" | cut -f1)
  results+=("$(python3 - "$dir/before.json" "$dir/after.json" "$work_setting" "$du_bytes" <<'EOP'
import json, sys
before = json.load(open(sys.argv[1]))["nodes"][0]
after = json.load(open(sys.argv[2]))["nodes"][0]
setting = int(sys.argv[3]); du = int(sys.argv[4])
written = after["lcp_bytes_written"] - before["lcp_bytes_written"]
changed = after["changed_row_bytes"] - before["changed_row_bytes"]
lcps = after["lcp_count"] - before["lcp_count"]
live = after["live_data_bytes"]
disk = after["checkpoint_disk_bytes"]
seed = {25: (4.0, 1.35), 50: (3.0, 1.6), 100: (2.0, 2.1)}.get(setting, (0, 0))
print(f"| {setting} | {lcps} | {changed/1e6:.0f} | {written/1e6:.0f} | {written/max(changed,1):.2f} | {seed[0]:.1f} "
      f"| {live/1e6:.0f} | {disk/1e6:.0f} | {disk/max(live,1):.2f} | {du/max(live,1):.2f} | {seed[1]:.2f} |")
EOP
)")
done
echo "records $records, update rate $rate rows/s for $seconds s, 1 data node, replicas 1, 2 ldm threads"
echo "| recovery_work | LCPs | changed MB | LCP MB written | written/changed | seed 003 | live MB | checkpoint MB | disk/live | du/live | seed 003 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${results[@]}"
