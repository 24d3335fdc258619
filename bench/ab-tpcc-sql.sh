#!/bin/bash
# TPC-C through two SQL node setups side by side on one cluster, in one
# run, interleaved (A, B, A, B, ...), for "before and after" figures of a
# SQL node change (docs/benchmarks.md "TPC-C against MariaDB"): two data
# nodes with replicas 2 (one ldm with its tc on it each, as
# tpcc-vs-mariadb.sh), WAREHOUSES loaded once, then per round the SQL node
# is started from binary A, the mix run, the SQL node stopped, and the
# same for B. Only the SQL node changes, so the data nodes and the
# benchmark client are A's. B may also be A's binary run differently:
# B_ENV (e.g. LD_PRELOAD=...) and B_ARGS (e.g. "--threads 1").
#
# usage: bench/ab-tpcc-sql.sh BINARY_A BINARY_B [ROUNDS] [SECONDS] [CONNECTIONS]
#   e.g. bench/ab-tpcc-sql.sh /tmp/base/target/release/tessera target/release/tessera
# env:   WAREHOUSES (2), MODE_ARGS (tpcc's statement mode; default
#        "--prepared --batching"), PORT (mgmd's; 28900)
# Prints per run: tpmC, transactions, the SQL node's and the data nodes'
# CPU per transaction (from /proc), and New-Order's median.
set -euo pipefail
a=$1; b=$2; rounds=${3:-3}; seconds=${4:-20}; connections=${5:-16}
warehouses=${WAREHOUSES:-2}
mode_args=${MODE_ARGS:---prepared --batching}
port=${PORT:-28900}
sql_port=$((port + 50))
work=$(mktemp -d /tmp/ab-tpcc-sql.XXXXXX)
pids=()
sql_pid=""
cleanup() { for pid in "${pids[@]}" $sql_pid; do kill "$pid" 2> /dev/null || true; done
            wait 2> /dev/null || true; }
trap cleanup EXIT

. "$(dirname "$0")/cluster.sh"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start_sql() { # BINARY [ENV] [ARGS]: starts the SQL node, waits until it answers
  local binary=$1 env_args=${2:-} extra=${3:-}
  # shellcheck disable=SC2086
  env $env_args "$binary" sql --mgmd 127.0.0.1:$port --port $sql_port $extra \
    > "$work/sql.log" 2>&1 &
  sql_pid=$!
  for _ in $(seq 1 150); do
    # It listens once it has joined the cluster.
    (exec 3<> "/dev/tcp/127.0.0.1/$sql_port") 2> /dev/null && return
    sleep 0.2
  done
  echo "the SQL node from $binary did not answer" >&2
  exit 1
}

stop_sql() { kill "$sql_pid"; wait "$sql_pid" 2> /dev/null || true; sql_pid=""; }

cluster_start "$a" "$work/cluster" 2 2 "ldm = 1\ntc = 1\ntc_on_ldm = true" 4G
start_sql "$a"
"$a" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses "$warehouses" --load --duration 0 \
  > "$work/load.log" 2>&1
stop_sql
nodes=$(pgrep -f "node --no-angel --mgmd 127.0.0.1:$port" | tr '\n' ' ')

for round in $(seq 1 "$rounds"); do
  for side in A B; do
    if [ $side = A ]; then start_sql "$a"; else start_sql "$b" "${B_ENV:-}" "${B_ARGS:-}"; fi
    sql_before=$(cpu_ticks "$sql_pid")
    data_before=0; for node in $nodes; do data_before=$((data_before + $(cpu_ticks "$node"))); done
    # shellcheck disable=SC2086
    "$a" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses "$warehouses" \
      --duration "$seconds" --connections "$connections" $mode_args --json > "$work/run.json"
    sql_after=$(cpu_ticks "$sql_pid")
    data_after=0; for node in $nodes; do data_after=$((data_after + $(cpu_ticks "$node"))); done
    stop_sql
    python3 - "$work/run.json" "$side" "$round" $((sql_after - sql_before)) \
      $((data_after - data_before)) "$(getconf CLK_TCK)" <<'EOP'
import json, sys
report = json.load(open(sys.argv[1]))
side, round_, sql_ticks, data_ticks, hz = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
count = sum(t["count"] for t in report["transactions"].values())
print(f"{side} round {round_}: tpmC {report['tpmc']:,.0f}, {count} transactions, "
      f"SQL node {sql_ticks / hz * 1000 / count:.3f} ms CPU per transaction, "
      f"data nodes {data_ticks / hz * 1000 / count:.3f} ms, "
      f"New-Order p50 {report['transactions']['new_order']['p50_ms']:.1f} ms, "
      f"consistency {report['consistency']}")
EOP
  done
done
