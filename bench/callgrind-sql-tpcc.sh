#!/bin/bash
# The SQL node's instructions per TPC-C transaction and per statement,
# counted by callgrind: a figure that repeats from run to run within a
# few percent, where tpmC on this shared 2-core VM moves by ten (docs/
# benchmarks.md "The SQL node's instructions per transaction").
#
# Two data nodes (replicas 2) and a normal SQL node load 1 warehouse;
# the SQL node is then restarted under `valgrind --tool=callgrind` (one
# event loop) and `tessera bench tpcc --prepared --batching` runs 4
# connections for 80 s. Instructions are counted for 50 s in the middle
# of the run only (not the load, the start-up or the consistency check
# after the run), and divided by the transactions (Com_commit +
# Com_rollback) and statements (Questions) the SQL node counted in the
# same window. Only user-space instructions of the SQL node: the kernel's
# work (sends, wake-ups) and the data nodes are not in the figure.
#
# usage: bench/callgrind-sql-tpcc.sh [TESSERA_BINARY]
# env:   WORK (scratch dir; /tmp/callgrind-sql-tpcc), PORT (29300)
# Leaves WORK/callgrind.out.1 for callgrind_annotate.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${1:-$here/target/release/tessera}
work=${WORK:-/tmp/callgrind-sql-tpcc}
port=${PORT:-29300}
sql_port=$((port + 50))
for tool in valgrind callgrind_control mariadb; do
  command -v $tool > /dev/null || { echo "needs $tool (apt-get install valgrind mariadb-client)" >&2; exit 1; }
done
rm -rf "$work"
mkdir -p "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"/cluster/node*/
}
trap cleanup EXIT
wait_for_sql() {
  for _ in $(seq 1 600); do (exec 3<> "/dev/tcp/127.0.0.1/$sql_port") 2> /dev/null && return; sleep 0.5; done
  echo "the SQL node did not listen on $sql_port" >&2
  exit 1
}

source "$here/bench/cluster.sh"
cluster_start "$tessera" "$work/cluster" 2 2 "ldm = 1\ntc = 1\ntc_on_ldm = true" 2G
"$tessera" sql --mgmd 127.0.0.1:$port --port $sql_port > "$work/sql.log" 2>&1 &
loader=$!
wait_for_sql
"$tessera" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses 1 --load --duration 0 > "$work/load.log" 2>&1
kill $loader
wait $loader 2> /dev/null || true

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --instr-atstart=no \
  "$tessera" sql --mgmd 127.0.0.1:$port --port $sql_port --threads 1 > "$work/sql-callgrind.log" 2>&1 &
pids+=($!)
wait_for_sql
# Warm: statements prepared, pools filled.
"$tessera" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses 1 --duration 5 --connections 4 \
  --prepared --batching --json > "$work/warm.json"
status() {
  mariadb -h127.0.0.1 -P$sql_port -uroot -N -e "SHOW GLOBAL STATUS" |
    awk '$1 == "Com_commit" || $1 == "Com_rollback" {t += $2} $1 == "Questions" {q = $2} END {print t, q}'
}
"$tessera" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses 1 --duration 80 --connections 4 \
  --prepared --batching --json > "$work/run.json" &
bench=$!
sleep 8
read -r transactions_before statements_before < <(status)
callgrind_control -i on > /dev/null 2>&1
sleep 50
callgrind_control -i off > /dev/null 2>&1
read -r transactions_after statements_after < <(status)
callgrind_control -d > /dev/null 2>&1
wait $bench
sleep 2
python3 - "$work/callgrind.out.1" $((transactions_after - transactions_before)) \
  $((statements_after - statements_before)) << 'EOF'
import re, sys
total = int(re.search(r"^totals: (\d+)", open(sys.argv[1]).read(), re.M).group(1))
transactions, statements = int(sys.argv[2]), int(sys.argv[3])
print(f"SQL node instructions: {total / transactions:,.0f} per transaction, "
      f"{total / statements:,.0f} per statement ({total:,} over {transactions} transactions, "
      f"{statements} statements)")
EOF
