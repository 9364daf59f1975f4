#!/usr/bin/env bash
# scripts/bench/python-heap.sh - does a Python trainer need GLIBC_TUNABLES? libspillway applies its malloc
# settings itself when it loads (client/job.c, lib/heap.h); this measures a Python trainer's CPU and minor
# page faults per received element in three set-ups, in alternating rounds on the same job: "library" (no
# environment: the library's own settings), "tunables" (the GLIBC_TUNABLES value the README used to ask for,
# library settings off) and "glibc" (glibc's defaults: SPILLWAY_MALLOC=default). Through a dispatcher and one
# worker (all groups remote, the trainer only receives and batches 150 KB elements), the trainer on core 0
# under a CPU quota of BENCH_TRAINER_CORES (root, cgroups; the regime where re-faulted buffers showed),
# the worker on core 1. Prints medians and the ratios library/tunables and glibc/tunables.
# Env: BENCH_N (600 images) BENCH_BATCHES (60 of 16) BENCH_ROUNDS (5) BENCH_TRAINER_CORES (0.35; 0 = none).
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"      # ROOT, B, wait_port, stop_daemons
PY=/usr/bin/python3
N=${BENCH_N:-600}
BATCHES=${BENCH_BATCHES:-60}
ROUNDS=${BENCH_ROUNDS:-5}
CORES=${BENCH_TRAINER_CORES:-0.35}
TUNABLES=glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=536870912
OUT=$B/bench-python-heap
rm -rf "$OUT" && mkdir -p "$OUT"
CGDIR=""
cleanup() {
  stop_daemons TERM
  [ -z "$CGDIR" ] || rmdir "$CGDIR" 2> /dev/null || true
}
trap cleanup EXIT

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/bench-heap" "$N" > /dev/null
cat > "$OUT/train.json" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/bench-heap/train", "shuffle": true, "seed": 1, "epochs": 0},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]}, {"op": "random_horizontal_flip"}],
 "batch": {"size": 16}}
JSON
taskset -c 1 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 > "$OUT/d.out" 2> "$OUT/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$OUT/d.out")
taskset -c 1 "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$OUT/w.out" 2> "$OUT/w.err" &
PIDS+=($!)
wait_port "$OUT/w.out" > /dev/null
sleep 0.5

if [ "$CORES" != 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-python-heap: BENCH_TRAINER_CORES needs root (cgroups); 0 runs without" >&2; exit 1; }
  # shellcheck source=scripts/lib/cpu-quota.sh
  source "$ROOT/scripts/lib/cpu-quota.sh"
  cpu_quota_cgroup spw-bench-heap "$CORES"
fi

# The trainer (python_heap_trainer.py): the installed-package way (PYTHONPATH to the source, the build's library), numpy imported
# first as a trainer's would be; one JSON line: elements, CPU seconds, minor faults (this process).
run() {   # run NAME ENV...: one trainer run in the quota's group; appends "NAME us_per_element faults_per_element"
  local name=$1
  shift
  # shellcheck disable=SC2016  # $$ and $CG are the child shell's
  env -u GLIBC_TUNABLES -u SPILLWAY_MALLOC "$@" PYTHONPATH="$ROOT/client/python" SPILLWAY_LIB="$B/lib/libspillway.so" \
    CG="$CGDIR" taskset -c 0 bash -c '[ -z "$CG" ] || echo $$ > "$CG/cgroup.procs"; exec "$0" "$@"' \
    "$PY" "$ROOT/scripts/bench/python_heap_trainer.py" "$OUT/train.json" "127.0.0.1:$DPORT" "$BATCHES" 2>> "$OUT/trainer.err" | tail -1 |
    "$PY" -c "import json,sys; d=json.loads(sys.stdin.read()); print('$name', 1e6*d['cpu_s']/d['elements'], d['minflt']/d['elements'])" \
    >> "$OUT/runs.txt"
}
for r in $(seq "$ROUNDS"); do
  run library
  run tunables SPILLWAY_MALLOC=default GLIBC_TUNABLES="$TUNABLES"
  run glibc SPILLWAY_MALLOC=default
  echo "bench-python-heap: round $r of $ROUNDS done" >&2
done
"$PY" "$ROOT/scripts/bench/python_heap_report.py" "$OUT/runs.txt" "$CORES"
