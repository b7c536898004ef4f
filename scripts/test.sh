#!/usr/bin/env bash
# The test command: makes sure both databases run (scripts/dbup.sh), then runs
# every test with the race detector (also those of the otel module, a module
# of its own), the fault-injection suite (verbosely, so
# its counts are printed), a smoke run of the bench command (-check: every
# case runs, no errors, no overlapping holders; speed is not judged) and one
# of the peer-libraries benchmark (bench/peers -check: every case, with etcd,
# Redis and ZooKeeper started by bench/peers/servers.sh on ports of their own
# and stopped at the step's end; a server that cannot be had fails the step)
# and the browser test of dblock ui (ui/browsertest, a module of its own:
# headless Debian chromium, installed by scripts/chromium.sh when missing,
# driven by chromedp; no chromium fails the step);
# then the same code
# on TiDB (scripts/tidb.sh builds it once from the Go module proxy, cached
# outside the repository, in the background from the end of go test's
# step, and starts it): the conformance suite, the root
# package's tests, package advisory's refusal and the fault suite, with
# DBLOCK_MYSQL_DSN pointed at it; and the fault suite in portable mode
# (WithPortable) on PostgreSQL and MariaDB; the failover suite on a
# PostgreSQL primary and standby (scripts/pgfailover.sh), and beside it a
# private PostgreSQL and MariaDB turned read-only mid-run
# (scripts/readonly.sh, TestReadOnlyWriter); the
# conformance suite, the root package's PostgreSQL tests and package
# dblockpgx's on PostgreSQL 12 and 18 (scripts/pgversions.sh;
# DBLOCK_PG_VERSIONS picks other majors), and beside them the same through
# PgBouncer 1.18 in transaction and session pooling (scripts/pgbouncer.sh
# check);
# and a subset on the oldest Go the modules support (go.mod's go line, see
# below).
# The fault suite's portable and FIFO modes run side by side, and so do the
# PostgreSQL versions with PgBouncer, and the failover suite with the
# read-only writer (group_step below).
# Every step runs even if an earlier one failed; a summary lists each step's
# result and the script exits non-zero if any failed. A database that cannot
# be had is a failure, not a skip.
set -uo pipefail
cd "$(dirname "$0")/.."
results=()
failed=0
step() {
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS
  if "$@"; then
    results+=("ok    $name ($((SECONDS - start)) s)")
  else
    results+=("FAIL  $name ($((SECONDS - start)) s, exit $?)")
    failed=1
  fi
}
# Steps side by side: group_step starts one in the background, its output
# kept in a file of its own; group_wait waits for the group, then prints
# each step's output whole, in the order they were started, and records
# their results. Used for steps that wait more than they compute (the fault
# suites' modes, the PostgreSQL versions): on 2 cores, two of them side by
# side take about as long as the longer one alone.
group_pids=()
group_names=()
group_logs=()
group_step() {
  local name=$1 log
  shift
  log=$(mktemp)
  group_names+=("$name")
  group_logs+=("$log")
  (
    results=()
    step "$name, side by side" "$@" >"$log" 2>&1
    printf '%s\n' "${results[@]}" >"$log.result"
  ) &
  group_pids+=($!)
}
group_wait() {
  local i r
  for i in "${!group_pids[@]}"; do
    wait "${group_pids[$i]}"
  done
  for i in "${!group_pids[@]}"; do
    cat "${group_logs[$i]}"
    r=$(cat "${group_logs[$i]}.result" 2>/dev/null || echo "FAIL  ${group_names[$i]} (no result)")
    results+=("$r")
    [[ $r == ok* ]] || failed=1
    rm -f "${group_logs[$i]}" "${group_logs[$i]}.result"
  done
  group_pids=()
  group_names=()
  group_logs=()
}
# A test.sh stopped by a signal stops a group's steps too, and the
# PostgreSQL versions it started.
pg_started=
on_signal() {
  [ ${#group_pids[@]} -eq 0 ] || kill "${group_pids[@]}" 2>/dev/null
  [ -z "${tidb_build:-}" ] || kill "$tidb_build" 2>/dev/null
  # shellcheck disable=SC2086 # a list of majors
  [ -z "$pg_started" ] || ./scripts/pgversions.sh stop $pg_started
  exit 143
}
trap on_signal TERM INT HUP
step "databases (scripts/dbup.sh)" ./scripts/dbup.sh
step "tests (go test -race)" go test -race -count=1 -timeout 20m "$@" $(go list ./... | grep -v /internal/faultsuite)
# TiDB's first build (about 12 minutes of 2 cores; nothing once cached)
# runs from here in the background, beside the steps that wait more than
# they compute; the TiDB step below waits for it.
tidb_build_log=$(mktemp)
./scripts/tidb.sh build >"$tidb_build_log" 2>&1 &
tidb_build=$!
step "otel module (go test -race)" bash -c 'cd otel && go test -race -count=1 -timeout 10m "$@" ./...' otel "$@"
step "fault suite" go test -race -count=1 -timeout 20m -v "$@" ./internal/faultsuite/
out=$(mktemp -d)
step "bench smoke (dblock-bench -check)" go run ./cmd/dblock-bench -check -db all -duration 200ms -rounds 2 \
  -ttl 5s -held 200 -intervals 1 -idle-keys 1,2 -json "$out/r.json" -svg "$out/r.svg" -md "$out/r.md" \
  -held-svg "$out/held.svg" -soak-svg "$out/soak.svg" -rows-svg "$out/rows.svg"
step "peers smoke (bench/peers -check, with servers.sh's etcd, Redis, ZooKeeper)" bash -c 'cd bench/peers && trap "./servers.sh stop" EXIT && ./servers.sh start &&
  GOWORK=off go run . -check -db all -systems all -duration 300ms -rounds 1 -ttl 2s -lease 4s -default-leases=false -handovers 3 -idle 50 -idle-window 500ms -svg "$1/peers.svg"' peers "$out"
rm -rf "$out"
step "browser test of dblock ui (ui/browsertest, chromium from scripts/chromium.sh)" bash -c 'cd ui/browsertest && ../../scripts/chromium.sh >/dev/null &&
  GOWORK=off go test -count=1 -timeout 5m "$@" .' browser "$@"
group_step "fault suite, portable mode (WithPortable)" env DBLOCK_FAULT_PORTABLE=1 go test -race -count=1 -timeout 20m -v "$@" -run TestFaults ./internal/faultsuite/
group_step "fault suite, FIFO mode (WithFIFO)" env DBLOCK_FAULT_FIFO=1 go test -race -count=1 -timeout 20m -v "$@" -run TestFaults ./internal/faultsuite/
group_wait
# The oldest Go the modules support (go.mod's go line), fetched from the
# module proxy by GOTOOLCHAIN: build and vet everything, then what a user
# meets first (README's program, the examples, dblockpgx's too, the
# command's DSNs and its embedded SQLite) and the conformance suite on every database, without
# -race (about a minute on 2 cores with a warm cache, most of it compiling).
# The dependencies are those of every other step: go.mod holds them at
# versions that allow Go 1.25.
oldest_go=${DBLOCK_OLDEST_GO:-go1.25.14}
step "Go ${oldest_go#go} (GOTOOLCHAIN=$oldest_go: build, vet, a subset of tests)" env GOTOOLCHAIN="$oldest_go" bash -c '
  set -e
  go version
  go build ./...
  go vet ./...
  (cd otel && go vet ./...)
  go test -count=1 -timeout 10m "$@" -run "TestREADME|Example" .
  go test -count=1 -timeout 10m "$@" -run Example ./dblockpgx/
  go test -count=1 -timeout 10m "$@" -run TestConformance ./internal/dialect/
  go test -count=1 -timeout 10m "$@" -run "TestDSN|TestParse|TestEmbedded" ./cmd/dblock/
  (cd otel && go test -count=1 -timeout 10m "$@" ./...)' oldest "$@"
# The PostgreSQL version matrix: besides the shared server (15), the oldest
# major dblock supports and the newest, from scripts/pgversions.sh (npm's
# server binaries, cached; each on a port of its own, stopped after the
# tests, or when test.sh is stopped): the conformance suite, the root
# package's PostgreSQL subtests (-run /postgres; top-level tests without
# subtests run too, on their own database) and package dblockpgx.
# The servers start one after the other (a first start may install npm and
# the server binaries); the tests then run side by side.
majors=${DBLOCK_PG_VERSIONS:-12 18}
pg_started=$majors
# shellcheck disable=SC2086 # majors is a list
step "PostgreSQL $majors (scripts/pgversions.sh start)" ./scripts/pgversions.sh start $majors
# Beside them (it waits more than it computes): PgBouncer 1.18 from Debian's
# package, in transaction and in session pooling, in front of the shared
# PostgreSQL (scripts/pgbouncer.sh check: the pooler tests, then through
# each mode the conformance suite, the root package's row-lock tests and a
# short fault suite; the instances are stopped at its end).
group_step "PgBouncer 1.18, transaction and session pooling (scripts/pgbouncer.sh check)" ./scripts/pgbouncer.sh check "$@"
for major in $majors; do
  group_step "PostgreSQL $major (scripts/pgversions.sh): conformance, root package (go test -race -run /postgres), dblockpgx" bash -c '
    major=$1
    shift
    DBLOCK_POSTGRES_DSN=$(./scripts/pgversions.sh dsn "$major") || exit 1
    export DBLOCK_POSTGRES_DSN
    rc=0
    go test -race -count=1 -timeout 10m "$@" -run "TestConformance/postgres" ./internal/dialect/ || rc=1
    go test -race -count=1 -timeout 20m "$@" -run "/postgres" . || rc=1
    go test -race -count=1 -timeout 10m "$@" ./dblockpgx/ || rc=1
    exit $rc' pgversion "$major" "$@"
done
group_wait
# shellcheck disable=SC2086
./scripts/pgversions.sh stop $majors || true
pg_started=
tidb=${DBLOCK_TIDB_DSN:-root@tcp(127.0.0.1:4000)/test}
tidb_wait() {
  local rc=0
  wait "$tidb_build" || rc=$?
  cat "$tidb_build_log"
  rm -f "$tidb_build_log"
  [ "$rc" -eq 0 ] || return "$rc"
  ./scripts/tidb.sh
}
step "TiDB (scripts/tidb.sh: its build, started in the background after the tests, then start)" tidb_wait
step "TiDB: conformance, advisory and the history's commands (go test -race)" env DBLOCK_MYSQL_DSN="$tidb" go test -race -count=1 -timeout 20m "$@" \
  -run 'TestConformance/mysql|TestEngineOf|TestDistributedEngineRefused/mysql|TestHistoryCommand/mysql|TestHistoryCommandOff/mysql|TestControlCharacters/mysql' ./internal/dialect/ ./advisory/ ./cmd/dblock/
step "TiDB: root package (go test -race -run /mysql)" env DBLOCK_MYSQL_DSN="$tidb" go test -race -count=1 -timeout 20m "$@" -run '/mysql' .
step "TiDB: fault suite (5,000 acquisitions: TiDB hands a key over at about half MariaDB's rate)" env DBLOCK_MYSQL_DSN="$tidb" DBLOCK_FAULT_ACQUISITIONS=5000 go test -race -count=1 -timeout 20m -v "$@" -run 'TestFaults/mysql' ./internal/faultsuite/
# The server scripts/tidb.sh started is stopped here (it costs half a core
# while idle, and the steps after it are timed); one it found answering is
# left alone.
./scripts/tidb.sh stop || true
# PostgreSQL failover: a primary and a streaming standby on 25432/25433
# (scripts/pgfailover.sh, which installs postgresql-15 if it is missing),
# failed over three times under the fault suite's workers, synchronous,
# asynchronous (measured, not failed) and asynchronous fenced (every check
# holds), about two and a half minutes on 2 cores; the pair is stopped
# whatever happens.
# The output is long and a CI log may keep only its tail: when the step
# fails, it ends with the lines that say why (the failures' messages, the
# figures), gathered from the output above.
# Beside the failover suite: a private PostgreSQL and MariaDB
# (scripts/readonly.sh, started and stopped by the test) turned read-only
# mid-run and back, with waiters, holders and a Singleton
# (TestReadOnlyWriter).
group_step "A writer turned read-only, PostgreSQL and MariaDB (scripts/readonly.sh, TestReadOnlyWriter)" \
  env DBLOCK_READONLY=1 go test -race -count=1 -timeout 10m -v "$@" -run TestReadOnlyWriter .
group_step "PostgreSQL failover (scripts/pgfailover.sh, TestFailover)" bash -c '
  out=$(mktemp)
  cleanup() { ./scripts/pgfailover.sh stop; rm -f "$out"; }
  trap cleanup EXIT
  DBLOCK_FAILOVER=sync,async,fenced go test -race -count=1 -timeout 10m -v "$@" -run TestFailover ./internal/faultsuite/ 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== why the failover suite failed (its lines above that say so, the last 30 of them):"
    # A pgfailover.sh failure: the command and the first lines of its output.
    awk '"'"'
      /failed write \(expected under faults\)|VIOLATION \(measured\)/ { next }
      /pgfailover\.sh [a-z]+: / { print; more = 6; next }
      more > 0 { print; more--; next }
      /--- FAIL|^FAIL|panic:|test timed out|violation|not above|did not|no acquisition|overlap on|a reader with a writer|linearizab|token order|after token [0-9]+ was acquired|recorded above the guard|has no end|never taken again|not taken again|was reaped|proved little|no live|the shared lock had|guard refused|exited|malformed|cleanup:|terminate session|kill w|start w|still under way/ { print }
    '"'"' "$out" | tail -n 30
  fi
  exit "$rc"' failover "$@"
group_wait
# Galera (scripts/galera.sh check: 3 nodes; conformance, advisory, the fault
# suite over the nodes with node 3 killed and rejoined) runs by hand, not
# here: one run of two with the node kill found a holder whose Err said nil
# after a larger token of its key was handed out (docs/operations.md,
# "Galera"), not yet explained.
echo "== summary"
printf '%s\n' "${results[@]}"
exit $failed
