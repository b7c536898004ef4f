#!/usr/bin/env bash
# A PostgreSQL primary and a streaming standby on loopback, for the failover
# suite (internal/faultsuite, TestFailover), and the steps of a failover:
#
#   pgfailover.sh start sync|async|fenced  fresh primary (25432) and standby (25433)
#   pgfailover.sh crash             the primary stops at once (pg_ctl stop -m immediate)
#   pgfailover.sh promote           the standby becomes the primary
#   pgfailover.sh rejoin            a new standby, copied from the primary, on the crashed node's port
#   pgfailover.sh stop              stops both servers and removes their data
#
# sync: the primary waits for the standby (synchronous_standby_names,
# synchronous_commit=on), so a commit it acknowledged is on the standby;
# async: it does not, so a promotion can lose the last commits; fenced:
# async, and a promotion keeps clients off the new primary for
# DBLOCK_FAILOVER_FENCE seconds (default 1: set it to the locks' TTL) with
# default_transaction_read_only, which target_session_attrs=read-write
# refuses, and steps every *_token_seq sequence a million ahead before it
# lets them in (docs/operations.md, "High availability"). A promoted
# standby has no standby of its own until rejoin gives it one (and, in sync
# mode, makes it synchronous again).
#
# Debian's PostgreSQL 15 binaries (apt-get install postgresql-15 when they
# are missing) run as the postgres OS user; the data directories live under
# DBLOCK_FAILOVER_DIR (default: a directory under /tmp). Ports: DBLOCK_FAILOVER_PORTS
# (default "25432 25433"). A wait for a server (to start, stop, promote, or
# stream to its standby) lasts at most DBLOCK_FAILOVER_WAIT seconds (default
# 120), then the command fails saying what it waited for. Nothing here
# touches another server.
set -euo pipefail
bin=${DBLOCK_PG_BIN:-/usr/lib/postgresql/15/bin}
dir=${DBLOCK_FAILOVER_DIR:-/tmp/dblock-failover}
read -r port_a port_b <<<"${DBLOCK_FAILOVER_PORTS:-25432 25433}"

as_pg() {
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

ensure_binaries() {
  if [ -x "$bin/pg_ctl" ] && [ -x "$bin/pg_basebackup" ]; then return; fi
  echo "pgfailover: installing postgresql-15" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
}

# node_dir port: the data directory of the node on port.
node_dir() { echo "$dir/n$1"; }

psql_on() { as_pg "$bin/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atc "$2"; }

# wait_limit is how long, in seconds, a step waits for a server to start,
# stop, promote or stream: long enough for a busy machine.
wait_limit=${DBLOCK_FAILOVER_WAIT:-120}

start_node() { # port
  as_pg "$bin/pg_ctl" -D "$(node_dir "$1")" -l "$dir/n$1.log" -w -t "$wait_limit" \
    -o "-c port=$1 -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir" start >/dev/null
}

primary_port() { cat "$dir/primary"; }
other_port() { if [ "$(primary_port)" = "$port_a" ]; then echo "$port_b"; else echo "$port_a"; fi; }

# standby_state from lsn: the standby's sync_state on the primary from,
# when it streams and, if lsn is given, has flushed up to it; empty otherwise.
standby_state() {
  local cond="state = 'streaming'"
  [ -z "${2:-}" ] || cond="$cond AND flush_lsn >= '$2'"
  psql_on "$1" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby' AND $cond" 2>/dev/null || true
}

# await_standby from want [lsn]: polls until standby_state says want, for
# at most wait_limit seconds.
await_standby() {
  local deadline=$((SECONDS + wait_limit))
  until [ "$(standby_state "$1" "${3:-}")" = "$2" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "pgfailover: the standby of $1 does not stream ($2${3:+, flushed to $3}) after ${wait_limit}s; pg_stat_replication:" >&2
      psql_on "$1" "SELECT application_name, state, sync_state, sent_lsn, flush_lsn FROM pg_stat_replication" >&2 || true
      return 1
    fi
    sleep 0.1
  done
}

# make_standby port: a standby on port copied from the primary.
make_standby() {
  local p=$1 from try
  from=$(primary_port)
  # A copy that failed (a connection lost on a busy machine) is made again
  # from scratch: nothing of it is running yet.
  for try in 1 2 3; do
    rm -rf "$(node_dir "$p")"
    if as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$from" -U postgres -D "$(node_dir "$p")" -X stream -c fast -R \
      -d "host=127.0.0.1 port=$from user=postgres application_name=standby"; then
      break
    fi
    if [ "$try" = 3 ]; then
      echo "pgfailover: pg_basebackup from $from failed 3 times" >&2
      return 1
    fi
    echo "pgfailover: pg_basebackup from $from failed; again" >&2
  done
  start_node "$p"
  if [ "$(cat "$dir/mode")" = sync ]; then
    psql_on "$from" "ALTER SYSTEM SET synchronous_standby_names = 'standby'" >/dev/null
  else
    psql_on "$from" "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
  fi
  psql_on "$from" "SELECT pg_reload_conf()" >/dev/null
  # Wait until the standby streams (and, in sync mode, is synchronous).
  local want=async
  [ "$(cat "$dir/mode")" = sync ] && want=sync
  await_standby "$from" "$want"
  # Then until it has flushed what the primary had written by now: the
  # commits acknowledged before it was synchronous too.
  local lsn
  lsn=$(psql_on "$from" "SELECT pg_current_wal_lsn()")
  await_standby "$from" "$want" "$lsn"
}

cmd=${1:-}
case "$cmd" in
start)
  mode=${2:-}
  case "$mode" in sync | async | fenced) ;; *) echo "usage: $0 start sync|async|fenced" >&2; exit 2 ;; esac
  ensure_binaries
  "$0" stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  chown postgres "$dir"
  echo "$mode" >"$dir/mode"
  echo "$port_a" >"$dir/primary"
  as_pg "$bin/initdb" -D "$(node_dir "$port_a")" -U postgres -A trust --no-sync >/dev/null
  cat >>"$(node_dir "$port_a")/postgresql.conf" <<CONF
