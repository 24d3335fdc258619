#!/bin/bash
# Key lookups side by side with Redis on this machine
# (docs/design/0006-key-lookup-push.md).
#
# Redis (loopback, no persistence; then appendonly yes + appendfsync
# everysec): redis-benchmark GET and SET, 100-byte values, RECORDS random
# keys, pipelined (-P 64) and one request at a time (-P 1, one client).
# Tessera: `tessera bench keylookup` with RECORDS rows of 100 value bytes
# (25 INT columns) against (a) 1 data node, replicas = 1, and (b) 2 data
# nodes, replicas = 2, durability on: batched reads and updates (one
# operation per transaction, as each pipelined Redis command stands alone,
# 256 transactions in flight per thread, 4 threads (1,024 in all; redis-
# benchmark -P 64 with 50 clients keeps 3,200); the async API sends
# everything bound for a node in one write) and single-operation round
# trips (1 thread, 1 in flight). Prints one table with the Tessera/Redis ratios, and exits
# non-zero if any Tessera phase had an error or a read did not verify.
#
# usage: bench/keylookup-vs-redis.sh [RECORDS] [SECONDS]
# env:   TESSERA (binary; default target/release/tessera), WORK (scratch
#        dir), PORT (first port), OUT (also write the table there), CHART
#        (with OUT: draw the table as a PNG there, bench/chart-vs-redis.py,
#        needs matplotlib), THREADS_ONE / THREADS_TWO ([threads] lines)
set -euo pipefail
records=${1:-1000000}
seconds=${2:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-vs-redis}
port=${PORT:-47500}
redis_port=$((port + 50))
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }

if ! command -v redis-server > /dev/null || ! command -v redis-benchmark > /dev/null; then
  echo "installing redis-server and redis-tools" >&2
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get install -y -qq redis-server redis-tools > /dev/null
fi
rm -rf "$work"; mkdir -p "$work"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

# --- Redis -----------------------------------------------------------------
ops_pipelined=$((records * 4))
ops_single=$((seconds * 5000))
redis_up() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --dir "$work" "$@" \
    > "$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping > /dev/null 2>&1 && return; sleep 0.1; done
  echo "redis-server did not start" >&2; exit 1
}
redis_down() { redis-cli -p "$redis_port" shutdown nosave > /dev/null 2>&1 || true; wait "$redis_pid" 2> /dev/null || true; }
# redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
redis_bench() { # NAME TEST PIPELINE CLIENTS REQUESTS
  redis-benchmark -p "$redis_port" -t "$2" -d 100 -r "$records" -n "$5" -P "$3" -c "$4" --csv \
    | python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if r and r[0] != "test"]
rps, p50 = float(rows[0][1]), float(rows[0][4]) * 1000
print(f"{rps:.0f} {p50:.0f}")' > "$work/redis-$1"
}
redis_up --appendonly no
redis_bench set-p64 set 64 50 "$ops_pipelined"   # also fills the keys the GETs read
redis_bench get-p64 get 64 50 "$ops_pipelined"
redis_bench get-p1 get 1 1 "$ops_single"
redis_bench set-p1 set 1 1 "$ops_single"
redis_down
redis_up --appendonly yes --appendfsync everysec
redis_bench set-aof-p64 set 64 50 "$ops_pipelined"
redis_down

