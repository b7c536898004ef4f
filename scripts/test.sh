#!/usr/bin/env bash
# The test command: makes sure both databases run (scripts/dbup.sh), then runs
# every test with the race detector. A database that cannot be had is a
# failure, not a skip. The fault-injection suite runs last, verbosely, so its
# counts (acquisitions, faults, overlaps, takeover delays) are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/dbup.sh
go test -race -count=1 -timeout 20m "$@" $(go list ./... | grep -v /internal/faultsuite)
go test -race -count=1 -timeout 20m -v "$@" ./internal/faultsuite/
