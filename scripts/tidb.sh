#!/usr/bin/env bash
# Builds TiDB once from the Go module proxy (cached outside the repository,
# under $DBLOCK_TIDB_CACHE, default ~/.cache/dblock/tidb) and starts a
# single-node tidb-server (unistore, in memory) on 127.0.0.1:4000 if none
# answers there. Prints nothing but progress on stderr; exits non-zero,
# saying why, when TiDB cannot be built or does not answer.
#
#   scripts/tidb.sh          build if needed, start if needed
#   scripts/tidb.sh build    build only
#   scripts/tidb.sh stop     stop the server this script started
#
# The build takes about 12 minutes on a 2-core machine; later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

TIDB_VERSION=v1.1.0-beta.0.20251126154744-e4e814fdc0af
PARSER_VERSION=v0.0.0-20251126154744-e4e814fdc0af
cache=${DBLOCK_TIDB_CACHE:-$HOME/.cache/dblock/tidb}
bin=$cache/tidb-server-$TIDB_VERSION
port=${DBLOCK_TIDB_PORT:-4000}
# The server the checks ask is the one this script starts.
export DBLOCK_TIDB_DSN=${DBLOCK_TIDB_DSN:-root@tcp(127.0.0.1:$port)/test}
log() { printf 'tidb: %s\n' "$*" >&2; }

build() {
  [ -x "$bin" ] && return 0
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/build.XXXXXX")
  # A RETURN trap would outlive this function (and fire, with $work out
  # of scope, when start returns): the directory goes by hand, and on
  # failure with the EXIT trap.
  trap '[ -n "$work" ] && rm -rf "$work"' EXIT
  log "downloading github.com/pingcap/tidb@$TIDB_VERSION and its parser from the module proxy"
  # go mod download prints the directory of each module in the module cache.
  local src parser
  src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/pingcap/tidb@$TIDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  parser=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/pingcap/tidb/pkg/parser@$PARSER_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] && [ -d "$parser" ] || { log "download failed"; return 1; }
  # The module cache is read-only; build from a writable copy with the
  # parser module placed where tidb's go.mod replace expects it.
  cp -r "$src" "$work/tidb"
  chmod -R u+w "$work/tidb"
  rm -rf "$work/tidb/pkg/parser"
  cp -r "$parser" "$work/tidb/pkg/parser"
  chmod -R u+w "$work/tidb/pkg/parser"
  log "building tidb-server (about 12 minutes on 2 cores)"
  (cd "$work/tidb" && GOWORK=off GOFLAGS=-mod=mod go build -o "$work/tidb-server" ./cmd/tidb-server)
  mv "$work/tidb-server" "$bin"
  rm -rf "$work"
  trap - EXIT
  log "built $bin"
}

answers() { go run ./internal/dbtest/ping tidb >/dev/null 2>&1; }

start() {
  if answers; then log "tidb-server answers on 127.0.0.1:$port"; return 0; fi
  build
  log "starting tidb-server on 127.0.0.1:$port"
  # From the cache directory: the server writes its slow-query log to
  # its working directory.
  # (cd, then the server alone in the background: its pid is the one
  # recorded, which stop kills.)
  (cd "$cache" || exit 1
    nohup "$bin" -store unistore -path '' -host 127.0.0.1 -P "$port" -report-status=false \
    -log-file "$cache/tidb.log" -log-slow-query "$cache/tidb-slow.log" >"$cache/tidb.out" 2>&1 &
    echo $! >"$cache/tidb.pid")
  for _ in $(seq 120); do answers && { log "tidb-server answers on 127.0.0.1:$port"; return 0; }; sleep 1; done
  log "tidb-server did not answer in 2 minutes; its log: $cache/tidb.log"
  tail -20 "$cache/tidb.out" >&2 || true
  return 1
}

case ${1:-start} in
  build) build ;;
  start) start ;;
  stop) [ -f "$cache/tidb.pid" ] && kill "$(cat "$cache/tidb.pid")" 2>/dev/null; rm -f "$cache/tidb.pid" ;;
  *) log "usage: $0 [start|build|stop]"; exit 2 ;;
esac
