#!/usr/bin/env bash
# scripts/bench/offload.sh - the offload gain on this 2-core machine: the train pipeline (decode,
# random_resized_crop 224, flip, rand_augment, normalize) on the generated ImageNet-like set, run by a client
# pinned to CPU 0 alone (spillctl run --local --threads 1), vs the same client on CPU 0 with --local-cores 1
# plus one worker (--threads 1) pinned to CPU 1 through a dispatcher, at each cut the workers can stop at.
# Runs are interleaved; medians of BENCH_RUNS (default 3). Target: >= 1.8x. Writes build/bench/offload.md.
# BENCH_EPOCHS (default 8: 16000 elements, 6-8 s a service run, 11-14 s local-only) keeps the planned default's
# start-up (probing the link, the client measuring itself: 0.6-0.9 s) from being the figure; it is reported
# apart (the target is read after it).
# BENCH_REMOTE_CORES="0.25 0.5 0.75 1" (root, cgroup cpu quotas on the worker) also measures the gain at cut
# BENCH_SWEEP_CUT (default 2) against the worker's share of its core (results.tsv's fifth column; make plots).
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
RUNS=${BENCH_RUNS:-3}
EPOCHS=${BENCH_EPOCHS:-8}
OUT=$B/bench/offload
DATA=$B/data/imagenet-like
CUTS=${BENCH_CUTS:-"auto 2 3"}    # auto: the default, planned
REMOTE_CORES=${BENCH_REMOTE_CORES:-}
SWEEP_CUT=${BENCH_SWEEP_CUT:-2}
need_built "$B/bin/spillctl" "$B/bin/spillway-worker" "$B/bin/spillway-dispatcher"
[ "$(nproc)" -ge 2 ] || { echo "bench-offload: needs 2 CPUs (client on CPU 0, worker on CPU 1)" >&2; exit 1; }
bash scripts/data/make-dataset.sh "$DATA" > /dev/null
mkdir -p "$OUT"
: > "$OUT/results.tsv"
cat > "$OUT/train.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 7, "epochs": $EPOCHS},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
         {"op": "random_horizontal_flip", "p": 0.5}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 64}}
JSON

trap 'stop_daemons TERM' EXIT
taskset -c 1 $B/bin/spillway-dispatcher --listen 127.0.0.1 --port 0 > "$OUT/d.out" 2> "$OUT/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$OUT/d.out")
taskset -c 1 $B/bin/spillway-worker --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$OUT/w.out" 2> "$OUT/w.err" &
WORKER=$!
PIDS+=("$WORKER")
wait_port "$OUT/w.out" > /dev/null
sleep 0.5
# The worker in a cgroup of its own for the remote-cores sweep (scripts/lib/cpu-quota.sh: v1 or v2 cpu controller).
CGDIR=""
if [ -n "$REMOTE_CORES" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-offload: BENCH_REMOTE_CORES needs root (cgroups)" >&2; exit 1; }
  # shellcheck source=scripts/lib/cpu-quota.sh
  source scripts/lib/cpu-quota.sh
  cpu_quota_cgroup spw-bench-offload 1
  echo "$WORKER" > "$CGDIR/cgroup.procs"
  trap 'cleanup; rmdir "$CGDIR" 2> /dev/null' EXIT
fi
quota() { cpu_quota_cgroup spw-bench-offload "$1"; }   # quota CORES: the worker may use CORES of its core

# rate: "elements/s start-up-seconds elements/s-after-start-up" from spillctl's JSON (the first counts the
# whole run; start-up is the time before the job existed: planning, listing)
rate() { "$PY" -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d["elements_per_s"], d.get("create_seconds", 0), d["consumed_per_s"])'; }
local_run() { taskset -c 0 $B/bin/spillctl run --local --threads 1 --pipeline "$OUT/train.json" --json --quiet --warmup-batches 3 | rate; }
service_run() {   # service_run CUT [MAX_BATCHES]
  taskset -c 0 $B/bin/spillctl run --dispatcher "127.0.0.1:$DPORT" --local-cores 1 --cut "$1" --log-level warn \
    --pipeline "$OUT/train.json" --json --quiet ${2:+--max-batches "$2"} | rate
}

echo "bench-offload: $RUNS runs; client on CPU 0, worker + dispatcher on CPU 1; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cut in $CUTS; do service_run "$cut" 40 > /dev/null; done      # warm the worker, page cache and allocator
for ((r = 1; r <= RUNS; r++)); do
  read -r v st after <<< "$(local_run)"
  printf 'local\t-\t%s\t%s\t-\t%s\t%s\n' "$r" "$v" "$st" "$after" >> "$OUT/results.tsv"
  printf '  run %s/%s  local-only (1 core)          %7.0f elements/s\n' "$r" "$RUNS" "$v"
  for cut in $CUTS; do
    read -r v st after <<< "$(service_run "$cut")"
    printf 'service\t%s\t%s\t%s\t-\t%s\t%s\n' "$cut" "$r" "$v" "$st" "$after" >> "$OUT/results.tsv"
    printf '  run %s/%s  client + 1 worker, cut %s      %7.0f elements/s  start-up %.2f s\n' "$r" "$RUNS" "$cut" "$v" "$st"
  done
  for cores in $REMOTE_CORES; do
    quota "$cores"
    read -r v st after <<< "$(service_run "$SWEEP_CUT")"
    printf 'remote\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SWEEP_CUT" "$r" "$v" "$cores" "$st" "$after" >> "$OUT/results.tsv"
    printf '  run %s/%s  client + %s of a worker core, cut %s  %7.0f elements/s\n' "$r" "$RUNS" "$cores" \
      "$SWEEP_CUT" "$v"
  done
  [ -z "$REMOTE_CORES" ] || quota 1
done

PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/offload_report.py" "$OUT/results.tsv" "$B/bench/offload.md"
