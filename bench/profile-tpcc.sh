#!/bin/bash
# One TPC-C run against Tessera (two data nodes, replicas 2, one SQL node,
# as tpcc-vs-mariadb.sh) or MariaDB (innodb_flush_log_at_trx_commit = 2),
# with a look at the machine in its middle (docs/benchmarks.md "Both
# systems' CPU per transaction, from one profile each"):
#   WHAT=perf    perf record -a -g -e cpu-clock for PROFILE_SECONDS into
#                WORK/perf.data; report it by thread with
#                `perf report -i WORK/perf.data --no-children --sort comm -g none`
#                (PERF_ARGS replaces "-a -g -e cpu-clock -F 999", e.g.
#                "-a --call-graph dwarf,16384 -e cpu-clock -F 250" for stacks
#                through code built without frame pointers)
#   WHAT=strace  strace -c -f of the benchmark client into WORK/strace.txt
#   WHAT=syscalls perf trace -s -a for PROFILE_SECONDS into WORK/syscalls.txt:
#                every thread's system calls by kind, with counts; prints
#                each thread name's calls per client statement (the
#                client's threads make one sendto per statement)
#   WHAT=switches each thread's context switches (voluntary and not) over
#                PROFILE_SECONDS, from /proc, per transaction of that
#                window (the run's transactions times its share of the run)
#   WHAT=wakeups perf record of the scheduler's wake-ups and switches for
#                PROFILE_SECONDS into WORK/sched.data; prints wake-ups and
#                context switches per transaction, who woke whom, and how
#                many went to the other CPU, or to an idle one
#   WHAT=none    nothing: tpmC alone (for before/after pairs of binaries)
# Prints tpmC, the consistency check and the server's CPU per transaction.
#
# usage: bench/profile-tpcc.sh tessera|mariadb [TESSERA_BINARY]
# env:   WHAT (perf), CONNECTIONS (16), WAREHOUSES (2), SECONDS_EACH (40),
#        DATA_NODES (2), REPLICAS (2),
#        PROFILE_SECONDS (20), SPIN_US (the data nodes' spin_us; 0),
#        WORK (scratch dir), PORT (29100), KEEP_DATA (keep the servers'
#        data), SERVER_NICE (renice every server thread to it before the
#        run: their priority over the client's), SQL_ARGS (more arguments
#        of `tessera sql`, such as `--threads 1`)
set -euo pipefail
system=${1:?tessera or mariadb}
here=$(cd "$(dirname "$0")/.." && pwd)
tessera=${2:-$here/target/release/tessera}
what=${WHAT:-perf}
connections=${CONNECTIONS:-16}
warehouses=${WAREHOUSES:-2}
seconds=${SECONDS_EACH:-40}
profile_seconds=${PROFILE_SECONDS:-20}
work=${WORK:-$(mktemp -d /tmp/profile-tpcc.XXXXXX)}
port=${PORT:-29100}
sql_port=$((port + 50))
mkdir -p "$work"
pids=()
# The servers' data (a gigabyte or more a run) goes with them, unless
# KEEP_DATA is set; logs, the profile and the run's JSON stay in WORK.
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$work"/cluster/node*/ "$work"/mariadb
}
trap cleanup EXIT

case $system in
  tessera)
    source "$here/bench/cluster.sh"
    cluster_start "$tessera" "$work/cluster" "${DATA_NODES:-2}" "${REPLICAS:-2}" "ldm = 1\ntc = 1\ntc_on_ldm = true\nspin_us = ${SPIN_US:-0}" 4G
    # shellcheck disable=SC2086 # SQL_ARGS is a list of words
    "$tessera" sql --mgmd 127.0.0.1:$port --port $sql_port ${SQL_ARGS:-} > "$work/sql.log" 2>&1 &
    pids+=($!)
    ;;
  mariadb)
    mariadb-install-db --no-defaults --datadir="$work/mariadb" --user="$(id -un)" \
      --auth-root-authentication-method=normal > "$work/mariadb-install.log" 2>&1
    /usr/sbin/mariadbd --no-defaults --datadir="$work/mariadb" --socket="$work/mariadb.sock" \
      --port=$sql_port --bind-address=127.0.0.1 --user="$(id -un)" --innodb-buffer-pool-size=4G \
      --innodb-flush-log-at-trx-commit=2 --max-connections=2100 > "$work/mariadb.log" 2>&1 &
    pids+=($!)
    ;;
  *) echo "tessera or mariadb, not $system" >&2; exit 2 ;;
