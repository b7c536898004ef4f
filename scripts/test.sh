#!/usr/bin/env bash
# The test command: makes sure both databases run (scripts/dbup.sh), then runs
# every test with the race detector. A database that cannot be had is a
# failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/dbup.sh
go test -race -count=1 -timeout 20m "$@" ./...
