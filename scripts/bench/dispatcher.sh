#!/usr/bin/env bash
# scripts/bench/dispatcher.sh - the control plane's scale: one dispatcher (pinned to core 0) under
# tests/tools/disp_load (core 1: simulated workers and clients, each on its own connection, at the real
# heartbeat, lease and idle-poll periods) for each point of a sweep of workers x jobs x splits per epoch.
# Prints a table (RPC/s, p50/p99 latency per method, the dispatcher's cores and RSS, workers alive at the
# end) and writes build/bench-dispatcher/scale.tsv. Then the target point (BENCH_TARGET=1, the default):
# 1000 workers x 100 ImageNet-sized jobs (20000 splits per epoch), each simulated worker leasing at the pace
# of a one-core worker (~15 splits/s over its jobs), 20 s; PASS when the dispatcher serves every heartbeat and
# >= 95% of the leases due (the rest is the window's edges) with p99 under 50 ms, all workers alive, on at
# most one core. With BENCH_DISPATCHER_OLD=PATH it measures that dispatcher binary too, point by point.
# Env: BENCH_WORKERS ("100 300 1000") BENCH_JOBS ("10 30") BENCH_SPLITS ("32 20000") BENCH_SECONDS (10)
#      BENCH_LOAD_THREADS (8: leasing) BENCH_HB_THREADS (2: heartbeating) BENCH_DISPATCHER_OLD BENCH_TARGET;
#      BENCH_SPLIT_MS (1000: how long a simulated worker takes to produce each split it leased for a job,
#      the job's splits one after another - a worker of one core on ImageNet makes ~15 splits/s whatever its
#      number of jobs, so jobs / 15 s is that worker: 6667 for 100 jobs); BENCH_DISPATCHER_CORES (root: the
#      dispatcher in a cgroup with that CPU quota, e.g. 0.25: an overload test); BENCH_BARE=1 (the simulated
#      peers' heartbeats without the progress entries, stream counts and trainer figures real ones carry);
#      BENCH_JOURNAL=1 (each dispatcher with a fresh --work-dir under build/bench-dispatcher, on the build's
#      disk, as deployments run it: acks and job changes synced before their replies).
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
WORKERS=${BENCH_WORKERS:-100 300 1000}
JOBS=${BENCH_JOBS:-10 30}
SPLITS=${BENCH_SPLITS:-32 20000}
SECONDS_EACH=${BENCH_SECONDS:-10}
THREADS=${BENCH_LOAD_THREADS:-8}
HB_THREADS=${BENCH_HB_THREADS:-2}
SPLIT_MS=${BENCH_SPLIT_MS:-1000}
TARGET=${BENCH_TARGET:-1}
DISP_CORES=${BENCH_DISPATCHER_CORES:-}
BARE=${BENCH_BARE:-}        # 1: heartbeats without progress entries, streams' counts or trainer figures
JOURNAL=${BENCH_JOURNAL:-}  # 1: a fresh journal per dispatcher
OUT=$B/bench-dispatcher
mkdir -p "$OUT"
# BUILD as the Makefile names its targets (relative): an absolute path matches no rule, and a stale
# disp_load or dispatcher would be measured without a word.
make -C "$ROOT" -s BUILD="$(realpath --relative-to="$ROOT" "$B")" "$(realpath --relative-to="$ROOT" "$B")/bin/spillway-dispatcher" \
  "$(realpath --relative-to="$ROOT" "$B")/tests/disp_load" > /dev/null
