#!/usr/bin/env bash
# scripts/eval/workers.sh - the planner's worker count (the autoscaling signal, `workers_needed`) against the
# smallest count that measured reaches a trainer's rate (issue 21). Real daemons: 4 workers, each in its own
# network namespace on CPU 1 under a cgroup quota of EVAL_WORKER_CORES (default 0.2) of a core, the client on
# CPU 0 under EVAL_CLIENT_CORES (default 0.5), the train pipeline from the 20000-image set in memory.
#  1. capacity T(k): local-only (k = 0), then k = 1..4 workers at cut 2 with the client producing too (the
#     best plan for this pipeline in scripts/eval/planner.sh), unpaced; medians of EVAL_REPEATS (default 3)
#     interleaved runs of EVAL_SECONDS (default 10). The measured count for a rate R: the smallest k with
#     T(k) >= R (EVAL_REACH x R).
#  2. rates that fall between counts: R = 0.8 T(0) and the midpoints (T(k-1) + T(k)) / 2. Per R and repeat the
#     planner's count as `spillctl plan --consume-rate R` gives it before any job (every worker profiled), and
#     as a planned job paced at R (--cut auto, all 4 workers) ends up after its re-plans on measured costs
#     (`spillctl explain`), with the rate that job reached.
#  3. demand (issue 39): per R and repeat, a trainer whose step takes B/R s per batch of B (--step-ms: it
#     states no rate), on a second dispatcher with no worker (the client makes every element, at cut 2): the
#     count its measured demand gives (spillway_job_workers_needed on /metrics 3 s before the run ends, the
#     dispatcher told a worker brings EVAL_WORKER_CORES).
# Target: the planner's count within one worker of the measured one. Needs root (netns, cgroups) and gnuplot.
# Writes build/eval/workers/{runs.tsv,plans.tsv,table.md}; scripts/eval/workers.py analyses them.
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
OUT=$B/eval/workers
REPEATS=${EVAL_REPEATS:-3}
SECS=${EVAL_SECONDS:-10}   # a planned job spends its first ~4 s measuring
CCORES=${EVAL_CLIENT_CORES:-0.5}
WCORES=${EVAL_WORKER_CORES:-0.2}
NW=4
REACH=${EVAL_REACH:-1.0}     # the measured count: the smallest k with T(k) >= REACH x R
SRC_DATA=$B/data/eval-20k
DATA=/dev/shm/spww-eval-20k
NAME=eval-workers
P=spww
PERIOD=100000
SUBNET=10.78.0

# shellcheck source=scripts/eval/lib.sh
source scripts/eval/lib.sh
eval_preflight
pipeline train

# run PHASE RATE K REP: one job -> a line of runs.tsv "phase rate k rep consumed_per_s workers_needed".
# K = 0: local-only; K > 0: K workers at cut 2; K = auto: planned (--cut auto, every worker), its count being
# the plan's at the job's end, or 0 when the planner ran it all locally because the client alone meets R.
run() {
  local phase=$1 rate=$2 k=$3 rep=$4 out rflag=() need=- v job
  [ "$rate" != 0 ] && rflag=(--consume-rate "$rate")
  local svc=(run --dispatcher "$SUBNET.1:$DPORT" --pipeline "$OUT/train.json" --local-cores 1 --json --quiet
             --max-seconds "$SECS" "${rflag[@]}")
  case $k in
    0) svc=(run --local --threads 1 --pipeline "$OUT/train.json" --json --quiet --max-seconds "$SECS" "${rflag[@]}") ;;
    auto) svc+=(--cut auto --keep-job) ;;    # kept (paused) for explain: an ended job's plan is gone
    *) svc+=(--cut 2 --workers "$k") ;;
  esac
  out=$(in_cg client 0 $B/bin/spillctl "${svc[@]}" 2> "$OUT/last.err") || die "run ($k): $(tail -2 "$OUT/last.err")"
  if [ "$k" = auto ]; then
    job=$(echo "$out" | json_eval "d['job']")
    if [ "$job" != 0 ]; then
      need=$($B/bin/spillctl --dispatcher $SUBNET.1:"$DPORT" explain "$job" --json | json_eval "d['workers_needed']")
      $B/bin/spillctl --dispatcher $SUBNET.1:"$DPORT" job cancel "$job" > /dev/null
    elif echo "$out" | json_eval "d['plan']['why']" | grep -q "the client alone meets the trainer's rate"; then
      need=0
    fi
  fi
  v=$(echo "$out" | json_eval "d['consumed_per_s']")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$rate" "$k" "$rep" "$v" "$need" >> "$OUT/runs.tsv"
  printf '  %-8s rate %7s  %-4s workers  run %s  %7.1f elements/s  planner: %s\n' "$phase" "$rate" "$k" "$rep" "$v" "$need"
  sleep 0.7     # the workers drop the closed job
}

