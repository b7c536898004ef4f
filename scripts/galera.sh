#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback, for the Galera tests: each
# node a mariadbd of its own (run as the mysql user) with its datadir under
# $DBLOCK_GALERA_DIR (default /tmp/dblock-galera), SQL ports 23061-23063 (below the kernel's range for client ports, which a
# client connection could hold),
# Galera's group ports 24567/24577/24587, IST 24568/24578/24588 and rsync
# SST 24569/24579/24589, all on 127.0.0.1. The shared MariaDB on 3306 is
# never touched. Installs the galera-4 package when it is missing (as root
# on Debian; mariadb-server must be there already). Exits non-zero, saying
# why, when the cluster cannot be had.
#
#   scripts/galera.sh start       a fresh cluster: node 1 bootstraps, 2 and 3 join
#   scripts/galera.sh stop        stops every node this script started
#   scripts/galera.sh kill N      SIGKILLs node N (1-3)
#   scripts/galera.sh rejoin N    starts node N again; it rejoins (IST or SST)
#   scripts/galera.sh check       start, the Galera tests, stop (the CI step)
#
# A test user root@127.0.0.1 without a password and a database test exist on
# every node: DSNs root@tcp(127.0.0.1:3306N)/test, N = 1..3.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${DBLOCK_GALERA_DIR:-/tmp/dblock-galera}
provider=/usr/lib/galera/libgalera_smm.so
nodes=(1 2 3)
log() { printf 'galera: %s\n' "$*" >&2; }

sqlport() { echo $((23060 + $1)); }
gport() { echo $((24557 + 10 * $1)); }
dsn() { echo "root@tcp(127.0.0.1:$(sqlport "$1"))/test"; }
sock() { echo "$dir/n$1/mysqld.sock"; }
client() { local n=$1; shift; mariadb --protocol=socket -S "$(sock "$n")" -uroot -N -B "$@"; }

packages() {
  [ -x /usr/sbin/mariadbd ] || { log "mariadbd is not installed (package mariadb-server)"; return 1; }
  [ -f "$provider" ] && command -v rsync >/dev/null && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "galera-4 and rsync are missing and cannot be installed here (root on Debian needed)"
    return 1
  fi
  log "installing galera-4 rsync"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq galera-4 rsync >/dev/null
}

config() {
  local n=$1 d=$dir/n$1 addr="" i
  for i in "${nodes[@]}"; do addr+="${addr:+,}127.0.0.1:$(gport "$i")"; done
  cat >"$d/my.cnf" <<EOF
[mariadbd]
user=mysql
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
bind-address=127.0.0.1
port=$(sqlport "$n")
skip-name-resolve
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
innodb_flush_log_at_trx_commit=2
max_connections=400
wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=dblock-test
wsrep_cluster_address=gcomm://$addr
wsrep_node_name=n$n
wsrep_node_address=127.0.0.1:$(gport "$n")
wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:$(gport "$n");ist.recv_addr=127.0.0.1:$(($(gport "$n") + 1));gcache.size=64M
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(($(gport "$n") + 2))
EOF
}

# ready N: node N is synced with the cluster and takes statements.
ready() {
  [ "$(client "$1" -e "SHOW STATUS LIKE 'wsrep_ready'" 2>/dev/null | cut -f2)" = ON ] &&
    [ "$(client "$1" -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)" = Synced ]
}

run() {
  local n=$1 d=$dir/n$1
  shift
  # mariadbd alone in the background: its pid is the one recorded, which
  # stop and kill signal.
  nohup /usr/sbin/mariadbd --defaults-file="$d/my.cnf" "$@" >>"$d/out.log" 2>&1 &
  echo $! >"$d/pid"
  for _ in $(seq 120); do
    ready "$n" && { log "node $n synced on 127.0.0.1:$(sqlport "$n")"; return 0; }
    kill -0 "$(cat "$d/pid")" 2>/dev/null || break
    sleep 0.5
  done
  log "node $n did not become synced; its log: $d/error.log"
  tail -30 "$d/error.log" >&2 || true
  return 1
}

stopnode() {
  local pidf=$dir/n$1/pid pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidf"
}

stop() {
  local n
  for n in 3 2 1; do stopnode "$n"; done
  # The rsync daemon of an SST cut short, if any, left its pid file.
  for n in 1 2 3; do
    [ -f "$dir/n$n/data/rsync_sst.pid" ] && kill "$(cat "$dir/n$n/data/rsync_sst.pid")" 2>/dev/null
  done
  return 0
}

