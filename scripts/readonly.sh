#!/usr/bin/env bash
# A private PostgreSQL and a private MariaDB on loopback that the read-only
# writer test (TestReadOnlyWriter) turns read-only and back mid-run, as a
# managed failover leaves pooled connections on an old writer turned
# reader. The shared servers (5432, 3306) are never touched.
#
#   scripts/readonly.sh start                     fresh servers: PostgreSQL on 26460, MariaDB on 26461
#   scripts/readonly.sh stop                      stops both and removes their data
#   scripts/readonly.sh dsn postgres|mysql        prints the DSN the test locks through
#   scripts/readonly.sh set postgres|mysql on|off turns the server read-only, or writable again
#
# PostgreSQL (Debian's 15, as scripts/pgfailover.sh runs it; installed if
# missing): read-only is default_transaction_read_only, set with ALTER
# SYSTEM and a reload, which every session's next transaction follows; its
# writes fail with SQLSTATE 25006. MariaDB (the installed mariadbd, a
# datadir of its own, as scripts/galera.sh runs its nodes): SET GLOBAL
# read_only; the test locks as 'locker'@'127.0.0.1', which has every
# privilege on database test and none of READ ONLY ADMIN or SUPER (they
# would let it write on), so its writes fail with 1290. Data live under
# DBLOCK_READONLY_DIR (default /tmp/dblock-readonly); ports:
# DBLOCK_READONLY_PORTS (default "26460 26461"). A wait for a server lasts
# at most 120 s, then the command fails saying what it waited for.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DBLOCK_PG_BIN:-/usr/lib/postgresql/15/bin}
dir=${DBLOCK_READONLY_DIR:-/tmp/dblock-readonly}
read -r pg_port my_port <<<"${DBLOCK_READONLY_PORTS:-26460 26461}"
log() { printf 'readonly.sh: %s\n' "$*" >&2; }

as_pg() {
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}
psql_pg() { as_pg "$bin/psql" -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atc "$1"; }
mysql_root() { mariadb --protocol=socket -S "$dir/my/mysqld.sock" -uroot -N -B -e "$1"; }

pg_start() {
  if ! [ -x "$bin/initdb" ]; then
    log "installing postgresql-15"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
  fi
  install -d -o postgres "$dir/pg"
  as_pg "$bin/initdb" -D "$dir/pg/data" -U postgres -A trust --no-sync >/dev/null
  cat >>"$dir/pg/data/postgresql.conf" <<CONF
fsync = off
max_connections = 200
CONF
  as_pg "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/log" -w -t 120 \
    -o "-c port=$pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir/pg" start >/dev/null
  psql_pg "CREATE DATABASE test" >/dev/null
}

my_start() {
  [ -x /usr/sbin/mariadbd ] || { log "mariadbd is not installed (package mariadb-server)"; return 1; }
  install -d -o mysql -g mysql "$dir/my" "$dir/my/data"
  cat >"$dir/my/my.cnf" <<EOF
[mariadbd]
user=mysql
datadir=$dir/my/data
socket=$dir/my/mysqld.sock
pid-file=$dir/my/mysqld.pid
log-error=$dir/my/error.log
bind-address=127.0.0.1
port=$my_port
skip-name-resolve
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
innodb_flush_log_at_trx_commit=2
max_connections=300
EOF
  mariadb-install-db --defaults-file="$dir/my/my.cnf" --user=mysql --skip-test-db \
    --auth-root-authentication-method=socket >"$dir/my/install.log" 2>&1 ||
    { log "mariadb-install-db failed: $dir/my/install.log"; tail -20 "$dir/my/install.log" >&2; return 1; }
  nohup /usr/sbin/mariadbd --defaults-file="$dir/my/my.cnf" >>"$dir/my/out.log" 2>&1 &
  echo $! >"$dir/my/pid"
  local deadline=$((SECONDS + 120))
  until mysql_root "SELECT 1" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$(cat "$dir/my/pid")" 2>/dev/null; then
      log "MariaDB on $my_port did not start; its log: $dir/my/error.log"
      tail -20 "$dir/my/error.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  mysql_root "CREATE DATABASE test;
    CREATE USER 'locker'@'127.0.0.1';
    GRANT ALL PRIVILEGES ON test.* TO 'locker'@'127.0.0.1';"
}

stop() {
  if [ -f "$dir/pg/data/postmaster.pid" ]; then
    as_pg "$bin/pg_ctl" -D "$dir/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ -f "$dir/my/pid" ]; then
    local pid
    pid=$(cat "$dir/my/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 240); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

which_server() {
  case ${1:-} in
    postgres | mysql) ;;
    *) log "want postgres or mysql, not '${1:-}'"; exit 2 ;;
  esac
}

cmd=${1:-}
case $cmd in
start)
  stop
  mkdir -p "$dir"
  chmod 755 "$dir"
  pg_start
  my_start
  log "PostgreSQL on $pg_port, MariaDB on $my_port"
  ;;
stop) stop ;;
dsn)
  which_server "${2:-}"
  if [ "$2" = postgres ]; then
    echo "postgres://postgres@127.0.0.1:$pg_port/test?sslmode=disable"
  else
    echo "locker@tcp(127.0.0.1:$my_port)/test"
  fi
  ;;
set)
  which_server "${2:-}"
  case ${3:-} in on | off) ;; *) log "set $2: want on or off"; exit 2 ;; esac
  if [ "$2" = postgres ]; then
    if [ "$3" = on ]; then
      psql_pg "ALTER SYSTEM SET default_transaction_read_only = on" >/dev/null
    else
      psql_pg "ALTER SYSTEM RESET default_transaction_read_only" >/dev/null
    fi
    psql_pg "SELECT pg_reload_conf()" >/dev/null
  else
    mysql_root "SET GLOBAL read_only = $([ "$3" = on ] && echo 1 || echo 0)"
  fi
  ;;
*)
  echo "usage: $0 start | stop | dsn postgres|mysql | set postgres|mysql on|off" >&2
  exit 2
  ;;
esac
