#!/usr/bin/env bash
# scripts/lib/harness.sh - what the integration tests, benches, evals, the soak and the demo share to run
# Spillway's daemons (source it; it starts nothing by itself): ROOT, B (the build; SPW_BUILD picks another),
# PY, need_built (build outputs are there, or exit saying so), wait_port (the port a daemon prints on its
# "listening on HOST:PORT" line), stop_daemons (every pid in PIDS, stopped ones continued first, waited for),
# json_field (a value of spillctl's --json report) and median (of numbers on stdin). Python helpers are in
# scripts/lib/*.py.
# shellcheck disable=SC2034  # ROOT, B, PY and PIDS are the sourcing script's
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${B:=${SPW_BUILD:-$ROOT/build}}"     # a B the sourcing script set first is kept
PY=/usr/bin/python3                     # Debian's, with numpy and torch: the peers' and the reports' Python
PIDS=()

# need_built FILE...: exit 1, naming the first missing one, unless every FILE (a build output) is there.
need_built() {
  local f
  for f in "$@"; do
    [ -e "$f" ] || { echo "$(basename "$0" .sh): $f is missing: build first (make all, or make bench)" >&2; exit 1; }
  done
}

# wait_port FILE [SECONDS]: prints the port of the "listening on HOST:PORT" line FILE gets within SECONDS
# (10); 1 when none came.
wait_port() {
  local tries=$(( ${2:-10} * 20 ))
  for _ in $(seq 1 "$tries"); do
    sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$1" | grep . && return 0
    sleep 0.05
  done
  return 1
}

# stop_daemons [SIGNAL]: send SIGNAL (KILL) to every pid in PIDS - continuing stopped ones first - and wait
# for each; PIDS is empty afterwards.
stop_daemons() {
  local p
  for p in "${PIDS[@]}"; do
    kill -CONT "$p" 2> /dev/null
    kill -"${1:-KILL}" "$p" 2> /dev/null
    wait "$p" 2> /dev/null
  done
  PIDS=()
  return 0
}

# json_field FILE EXPR: the value at EXPR (a Python subscript: '["plan"]["cut"]') of the last JSON line in
# FILE (spillctl's --json report; - reads stdin).
json_field() {
  /usr/bin/python3 "$ROOT/scripts/lib/spw_report.py" "$1" "$2"
}

# median: the median of the numbers on stdin, one per line.
median() {
  sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
