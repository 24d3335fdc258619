#!/bin/bash
# Scans side by side with MariaDB on this machine
# (docs/design/0022-scan-programs.md, docs/benchmarks.md "Full scans with
# a filter").
#
# Tessera: `tessera bench keylookup` over RECORDS rows on one data node,
# replicas 1, with (a) one ldm thread and (b) two: the `scan` phase (full
# scans of the table with a filter, evaluated at the data node, taking 1%
# of the rows, which come back verified; rows looked at per second) and
# the `range` phase (100 consecutive keys through the primary key's
# ordered index, every row verified) with one client thread at low load.
# MariaDB 10.11 (InnoDB, buffer pool holding the table,
# innodb_flush_log_at_trx_commit = 2): a RECORDS-row sysbench table;
# `SELECT COUNT(*) ... WHERE c LIKE '00%'` (a full scan through a filter
# taking 1% of the rows: c is not indexed) run QUERIES times, and sysbench
# oltp_read_only with only simple 100-row ranges, one thread. Prints one
# table with the ratios; exits non-zero if a Tessera phase had an error or
# a mismatch.
#
# usage: bench/scans-vs-mariadb.sh [RECORDS] [SECONDS]
# env:   TESSERA (binary; default target/release/tessera), WORK (scratch
#        dir), PORT (first port), OUT (also write the table there), QUERIES
#        (MariaDB full scans to time, default 10)
set -euo pipefail
records=${1:-1000000}
seconds=${2:-10}
queries=${QUERIES:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-scans-vs-mariadb}
port=${PORT:-47700}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }

rm -rf "$work"; mkdir -p "$work"
pids=()
source "$here/bench/cluster.sh"
source "$here/bench/mariadb.sh"
install_missing mariadbd:mariadb-server mariadb:mariadb-client sysbench:sysbench
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

# --- MariaDB ---------------------------------------------------------------
mariadb_start $((port + 60)) 2G --max-connections=200
mariadb --socket="$socket" -uroot -e 'create database sbtest'
sysbench_common=(--db-driver=mysql --mysql-socket="$socket" --mysql-user=root --mysql-db=sbtest
  --tables=1 --table-size="$records")
echo "loading $records rows into MariaDB" >&2
sysbench oltp_read_only "${sysbench_common[@]}" prepare > "$work/sysbench-prepare.log"
# Warm the buffer pool, then time the full scans.
mariadb --socket="$socket" -uroot sbtest -e "select count(*) from sbtest1 where c like '00%'" > /dev/null
python3 - "$socket" "$queries" "$records" > "$work/mariadb-scan" <<'EOP'
import subprocess, sys, time
socket, queries, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
query = "select count(*) from sbtest1 where c like '00%'; " * queries
started = time.monotonic()
out = subprocess.run(["mariadb", f"--socket={socket}", "-uroot", "sbtest", "-N", "-e", query],
                     check=True, capture_output=True, text=True).stdout.split()
elapsed = time.monotonic() - started
print(f"{records * queries / elapsed:.0f} {elapsed / queries * 1e6:.0f} {out[0]}")
EOP
sysbench oltp_read_only "${sysbench_common[@]}" --threads=1 --time="$seconds" \
  --range_selects=on --point_selects=0 --simple_ranges=1 --sum_ranges=0 --order_ranges=0 \
  --distinct_ranges=0 --skip_trx=on --percentile=50 run > "$work/sysbench-ranges.log"
python3 - "$work/sysbench-ranges.log" > "$work/mariadb-range" <<'EOP'
import re, sys
text = open(sys.argv[1]).read()
queries = float(re.search(r"queries:\s+\d+\s+\(([\d.]+) per sec", text).group(1))
p50 = float(re.search(r"50th percentile:\s+([\d.]+)", text).group(1))
print(f"{queries:.0f} {p50 * 1000:.0f}")
EOP
mariadb_stop

# --- Tessera -------------------------------------------------------------
tessera_phase() { # CLUSTER PHASE ARGS...: "ops/s p50_us errors mismatches"
  local cluster=$1 phase=$2; shift 2
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases "$phase" \
    --json "$@" > "$work/$cluster-$phase.json"
  python3 - "$work/$cluster-$phase.json" "$phase" <<'EOP'
import json, sys
phase = json.load(open(sys.argv[1]))["phases"][sys.argv[2]]
print(f'{phase["ops_per_sec"]:.0f} {phase["p50_us"]} {phase["errors"]} {phase["mismatches"]} {phase["transactions"]}')
EOP
}
for run in "one:ldm = 1\ntc = 1\ntc_on_ldm = true" "two:ldm = 2\ntc = 1"; do
  name=${run%%:*}
  cluster_start "$tessera" "$work/$name" 1 1 "${run#*:}" 2G
  echo "loading $records rows into Tessera ($name ldm thread(s))" >&2
  "$tessera" bench keylookup --mgmd 127.0.0.1:$port --records "$records" --phases insert \
    --threads 2 --inflight 64 --json > "$work/$name-insert.json"
  tessera_phase "$name" scan --threads 1 --duration "$seconds" > "$work/tessera-$name-scan"
  tessera_phase "$name" range --threads 1 --duration "$seconds" > "$work/tessera-$name-range"
  cluster_kill
done

python3 - "$work" "$records" <<'EOP' | tee "${OUT:-/dev/null}"
import sys
work, records = sys.argv[1], int(sys.argv[2])
read = lambda name: open(f"{work}/{name}").read().split()
m_scan_rate, m_scan_us, m_count = read("mariadb-scan")
m_range_rate, m_range_p50 = read("mariadb-range")
print(f"{records:,} rows. MariaDB: SELECT COUNT(*) ... WHERE c LIKE '00%' (counted {int(m_count):,}), "
      f"{float(m_scan_us)/1000:.1f} ms a scan; sysbench simple ranges, 1 thread.")
print()
print("| measure | Tessera, 1 ldm thread | Tessera, 2 ldm threads | MariaDB | ratio (1 ldm / 2 ldm) |")
print("|---|---|---|---|---|")
bad = False
rows = []
for name in ("one", "two"):
    scan = read(f"tessera-{name}-scan"); rng = read(f"tessera-{name}-range")
    bad |= any(int(x) for x in scan[2:4] + rng[2:4])
    rows.append((float(scan[0]), float(rng[0]) / 100, int(rng[1])))
print(f"| full scan, filter taking 1%: rows looked at per second | {rows[0][0]:,.0f} | {rows[1][0]:,.0f} | "
      f"{float(m_scan_rate):,.0f} | {rows[0][0]/float(m_scan_rate):.2f} / {rows[1][0]/float(m_scan_rate):.2f} |")
print(f"| 100-row ranges per second, 1 client thread | {rows[0][1]:,.0f} | {rows[1][1]:,.0f} | "
      f"{float(m_range_rate):,.0f} | {rows[0][1]/float(m_range_rate):.2f} / {rows[1][1]/float(m_range_rate):.2f} |")
print(f"| 100-row range p50 latency (us) | {rows[0][2]} | {rows[1][2]} | {m_range_p50} | |")
sys.exit(1 if bad else 0)
EOP
