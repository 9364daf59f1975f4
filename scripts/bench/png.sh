#!/usr/bin/env bash
# scripts/bench/png.sh - PNG decode per core: Spillway's decode_image (libpng) vs Pillow's open + load +
# convert("RGB") on the same files: the benchmark photos re-encoded as PNG by Pillow (BENCH_PNG_N of them,
# default 300, cached under build/data/png-like), both sides pinned to one core (BENCH_CPU, default 1), runs
# interleaved, medians of BENCH_RUNS (default 3). Prints images/s and the ratio (target >= 1.0); writes
# build/bench/png.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
N=${BENCH_PNG_N:-300}
RUNS=${BENCH_RUNS:-3}
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-build/bin/spillctl}
OUT=build/bench
DATA=build/data/png-like-n$N
[ -x "$SPILLCTL" ] || { echo "bench-png: $SPILLCTL is missing (make all)" >&2; exit 1; }
mkdir -p "$OUT"
bash scripts/data/make-dataset.sh build/data/imagenet-like 2000 > /dev/null
if [ ! -f "$DATA/stamp" ]; then
  rm -rf "$DATA"
  "$PY" - build/data/imagenet-like/train "$DATA/train" "$N" <<'PY'
import os, sys
from PIL import Image
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(os.path.join(c, f) for c in os.listdir(src) for f in os.listdir(os.path.join(src, c)))[:n]
for rel in files:
    os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
    Image.open(os.path.join(src, rel)).convert("RGB").save(os.path.join(dst, os.path.splitext(rel)[0] + ".png"))
PY
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
  taskset -c "$CPU" "$PY" - "$DATA/train" <<'PY'
import os, sys, time
from PIL import Image
root = sys.argv[1]
files = sorted(os.path.join(root, c, f) for c in os.listdir(root) for f in os.listdir(os.path.join(root, c)))
t0 = time.perf_counter()
for p in files:
    with open(p, "rb") as f:
        im = Image.open(f)
        im.load()
        im.convert("RGB")
print(len(files) / (time.perf_counter() - t0))
PY
}
echo "bench-png: $RUNS runs of $N PNGs on CPU $CPU; load: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$OUT/png.tsv"
for r in $(seq 1 "$RUNS"); do
  a=$(pil)
  b=$(spw)
  printf 'pillow\t%s\nspillway\t%s\n' "$a" "$b" >> "$OUT/png.tsv"
  printf '  run %s/%s  Pillow %7.1f img/s   Spillway %7.1f img/s\n' "$r" "$RUNS" "$a" "$b"
done
PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$OUT/png.tsv" "$OUT/png.md" "$N" <<'PY'
import statistics, sys
import bench_targets
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
m = {k: statistics.median(float(v) for s, v in rows if s == k) for k in ("pillow", "spillway")}
r = m["spillway"] / m["pillow"]
lines = ["| PNG decode, one core (%s photos as PNG) | images/s (median) |" % sys.argv[3], "|---|---:|",
         "| Pillow open + load + convert(\"RGB\") | %.1f |" % m["pillow"],
         "| Spillway decode_image (libpng) | %.1f |" % m["spillway"], "",
         "ratio %.2fx (target >= 1.0): %s" % (r, "met" if r >= 1.0 else "NOT met")]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
bench_targets.record("png", [("PNG decode per core", "Pillow (%.1f img/s)" % m["pillow"],
                              "%.1f img/s, %.2fx" % (m["spillway"], r), ">= 1.0x", r >= 1.0)])
PY
