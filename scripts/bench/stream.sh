#!/usr/bin/env bash
# scripts/bench/stream.sh - element streaming over loopback: Spillway's worker->client path (zero-copy
# ElementBatch encoding, byte credits on the gRPC stream, the messages on a data connection - lib/direct.h -
# read whole into a kept buffer, one copy into the batch slot), its fallback (the same messages on the gRPC
# stream), and a raw TCP socket moving the same bytes in the same message sizes. Sender pinned to CPU 0,
# receiver to CPU 1; medians of BENCH_RUNS. Prints MB/s, the ratio (target >= 0.70) and CPU-seconds per GB
# at both ends; writes build/bench/stream.md.
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
BIN=${STREAMBENCH:-$B/tests/streambench}
RUNS=${BENCH_RUNS:-3}
OUT=$B/bench
need_built "$BIN"
mkdir -p "$OUT"
RESULTS=$OUT/stream.tsv
: > "$RESULTS"

# one MODE ELEM_BYTES ELEMENTS RUN
one() {
  local mode=$1 elem=$2 n=$3 run=$4 srv port cli sp
  srv=$(mktemp)
  taskset -c 0 "$BIN" server "$mode" "$elem" "$n" > "$srv" 2>&1 &
  sp=$!
  for _ in $(seq 1 200); do grep -q listening "$srv" && break; sleep 0.05; done
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$srv")
  cli=$(timeout 120 taskset -c 1 "$BIN" client "$mode" "127.0.0.1:$port" "$elem" "$n")
  wait "$sp"
  printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$elem" "$run" "$cli" "$(tail -1 "$srv")" >> "$RESULTS"
  rm -f "$srv"
  printf '  run %s/%s  %-4s %7d-byte elements  %s\n' "$run" "$RUNS" "$mode" "$elem" \
    "$("$PY" -c 'import json,sys; print("%.0f MB/s" % json.loads(sys.argv[1])["mb_per_s"])' "$cli")"
}

echo "bench-stream: $RUNS runs; sender on CPU 0, receiver on CPU 1; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= RUNS; r++)); do
  for elem in 150528 602112; do
    n=$((6000 * 1000 * 1000 / elem))           # ~6 GB per run: a second or more at loopback speed
    one tcp "$elem" "$n" "$r"
    one direct "$elem" "$n" "$r"
    one grpc "$elem" "$n" "$r"
  done
done

PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/stream_report.py" "$RESULTS" "$OUT/stream.md"
