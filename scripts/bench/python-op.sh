#!/usr/bin/env bash
# scripts/bench/python-op.sh - what a Python op costs: the photos decoded and random-resized-cropped to
# 224 x 224 in-process (spillctl run --local) without an op, with an identity function and with a numpy-heavy
# one (tests/python/pyops_fixture.py), medians of BENCH_RUNS (default 3) runs over BENCH_PY_N photos
# (default 1920). The Python op's own time per element comes from the runs' per-op stats; for the identity
# function it is the steady state, the op's time over 3 N elements (three epochs) less its time over N, per
# extra element, so the helper's start (once per thread, about 0.1 s, varying by tens of ms) is printed
# apart rather than spread into the figure (target: at most 20 us per element per thread). Also the heavy
# pipeline's scaling from 1 to 2 threads (target >= 1.8x); writes build/bench/python-op.md.
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_PY_N:-1920}
RUNS=${BENCH_RUNS:-3}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
OUT=build/bench
need_built "$SPILLCTL"
mkdir -p "$OUT"
bash scripts/data/make-dataset.sh build/data/imagenet-like 2000 > /dev/null
export SPILLWAY_PYTHON=$PY SPILLWAY_PYTHONPATH=$ROOT/tests/python
spec() {   # spec NAME [FUNCTION]
  local op=""
  [ -n "${2:-}" ] && op=", {\"op\": \"python\", \"function\": \"pyops_fixture:$2\"}"
  cat > "$OUT/python-op-$1.json" <<JSON
{"source": {"format": "image_folder", "path": "$ROOT/build/data/imagenet-like/train", "shuffle": true, "seed": 7,
            "epochs": 3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 224}$op], "batch": {"size": 32}}
JSON
}
spec base
spec identity identity
spec heavy heavy
run() {   # run NAME THREADS [PHOTOS]: elements/s, the python op's ns per element and ns in all (0 without one)
  "$SPILLCTL" run --local --threads "$2" --max-batches $((${3:-$N} / 32)) --pipeline "$OUT/python-op-$1.json" \
    --json --quiet | "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
ns = [(o["ns_per_element"], o["ns_per_element"] * o["elements"]) for o in d["ops"] if o["name"] == "python"]
print(d["elements_per_s"], *(ns[0] if ns else (0, 0)))'
}
echo "bench-python-op: $RUNS runs of $N photos; load: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$OUT/python-op.tsv"
for r in $(seq 1 "$RUNS"); do
  for case in "base 1 $N" "identity 1 $N" "identity 1 $((3 * N))" "heavy 1 $N" "heavy 2 $N"; do
    set -- $case
    read -r rate ns all < <(run "$1" "$2" "$3")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rate" "$ns" "$3" "$all" "$r" >> "$OUT/python-op.tsv"
    printf '  run %s/%s  %-8s threads=%s photos=%-5s %8.1f elements/s  python op %8.1f us/element\n' "$r" "$RUNS" \
      "$1" "$2" "$3" "$rate" "$(echo "$ns / 1000" | bc -l)"
  done
done
PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/python_op_report.py" "$OUT/python-op.tsv" "$OUT/python-op.md" "$N"
