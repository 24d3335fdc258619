#!/bin/bash
# Reads through views and derived tables against MariaDB on this machine
# (docs/design/0040-derived-condition-pushdown.md, docs/benchmarks.md
# "Conditions pushed into views").
#
# Both systems get the same table of ROWS rows (`id` its key, `g` one of
# 100 groups with an index, `v` a number) and the same views: one of the
# whole table, one grouped by `g`, one a UNION ALL of two halves. Then
# `mariadb-slap` (the client's own load tool) runs each query QUERIES
# times over CONCURRENCY connections: the table by key (the yardstick),
# the view by key, a derived table by key, the grouped view for one
# group, the UNION ALL view by key, and a LIMIT view by key, which no
# condition may enter (the view is computed whole, as every view was
# before design 0040; run a twentieth as often). Tessera: two data nodes, replicas 2, one SQL
# node. MariaDB 10.11: InnoDB, buffer pool holding the table. Prints
# one table of queries per second with the Tessera/MariaDB ratio.
#
# usage: bench/views-vs-mariadb.sh
# env:   ROWS (100000), QUERIES (2000), CONCURRENCY (4), TESSERA (binary;
#        default target/release/tessera), WORK (scratch dir), PORT (first
#        port), OUT (also write the table there)
set -euo pipefail
rows=${ROWS:-100000}
queries=${QUERIES:-2000}
concurrency=${CONCURRENCY:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${TESSERA:-$here/target/release/tessera}
work=${WORK:-/tmp/tessera-views-vs-mariadb}
port=${PORT:-28900}
[ -x "$tessera" ] || { echo "no tessera binary at $tessera: cargo build --release -p cli" >&2; exit 1; }
[ $((rows % 1000)) = 0 ] && [ "$rows" -le 1000000 ] || { echo "ROWS: a multiple of 1000, at most 1000000" >&2; exit 1; }

rm -rf "$work"; mkdir -p "$work"
pids=()
source "$here/bench/cluster.sh"
source "$here/bench/mariadb.sh"
install_missing mariadbd:mariadb-server mariadb-slap:mariadb-client
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; wait 2> /dev/null || true; }
trap cleanup EXIT

# The queries, by name: a key in the middle of the table, a group.
key=$((rows / 2 + 7))
names=(table view derived grouped union limited)
sqls=(
  "SELECT v FROM t WHERE id = $key"
  "SELECT v FROM everything WHERE id = $key"
  "SELECT v FROM (SELECT id, v FROM t) AS d WHERE d.id = $key"
  "SELECT total FROM sums WHERE g = 42"
  "SELECT v FROM halves WHERE id = $key"
  "SELECT v FROM first_rows WHERE id = $key"
)

# load SYSTEM PORT: the table (in 1000-row statements built from a
# table of the ten digits) and the views.
load() {
  local system=$1 sql_port=$2
  local client=(mariadb -h 127.0.0.1 -P "$sql_port" -uroot)
  "${client[@]}" -e "CREATE DATABASE views_bench"
  "${client[@]}" views_bench -e "CREATE TABLE digits (d INT PRIMARY KEY);
    INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
    CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, v INT NOT NULL, KEY (g));
    CREATE VIEW everything AS SELECT * FROM t;
    CREATE VIEW sums AS SELECT g, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY g;
    CREATE VIEW halves AS SELECT id, v FROM t WHERE id <= $((rows / 2))
      UNION ALL SELECT id, v FROM t WHERE id > $((rows / 2));
    CREATE VIEW first_rows AS SELECT id, v FROM t ORDER BY id LIMIT $rows"
  echo "loading $rows rows into $system" >&2
  for thousand in $(seq 0 $((rows / 1000 - 1))); do
    echo "INSERT INTO t SELECT $((thousand * 1000)) + a.d * 100 + b.d * 10 + c.d + 1,
      ($((thousand * 1000)) + a.d * 100 + b.d * 10 + c.d) % 100,
      ($((thousand * 1000)) + a.d * 100 + b.d * 10 + c.d) * 3
      FROM digits AS a, digits AS b, digits AS c;"
  done | "${client[@]}" views_bench
  "${client[@]}" -N views_bench -e "SELECT COUNT(*) FROM t" > "$work/$system-count"
}

# slap SYSTEM PORT: each query's queries per second into
# $work/SYSTEM-NAME, after a warm-up.
slap() {
  local system=$1 sql_port=$2 at count
  for at in "${!names[@]}"; do
    count=$queries
    [ "${names[$at]}" = limited ] && count=$((queries / 20))
    local slap=(mariadb-slap -h 127.0.0.1 -P "$sql_port" -uroot --create-schema=views_bench
      --no-drop --query="${sqls[$at]}" --concurrency="$concurrency")
    "${slap[@]}" --number-of-queries="$concurrency" > /dev/null
    "${slap[@]}" --number-of-queries="$count" > "$work/$system-${names[$at]}.log"
    python3 - "$work/$system-${names[$at]}.log" "$count" > "$work/$system-${names[$at]}" <<'EOP'
import re, sys
text = open(sys.argv[1]).read()
seconds = float(re.search(r"Average number of seconds to run all queries: ([\d.]+)", text).group(1))
print(f"{int(sys.argv[2]) / max(seconds, 1e-6):.0f}")
EOP
  done
}

# --- MariaDB ---------------------------------------------------------------
mariadb_start $((port + 60)) 1G --max-connections=200
load mariadb $((port + 60))
slap mariadb $((port + 60))
mariadb_stop

# --- Tessera ---------------------------------------------------------------
cluster_start "$tessera" "$work/tessera" 2 2 "ldm = 1\ntc = 1\ntc_on_ldm = true" 1G
"$tessera" sql --mgmd 127.0.0.1:$port --port $((port + 50)) > "$work/sql.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do mariadb -h 127.0.0.1 -P $((port + 50)) -uroot -e 'select 1' > /dev/null 2>&1 && break; sleep 0.2; done
load tessera $((port + 50))
slap tessera $((port + 50))

# --- the table ---------------------------------------------------------------
python3 - "$work" "$rows" "$queries" "$concurrency" "${names[*]}" <<'EOP' | tee "${OUT:-/dev/null}"
import sys
work, rows, queries, concurrency, names = sys.argv[1:6]
read = lambda name: open(f"{work}/{name}").read().strip()
counts = {system: read(f"{system}-count") for system in ("tessera", "mariadb")}
print(f"{int(rows):,} rows (counted: Tessera {counts['tessera']}, MariaDB {counts['mariadb']}); "
      f"each query {int(queries):,} times over {concurrency} connections (mariadb-slap).")
print()
print("| query | Tessera queries/s | MariaDB queries/s | ratio |")
print("|---|---|---|---|")
for name in names.split():
    tessera, mariadb = float(read(f"tessera-{name}")), float(read(f"mariadb-{name}"))
    print(f"| {name} | {tessera:,.0f} | {mariadb:,.0f} | {tessera / mariadb:.2f} |")
EOP
