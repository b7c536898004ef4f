#!/usr/bin/env bash
# Makes sure PostgreSQL and MySQL/MariaDB answer at the test DSNs
# (DBLOCK_POSTGRES_DSN / DBLOCK_MYSQL_DSN, or the defaults:
# postgres@127.0.0.1:5432/test and root@127.0.0.1:3306/test, no passwords).
#
#  1. already reachable: nothing to do;
#  2. a Docker engine answers: docker compose up -d --wait (docker-compose.yml);
#  3. otherwise, as root on Debian: install the postgresql and mariadb-server
#     packages if missing, start them, and create the test database and users.
# Then it makes sure the command-line tools the tests run are on PATH: the
# databases' own clients (psql, mysql or mariadb, sqlite3:
# TestMigratePrintApplied applies migrate --print's SQL with them) and the
# shells dblock completes (zsh, fish: TestCompletion; bash is there),
# installing postgresql-client, mariadb-client, sqlite3, zsh and fish as
# root on Debian when one is missing.
# Exits non-zero, saying why, when a database still cannot be reached or a
# client cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'dbup: %s\n' "$*" >&2; }
ping() { go run ./internal/dbtest/ping "$@" >/dev/null 2>&1; }

# clients installs the command-line tools the tests run that are missing.
clients() {
  local need=()
  command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
  command -v mysql >/dev/null 2>&1 || command -v mariadb >/dev/null 2>&1 || need+=(mariadb-client)
  command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
  command -v zsh >/dev/null 2>&1 || need+=(zsh)
  command -v fish >/dev/null 2>&1 || need+=(fish)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing clients: install ${need[*]} (not root with apt-get here)"
    return 1
  fi
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
}

missing=()
for d in postgres mysql; do ping "$d" || missing+=("$d"); done
[ ${#missing[@]} -eq 0 ] && { log "postgres and mysql reachable"; clients; exit; }
log "not reachable: ${missing[*]}"

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  log "starting them with docker compose"
  docker compose up -d --wait
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  for d in "${missing[@]}"; do
    if [ "$d" = postgres ] && [ -n "${DBLOCK_POSTGRES_DSN:-}" ]; then log "DBLOCK_POSTGRES_DSN is set; not installing a server for it"; exit 1; fi
    if [ "$d" = mysql ] && [ -n "${DBLOCK_MYSQL_DSN:-}" ]; then log "DBLOCK_MYSQL_DSN is set; not installing a server for it"; exit 1; fi
  done
  export DEBIAN_FRONTEND=noninteractive
  need=()
  for d in "${missing[@]}"; do
    case $d in
      postgres) ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql) ;;
      mysql) [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server) ;;
    esac
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  for d in "${missing[@]}"; do
    case $d in
      postgres)
        ver=$(ls /etc/postgresql | sort -V | tail -n1)
        hba=/etc/postgresql/$ver/main/pg_hba.conf
        if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
          # Test servers only: trust loopback, as the default DSN has no password.
          sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
        fi
        pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null ||
          pg_ctlcluster --skip-systemctl-redirect "$ver" main reload
        for _ in $(seq 60); do pg_isready -q -h 127.0.0.1 && break; sleep 0.5; done
        su postgres -c "psql -Atqc \"SELECT 1 FROM pg_database WHERE datname='test'\"" | grep -q 1 ||
          su postgres -c "createdb test"
        ;;
      mysql)
        install -d -o mysql -g mysql /run/mysqld
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
        for _ in $(seq 60); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.5; done
        mariadb -uroot -e "CREATE DATABASE IF NOT EXISTS test;
          CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
          GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
        ;;
    esac
  done
else
  log "no Docker engine and not root with apt-get: start the databases yourself or set the DSNs"
  exit 1
fi

for d in postgres mysql; do
  for _ in $(seq 30); do ping "$d" && break; sleep 1; done
  ping "$d" || { go run ./internal/dbtest/ping "$d" >&2 || true; log "$d still unreachable"; exit 1; }
done
log "postgres and mysql reachable"
clients