esac
for _ in $(seq 1 200); do (exec 3<> "/dev/tcp/127.0.0.1/$sql_port") 2> /dev/null && break; sleep 0.2; done
"$tessera" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses "$warehouses" --load --duration 0 \
  > "$work/load.log" 2>&1
if [ -n "${SERVER_NICE:-}" ]; then
  for pid in "${pids[@]}"; do
    for task in /proc/"$pid"/task/*; do renice -n "$SERVER_NICE" -p "${task##*/}" > /dev/null; done
  done
fi
# CPU ticks (user + system, every thread) of each server process.
ticks() { for pid in "${pids[@]}"; do awk '{print $14 + $15}' /proc/"$pid"/stat 2> /dev/null || echo 0; done; }
ticks > "$work/ticks.before"
"$tessera" bench tpcc --mysql 127.0.0.1:$sql_port --warehouses "$warehouses" --duration "$seconds" \
  --connections "$connections" --prepared --batching --json > "$work/run.json" &
bench=$!
sleep $(((seconds - profile_seconds) / 2))
case $what in
  # shellcheck disable=SC2086 # PERF_ARGS is a list of words
  perf) perf record ${PERF_ARGS:--a -g -e cpu-clock -F 999} -o "$work/perf.data" -- sleep "$profile_seconds" \
    > /dev/null 2>&1 ;;
  strace) timeout "$profile_seconds" strace -c -f -p $bench -o "$work/strace.txt" > /dev/null 2>&1 || true ;;
  syscalls) perf trace -s -a -o "$work/syscalls.txt" -- sleep "$profile_seconds" > /dev/null 2>&1 || true ;;
  wakeups) perf record -a -e sched:sched_wakeup -e sched:sched_switch -o "$work/sched.data" \
    -- sleep "$profile_seconds" > /dev/null 2>&1 ;;
  switches)
    switches() {
      for pid in "${pids[@]}" $bench; do
        for task in /proc/"$pid"/task/*; do
          printf '%s %s %s\n' "$(cat "/proc/$pid/comm")" "$(cat "$task/comm")" \
            "$(awk '/ctxt_switches/ {n += $2} END {print n}' "$task/status")"
        done
      done 2> /dev/null
    }
    switches > "$work/switches.before"
    sleep "$profile_seconds"
    switches > "$work/switches.after"
    ;;
  none) ;;
  *) echo "WHAT is perf, strace, syscalls, switches, wakeups or none" >&2 ;;
esac
wait $bench
ticks > "$work/ticks.after"
# The server's CPU per transaction over the whole run (the consistency
# check after it included, a small share): for Tessera the last process
# started is the SQL node, the ones before it mgmd and the data nodes.
python3 - "$work" "$system" << 'EOF'
import json, os, sys
work, system = sys.argv[1], sys.argv[2]
run = json.load(open(f"{work}/run.json"))
count = sum(t["count"] for t in run["transactions"].values())
hz = os.sysconf("SC_CLK_TCK")
before = [int(x) for x in open(f"{work}/ticks.before").read().split()]
after = [int(x) for x in open(f"{work}/ticks.after").read().split()]
ms = [(a - b) * 1000 / hz / max(count, 1) for a, b in zip(after, before)]
parts = f"SQL node {ms[-1]:.2f}, data nodes {sum(ms[1:-1]):.2f}, " if system == "tessera" else ""
print(f"{system}: tpmC {round(run['tpmc'])} consistency {run['consistency']}; server CPU per "
      f"transaction {sum(ms):.2f} ms ({parts}{count} transactions) (work: {work})")
EOF
case $what in
  syscalls)
    # Calls per client statement, summed by thread name.
    python3 - "$work/syscalls.txt" << 'EOF'
import collections, re, sys
calls = collections.defaultdict(collections.Counter)
name = None
for line in open(sys.argv[1]):
    thread = re.match(r" (\S+) \((\d+)\), \d+ events", line)
    if thread:
        name = thread.group(1)
        continue
    row = re.match(r"\s+(\w+)\s+(\d+)\s+\d+\s", line)
    if row and name and row.group(1) != "syscall":
        calls[name][row.group(1)] += int(row.group(2))
statements = calls["tessera"]["sendto"] or 1
print(f"{statements} client statements traced; calls per statement by thread name:")
for thread, counted in sorted(calls.items()):
    if sum(counted.values()) >= statements / 10:
        print(f"  {thread}: " + ", ".join(f"{call} {n / statements:.2f}" for call, n in counted.most_common()))
EOF
    ;;
  switches)
    python3 - "$work" "$seconds" "$profile_seconds" << 'EOF'
import collections, json, sys
work, seconds, window = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
run = json.load(open(f"{work}/run.json"))
transactions = sum(t["count"] for t in run["transactions"].values()) * window / seconds
def load(path):
    counts = collections.Counter()
    for line in open(path):
        process, thread, n = line.rsplit(" ", 2)
        counts[f"{process}:{thread}"] += int(n)
    return counts
before, after = load(f"{work}/switches.before"), load(f"{work}/switches.after")
print(f"context switches per transaction (about {transactions:.0f} in the window):")
for key in sorted(after):
    delta = after[key] - before.get(key, 0)
    if delta > transactions / 10:
        print(f"  {key}: {delta / transactions:.1f}")
EOF
    ;;
  wakeups)
    perf script -i "$work/sched.data" -F comm,cpu,event,trace 2> /dev/null > "$work/sched.txt"
    python3 - "$work" "$seconds" "$profile_seconds" << 'EOF'
import collections, json, re, sys
work, seconds, window = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
run = json.load(open(f"{work}/run.json"))
transactions = sum(t["count"] for t in run["transactions"].values()) * window / seconds
# Thread names as perf prints them; the benchmark client's threads are
# named after its binary.
name = lambda comm: "client" if comm == "tessera" else comm
wakes, other_cpu, idle_cpu = collections.Counter(), collections.Counter(), collections.Counter()
running = {}  # cpu -> the thread it last switched to
switches = 0
for line in open(f"{work}/sched.txt"):
    event = re.match(r"\s*(.*?)\s+\[(\d+)\]\s+sched:(\w+):\s+(.*)", line)
    if not event:
        continue
    comm, cpu, kind, rest = event.group(1), int(event.group(2)), event.group(3), event.group(4)
    if kind == "sched_switch":
        switches += 1
        running[cpu] = re.search(r"next_comm=(.*?) next_pid=", rest).group(1)
        continue
    woken = re.search(r"comm=(.*?) pid=\d+ prio=\d+ target_cpu=(\d+)", rest)
    pair = (name(comm), name(woken.group(1)))
    wakes[pair] += 1
    target = int(woken.group(2))
    if target != cpu:
        other_cpu[pair] += 1
        if running.get(target, "swapper").startswith("swapper"):
            idle_cpu[pair] += 1
per = lambda n: n / max(transactions, 1)
print(f"per transaction (about {transactions:.0f} in the window): {per(switches):.1f} context switches, "
      f"{per(sum(wakes.values())):.1f} wake-ups ({per(sum(other_cpu.values())):.1f} to the other CPU, "
      f"{per(sum(idle_cpu.values())):.1f} of them to an idle one)")
for (waker, woken), n in wakes.most_common():
    if n >= transactions / 2:
        print(f"  {waker} -> {woken}: {per(n):.1f} ({per(other_cpu[waker, woken]):.1f} other CPU, "
              f"{per(idle_cpu[waker, woken]):.1f} idle)")
EOF
    ;;
esac
