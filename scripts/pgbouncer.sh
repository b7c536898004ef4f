#!/usr/bin/env bash
# PgBouncer from Debian's package (bookworm: 1.18) in front of the test
# PostgreSQL, for the pooler step of the test command: one instance in
# transaction pooling, one in session pooling, each on a port of its own.
#
#   scripts/pgbouncer.sh start          installs pgbouncer if missing, starts both
#   scripts/pgbouncer.sh stop           stops both and removes their directory
#   scripts/pgbouncer.sh dsn MODE       prints the DSN through MODE (transaction|session)
#   scripts/pgbouncer.sh crashes        prints how often each instance was restarted, and its FATAL lines
#   scripts/pgbouncer.sh check [ARGS]   start, the pooler step's tests (go test ARGS too), stop
#
# PgBouncer 1.18 exits on a FATAL "bad client state" when a client closes
# a cancel request's connection before the server answered it
# (pgbouncer/pgbouncer#801, #822, #904; fixed by 1.21): pgx sends a cancel
# request whenever a context ends a statement in flight, and a process
# that exits right after (or is killed) closes it. So each instance runs
# under a loop that starts it again at once, and the step that uses them
# prints how often that happened (crashes); a client meets a dropped
# connection, as at any restart of a pooler.
#
# The DSN through transaction pooling carries default_query_exec_mode=exec,
# as a pgx user writes it for PgBouncer before 1.21 (which keeps no prepared
# statement across transactions); the one through session pooling is plain.
# Both instances forward every database to DBLOCK_PGBOUNCER_UPSTREAM
# (default 127.0.0.1:5432) as the client's user, with no password
# (auth_type trust, the test server's own rule). They only forward: nothing
# here changes the server. Config, logs and pid files live in
# DBLOCK_PGBOUNCER_DIR (default /tmp/dblock-pgbouncer); ports:
# DBLOCK_PGBOUNCER_PORTS (default "26450 26451", transaction then session).
# Exits non-zero, saying why, when an instance cannot be had.
set -euo pipefail
self=$(readlink -f "$0")
dir=${DBLOCK_PGBOUNCER_DIR:-/tmp/dblock-pgbouncer}
read -r tx_port session_port <<<"${DBLOCK_PGBOUNCER_PORTS:-26450 26451}"
upstream=${DBLOCK_PGBOUNCER_UPSTREAM:-127.0.0.1:5432}
log() { printf 'pgbouncer.sh: %s\n' "$*" >&2; }

port_of() {
  case $1 in
    transaction) echo "$tx_port" ;;
    session) echo "$session_port" ;;
    *) log "unknown mode $1 (transaction or session)"; return 2 ;;
  esac
}

# as_user runs a command as the postgres OS user when root (PgBouncer
# refuses to run as root).
as_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_binary() {
  command -v pgbouncer >/dev/null && return 0
  [ -x /usr/sbin/pgbouncer ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "pgbouncer is missing and cannot be installed here (root on Debian needed)"
    return 1
  fi
  log "installing pgbouncer"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq pgbouncer >/dev/null
  # The package's own service is not used.
  service pgbouncer stop >/dev/null 2>&1 || true
}

pgbouncer_bin() { command -v pgbouncer || echo /usr/sbin/pgbouncer; }

# config mode: the instance's configuration. Pools: transaction pooling
# needs few server connections; session pooling one per client, so its
# pool is larger (the shared server allows 100 in all). A client waits
# at most query_wait_timeout for one.
config() {
  local mode=$1 port size
  port=$(port_of "$mode")
  size=12
  [ "$mode" = session ] && size=40
  cat >"$dir/$mode.ini" <<EOF
[databases]
* = host=${upstream%:*} port=${upstream##*:}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = $mode
default_pool_size = $size
max_client_conn = 2000
query_wait_timeout = 60
ignore_startup_parameters = extra_float_digits
logfile = $dir/$mode.log
pidfile = $dir/$mode.pid
log_connections = 0
log_disconnections = 0
EOF
}

# ready port: a client gets through to the server.
ready() {
  local deadline=$((SECONDS + 30))
  until psql -X -q -h 127.0.0.1 -p "$1" -U postgres -d test -Atc "SELECT 1" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "no answer through port $1 after 30 s"
      return 1
    fi
    sleep 0.1
  done
}

# supervise mode: runs the instance in the foreground, again after each
# exit, until the stop file appears.
supervise() {
  local mode=$1
  while [ ! -e "$dir/stop" ]; do
    as_user "$(pgbouncer_bin)" -q "$dir/$mode.ini" </dev/null >>"$dir/$mode.out" 2>&1 || true
    [ -e "$dir/stop" ] && break
    echo "$(date -u +%FT%T) restarted" >>"$dir/$mode.restarts"
    sleep 0.1
  done
}

kill_wait() {
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
}

stop_one() {
  [ -f "$dir/$1.loop" ] && kill_wait "$(cat "$dir/$1.loop")"
  [ -f "$dir/$1.pid" ] && kill_wait "$(cat "$dir/$1.pid")"
  return 0
}

cmd=${1:-}
case $cmd in
start)
  ensure_binary
  "$0" stop
  mkdir -p "$dir"
  echo '"postgres" ""' >"$dir/userlist.txt"
  for mode in transaction session; do
    config "$mode"
  done
  chown -R postgres "$dir" 2>/dev/null || true
  for mode in transaction session; do
    supervise "$mode" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/$mode.loop"
    if ! ready "$(port_of "$mode")"; then
      log "the $mode instance did not start; its log:"
      cat "$dir/$mode.log" "$dir/$mode.out" >&2 || true
      "$0" stop
      exit 1
    fi
  done
  log "transaction pooling on $tx_port, session pooling on $session_port, in front of $upstream ($("$(pgbouncer_bin)" --version | head -1))"
  ;;
stop)
  [ -d "$dir" ] && touch "$dir/stop"
  for mode in transaction session; do
    stop_one "$mode"
  done
  rm -rf "$dir"
  ;;
