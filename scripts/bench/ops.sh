#!/usr/bin/env bash
# scripts/bench/ops.sh - `make bench`: Spillway vs torchvision+PIL, same images, each pinned to one core.
# Cases a-d (docs/benchmarks.md), BENCH_RUNS interleaved runs, medians; prints a table and writes
# build/bench/ops.md + build/bench/ops.json. A missed target prints FAIL but exits 0; a crash exits 1.
# Env: BENCH_N (2000) BENCH_RUNS (3) BENCH_WARMUP_BATCHES (3) BENCH_CPU (1) BENCH_CPUS2 (0,1)
# BENCH_SIDES (both|torchvision) SPILLCTL.
set -euo pipefail

# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_N:-2000}
RUNS=${BENCH_RUNS:-3}
WARMUP=${BENCH_WARMUP_BATCHES:-3}   # untimed batches before each timed epoch, the same on both sides
CPU=${BENCH_CPU:-1}
CPUS2=${BENCH_CPUS2:-0,1}
SIDES=${BENCH_SIDES:-both}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
# Both sides run with glibc keeping freed memory in the process: on this kind of VM a first touch of a page
# costs ~10 us, and torchvision's collate allocates a fresh 38.5 MB batch (over glibc's 32 MB mmap cap)
# every batch, which would slow the peer by ~1.5 ms/image for reasons unrelated to preprocessing.
# Set BENCH_GLIBC_TUNABLES= (empty) to measure with glibc's defaults.
TUNABLES=${BENCH_GLIBC_TUNABLES-glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295}
OUT=build/bench
CASES=(a b c d)

die() { echo "bench-ops: error: $*" >&2; exit 1; }

[[ $N =~ ^[0-9]+$ && $N -ge 10 ]] || die "BENCH_N must be an integer >= 10 (got '$N')"
[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || die "BENCH_RUNS must be an integer >= 1 (got '$RUNS')"
[[ $SIDES == both || $SIDES == torchvision ]] || die "BENCH_SIDES must be 'both' or 'torchvision' (got '$SIDES')"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
taskset -c "$CPU" true 2>/dev/null || die "cannot pin to CPU $CPU (BENCH_CPU); this machine has $(nproc) CPUs"
"$PY" -c 'import torch, torchvision, PIL' 2>/dev/null ||
  die "$PY cannot import torch, torchvision and PIL (bash scripts/install-deps.sh)"
if [[ $SIDES == both ]]; then
  [[ -x $SPILLCTL ]] || die "$SPILLCTL not found or not executable: build it first ('make all'; 'make bench'
  builds it), set SPILLCTL=PATH, or run only the peer with BENCH_SIDES=torchvision"
  taskset -c "$CPUS2" true 2>/dev/null || die "cannot pin to CPUs $CPUS2 (BENCH_CPUS2) for the scaling run"
fi
[[ $N -ge 1000 ]] || echo "bench-ops: note: BENCH_N=$N is below the specified 1000 images; numbers are indicative only"

DATA=build/data/imagenet-like
[[ $N -eq 2000 ]] || DATA=build/data/imagenet-like-n$N
bash scripts/data/make-dataset.sh "$DATA" "$N"
TRAIN=$ROOT/$DATA/train

rm -rf "$OUT/raw" "$OUT/pipelines"
mkdir -p "$OUT/raw" "$OUT/pipelines"
RESULTS=$OUT/raw/results.tsv
printf 'case\tside\tthreads\trun\timg_per_s\telements\tseconds\tfile\n' >"$RESULTS"

# Pipeline specs: (a) decode + random_resized_crop + flip + normalize; (b) + rand_augment after the flip;
# (c) + auto_augment after the flip; (d) decode only, batch size 1.
"$PY" "$ROOT/scripts/bench/ops_pipelines.py" "$TRAIN" "$OUT/pipelines"

errors=0

# run_tv CASE RUN: one torchvision process, pinned; OpenBLAS overrides unset for this command only.
run_tv() {
  local c=$1 r=$2 log="$OUT/raw/tv-$1-r$2"
  if env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE GLIBC_TUNABLES="$TUNABLES" taskset -c "$CPU" \
      "$PY" scripts/bench/torchvision_peer.py --data "$TRAIN" --case "$c" --warmup-batches "$WARMUP" >"$log.json" 2>"$log.err"; then
    "$PY" -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("\t".join(map(str, [sys.argv[2], "torchvision", 1, sys.argv[3], d["img_per_s"], d["images"], d["seconds"], sys.argv[1]])))' \
      "$log.json" "$c" "$r" >>"$RESULTS"
    printf '  run %s/%s  (%s) torchvision          %8.1f img/s\n' "$r" "$RUNS" "$c" "$(tail -n1 "$RESULTS" | cut -f5)"
  else
    errors=$((errors + 1))
    echo "bench-ops: ERROR: torchvision case $c run $r failed; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  fi
}

