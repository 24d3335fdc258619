#!/bin/bash
# Key lookups of two builds side by side, in one run, interleaved (A, B, A,
# B, ...), for "before and after" figures of a change (docs/benchmarks.md):
# batched reads, batched updates and single reads, on one data node
# (replicas 1) and on two (replicas 2), each build against its own cluster
# (its own wire format) and with its own bench client. Threads as in
# keylookup-vs-redis.sh (one ldm with its tc on it per node for one node,
# two for two nodes).
#
# usage: bench/ab-keylookup.sh BINARY_A BINARY_B [RECORDS] [SECONDS] [ROUNDS]
#   e.g. bench/ab-keylookup.sh /tmp/base/target/release/tessera target/release/tessera
# Prints one markdown table: per shape and phase, each round's ops/s of A
# and B, the medians and B/A.
set -euo pipefail
a=$1; b=$2; records=${3:-200000}; seconds=${4:-5}; rounds=${5:-3}
work=$(mktemp -d /tmp/ab-keylookup.XXXXXX)
port=${PORT:-12860}
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
            wait 2> /dev/null || true; pids=(); }
trap cleanup EXIT

. "$(dirname "$0")/cluster.sh"

phase_ops() { # BINARY OUT PHASE ARGS...: ops/s of one phase, checked
  local tessera=$1 out=$2 phase=$3; shift 3
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases "$phase" \
    --json "$@" > "$out"
  python3 - "$out" "$phase" <<'EOP'
import json, sys
phase = json.load(open(sys.argv[1]))["phases"][sys.argv[2]]
if phase["errors"] or phase["mismatches"] or (sys.argv[2] == "read" and phase["verified"] != phase["operations"]):
    sys.exit(f"{sys.argv[1]}: {phase['errors']} errors, {phase['mismatches']} mismatches")
print(f"{phase['ops_per_sec']:.0f}")
EOP
}

batched=(--threads 4 --inflight 256 --ops-per-txn 1 --duration "$seconds")
single=(--threads 1 --inflight 1 --ops-per-txn 1 --duration "$seconds")
results=$work/results
: > "$results"
for round in $(seq 1 "$rounds"); do
  for shape in "one 1 1" "two 2 2"; do
    read -r name nodes replicas <<< "$shape"
    if [ "$name" = one ]; then threads='ldm = 1\ntc = 1\ntc_on_ldm = true'
    else threads='ldm = 2\ntc = 2\ntc_on_ldm = true'; fi
    for side in A B; do
      if [ $side = A ]; then tessera=$a; else tessera=$b; fi
      dir=$work/$round-$name-$side
      cluster_start "$tessera" "$dir" "$nodes" "$replicas" "$threads" 1G
      "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert \
        --threads 4 --inflight 32 > "$dir/insert.log"
      echo "$name read-batched $side $(phase_ops "$tessera" "$dir/rb.json" read "${batched[@]}")" >> "$results"
      echo "$name update-batched $side $(phase_ops "$tessera" "$dir/ub.json" update "${batched[@]}")" >> "$results"
      echo "$name read-single $side $(phase_ops "$tessera" "$dir/rs.json" read "${single[@]}")" >> "$results"
      cleanup
      port=$((port + 10))
    done
  done
done
python3 - "$results" <<'EOP'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    shape, phase, side, ops = line.split()
    runs[(shape, phase, side)].append(float(ops))
print("| shape | phase | A (ops/s, each round) | B (ops/s, each round) | median A | median B | B/A |")
print("|---|---|---|---|---:|---:|---:|")
for shape in ("one", "two"):
    for phase in ("read-batched", "update-batched", "read-single"):
        a, b = runs[(shape, phase, "A")], runs[(shape, phase, "B")]
        ma, mb = statistics.median(a), statistics.median(b)
        label = "1 node" if shape == "one" else "2 nodes, replicas 2"
        print(f"| {label} | {phase} | {', '.join(f'{x:,.0f}' for x in a)} | "
              f"{', '.join(f'{x:,.0f}' for x in b)} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.2f} |")
EOP