wal_level = replica
max_wal_senders = 4
hot_standby = on
synchronous_commit = on
fsync = off
full_page_writes = on
wal_keep_size = 256MB
max_connections = 200
CONF
  start_node "$port_a"
  psql_on "$port_a" "CREATE DATABASE test" >/dev/null
  make_standby "$port_b"
  echo "pgfailover: $mode primary on $port_a, standby on $port_b"
  ;;
crash)
  d=$(node_dir "$(primary_port)")
  if ! as_pg "$bin/pg_ctl" -D "$d" -m immediate -w -t "$wait_limit" stop >/dev/null; then
    # Stopped all the same? (pg_ctl status: 3 when no server runs.)
    rc=0
    as_pg "$bin/pg_ctl" -D "$d" status >/dev/null 2>&1 || rc=$?
    if [ "$rc" != 3 ]; then
      echo "pgfailover: the primary on $(primary_port) did not stop" >&2
      exit 1
    fi
  fi
  ;;
promote)
  p=$(other_port)
  fenced=$([ "$(cat "$dir/mode")" = fenced ] && echo 1 || true)
  if [ -n "$fenced" ]; then
    # Read-only for every new session until the fence ends.
    psql_on "$p" "ALTER SYSTEM SET default_transaction_read_only = on" >/dev/null
    psql_on "$p" "SELECT pg_reload_conf()" >/dev/null
  fi
  as_pg "$bin/pg_ctl" -D "$(node_dir "$p")" -w -t "$wait_limit" promote >/dev/null
  echo "$p" >"$dir/primary"
  # It has no standby yet: it must not wait for one.
  psql_on "$p" "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
  psql_on "$p" "SELECT pg_reload_conf()" >/dev/null
  if [ -n "$fenced" ]; then
    # Tokens the old primary handed out in commits the standby never
    # received lie above the sequence here: step past them.
    as_pg "$bin/psql" -X -q -h 127.0.0.1 -p "$p" -U postgres -d test -v ON_ERROR_STOP=1 \
      -c "SET default_transaction_read_only = off" \
      -c "DO \$\$ DECLARE s regclass; BEGIN
            FOR s IN SELECT c.oid::regclass FROM pg_class c WHERE c.relkind = 'S' AND c.relname LIKE '%\\_token\\_seq' LOOP
              PERFORM setval(s, nextval(s) + 1000000);
            END LOOP; END \$\$" >/dev/null
    sleep "${DBLOCK_FAILOVER_FENCE:-1}"
    psql_on "$p" "ALTER SYSTEM RESET default_transaction_read_only" >/dev/null
    psql_on "$p" "SELECT pg_reload_conf()" >/dev/null
  fi
  ;;
rejoin)
  make_standby "$(other_port)"
  ;;
stop)
  for p in "$port_a" "$port_b"; do
    if [ -f "$(node_dir "$p")/postmaster.pid" ]; then
      as_pg "$bin/pg_ctl" -D "$(node_dir "$p")" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start sync|async | crash | promote | rejoin | stop" >&2
  exit 2
  ;;
esac