# spw_report OUT CASE RUN THREADS: checks spillctl's report (the last JSON object on stdout) and prints a
# results.tsv line; keeps the object as .json beside the raw output. Exits non-zero with a reason.
spw_report() {
  PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/ops_run.py" "$@" "$N"
}

# run_spw CASE RUN THREADS CPUS: one spillctl run, pinned to CPUS.
run_spw() {
  local c=$1 r=$2 t=$3 cpus=$4 log="$OUT/raw/spw-$1-t$3-r$2" line rc=0
  GLIBC_TUNABLES="$TUNABLES" taskset -c "$cpus" "$SPILLCTL" run --local --pipeline "$OUT/pipelines/$c.json" \
    --threads "$t" --warmup-batches "$WARMUP" --json >"$log.out" 2>"$log.err" || rc=$?
  if ((rc != 0)); then
    errors=$((errors + 1))
    echo "bench-ops: ERROR: spillway case $c run $r (threads=$t): spillctl exited with $rc; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  elif ! line=$(spw_report "$log.out" "$c" "$r" "$t" 2>&1); then
    errors=$((errors + 1))
    echo "bench-ops: ERROR: spillway case $c run $r (threads=$t): $line" >&2
  else
    echo "$line" >>"$RESULTS"
    printf '  run %s/%s  (%s) spillway  %s thread%s  %8.1f img/s\n' "$r" "$RUNS" "$c" "$t" \
      "$( ((t == 1)) && echo ' ' || echo s)" "$(cut -f5 <<<"$line")"
  fi
}

# run_pair RUN: two independent 1-thread spillctl runs of case (a) at once, one per CPU of CPUS2; records
# their summed img/s as side "pair". That is what the machine gives two busy cores right now (shared caches,
# memory bandwidth, SMT siblings or host contention under a VM), the ceiling for any 2-thread scaling.
run_pair() {
  local r=$1 total=0 pids=() i=0 cpu log v
  IFS=, read -r -a pair_cpus <<<"$CPUS2"
  for cpu in "${pair_cpus[@]}"; do
    log="$OUT/raw/spw-a-pair$i-r$r"
    GLIBC_TUNABLES="$TUNABLES" taskset -c "$cpu" "$SPILLCTL" run --local --pipeline "$OUT/pipelines/a.json" \
      --threads 1 --warmup-batches "$WARMUP" --json >"$log.out" 2>"$log.err" &
    pids+=($!)
    i=$((i + 1))
  done
  for pid in "${pids[@]}"; do wait "$pid" || errors=$((errors + 1)); done
  for ((i = 0; i < ${#pair_cpus[@]}; i++)); do
    v=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["elements_per_s"])' \
      "$OUT/raw/spw-a-pair$i-r$r.out") || { errors=$((errors + 1)); return; }
    total=$("$PY" -c "print($total + $v)")
  done
  printf 'a\tpair\t1\t%s\t%s\t-\t-\t-\n' "$r" "$total" >>"$RESULTS"
  printf '  run %s/%s  (a) 2 independent 1-thread processes at once  %8.1f img/s (sum)\n' "$r" "$RUNS" "$total"
}

echo "bench-ops: $N images from $DATA, $RUNS runs, one core (CPU $CPU) per side, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= RUNS; r++)); do
  for c in "${CASES[@]}"; do
    # Alternate which side goes first so neither always runs on a cache the other just warmed.
    if [[ $SIDES == torchvision ]]; then
      run_tv "$c" "$r"
    elif ((r % 2)); then
      run_tv "$c" "$r"; run_spw "$c" "$r" 1 "$CPU"
    else
      run_spw "$c" "$r" 1 "$CPU"; run_tv "$c" "$r"
    fi
  done
  [[ $SIDES == torchvision ]] || { run_spw a "$r" 2 "$CPUS2"; run_pair "$r"; }
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/ops_report.py" "$RESULTS" "$OUT" "$N" "$RUNS" "$CPU" "$CPUS2" "$SIDES" "$ROOT/$DATA/stamp.json" "$TUNABLES" \
  "$LOAD_BEFORE" "$LOAD_AFTER" "$errors"

if ((errors)); then
  echo "bench-ops: $errors measurement(s) failed (see above and $OUT/raw/)" >&2
  exit 1
fi