crashes)
  for mode in transaction session; do
    n=0
    [ -f "$dir/$mode.restarts" ] && n=$(wc -l <"$dir/$mode.restarts")
    echo "pgbouncer.sh: $mode pooling: restarted $n times"
    grep -h "FATAL @" "$dir/$mode.log" 2>/dev/null | sed 's/^/  /' || true
  done
  ;;
dsn)
  mode=${2:-}
  port=$(port_of "$mode")
  dsn="postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
  [ "$mode" = transaction ] && dsn="$dsn&default_query_exec_mode=exec"
  echo "$dsn"
  ;;
check)
  shift
  "$self" start
  trap '"$self" crashes; "$self" stop' EXIT
  cd "$(dirname "$self")/.."
  DBLOCK_PGBOUNCER_TRANSACTION_DSN=$("$self" dsn transaction)
  DBLOCK_PGBOUNCER_SESSION_DSN=$("$self" dsn session)
  export DBLOCK_PGBOUNCER_TRANSACTION_DSN DBLOCK_PGBOUNCER_SESSION_DSN
  rc=0
  # The pooler tests: prepared statements, Migrate, LISTEN, FIFO grants,
  # every command, advisory's refusal. One package at a time (-p 1): a
  # crash of 1.18's (above) ends every client connection of the instance,
  # and one package's cancel requests would cut another's statements.
  go test -race -count=1 -p 1 -timeout 10m "$@" -run 'TestTransactionPooling|TestPooler' . ./cmd/dblock/ ./advisory/ || rc=1
  # Through each mode: the conformance suite, the root package's tests of
  # what a service does with row locks (not those that need
  # notifications, other roles, startup parameters PgBouncer refuses
  # (search_path), 10,000 locks through 12 server connections, or a
  # server stalled behind a fault proxy), and a short fault suite.
  root='^('
  root+='TestExclusion|TestReentrancy|TestConcurrentReentries|TestTokenOrder|TestTakeoverAfterExpiry|TestOwnerSymmetry|'
  root+='TestHandover|TestHandoverOfLostLock|TestDataAndGet|TestDataHandover|TestMaxHold|TestDoMaxHold|TestContext|'
  root+='TestClose|TestCloseReleasesHeldLocks|TestTimeZones|TestElection|TestSemaphore|TestSemaphoreTry|'
  root+='TestSharedExclusion|TestSharedRules|TestLockAllNoDeadlock|TestTryLockAll|TestLockTxEndsWithTx|'
  root+='TestLockTxExclusion|TestLockTxVersusLease|TestCheckBlocksTakeover|TestCheckNotHeld|TestReapRemovesOnlyDeadRows|'
  root+='TestReapConcurrently|TestTokensIncreaseAfterReap|TestListHeldLocks|TestForceUnlock|TestWaitersShown|'
  root+='TestBlockedChain|TestFIFOOrder|TestFIFOGrantsUnderContention|TestSingletonOncePerTick|TestSingletonKeepAlive|'
  root+='TestSyncLocker|TestLockExtend|TestHistory|TestMigrationRerun)$/postgres'
  for mode in transaction session; do
    echo "== through $mode pooling"
    DBLOCK_POSTGRES_DSN=$("$self" dsn "$mode")
    export DBLOCK_POSTGRES_DSN
    go test -race -count=1 -timeout 10m "$@" -run 'TestConformance/postgres' ./internal/dialect/ || rc=1
    go test -race -count=1 -timeout 10m "$@" -run "$root" . || rc=1
    DBLOCK_FAULT_ACQUISITIONS=${DBLOCK_PGBOUNCER_FAULT_ACQUISITIONS:-1000} \
      go test -race -count=1 -timeout 10m -v "$@" -run 'TestFaults/postgres' ./internal/faultsuite/ || rc=1
  done
  exit $rc
  ;;
*)
  echo "usage: $0 start | stop | dsn transaction|session | crashes | check [ARGS]" >&2
  exit 2
  ;;
esac
