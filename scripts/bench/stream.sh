#!/usr/bin/env bash
# scripts/bench/stream.sh - element streaming over loopback: Spillway's worker->client path (zero-copy
# ElementBatch encoding, byte credits on the gRPC stream, the messages on a data connection - lib/direct.h -
# read whole into a kept buffer, one copy into the batch slot), the same with TLS on the data connection
# (scripts/dev/make-certs.sh's throwaway CA and server certificate for 127.0.0.1; the client verifies it,
# presents none), its fallback (the same messages on the gRPC stream), and a raw TCP
# socket moving the same bytes in the same message sizes. Sender pinned to CPU 0, receiver to CPU 1; medians
# of BENCH_RUNS. Prints MB/s, the ratios (direct >= 0.70x TCP; TLS >= 0.80x TCP, and TLS vs direct), CPU-s
# per GB at both ends and whether kTLS was used; writes build/bench/stream.md.
# STREAM_BYTES: bytes per run (default 6000000000; a small figure for a smoke run).
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
BYTES=${STREAM_BYTES:-6000000000}
CERTS=$(mktemp -d)
trap 'rm -rf "$CERTS"' EXIT
# tls mode's certificates: the tests' throwaway CA and a server certificate naming 127.0.0.1, as the client dials.
bash "$ROOT/scripts/dev/make-certs.sh" "$CERTS" > /dev/null
export STREAMBENCH_TLS_CERT=$CERTS/server.pem STREAMBENCH_TLS_KEY=$CERTS/server.key STREAMBENCH_TLS_CA=$CERTS/ca.pem

# one MODE ELEM_BYTES ELEMENTS RUN
one() {
  local mode=$1 elem=$2 n=$3 run=$4 srv port cli sp
  srv=$(mktemp)
  taskset -c 0 "$BIN" server "$mode" "$elem" "$n" > "$srv" 2>&1 &
  sp=$!
  for _ in $(seq 1 200); do grep -q listening "$srv" && break; sleep 0.05; done
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$srv")
  cli=$(timeout 120 taskset -c 1 "$BIN" client "$mode" "127.0.0.1:$port" "$elem" "$n") || {
    echo "bench-stream: $mode client failed; server said: $(cat "$srv")" >&2; kill "$sp" 2> /dev/null; return 1; }
  wait "$sp"
  printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$elem" "$run" "$cli" "$(tail -1 "$srv")" >> "$RESULTS"
  rm -f "$srv"
  printf '  run %s/%s  %-6s %7d-byte elements  %s\n' "$run" "$RUNS" "$mode" "$elem" \
    "$("$PY" -c 'import json,sys; j = json.loads(sys.argv[1]); print("%.0f MB/s%s" % (j["mb_per_s"],
       "  (" + j["data"] + ")" if j.get("data", "none") not in ("none", "plaintext") else ""))' "$cli")"
}

echo "bench-stream: $RUNS runs; sender on CPU 0, receiver on CPU 1; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= RUNS; r++)); do
  for elem in 150528 602112; do
    n=$((BYTES / elem))                         # ~6 GB per run by default: a second or more at loopback speed
    one tcp "$elem" "$n" "$r"
    one direct "$elem" "$n" "$r"
    one tls "$elem" "$n" "$r"
    one grpc "$elem" "$n" "$r"
  done
done

PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/stream_report.py" "$RESULTS" "$OUT/stream.md"
