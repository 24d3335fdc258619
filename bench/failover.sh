#!/bin/bash
# Failover time (docs/benchmarks.md, "Failover"): a 2-data-node cluster
# with replicas = 2 on loopback, default heartbeats (250 ms, 4 missed),
# mgmd as the arbitrator; `tessera bench failover` keeps one-row writes
# going from 4 client threads and SIGKILLs one data node 3 s in (with
# SIGNAL=STOP it SIGSTOPs it instead: no link breaks, so the heartbeats
# must find it). Each run
# prints how long after the kill the first transaction started after it
# committed; RUNS runs for the master (node 2, the president: the GCI
# switch and take-overs move) and RUNS for the other node, then min,
# median and max of each. The last run of each also writes its commits
# per 100 ms to OUT_DIR/failover-{master,other}-SIGNAL.json (for
# bench/chart-failover.py).
#
# usage: bench/failover.sh [RUNS]
# env:   TESSERA (binary, default target/release/tessera), WORK (scratch
#        dir), OUT_DIR (default WORK), PORT (mgmd's port), SIGNAL (KILL
#        or STOP)
set -euo pipefail
runs=${1:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/cluster.sh"
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-failover-bench}
out_dir=${OUT_DIR:-$work}
port=${PORT:-47600}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }
pids=()
trap cluster_kill EXIT
mkdir -p "$out_dir"

for role in master other; do
  victim=2; [ "$role" = other ] && victim=3
  times=()
  for run in $(seq 1 "$runs"); do
    rm -rf "$work/cluster"
    cluster_start "$tessera" "$work/cluster" 2 2 'ldm = 2\ntc = 1' 256M
    json=$("$tessera" bench failover --mgmd 127.0.0.1:$port --kill-pid "$(data_node_pid "$tessera" $victim)" \
      --signal "${SIGNAL:-KILL}" --json)
    cluster_kill
    ms=$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["failover_ms"] if r["failover_ms"] is not None else "none")' "$json")
    echo "$role run $run: first new commit ${ms} ms after the kill"
    times+=("$ms")
    [ "$run" = "$runs" ] && echo "$json" > "$out_dir/failover-$role-${SIGNAL:-KILL}.json"
  done
  python3 - "$role" "${times[@]}" <<'PY'
import statistics, sys
role, values = sys.argv[1], sys.argv[2:]
numbers = sorted(float(v) for v in values if v != "none")
missing = len(values) - len(numbers)
summary = (f"min {numbers[0]:.0f} ms, median {statistics.median(numbers):.0f} ms, "
           f"max {numbers[-1]:.0f} ms over {len(numbers)} runs" if numbers else "no run")
print(f"{role}: {summary}" + (f" ({missing} with no commit after the kill)" if missing else ""))
PY
done
