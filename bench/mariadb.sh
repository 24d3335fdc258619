# MariaDB beside a benchmark, for the bench/*-vs-mariadb.sh scripts to
# source (after setting `work` and `pids`).
#
# install_missing COMMAND:PACKAGE...: installs, with apt-get, the Debian
# package of each command not found (mariadbd is looked for in
# /usr/sbin too).
install_missing() {
  local missing=() pair command
  for pair in "$@"; do
    command=${pair%%:*}
    command -v "$command" > /dev/null || [ -x "/usr/sbin/$command" ] || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing ${missing[*]}" >&2
  local sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" > /dev/null
}

# mariadb_start PORT BUFFER_POOL [ARGS...]: a fresh MariaDB in
# $work/mariadb listening on 127.0.0.1:PORT and on $work/mariadb.sock
# (`socket`), InnoDB with a buffer pool of BUFFER_POOL and
# innodb_flush_log_at_trx_commit = 2, ARGS added to its command line;
# returns once it answers. Its pid is `mariadb_pid`, also in `pids`.
mariadb_start() {
  local port=$1 pool=$2; shift 2
  local mariadbd; mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  socket="$work/mariadb.sock"
  mariadb-install-db --no-defaults --datadir="$work/mariadb" --user="$(id -un)" \
    --auth-root-authentication-method=normal > "$work/mariadb-install.log" 2>&1
  "$mariadbd" --no-defaults --datadir="$work/mariadb" --socket="$socket" --port="$port" \
    --bind-address=127.0.0.1 --user="$(id -un)" --innodb-buffer-pool-size="$pool" \
    --innodb-flush-log-at-trx-commit=2 "$@" > "$work/mariadb.log" 2>&1 &
  mariadb_pid=$!
  pids+=("$mariadb_pid")
  for _ in $(seq 1 200); do
    mariadb --socket="$socket" -uroot -e 'select 1' > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "MariaDB did not start: see $work/mariadb.log" >&2
  return 1
}

# mariadb_stop: stops the MariaDB mariadb_start started.
mariadb_stop() {
  kill "$mariadb_pid"
  wait "$mariadb_pid" 2> /dev/null || true
}