DPID=""
CGDIR=""
cleanup() {
  [ -z "$DPID" ] || kill "$DPID" 2> /dev/null || true
  [ -z "$CGDIR" ] || rmdir "$CGDIR" 2> /dev/null || true
}
trap cleanup EXIT
# The dispatcher in a cgroup of its own with a CPU quota.
if [ -n "$DISP_CORES" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-dispatcher: BENCH_DISPATCHER_CORES needs root (cgroups)" >&2; exit 1; }
  # shellcheck source=scripts/lib/cpu-quota.sh
  source "$ROOT/scripts/lib/cpu-quota.sh"
  cpu_quota_cgroup spw-bench-dispatcher "$DISP_CORES"
fi

# A dataset per splits-per-epoch point: empty files (the dispatcher lists, nobody decodes); 32 splits are
# 2048 samples in splits of 64, 20000 splits are 20000 samples in splits of 1 (ImageNet's 1.28 M in 64s).
data_for() {   # data_for SPLITS -> prints "DIR SPLIT_SIZE"
  local n=$1 size=64 samples
  [ "$n" -le 64 ] || size=1
  samples=$((n * size))
  local dir=$OUT/data-$samples
  if [ ! -d "$dir/a" ] || [ "$(find "$dir/a" -type f | wc -l)" -ne "$samples" ]; then
    rm -rf "$dir" && mkdir -p "$dir/a"
    (cd "$dir/a" && seq 1 "$samples" | sed 's/$/.jpg/' | xargs touch)
  fi
  echo "$dir $size"
}

run_point() {   # run_point DISPATCHER_BIN WORKERS JOBS SPLITS [SPLIT_MS SECONDS] -> one JSON line
  local bin=$1 w=$2 j=$3 s=$4 split_ms=${5:-$SPLIT_MS} secs=${6:-$SECONDS_EACH} dir size port
  read -r dir size < <(data_for "$s")
  local journal=()
  if [ -n "$JOURNAL" ]; then
    rm -rf "$OUT/journal" && mkdir -p "$OUT/journal"
    journal=(--work-dir "$OUT/journal")
  fi
  # Every simulated client is this host: the per-host job cap (64 by default) would refuse the 65th job.
  taskset -c 0 "$bin" --listen 127.0.0.1 --port 0 --max-jobs-per-client 65536 --max-jobs 4096 "${journal[@]}" \
    > "$OUT/d.out" 2> "$OUT/d.err" &
  DPID=$!
  [ -z "$CGDIR" ] || echo "$DPID" > "$CGDIR/cgroup.procs"
  for _ in $(seq 100); do
    port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$OUT/d.out")
    [ -n "$port" ] && break
    sleep 0.05
  done
  taskset -c 1 "$B/tests/disp_load" --dispatcher "127.0.0.1:$port" --data "$dir" --workers "$w" --jobs "$j" \
    --split-size "$size" --seconds "$secs" --threads "$THREADS" --hb-threads "$HB_THREADS" --split-ms "$split_ms" \
    --pid "$DPID" ${BARE:+--bare} \
    2>> "$OUT/load.err" || echo '{}'
  kill "$DPID" 2> /dev/null || true
  wait "$DPID" 2> /dev/null || true
  DPID=""
}

: > "$OUT/scale.tsv"
for s in $SPLITS; do
  for j in $JOBS; do
    for w in $WORKERS; do
      for side in new ${BENCH_DISPATCHER_OLD:+old}; do
        bin=$B/bin/spillway-dispatcher
        [ "$side" = new ] || bin=$BENCH_DISPATCHER_OLD
        line=$(run_point "$bin" "$w" "$j" "$s")
        printf '%s\t%s\t%s\t%s\t%s\n' "$side" "$w" "$j" "$s" "$line" >> "$OUT/scale.tsv"
        echo "bench-dispatcher: $side workers=$w jobs=$j splits=$s done" >&2
      done
    done
  done
done

if [ "$TARGET" = 1 ]; then
  line=$(run_point "$B/bin/spillway-dispatcher" 1000 100 20000 6667 20)
  printf 'target\t1000\t100\t20000\t%s\n' "$line" >> "$OUT/scale.tsv"
  echo "bench-dispatcher: target workers=1000 jobs=100 splits=20000 done" >&2
fi

PYTHONPATH="$ROOT/scripts/lib" /usr/bin/python3 "$ROOT/scripts/bench/dispatcher_report.py" "$OUT/scale.tsv"