: > "$OUT/runs.tsv"
: > "$OUT/plans.tsv"
echo "eval-workers: client $CCORES core, $NW workers x $WCORES core; $REPEATS repeats x $SECS s; load before:" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
setup none "$CCORES" "$NW" "$WCORES"
run warm 0 "$NW" 0
echo "== capacity: unpaced, k = 0..$NW workers (cut 2)"
for ((r = 1; r <= REPEATS; r++)); do
  for ((k = 0; k <= NW; k++)); do run capacity 0 "$k" "$r"; done
done
mapfile -t RATES < <("$PY" "$ROOT/scripts/eval/workers_rates.py" "$OUT/runs.tsv" "$NW")
for rate in "${RATES[@]}"; do
  echo "== rate $rate elements/s"
  for ((r = 1; r <= REPEATS; r++)); do
    need=$(in_cg client 0 $B/bin/spillctl plan --dispatcher $SUBNET.1:"$DPORT" --pipeline "$OUT/train.json" --local-cores 1 \
      --consume-rate "$rate" --json 2> "$OUT/last.err" | json_eval "d['workers_needed']") ||
      die "spillctl plan: $(tail -2 "$OUT/last.err")"
    printf '%s\t%s\t%s\n' "$rate" "$r" "$need" >> "$OUT/plans.tsv"
    echo "  plan     rate $rate  run $r  the planner says $need workers"
    run paced "$rate" auto "$r"
  done
done
# demand RATE REP: a run whose steps take B/RATE s (no rate stated) on the worker-less dispatcher;
# workers_needed from its /metrics near the run's end -> a "demand" line of runs.tsv.
demand() {
  local rate=$1 rep=$2 out need step
  step=$("$PY" -c 'import json, sys; print(1000 * json.load(open(sys.argv[1]))["batch"]["size"] / float(sys.argv[2]))' \
    "$OUT/train.json" "$rate")
  in_cg client 0 $B/bin/spillctl run --dispatcher "$SUBNET.1:$D2PORT" --pipeline "$OUT/train.json" --cut 2 \
    --local-cores 1 --json --quiet --max-seconds "$SECS" --step-ms "$step" > "$OUT/demand.json" 2> "$OUT/last.err" &
  local run=$!
  sleep "$(awk -v s="$SECS" 'BEGIN { print s - 2 }')"     # the job exists 1-3 s after the start; ends SECS after
  need=$(curl -sf "http://$SUBNET.1:$D2M/metrics" |
    sed -n 's/^spillway_job_workers_needed{job_id="[0-9]*"} \(.*\)$/\1/p' | tail -n 1)
  wait "$run" || die "demand run: $(tail -2 "$OUT/last.err")"
  out=$(json_eval "d['consumed_per_s']" < "$OUT/demand.json")
  printf 'demand\t%s\t0\t%s\t%s\t%s\n' "$rate" "$rep" "$out" "${need:--}" >> "$OUT/runs.tsv"
  printf '  demand   rate %7s  0    workers  run %s  %7.1f elements/s  demand says: %s\n' "$rate" "$rep" "$out" "${need:--}"
  sleep 0.7
}
taskset -c 1 $B/bin/spillway-dispatcher --listen $SUBNET.1 --insecure --port 0 --metrics-port -1 \
  --worker-millicores "$(awk -v c="$WCORES" 'BEGIN { printf "%d", c * 1000 }')" > "$OUT/d2.out" 2> "$OUT/d2.err" &
PIDS+=($!)
D2PORT=$(wait_port "$OUT/d2.out") || die "the second dispatcher did not start: $(cat "$OUT/d2.err")"
D2M=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$OUT/d2.out")
echo "== demand: trainers whose steps take B/R s, no rate stated, no worker"
for rate in "${RATES[@]}"; do
  for ((r = 1; r <= REPEATS; r++)); do demand "$rate" "$r"; done
done
cleanup

PYTHONPATH="$ROOT/scripts/lib" "$PY" scripts/eval/workers.py "$OUT" "$REACH" "$CCORES" "$WCORES" "$SECS"