start() {
  packages
  stop
  rm -rf "$dir"
  # The mysql user walks to its datadir.
  mkdir -p "$dir"
  chmod 755 "$dir"
  local n
  for n in "${nodes[@]}"; do
    install -d -o mysql -g mysql "$dir/n$n" "$dir/n$n/data"
    config "$n"
  done
  log "initialising node 1's datadir"
  mariadb-install-db --defaults-file="$dir/n1/my.cnf" --user=mysql --skip-test-db \
    --auth-root-authentication-method=socket >"$dir/n1/install.log" 2>&1 ||
    { log "mariadb-install-db failed: $dir/n1/install.log"; tail -20 "$dir/n1/install.log" >&2; return 1; }
  run 1 --wsrep-new-cluster
  client 1 -e "CREATE DATABASE IF NOT EXISTS test;
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
    GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
  # Joiners copy node 1's datadir by SST (rsync).
  run 2
  run 3
  [ "$(client 1 -e "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2)" = 3 ] ||
    { log "the cluster does not have 3 nodes"; return 1; }
  log "3 nodes: $(dsn 1) $(dsn 2) $(dsn 3)"
}

# certs sums a status counter over the nodes that answer.
certs() {
  local n sum=0 v
  for n in "${nodes[@]}"; do
    v=$(client "$n" -e "SHOW GLOBAL STATUS LIKE '$1'" 2>/dev/null | cut -f2)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

check() {
  trap stop EXIT
  start
  local rc=0 suite killed_at
  export DBLOCK_GALERA_DSNS="$(dsn 1) $(dsn 2) $(dsn 3)"
  # Conformance suite, Galera's engine and bells, and advisory's refusal,
  # on node 1 (the Galera tests on every node); the root package's Galera
  # test isolates node 3 for a while.
  DBLOCK_MYSQL_DSN=$(dsn 1) go test -race -count=1 -timeout 10m \
    -run 'TestConformance/mysql|TestEngineOf|TestGalera|TestBells|TestDistributedEngineRefused/mysql' \
    ./internal/dialect/ ./advisory/ || rc=1
  # A Lock through a node outside the primary component (1047) waits.
  go test -race -count=1 -timeout 5m -run 'TestGalera' . || rc=1
  # The fault suite with workers over the three nodes; node 3 is killed
  # (SIGKILL) once it runs and rejoins a few seconds later.
  go test -race -c -o "$dir/faultsuite.test" ./internal/faultsuite/ || return 1
  local c0 b0
  c0=$(certs wsrep_local_cert_failures) b0=$(certs wsrep_local_bf_aborts)
  (cd internal/faultsuite && DBLOCK_MYSQL_DSN=$(dsn 1) DBLOCK_MYSQL_DSNS=$DBLOCK_GALERA_DSNS \
    "$dir/faultsuite.test" -test.run 'TestFaults/mysql' -test.count=1 -test.v -test.timeout 10m) &
  suite=$!
  sleep "${DBLOCK_GALERA_KILL_AFTER:-30}"
  if kill -0 "$suite" 2>/dev/null; then
    # Node 3's counters start again at its rejoin: keep what it counted.
    c0=$((c0 - $(client 3 -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_cert_failures'" | cut -f2)))
    b0=$((b0 - $(client 3 -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_bf_aborts'" | cut -f2)))
    log "killing node 3 (SIGKILL) mid-run"
    kill -9 "$(cat "$dir/n3/pid")"
    rm -f "$dir/n3/pid"
    killed_at=$SECONDS
    sleep 3
    run 3 || rc=1
    log "node 3 rejoined $((SECONDS - killed_at)) s after its kill; the suite was still running: $(kill -0 "$suite" 2>/dev/null && echo yes || echo no)"
  else
    log "the fault suite ended before node 3 could be killed"
  fi
  wait "$suite" || rc=1
  log "certification failures during the fault suite (wsrep_local_cert_failures, all nodes): $(($(certs wsrep_local_cert_failures) - c0)); brute-force aborts (wsrep_local_bf_aborts): $(($(certs wsrep_local_bf_aborts) - b0))"
  # The datadirs (about 600 MB) stay for a look after a failure only.
  if [ $rc = 0 ]; then stop; rm -rf "$dir"; fi
  return $rc
}

case ${1:-start} in
  start) start ;;
  stop) stop ;;
  kill) [ -f "$dir/n$2/pid" ] && kill -9 "$(cat "$dir/n$2/pid")" && rm -f "$dir/n$2/pid" ;;
  rejoin) run "$2" ;;
  check) check ;;
  dsn) dsn "${2:-1}" ;;
  *) log "usage: $0 [start|stop|kill N|rejoin N|check|dsn N]"; exit 2 ;;
esac
