#!/usr/bin/env bash
# The release check: does the module layout work for a user once tagged?
#
#   scripts/release-check.sh [VERSION]
#
# It copies the work tree (committed or not) into a throwaway git
# repository, tags it as a release does (VERSION for the root module,
# otel/VERSION for github.com/dblockhq/dblock/otel, on one commit; see
# docs/releasing.md), and serves that repository as
# https://github.com/dblockhq/dblock to a module outside the workspace
# (GOWORK=off, GOFLAGS=-mod=mod, a git url.insteadOf in a private git
# config, an empty module cache of its own so no pretend version reaches
# the shared one, the other modules from the local module cache or the
# proxy, checked against the checksum database but for the pretend tags
# (GOPRIVATE)). That module runs
#   go get github.com/dblockhq/dblock/otel@VERSION
# builds and vets a program using both modules, and checks that it got
# the root module at VERSION, as the otel module's go.mod requires it, and
# that the command's dependencies resolve at the tag.
#
# VERSION defaults to the version of github.com/dblockhq/dblock that
# otel/go.mod requires: a release version, never a pseudo-version, since a
# user's go command ignores otel/go.mod's replace directive. Takes a few
# seconds with a warm build cache; no database needed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

required=$(cd otel && GOWORK=off go list -m -f '{{.Version}}' github.com/dblockhq/dblock)
version=${1:-$required}
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || [[ $version =~ -[0-9]{14}-[0-9a-f]{12}$ ]] || [[ $version =~ \.0\.[0-9]{14}-[0-9a-f]{12}$ ]]; then
  echo "release-check: $version is not a release version (otel/go.mod requires github.com/dblockhq/dblock $required;" >&2
  echo "a pseudo-version names no tag, and users ignore otel/go.mod's replace): see docs/releasing.md" >&2
  exit 1
fi
if [ "$version" != "$required" ]; then
  echo "release-check: otel/go.mod requires github.com/dblockhq/dblock $required, not $version: a user of otel/$version would get $required" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
gomodcache=$(go env GOMODCACHE)
goproxy=$(go env GOPROXY)

echo "== a repository tagged $version and otel/$version"
mkdir "$tmp/repo"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue # deleted in the work tree
  mkdir -p "$tmp/repo/$(dirname "$f")"
  cp -p "$f" "$tmp/repo/$f"
done
(
  cd "$tmp/repo"
  git init -q
  git add -A
  git -c user.name=release-check -c user.email=release-check@localhost commit -qm "release $version"
  git tag "$version"
  git tag "otel/$version"
)

echo "== a module outside the workspace: go get github.com/dblockhq/dblock/otel@$version"
printf '[url "file://%s"]\n\tinsteadOf = https://github.com/dblockhq/dblock\n[protocol "file"]\n\tallow = always\n' "$tmp/repo" >"$tmp/gitconfig"
mkdir "$tmp/user"
cd "$tmp/user"
export GIT_CONFIG_GLOBAL=$tmp/gitconfig GIT_CONFIG_NOSYSTEM=1
export GOWORK=off GOFLAGS=-mod=mod GOMODCACHE=$tmp/modcache
export GOPRIVATE=github.com/dblockhq GONOSUMDB=github.com/dblockhq
export GOPROXY=file://$gomodcache/cache/download,$goproxy
cat >go.mod <<EOF
module example.com/user

go $(cd "$root" && go mod edit -json | sed -n 's/^[[:space:]]*"Go": "\(.*\)",*$/\1/p')
EOF
cat >main.go <<'EOF'
// Command user is what a user of both modules writes.
package main

import (
	"database/sql"
	"log"
	"os"

	"github.com/dblockhq/dblock"
	dblockotel "github.com/dblockhq/dblock/otel"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	obs, err := dblockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	locker.Close()
}
EOF
go get "github.com/dblockhq/dblock/otel@$version" github.com/jackc/pgx/v5
go build -o /dev/null .
go vet .
got=$(go list -m -f '{{.Version}}' github.com/dblockhq/dblock)
if [ "$got" != "$version" ]; then
  echo "release-check: the user got github.com/dblockhq/dblock $got, not $version" >&2
  exit 1
fi
echo "== go install github.com/dblockhq/dblock/cmd/dblock@$version resolves (-n: prints, builds nothing)"
GOFLAGS= go install -n "github.com/dblockhq/dblock/cmd/dblock@$version" 2>"$tmp/install.log" || {
  cat "$tmp/install.log" >&2
  exit 1
}
echo "release-check: ok, github.com/dblockhq/dblock $version and github.com/dblockhq/dblock/otel $version"
