#!/usr/bin/env bash
# scripts/bench/stream.sh - element streaming over loopback: Spillway's worker->client path (zero-copy
# ElementBatch encoding, byte credits on the gRPC stream, the messages on a data connection - lib/direct.h -
# read whole into a kept buffer, one copy into the batch slot), its fallback (the same messages on the gRPC
# stream), and a raw TCP socket moving the same bytes in the same message sizes. Sender pinned to CPU 0,
# receiver to CPU 1; medians of BENCH_RUNS. Prints MB/s, the ratio (target >= 0.70) and CPU-seconds per GB
# at both ends; writes build/bench/stream.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${STREAMBENCH:-$ROOT/build/tests/streambench}
RUNS=${BENCH_RUNS:-3}
OUT=$ROOT/build/bench
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "bench-stream: $BIN is missing: run make bench" >&2; exit 1; }
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

PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$RESULTS" "$OUT/stream.md" <<'PYEOF'
import json, statistics, sys
import bench_targets
targets = []
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
data = {}
for mode, elem, run, cli, srv in rows:
    c, s = json.loads(cli), json.loads(srv)
    data.setdefault((mode, int(elem)), []).append((c["mb_per_s"], c["cpu_s_per_gb"], s["cpu_s"] / (c["mb_per_s"] * c["seconds"] / 1e3)))
lines = ["| element | raw TCP MB/s | Spillway MB/s | ratio | target | receiver CPU-s/GB (TCP / Spillway) | sender CPU-s/GB (TCP / Spillway) | gRPC stream (fallback) MB/s |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
print()
print("%-22s %12s %14s %7s %8s %26s %26s %14s" % ("element", "raw TCP MB/s", "Spillway MB/s", "ratio", "target",
                                                  "recv CPU-s/GB tcp/spw", "send CPU-s/GB tcp/spw", "gRPC MB/s"))
for elem, name in ((150528, "150 KB (uint8 224x224x3)"), (602112, "600 KB (float32 3x224x224)")):
    t, d, g = data.get(("tcp", elem)), data.get(("direct", elem)), data.get(("grpc", elem))
    if not t or not d or not g:
        continue
    med = lambda v, i: statistics.median(x[i] for x in v)
    ratio = med(d, 0) / med(t, 0)
    verdict = "PASS" if ratio >= 0.70 else "FAIL"
    print("%-22s %12.0f %14.0f %6.2fx %8s %12.3f / %-11.3f %12.3f / %-11.3f %6.0f (%.2fx) %s" % (
        name[:22], med(t, 0), med(d, 0), ratio, ">= 0.70", med(t, 1), med(d, 1), med(t, 2), med(d, 2), med(g, 0),
        med(g, 0) / med(t, 0), verdict))
    targets.append(("element streaming, %s" % name, "raw TCP %.0f MB/s (%.3f CPU-s/GB received)" % (med(t, 0), med(t, 1)),
                    "%.0f MB/s, %.2fx (%.3f CPU-s/GB received, %.3f sent)" % (med(d, 0), ratio, med(d, 1), med(d, 2)),
                    ">= 0.70x", ratio >= 0.70))
    lines.append("| %s | %.0f | %.0f | %.2fx | >= 0.70x %s | %.3f / %.3f | %.3f / %.3f | %.0f (%.2fx) |" % (
        name, med(t, 0), med(d, 0), ratio, verdict, med(t, 1), med(d, 1), med(t, 2), med(d, 2), med(g, 0),
        med(g, 0) / med(t, 0)))
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
bench_targets.record("stream", targets)
print("\nbench-stream: medians; wrote", sys.argv[2])
PYEOF
