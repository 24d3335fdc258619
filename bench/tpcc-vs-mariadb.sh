#!/bin/bash
# TPC-C (DBT2's workload, `tessera bench tpcc`) against `tessera sql` and
# MariaDB on this machine, in one run (docs/benchmarks.md "TPC-C against
# MariaDB").
#
# MariaDB 10.11: InnoDB with a buffer pool that holds the data and
# innodb_flush_log_at_trx_commit = 2 (the durability closest to a 2 s
# global checkpoint). Tessera: two data nodes with replicas 2 (every
# write on both) and one SQL node, all on loopback; the tables are
# partitioned on the warehouse (PARTITION BY KEY), as NDB's DBT2 runs
# them. The same command loads WAREHOUSES into each, then runs the
# standard mix (keying and think times off) at each connection count for
# SECONDS, once per statement mode (text statements; prepared ones,
# `--prepared`; prepared with each transaction's INSERTs batched where
# the server can, `--prepared --batching`, NDB's
# transaction_allow_batching, which MariaDB lacks and runs without), and
# checks TPC-C's consistency conditions 1-4 after each run.
# Prints one table of tpmC with the Tessera/MariaDB ratio, and each run's
# JSON report is kept in WORK.
#
# usage: bench/tpcc-vs-mariadb.sh
# env:   WAREHOUSES (4), CONNECTIONS ("8 32"), MODES ("text prepared batched"),
#        SECONDS_EACH (60), TESSERA
#        (binary; default target/release/tessera), WORK (scratch dir), PORT
#        (first port), OUT (also write the table there)
set -euo pipefail
warehouses=${WAREHOUSES:-4}
connections_list=${CONNECTIONS:-8 32}
modes=${MODES:-text prepared batched}
seconds=${SECONDS_EACH:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-tpcc-vs-mariadb}
port=${PORT:-27900}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }

rm -rf "$work"; mkdir -p "$work"
pids=()
source "$here/bench/cluster.sh"
source "$here/bench/mariadb.sh"
install_missing mariadbd:mariadb-server mariadb:mariadb-client
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

# run SYSTEM PORT: load, then the mix in every mode at every connection
# count, into $work/SYSTEM-MODE-CONNECTIONS.json; a run whose consistency
# check fails says so.
run() {
  local system=$1 sql_port=$2 status=0
  local started=$SECONDS
  "$tessera" bench tpcc --mysql 127.0.0.1:"$sql_port" --warehouses "$warehouses" --load \
    --duration 0 --json > "$work/$system-load.json" 2> "$work/$system-load.log" \
    || { echo "$system: load failed: see $work/$system-load.log" >&2; return 1; }
  echo "$system: loaded $warehouses warehouses in $((SECONDS - started)) s" >&2
  for mode in $modes; do
    local flag=""
    [ "$mode" = prepared ] && flag=--prepared
    [ "$mode" = batched ] && flag="--prepared --batching"
    for connections in $connections_list; do
      echo "$system: $mode statements, $connections connections, $seconds s" >&2
      "$tessera" bench tpcc --mysql 127.0.0.1:"$sql_port" --warehouses "$warehouses" \
        --duration "$seconds" --connections "$connections" $flag --json \
        > "$work/$system-$mode-$connections.json" 2> "$work/$system-$mode-$connections.log" || status=1
      [ $status = 0 ] || echo "$system: $mode, $connections connections: a consistency condition failed or the run broke: see $work/$system-$mode-$connections.*" >&2
    done
  done
  return $status
}

# --- MariaDB ---------------------------------------------------------------
mariadb_start $((port + 60)) 4G --max-connections=2100
run mariadb $((port + 60)) || true
mariadb_stop

# --- Tessera ---------------------------------------------------------------
cluster_start "$tessera" "$work/tessera" 2 2 "ldm = 1\ntc = 1\ntc_on_ldm = true" 4G
"$tessera" sql --mgmd 127.0.0.1:$port --port $((port + 50)) > "$work/sql.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do mariadb -h 127.0.0.1 -P $((port + 50)) -uroot -e 'select 1' > /dev/null 2>&1 && break; sleep 0.2; done
run tessera $((port + 50)) || true
"$tessera" mgm --mgmd 127.0.0.1:$port -e "check replicas" > "$work/check-replicas.log" 2>&1 || true

# --- the table ---------------------------------------------------------------
python3 - "$work" "$connections_list" "$warehouses" "$modes" <<'EOP' | tee "${OUT:-/dev/null}"
import json, os, sys
work, connections_list, warehouses, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4].split()
def read(name):
    try:
        return json.load(open(os.path.join(work, name)))
    except (OSError, ValueError):
        return None
loads = {system: read(f"{system}-load.json") for system in ("tessera", "mariadb")}
for system, report in loads.items():
    seconds = report.get("load_seconds") if report else None
    print(f"{system}: {warehouses} warehouses loaded in {seconds:.1f} s" if seconds else f"{system}: load failed")
print()
print("| statements | connections | Tessera tpmC | MariaDB tpmC | ratio | Tessera New-Order p50 / p95 ms | MariaDB New-Order p50 / p95 ms | Tessera retried | MariaDB retried | Tessera errors | MariaDB errors | consistency (Tessera / MariaDB) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for mode, connections in [(mode, c) for mode in modes for c in connections_list]:
    t, m = read(f"tessera-{mode}-{connections}.json"), read(f"mariadb-{mode}-{connections}.json")
    def field(report, *path):
        value = report
        for key in path:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value
    def total(report, key):
        if not report:
            return "-"
        return sum(v.get(key, 0) for v in report.get("transactions", {}).values())
    def consistency(report):
        if not report:
            return "failed run"
        c = report.get("consistency")
        return "ok" if c == "ok" else "FAILED: " + "; ".join(c)
    tt, mt = field(t, "tpmc"), field(m, "tpmc")
    ratio = f"{tt / mt:.2f}" if tt and mt else "-"
    fmt = lambda x: f"{x:,.0f}" if isinstance(x, (int, float)) else "-"
    def latency(r):
        p50, p95 = field(r, 'transactions', 'new_order', 'p50_ms'), field(r, 'transactions', 'new_order', 'p95_ms')
        return f"{p50:.1f} / {p95:.1f}" if p50 is not None and p95 is not None else "-"
    print(f"| {mode} | {connections} | {fmt(tt)} | {fmt(mt)} | {ratio} | {latency(t)} | {latency(m)} | {total(t, 'retried')} | {total(m, 'retried')} | {total(t, 'errors')} | {total(m, 'errors')} | {consistency(t)} / {consistency(m)} |")
try:
    check = open(os.path.join(work, "check-replicas.log")).read().strip().splitlines()[-1]
    print(f"\ncheck replicas after the Tessera runs: {check}")
except (OSError, IndexError):
    pass
EOP
