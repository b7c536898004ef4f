#!/usr/bin/env bash
# Compares the public API of the module at the work tree with that at a
# base revision (default: the tag or commit in $1, else 2458749, where the
# core rebuild began), with golang.org/x/exp/cmd/apidiff in module mode
# (every public package). Prints apidiff's report; exits non-zero when it
# finds an incompatible change.
#
#   ./scripts/apidiff.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-2458749}
apidiff="go run golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4"
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/old" "$base"
(cd "$tmp/old" && GOWORK=off $apidiff -m -w "$tmp/old.export" github.com/dblockhq/dblock 2>/dev/null)
GOWORK=off $apidiff -m -w "$tmp/new.export" github.com/dblockhq/dblock 2>/dev/null
out=$($apidiff -m "$tmp/old.export" "$tmp/new.export" 2>&1 | grep -v '^Ignoring internal package' || true)
echo "apidiff $base..work tree:"
echo "${out:-no changes}"
if grep -q '^Incompatible changes:' <<<"$out"; then
  exit 1
fi
