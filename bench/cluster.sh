# Shared by the bench scripts (sourced, not run): starts an mgmd and data
# nodes on loopback from one config and waits until every data node is
# started. The caller sets `port` (mgmd's; data node N listens on port+N)
# and `pids` (an array the started processes are appended to, for its
# cleanup).
#
# cluster_start TESSERA DIR DATA_NODES REPLICAS THREADS [DATA_MEMORY]
#   THREADS: the [threads] lines ('ldm = 1\ntc = 1\ntc_on_ldm = true').
# Each part gets 64 MiB redo files (a table with one partition per ldm
# thread writes one part, and the default fills in seconds of updates at
# full speed: error 410) and a 32 MiB redo buffer (the default 4 MiB fills
# at 400,000 updates/s between the io thread's writes: error 1234).
cluster_start() {
  local tessera=$1 dir=$2 nodes=$3 replicas=$4 threads=$5 memory=${6:-2G}
  mkdir -p "$dir"
  local secret_line
  secret_line=$(cluster_secret "$tessera" "$dir")
  {
    printf '[mgmd]\nnode_id = 1\nhost = "127.0.0.1"\nport = %d\n\n' "$port"
    printf '[cluster]\nreplicas = %d\ndata_memory = "%s"\nredo_log_file_size = "64M"\nredo_buffer = "32M"\n%s\n\n' \
      "$replicas" "$memory" "$secret_line"
    printf '[threads]\n%b\n' "$threads"
    for id in $(seq 2 $((nodes + 1))); do
      printf '\n[[data_node]]\nid = %d\nhost = "127.0.0.1"\nport = %d\ndata_dir = "node%d"\n' \
        "$id" $((port + id)) "$id"
    done
  } > "$dir/config.toml"
  "$tessera" mgmd --config "$dir/config.toml" > "$dir/mgmd.log" 2>&1 &
  pids+=($!)
  sleep 1
  for id in $(seq 2 $((nodes + 1))); do
    # No angel: the failover benchmarks kill a node and mean it to stay down.
    "$tessera" node --no-angel --mgmd 127.0.0.1:$port --node-id "$id" --initial > "$dir/node$id.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 600); do
    "$tessera" mgm --mgmd 127.0.0.1:$port -e show --json 2> /dev/null | python3 -c '
import json, sys
nodes = [n for n in json.load(sys.stdin)["nodes"] if n.get("type") == "data"]
sys.exit(0 if nodes and all(n.get("state") == "started" for n in nodes) else 1)' 2> /dev/null && return
    sleep 0.5
  done
  echo "cluster in $dir did not start" >&2
  exit 1
}

# cluster_secret TESSERA DIR: writes a new cluster secret to DIR/cluster.secret
# and prints the config line naming it (docs/design/0007-groundwork.md,
# decision 13). Builds from before admission have no `secret` subcommand
# and refuse the key, so for them it writes and prints nothing (the A/B
# scripts run older builds).
cluster_secret() {
  local tessera=$1 dir=$2
  if "$tessera" secret --help > /dev/null 2>&1; then
    rm -f "$dir/cluster.secret"
    "$tessera" secret "$dir/cluster.secret"
    printf 'secret_file = "cluster.secret"'
  fi
}

# cluster_kill: SIGKILLs every process in `pids` and reaps it (the
# failover scripts' cleanup, between runs and on exit).
cluster_kill() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; done
  pids=()
}

# data_node_pid TESSERA ID: the pid of data node ID, as mgmd at `port`
# shows it.
data_node_pid() {
  "$1" mgm --mgmd 127.0.0.1:$port -e show --json | python3 -c '
import json, sys
node = [n for n in json.load(sys.stdin)["nodes"] if n.get("type") == "data" and n["id"] == int(sys.argv[1])]
print(node[0]["pid"])' "$2"
}