# --- Tessera ---------------------------------------------------------------
# Threads for this 2-core machine shared with the load generator (design
# 0006, docs/benchmarks.md): one data node runs one ldm thread with its tc
# on it (receive, block and send threads: the fewest hand-offs); two data nodes
# run two each, so that both nodes hold primaries (a table has ldm x node
# groups partitions), with the client's tc hint keeping each lookup on its
# ldm's thread. Override with THREADS_ONE / THREADS_TWO ("ldm = 2\ntc = 1").
threads_one=${THREADS_ONE:-'ldm = 1\ntc = 1\ntc_on_ldm = true'}
threads_two=${THREADS_TWO:-'ldm = 2\ntc = 2\ntc_on_ldm = true'}
. "$here/bench/cluster.sh"
cluster_up() { # NAME DATA_NODES REPLICAS THREADS
  cluster_start "$tessera" "$work/$1" "$2" "$3" "$4" 2G
}
cluster_down() { cleanup; pids=(); port=$((port + 10)); }
tessera_bench() { # CLUSTER NAME PHASE ARGS...
  local cluster=$1 dir=$work/$1 name=$2 phase=$3; shift 3
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases "$phase" \
    --json "$@" > "$dir/$name.json"
  python3 - "$dir/$name.json" "$phase" > "$work/tessera-$cluster-$name" <<'EOP'
import json, sys
report = json.load(open(sys.argv[1])); phase = report["phases"][sys.argv[2]]
if phase["errors"] or phase["mismatches"] or (sys.argv[2] == "read" and phase["verified"] != phase["operations"]):
    sys.exit(f"{sys.argv[1]}: {phase['errors']} errors, {phase['mismatches']} mismatches, "
             f"{phase['verified']} of {phase['operations']} verified")
print(f"{phase['ops_per_sec']:.0f} {phase['p50_us']}")
EOP
}
batched=(--threads 4 --inflight "${INFLIGHT:-256}" --ops-per-txn 1 --duration "$seconds")
single=(--threads 1 --inflight 1 --ops-per-txn 1 --duration "$seconds")
for shape in "one 1 1" "two 2 2"; do
  read -r name nodes replicas <<< "$shape"
  if [ "$name" = one ]; then threads=$threads_one; else threads=$threads_two; fi
  cluster_up "$name" "$nodes" "$replicas" "$threads"
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert \
    --threads 4 --inflight 32 > "$work/$name/insert.log"
  tessera_bench "$name" read-batched read "${batched[@]}"
  tessera_bench "$name" update-batched update "${batched[@]}"
  tessera_bench "$name" read-single read "${single[@]}"
  cluster_down
done

# --- Table -----------------------------------------------------------------
python3 - "$work" "$records" "$seconds" <<'EOP' | tee "${OUT:-/dev/null}"
import sys, os
work, records, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
def pair(name):
    ops, p50 = open(os.path.join(work, name)).read().split()
    return float(ops), float(p50)
rows = [
    ("batched reads, 1 node, replicas 1", "tessera-one-read-batched", "redis-get-p64", "GET -P 64", 1.0),
    ("batched reads, 2 nodes, replicas 2", "tessera-two-read-batched", "redis-get-p64", "GET -P 64", 0.8),
    ("batched updates, 2 nodes, replicas 2, durable", "tessera-two-update-batched", "redis-set-aof-p64", "SET -P 64, AOF everysec", 0.5),
    ("single reads, 1 node, replicas 1", "tessera-one-read-single", "redis-get-p1", "GET -P 1, 1 client", None),
    ("single reads, 2 nodes, replicas 2", "tessera-two-read-single", "redis-get-p1", "GET -P 1, 1 client", None),
]
print(f"{records} records, 100-byte values, {seconds} s per Tessera phase, client on the same cores")
print("| workload | Tessera ops/s | p50 us | Redis | Redis ops/s | p50 us | ops ratio | p50 ratio | target |")
print("|---|---:|---:|---|---:|---:|---:|---:|---|")
for label, ours, theirs, redis_label, target in rows:
    (o, op50), (r, rp50) = pair(ours), pair(theirs)
    goal = f">= {target}x ops" if target else "p50 <= 2x"
    print(f"| {label} | {o:,.0f} | {op50:,.0f} | {redis_label} | {r:,.0f} | {rp50:,.0f} | {o / r:.2f} | {op50 / max(rp50, 1):.2f} | {goal} |")
print(f"| (Redis SET -P 64, no persistence) | | | SET -P 64 | {pair('redis-set-p64')[0]:,.0f} | {pair('redis-set-p64')[1]:,.0f} | | | |")
print(f"| (Redis SET -P 1, 1 client) | | | SET -P 1 | {pair('redis-set-p1')[0]:,.0f} | {pair('redis-set-p1')[1]:,.0f} | | | |")
EOP
if [ -n "${CHART:-}" ] && [ -n "${OUT:-}" ]; then
  python3 "$here/bench/chart-vs-redis.py" "$OUT" "$CHART"
fi
