#!/usr/bin/env bash
# scripts/bench/png.sh - PNG decode per core: Spillway's decode_image (libpng) vs Pillow's open + load +
# convert("RGB") on the same files: the benchmark photos re-encoded as PNG by Pillow (BENCH_PNG_N of them,
# default 300, cached under build/data/png-like), both sides pinned to one core (BENCH_CPU, default 1), runs
# interleaved, medians of BENCH_RUNS (default 3). Prints images/s and the ratio (target >= 1.0); writes
# build/bench/png.md.
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_PNG_N:-300}
RUNS=${BENCH_RUNS:-3}
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
OUT=build/bench
DATA=build/data/png-like-n$N
need_built "$SPILLCTL"
mkdir -p "$OUT"
bash scripts/data/make-dataset.sh build/data/imagenet-like 2000 > /dev/null
if [ ! -f "$DATA/stamp" ]; then
  rm -rf "$DATA"
  "$PY" "$ROOT/scripts/bench/png_data.py" build/data/imagenet-like/train "$DATA/train" "$N"
  echo "$N" > "$DATA/stamp"
fi
cat > "$OUT/png.json" <<JSON
{"source": {"format": "image_folder", "path": "$ROOT/$DATA/train", "shuffle": true, "seed": 7, "epochs": 1},
 "ops": [{"op": "decode_image"}], "batch": {"size": 1}}
JSON
spw() {
  taskset -c "$CPU" "$SPILLCTL" run --local --threads 1 --pipeline "$OUT/png.json" --json --quiet |
    "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["elements_per_s"])'
}
pil() {
  taskset -c "$CPU" "$PY" "$ROOT/scripts/bench/png_pillow.py" "$DATA/train"
}
echo "bench-png: $RUNS runs of $N PNGs on CPU $CPU; load: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$OUT/png.tsv"
for r in $(seq 1 "$RUNS"); do
  a=$(pil)
  b=$(spw)
  printf 'pillow\t%s\nspillway\t%s\n' "$a" "$b" >> "$OUT/png.tsv"
  printf '  run %s/%s  Pillow %7.1f img/s   Spillway %7.1f img/s\n' "$r" "$RUNS" "$a" "$b"
done
PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/png_report.py" "$OUT/png.tsv" "$OUT/png.md" "$N"
