#!/usr/bin/env bash
# tests/integration/demand.sh - the autoscaling signal of a job whose trainer states no rate (issue 39 item 8):
# spillway_job_workers_needed follows the trainer's measured demand. Proves, with a real dispatcher (no
# worker yet) and Python trainers through it: a trainer that starves (it consumes as fast as it can while its one
# core makes every element) exports a positive count; a slow trainer (0.25 s per batch, its own core keeps up)
# exports 0; neither exports -1 once running; `spillctl job` names the producers as the first one's bottleneck
# and the trainer as the second's. A paced trainer in a 0.2-CPU cgroup quota, its own threads making every
# element, reports the time its thread was ready but throttled (spillway_job_client_cpu_starved_ratio), which
# with its wait gives back its pace, and exports a positive count; the unthrottled slow trainer reports almost none. Real processes on loopback;
# kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
# The job offloads every group (lib.sh's SPILLWAY_CUT=all): with no worker its client makes every element. (A
# planned job with no worker alive is on the dispatcher too: default_plan.sh.)
dispatcher_on d --heartbeat-ms 200 --metrics-port -1 --worker-millicores 1000 || { finish; exit 1; }
DM=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")

# trainer SLEEP SECONDS: a trainer through the dispatcher for SECONDS, sleeping SLEEP per batch; no rate given
# (in the cgroup at CG_DIR when IN_GROUP is set).
trainer() {
  ${IN_GROUP:+in_group} env PYTHONPATH="$ROOT/client/python" SPILLWAY_LIB="$B/lib/libspillway.so" SPILLWAY_LOG_TO=stderr \
    timeout 120 /usr/bin/python3 -c "
import sys, time, spillway
p = (spillway.Pipeline.image_folder('$B/data/cli-test/train', seed=3).decode_jpeg()
     .random_resized_crop(160).random_horizontal_flip().normalize([0.5] * 3, [0.25] * 3).batch(16))
end = time.monotonic() + $2
with spillway.Loader(p, dispatcher='127.0.0.1:$DPORT', local_cores=1) as ld:
    while time.monotonic() < end:
        for b in ld:
            time.sleep($1)
            if time.monotonic() >= end:
                break
" > "$WORK/trainer.out" 2> "$WORK/trainer.err" &
  TRAINER=$!
  PIDS+=("$TRAINER")
}
# needed: the running job's workers_needed on the dispatcher's /metrics (empty: none exported yet).
needed() { gauge spillway_job_workers_needed; }
# gauge NAME: the last job's value of a per-job series on /metrics.
gauge() {
  curl -sf "http://127.0.0.1:$DM/metrics" | sed -n "s/^$1{job_id=\"[0-9]*\"} \(.*\)\$/\1/p" | tail -n 1
}
# settled_needed NAME: the count once the trainer has run a few seconds (rates are over >= 1 s windows); also
# `spillctl job --json` of the running job then, into WORK/NAME.job.
settled_needed() {
  local v=""
  sleep 5
  for _ in $(seq 1 10); do v=$(needed); [ -n "$v" ] && break; sleep 0.5; done
  local job
  job=$("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json 2> /dev/null |
    /usr/bin/python3 -c 'import json, sys; print(max(j["job"] for j in json.load(sys.stdin)["jobs"]))' 2> /dev/null)
  "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "${job:-0}" --json > "$WORK/$1.job" 2>&1
  gauge spillway_job_client_cpu_starved_ratio > "$WORK/$1.starved"
  gauge spillway_job_client_wait_ratio > "$WORK/$1.wait"
  gauge spillway_job_client_elements_per_second > "$WORK/$1.rate"
  echo "${v:-none}"
}
# bottleneck NAME: what spillctl job said limits the job.
bottleneck() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("bottleneck"))' \
  "$WORK/$1.job" 2> /dev/null; }

trainer 0 12
STARVING=$(settled_needed starving)
wait "$TRAINER"
check "the starving trainer's run ends well" test $? -eq 0
check "a starving trainer, no worker, no rate: workers_needed > 0 (got $STARVING)" \
  awk -v v="$STARVING" 'BEGIN { exit !(v + 0 >= 1) }'

trainer 0.25 12
SLOW=$(settled_needed slow)
wait "$TRAINER"
check "the slow trainer's run ends well" test $? -eq 0
check "a slow trainer its own core keeps up with: workers_needed 0 (got $SLOW)" test "$SLOW" = 0
check "spillctl job: the starving trainer's job is bound by its producers" test "$(bottleneck starving)" = producers
check "spillctl job: the slow trainer's job is bound by the trainer" test "$(bottleneck slow)" = trainer
check "the slow trainer is not CPU-starved: starved ratio < 0.1 (got $(cat "$WORK/slow.starved"))" \
  awk -v v="$(cat "$WORK/slow.starved")" 'BEGIN { exit !(v != "" && v + 0 < 0.1) }'

if quota_group throttled 0.2; then
  # 16 elements per 0.03 s step: it would take 533/s. In 0.2 of a CPU its own threads cannot make that, and the
  # quota they spend throttles the step too: what the step loses (starved) is as much its input's fault as the
  # wait in next(). rate / (1 - wait - starved) is its pace again; rate / (1 - wait) alone was 0.65-0.70 of it.
  IN_GROUP=1 trainer 0.03 12
  THROTTLED=$(settled_needed throttled)
  wait "$TRAINER"
  check "the throttled trainer's run ends well" test $? -eq 0
  read -r R W S < <(echo "$(cat "$WORK/throttled.rate") $(cat "$WORK/throttled.wait") $(cat "$WORK/throttled.starved")")
  check "a trainer in a 0.2-CPU quota: its thread throttled between batches (starved $S > 0.03)" \
    awk -v v="$S" 'BEGIN { exit !(v + 0 > 0.03) }'
  check "its rate $R over 1 - wait $W - starved $S is its pace, 533/s, within 15%" \
    awk -v r="$R" -v w="$W" -v s="$S" 'BEGIN { d = r / (1 - w - s); exit !(d > 0.85 * 533 && d < 1.15 * 533) }'
  check "a throttled trainer, no worker, no rate: workers_needed > 0 (got $THROTTLED)" \
    awk -v v="$THROTTLED" 'BEGIN { exit !(v + 0 >= 1) }'
fi
finish
