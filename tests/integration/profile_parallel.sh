#!/usr/bin/env bash
# tests/integration/profile_parallel.sh - planning asks the workers for their profiles at once, not one after
# another: three workers whose Profile takes 2 s each (tests/tools/fakeworker slow-profile, stamping when it
# is asked and when it answers) are all asked before any of them answers, and the plan has all three. Then a
# real worker and one whose profile lies (a cut too many) join: the liar is left out of the plan with a
# warning, and a planned job over the rest runs every key exactly once; its profiles were asked ahead (while
# the client measured itself, dispatcher/profile_ahead.h), each worker once. Real processes on loopback;
# kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

image_job "$WORK/p.json" 3 2 "$WORK/local.keys" || exit 1
dispatcher_on d --heartbeat-ms 100 || exit 1
for j in 1 2 3; do
  "$B/tests/fakeworker" "127.0.0.1:$DPORT" slow-profile > "$WORK/f$j.out" 2> "$WORK/f$j.err" &
  PIDS+=($!)
  wait_port "$WORK/f$j.out" > /dev/null || { bad "slow worker $j starts"; exit 1; }
done
sleep 0.4                                   # registered and heartbeating: alive

timeout 60 "$B/bin/spillctl" plan --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --json \
  > "$WORK/plan.json" 2> "$WORK/plan.err"
check "spillctl plan exits 0" test $? -eq 0
check "the plan has all three workers' profiles" \
  /usr/bin/python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["workers"] != 3)' "$WORK/plan.json"
stamps() { sed -n "s/^fakeworker: profile $1 at \([0-9]*\)$/\1/p" "$WORK"/f[123].err | sort -n; }
check "each slow worker was asked once and answered" \
  test "$(stamps asked | wc -l)" -eq 3 -a "$(stamps answered | wc -l)" -eq 3
check "all three were asked before the first one answered" \
  test "$(stamps asked | tail -1)" -lt "$(stamps answered | head -1)"

add_workers 1 || exit 1
"$B/tests/fakeworker" "127.0.0.1:$DPORT" lying-profile > "$WORK/liar.out" 2> "$WORK/liar.err" &
PIDS+=($!)
wait_port "$WORK/liar.out" > /dev/null || { bad "the lying worker starts"; exit 1; }
sleep 0.4
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --cut auto \
  --keys "$WORK/service.keys" --quiet --log-level debug --log-format json > /dev/null 2> "$WORK/run.err"
check "a planned job over the slow workers and a real one exits 0" test $? -eq 0
# Asked ahead: the workers profile while the client measures itself (its GetManifest said plan_ahead), not
# after; and a worker whose ahead profile was refused is not asked again by CreateJob.
measured_ms=$(/usr/bin/python3 "$ROOT/tests/integration/checks.py" profile_parallel_measured_ms "$WORK/run.err")
check "the client logged when it had measured itself and its links" test -n "$measured_ms"
check "the slow workers were asked for the run's profiles before the client had measured itself" \
  test "$(stamps asked | sed -n 4p)" -lt "${measured_ms:-0}" -a "$(stamps asked | sed -n 6p)" -lt "${measured_ms:-0}"
check "the slow workers were asked once for the run" test "$(stamps asked | wc -l)" -eq 6
check "every key exactly once, as a local run" \
  bash -c "cmp -s <(sort '$WORK/local.keys') <(sort '$WORK/service.keys')"
check "the lying worker was asked once and its profile refused, with a reason" \
  bash -c "test \$(grep -c 'profile asked' '$WORK/liar.err') -eq 1 && grep -q 'gave no usable profile .*other cuts or bad numbers' '$WORK/d.err'"
check "the plan has the four honest workers, not the liar" grep -q 'planned offload=.* workers=4/5' "$WORK/d.err"
grep -q 'planned offload=.* workers=4/5' "$WORK/d.err" ||     # what the plan had instead (CI saw this fail once)
  grep -E 'planned offload|gave no usable|planning with|not asked ahead' "$WORK/d.err" | sed 's/^/     /'
check "the second round of profiles also asked the slow workers together" \
  test "$(stamps asked | sed -n 6p)" -lt "$(stamps answered | sed -n 4p)"

finish
