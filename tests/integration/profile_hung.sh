#!/usr/bin/env bash
# tests/integration/profile_hung.sh - a worker whose Profile never answers (tests/tools/fakeworker
# hung-profile: stuck as on a hung mount) does not stall planning: the dispatcher (--profile-timeout-ms 2000)
# plans without it once its time is up, well within the client's 30 s CreateJob deadline; a planned job over
# it and a real worker runs every key exactly once; the hung worker is named in the dispatcher's log. With a
# second job the same: asked again, left out again. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

image_job "$WORK/p.json" 2 2 "$WORK/local.keys" || exit 1
dispatcher_on d --heartbeat-ms 100 --profile-timeout-ms 2000 || exit 1
add_workers 1 || exit 1
"$B/tests/fakeworker" "127.0.0.1:$DPORT" hung-profile > "$WORK/hung.out" 2> "$WORK/hung.err" &
PIDS+=($!)
wait_port "$WORK/hung.out" > /dev/null || { bad "the hung worker starts"; exit 1; }
sleep 0.4                                   # registered and heartbeating: alive

for run in 1 2; do
  t0=$(date +%s%N)
  timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --cut auto \
    --keys "$WORK/service$run.keys" --quiet > /dev/null 2> "$WORK/run$run.err"
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
  check "run $run: a planned job beside a hung worker exits 0 (in ${secs} s)" test "$rc" -eq 0
  check "run $run: every key exactly once, as a local run" \
    bash -c "cmp -s <(sort '$WORK/local.keys') <(sort '$WORK/service$run.keys')"
  check "run $run: the plan was made without the hung worker, not on the client's deadline" \
    test "$(grep -c 'planned offload=.* workers=1/2' "$WORK/d.err")" -eq "$run"
done
check "the hung worker was asked once per job" test "$(grep -c 'profile asked' "$WORK/hung.err")" -eq 2
check "the dispatcher named it: no profile within its time" \
  grep -q "worker=127.0.0.1:[0-9]* gave no usable profile status=DEADLINE_EXCEEDED" "$WORK/d.err"
check "no CreateJob timed out at the client" bash -c "! grep -qi 'deadline' '$WORK/run1.err' '$WORK/run2.err'"

finish
