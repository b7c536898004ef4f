#!/usr/bin/env bash
# Measures a change of the library with the bench command: builds
# cmd/dblock-bench at two revisions, runs them alternately (OLD, NEW, OLD,
# NEW, ...) PAIRS times on the same cases, and prints, per case, each run's
# ratio to its in-run baseline and NEW's median ratio over OLD's. Ratios to a
# baseline measured in the same run cancel most of what the machine does
# meanwhile; alternating cancels drift.
#
#   ./scripts/benchpair.sh OLD NEW [PAIRS] [dblock-bench flags...]
#   ./scripts/benchpair.sh e9373c8 HEAD 3 -cases dblock,contended -duration 2s -rounds 4
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2
pairs=${3:-3}
shift $(($# < 3 ? $# : 3))
tmp=$(mktemp -d)
trap 'for r in old new; do git worktree remove --force "$tmp/$r" >/dev/null 2>&1 || true; done; rm -rf "$tmp"' EXIT
for r in old new; do
  rev=$old
  [ "$r" = new ] && rev=$new
  if [ "$rev" = WORKTREE ]; then
    go build -o "$tmp/$r.bin" ./cmd/dblock-bench
  else
    git worktree add -q --detach "$tmp/$r" "$rev"
    (cd "$tmp/$r" && GOWORK=off go build -o "$tmp/$r.bin" ./cmd/dblock-bench)
  fi
done
for i in $(seq 1 "$pairs"); do
  for r in old new; do
    echo "== pair $i: $r" >&2
    "$tmp/$r.bin" "$@" -json "$tmp/$r.$i.json" -svg "$tmp/$r.$i.svg" >/dev/null
  done
done
python3 - "$tmp" "$pairs" <<'PY'
import json, statistics, sys
tmp, pairs = sys.argv[1], int(sys.argv[2])
runs = {r: [json.load(open(f"{tmp}/{r}.{i}.json")) for i in range(1, pairs + 1)] for r in ("old", "new")}
def ratios(rep):
    # The figure each case is judged by: its ratio to its in-run baseline;
    # the idle waiters' client and server CPU (% of a core) and wake p50
    # (µs); the
    # heartbeat's client CPU per renewal (µs) and heap per held lock (B).
    out = {}
    for row in rep["rows"]:
        k = (row["db"], row["case"], row["goroutines"])
        if row.get("ratio"):
            out[k] = row["ratio"]
        if row.get("idle"):
            out[k[:2] + ("client %",)] = row["idle"]["client_core_pct"]
            out[k[:2] + ("wake p50 µs",)] = row["idle"]["wake_p50_us"]
            if row["idle"]["server_core_pct"] >= 0:
                out[k[:2] + ("server %",)] = row["idle"]["server_core_pct"]
        if row.get("heartbeat"):
            out[k[:2] + ("cpu µs/renewal",)] = row["heartbeat"]["client_cpu_per_renewal_us"]
            out[k[:2] + ("heap B/lock",)] = row["heartbeat"]["heap_bytes_per_lock"]
    return out
old = [ratios(r) for r in runs["old"]]
new = [ratios(r) for r in runs["new"]]
keys = sorted(set().union(*old, *new), key=str)
print("| db | case | g (or figure) | old | new | new ÷ old (medians) |")
print("|---|---|---|---|---|---|")
for k in keys:
    o = [r[k] for r in old if k in r]
    n = [r[k] for r in new if k in r]
    if not o or not n:
        continue
    q = statistics.median(n) / statistics.median(o)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {' '.join(f'{x:.2f}' for x in o)} | {' '.join(f'{x:.2f}' for x in n)} | {q:.2f} |")
PY
