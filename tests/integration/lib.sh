#!/usr/bin/env bash
# tests/integration/lib.sh - shared by the integration tests (source it): result counters and check
# helpers, waiting for a daemon's "listening on HOST:PORT" line, and a cleanup trap that kills every process
# recorded in PIDS (continuing stopped ones first) and removes WORK (kept when KEEP is set).
# shellcheck disable=SC2034  # PIDS, WORK, pass and fail are used by the sourcing script
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${SPW_BUILD:-$ROOT/build}   # SPW_BUILD: run against another build (e.g. a sanitizer build)
WORK=$(mktemp -d /tmp/spw-int-XXXXXX)
PIDS=()
pass=0
fail=0
cleanup() {
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# wait_port FILE: prints the port of the "listening on HOST:PORT" line FILE gets within 5 s.
wait_port() {
  for _ in $(seq 1 100); do
    sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$1" | grep . && return 0
    sleep 0.05
  done
  return 1
}
# finish: the closing line and the exit status.
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
