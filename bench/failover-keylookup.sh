#!/bin/bash
# Committed transactions per 100 ms around a data node's SIGKILL under a
# steady `tessera bench keylookup` load (docs/benchmarks.md, "Failover"):
# a 2-data-node cluster with replicas = 2 on loopback, default
# heartbeats, mgmd as the arbitrator. The rows are inserted first; then
# an update phase runs for DURATION seconds from THREADS client threads
# (INFLIGHT transactions in flight each) and the victim (node 2, the
# master, or VICTIM=3) is killed KILL_AFTER seconds into it. Writes
# OUT_DIR/failover-keylookup.json in the form bench/chart-failover.py
# reads (the update phase's series, the kill's time in it) and prints
# the phase's report.
#
# usage: bench/failover-keylookup.sh
# env:   TESSERA, WORK, OUT_DIR, PORT, VICTIM (2 or 3), RECORDS,
#        THREADS, INFLIGHT, DURATION, KILL_AFTER
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/cluster.sh"
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-failover-keylookup}
out_dir=${OUT_DIR:-$work}
port=${PORT:-47700}
victim=${VICTIM:-2}
records=${RECORDS:-20000}
threads=${THREADS:-4}
inflight=${INFLIGHT:-8}
duration=${DURATION:-8}
kill_after=${KILL_AFTER:-3}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }
pids=()
trap cluster_kill EXIT
mkdir -p "$out_dir"
rm -rf "$work/cluster"
cluster_start "$tessera" "$work/cluster" 2 2 'ldm = 2\ntc = 1' 256M
victim_pid=$(data_node_pid "$tessera" "$victim")
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert \
  --threads "$threads" --inflight "$inflight" > /dev/null
"$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases update \
  --duration "$duration" --threads "$threads" --inflight "$inflight" --json > "$work/update.json" &
load=$!
sleep "$kill_after"
kill_unix_ms=$(date +%s%3N)
kill -9 "$victim_pid"
wait "$load"
python3 - "$work/update.json" "$kill_unix_ms" "$out_dir/failover-keylookup.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
phase = report["phases"]["update"]
kill_at_ms = int(sys.argv[2]) - phase["started_unix_ms"]
series = phase["transactions_per_100ms"]
json.dump({"commits_per_100ms": series, "kill_at_ms": kill_at_ms},
          open(sys.argv[3], "w"))
print(f"update phase: {phase['transactions']} transactions in {phase['elapsed_s']:.1f} s, "
      f"{phase['errors']} errors {phase['errors_by_code']}; node killed at {kill_at_ms} ms")
PY
