#!/usr/bin/env bash
# tests/integration/demand.sh - the autoscaling signal of a job whose trainer states no rate (issue 39 item 8):
# spillway_job_workers_needed follows the trainer's measured demand. Proves, with a real dispatcher (no
# worker yet) and Python trainers through it: a trainer that starves (it consumes as fast as it can while its one
# core makes every element) exports a positive count; a slow trainer (0.25 s per batch, its own core keeps up)
# exports 0; neither exports -1 once running; `spillctl job` names the producers as the first one's bottleneck
# and the trainer as the second's. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
# The job offloads every group (lib.sh's SPILLWAY_CUT=all): with no worker its client makes every element. (A
# planned job with no worker is not made on the dispatcher at all: the client runs it alone, unseen there.)
dispatcher_on d --heartbeat-ms 200 --metrics-port -1 --worker-millicores 1000 || { finish; exit 1; }
DM=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")

# trainer SLEEP SECONDS: a trainer through the dispatcher for SECONDS, sleeping SLEEP per batch; no rate given.
trainer() {
  PYTHONPATH="$ROOT/client/python" SPILLWAY_LIB="$B/lib/libspillway.so" SPILLWAY_LOG_TO=stderr \
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
needed() {
  curl -sf "http://127.0.0.1:$DM/metrics" | sed -n 's/^spillway_job_workers_needed{job_id="[0-9]*"} \(.*\)$/\1/p' |
    tail -n 1
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
finish
