#!/usr/bin/env bash
# scripts/demo.sh - `make demo`: a local Spillway training pipeline (decode, random_resized_crop, flip,
# rand_augment, normalize) on the generated ImageNet-like set with all cores, then an eval pipeline on val,
# then the same training job through the service: a dispatcher and two workers on loopback and a simulated
# trainer (spillctl run --dispatcher), `spillctl job` for it, its throughput next to the local run's, and a
# clean shutdown (no process left behind). Env: SPILLCTL.
set -euo pipefail

# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/lib/harness.sh"     # ROOT, wait_port, stop_daemons, json_field
cd "$ROOT"
PY=/usr/bin/python3
SPILLCTL=${SPILLCTL:-build/bin/spillctl}
DATA=build/data/imagenet-like
OUT=build/demo
THREADS=$(nproc)

die() { echo "demo: error: $*" >&2; exit 1; }
[[ -x $SPILLCTL ]] || die "$SPILLCTL not found or not executable: build it first ('make all'; 'make demo' builds it)"

bash scripts/data/make-dataset.sh "$DATA"
mkdir -p "$OUT"

"$PY" scripts/demo_parts.py specs "$ROOT/$DATA" "$OUT"

# run_pipeline NAME: runs spillctl on $OUT/NAME.json; its stdout goes to $OUT/NAME.out.
run_pipeline() {
  local rc=0
  "$SPILLCTL" run --local --pipeline "$OUT/$1.json" --threads "$THREADS" --json >"$OUT/$1.out" 2>"$OUT/$1.err" || rc=$?
  if ((rc != 0)); then
    echo "demo: error: the $1 pipeline failed (spillctl exited with $rc); its stderr ends:" >&2
    tail -n 20 "$OUT/$1.err" >&2
    exit 1
  fi
}

echo
echo "== Spillway demo: local training pipeline, $THREADS thread(s)"
echo "   decode_jpeg -> random_resized_crop(224) -> random_horizontal_flip -> rand_augment(2, 9) -> normalize"
run_pipeline train
# Summary of spillctl's --json report (its last line): throughput, then per-op time, largest first.
/usr/bin/python3 scripts/demo_parts.py train_summary "$OUT/train.out"

echo
echo "== eval pipeline: val set, no shuffle, resize(256) -> center_crop(224) -> normalize"
run_pipeline eval
VAL_N=$(find "$DATA/val" -name '*.JPEG' | wc -l)
/usr/bin/python3 scripts/demo_parts.py eval_check "$OUT/eval.out" "$VAL_N"

echo
echo "== the same training job through the service: a dispatcher and 2 workers (1 thread each) on loopback"
trap 'stop_daemons TERM' EXIT
build/bin/spillway-dispatcher --listen 127.0.0.1 --port 0 > "$OUT/dispatcher.out" 2> "$OUT/dispatcher.log" &
PIDS+=($!)
DPORT=$(wait_port "$OUT/dispatcher.out") || die "the dispatcher did not start; see $OUT/dispatcher.log"
for i in 1 2; do
  build/bin/spillway-worker --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    > "$OUT/worker$i.out" 2> "$OUT/worker$i.log" &
  PIDS+=($!)
  wait_port "$OUT/worker$i.out" > /dev/null || die "worker $i did not start; see $OUT/worker$i.log"
done
sleep 0.5
"$SPILLCTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$OUT/train.json" --local-cores 1 --json \
  > "$OUT/service.out" 2> "$OUT/service.err" || { tail -n 20 "$OUT/service.err" >&2; die "the service run failed"; }
JOB=$(json_field "$OUT/service.out" '["job"]')
sleep 1.2     # producers report their final counts in their next heartbeat (1 s)
"$SPILLCTL" --dispatcher "127.0.0.1:$DPORT" job "$JOB" | sed 's/^/   /'
/usr/bin/python3 scripts/demo_parts.py service_summary "$OUT/service.out" "$OUT/train.out" "$THREADS"
STARTED=("${PIDS[@]}")
stop_daemons TERM
for p in "${STARTED[@]}"; do ! kill -0 "$p" 2>/dev/null || die "process $p was left behind"; done
echo "   dispatcher and workers stopped (SIGTERM, drained)"

echo
echo "demo: pipeline specs and raw reports are in $OUT/"
