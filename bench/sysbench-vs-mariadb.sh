#!/bin/bash
# Stock sysbench against `tessera sql` and MariaDB on this machine, in one
# run (docs/design/0027-sql-node.md, docs/benchmarks.md "sysbench against
# MariaDB").
#
# MariaDB 10.11: InnoDB with a buffer pool that holds the data and
# innodb_flush_log_at_trx_commit = 2 (the durability closest to a 2 s
# global checkpoint). Tessera: two data nodes with replicas 2 (every
# write on both) and one SQL node, all on loopback. The same sysbench
# commands run against each: prepare TABLES x TABLE_SIZE, then each
# workload at each thread count for SECONDS. Prints one table of TPS, QPS
# and p95 latency with the Tessera/MariaDB ratios, and draws it as a PNG
# (gnuplot).
#
# usage: bench/sysbench-vs-mariadb.sh
# env:   SECONDS_EACH (30), TABLES (4), TABLE_SIZE (100000), THREADS
#        ("8 32 1024"), WORKLOADS ("oltp_point_select oltp_read_only
#        oltp_read_write oltp_update_index"), SQL_THREADS (the SQL node's
#        --threads; default: its own, one per core), TESSERA (binary; default target/release/tessera), WORK
#        (scratch dir), PORT (first port), OUT (also write the table
#        there), PNG (the chart; default WORK/sysbench-vs-mariadb.png)
set -euo pipefail
seconds=${SECONDS_EACH:-30}
tables=${TABLES:-4}
table_size=${TABLE_SIZE:-100000}
threads_list=${THREADS:-8 32 1024}
workloads=${WORKLOADS:-oltp_point_select oltp_read_only oltp_read_write oltp_update_index}
sql_threads=${SQL_THREADS:+--threads $SQL_THREADS}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-sysbench-vs-mariadb}
# Below the ephemeral range (32768-60999), where 1,024 client sockets
# would take the ports the servers listen on.
port=${PORT:-27800}
png=${PNG:-$work/sysbench-vs-mariadb.png}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }

# 1,024 connections and their sysbench threads need the descriptors.
ulimit -n 65536 2> /dev/null || ulimit -n "$(ulimit -Hn)"
rm -rf "$work"; mkdir -p "$work"
pids=()
source "$here/bench/cluster.sh"
source "$here/bench/mariadb.sh"
install_missing mariadbd:mariadb-server mariadb:mariadb-client sysbench:sysbench gnuplot:gnuplot-nox
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

# run SYSTEM PORT: prepare, every workload at every thread count, into
# $work/SYSTEM-WORKLOAD-THREADS.log
run() {
  local system=$1 sql_port=$2
  local common=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$sql_port" --mysql-user=root
    --mysql-db=sbtest --tables="$tables" --table-size="$table_size")
  local started=$SECONDS
  sysbench oltp_read_write "${common[@]}" --threads=4 prepare > "$work/$system-prepare.log" 2>&1
  echo "$system: prepared $tables x $table_size rows in $((SECONDS - started)) s" >&2
  for workload in $workloads; do
    for threads in $threads_list; do
      echo "$system: $workload, $threads threads, $seconds s" >&2
      sysbench "$workload" "${common[@]}" --threads="$threads" --time="$seconds" \
        --percentile=95 run > "$work/$system-$workload-$threads.log" 2>&1 \
        || echo "$system: $workload $threads threads failed: see $work/$system-$workload-$threads.log" >&2
    done
  done
}

# --- MariaDB ---------------------------------------------------------------
mariadb_start $((port + 60)) 4G --max-connections=2100 --max-prepared-stmt-count=1000000
mariadb --socket="$socket" -uroot -e 'create database sbtest'
run mariadb $((port + 60))
mariadb_stop

# --- Tessera ---------------------------------------------------------------
cluster_start "$tessera" "$work/tessera" 2 2 "ldm = 1\ntc = 1\ntc_on_ldm = true" 4G
"$tessera" sql --mgmd 127.0.0.1:$port --port $((port + 50)) $sql_threads > "$work/sql.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do mariadb -h 127.0.0.1 -P $((port + 50)) -uroot -e 'select 1' > /dev/null 2>&1 && break; sleep 0.2; done
mariadb -h 127.0.0.1 -P $((port + 50)) -uroot -e 'create database sbtest'
run tessera $((port + 50))
"$tessera" mgm --mgmd 127.0.0.1:$port -e "check replicas" > "$work/check-replicas.log" 2>&1 || true

# --- the table and the chart -----------------------------------------------
python3 - "$work" "$workloads" "$threads_list" "$png" <<'EOP' | tee "${OUT:-/dev/null}"
import os, re, subprocess, sys
work, workloads, threads_list, png = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
def read(system, workload, threads):
    path = os.path.join(work, f"{system}-{workload}-{threads}.log")
    try:
        text = open(path).read()
    except OSError:
        return None
    tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", text)
    qps = re.search(r"queries:\s+\d+\s+\(([\d.]+) per sec", text)
    p95 = re.search(r"95th percentile:\s+([\d.]+)", text)
    errors = re.search(r"ignored errors:\s+(\d+)", text)
    if not (tps and qps and p95):
        return None
    return float(tps.group(1)), float(qps.group(1)), float(p95.group(1)), int(errors.group(1)) if errors else 0
def fmt(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"
print(f"| workload | threads | Tessera TPS | MariaDB TPS | TPS ratio | Tessera QPS | MariaDB QPS | Tessera p95 ms | MariaDB p95 ms | Tessera ignored errors |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = []
for workload in workloads:
    for threads in threads_list:
        t, m = read("tessera", workload, threads), read("mariadb", workload, threads)
        if t is None or m is None:
            print(f"| {workload} | {threads} | {'failed' if t is None else fmt(t[0])} | {'failed' if m is None else fmt(m[0])} | | | | | | |")
            continue
        ratio = t[0] / m[0] if m[0] else float("inf")
        rows.append((f"{workload.replace('oltp_', '')} {threads}", t[0], m[0]))
        print(f"| {workload} | {threads} | {fmt(t[0])} | {fmt(m[0])} | {ratio:.2f} | {fmt(t[1])} | {fmt(m[1])} | {t[2]:.2f} | {m[2]:.2f} | {t[3]} |")
try:
    check = open(os.path.join(work, "check-replicas.log")).read().strip().splitlines()[-1]
    print(f"\ncheck replicas after the Tessera runs: {check}")
except (OSError, IndexError):
    pass
data = os.path.join(work, "chart.dat")
with open(data, "w") as out:
    for label, t, m in rows:
        out.write(f"\"{label}\" {t} {m}\n")
script = f"""
set terminal png size 1200,600 noenhanced
set output '{png}'
set title 'sysbench TPS: Tessera (2 data nodes, replicas 2, 1 SQL node) and MariaDB (InnoDB), one 2-core machine'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'transactions per second (log)'
set xtics rotate by -35
set key top right
plot '{data}' using 2:xtic(1) title 'Tessera', '' using 3 title 'MariaDB'
"""
if rows and subprocess.run(["gnuplot"], input=script, text=True).returncode == 0:
    print(f"chart: {png}")
EOP
