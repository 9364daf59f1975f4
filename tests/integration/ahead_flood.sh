#!/usr/bin/env bash
# tests/integration/ahead_flood.sh - a client host flooding GetManifest with plan_ahead (tests/tools/hostilepeer
# ahead: 20 distinct pipelines, no CreateJob) has the workers profile at most two of them at a time
# (dispatcher/profile_ahead.h: 2 per client host) and leaves room for others: a planned job from another
# address (::1) still has its profiles asked ahead, taken by its CreateJob, and runs every key exactly once.
# A worker whose Profile takes 8 s (fakeworker slow-profile) keeps the flood's asks running meanwhile. Real
# processes, the dispatcher listening on ::; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1

image_job "$WORK/p.json" 4 2 "$WORK/local.keys" || exit 1
"$B/bin/spillway-dispatcher" --listen :: --port 0 --heartbeat-ms 100 --log-level debug \
  > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || { bad "the dispatcher starts"; exit 1; }
add_workers 1 || exit 1                     # registered first: the planned job's --workers 1
FAKEWORKER_PROFILE_MS=8000 "$B/tests/fakeworker" "127.0.0.1:$DPORT" slow-profile > "$WORK/f.out" 2> "$WORK/f.err" &
PIDS+=($!)
wait_port "$WORK/f.out" > /dev/null || { bad "the slow worker starts"; exit 1; }
sleep 0.4                                   # registered and heartbeating: alive

"$B/tests/hostilepeer" "127.0.0.1:$DPORT" ahead 0 "$WORK/p.json" 20 > "$WORK/flood.out" 2>&1
check "the flood's GetManifests are all answered (ok=20 of 20)" grep -qx 'ok=20 of 20' "$WORK/flood.out"
asked=$(grep -c '^fakeworker: profile asked at' "$WORK/f.err")
check "the slow worker was asked for two of the flood's pipelines, not four or twenty ($asked)" test "$asked" -eq 2
check "the rest were not asked ahead, saying why" \
  test "$(grep -c 'profiles not asked ahead for [^ ]*127.0.0.1 (its 2 asks are running)' "$WORK/d.err")" -eq 18

timeout 60 "$B/bin/spillctl" run --dispatcher "[::1]:$DPORT" --pipeline "$WORK/p.json" --cut auto --workers 1 \
  --keys "$WORK/service.keys" --quiet > /dev/null 2> "$WORK/run.err"
check "a planned job from ::1 meanwhile exits 0" test $? -eq 0
check "... its profiles were asked ahead and taken by its CreateJob" \
  grep -q 'planning with 1 profiles asked ahead' "$WORK/d.err"
check "... not refused for the flood" bash -c "! grep -q 'not asked ahead for ::1' '$WORK/d.err'"
check "... every key exactly once, as a local run" \
  bash -c "cmp -s <(sort '$WORK/local.keys') <(sort '$WORK/service.keys')"
check "the slow worker was still asked only twice" test "$(grep -c '^fakeworker: profile asked at' "$WORK/f.err")" -eq 2
finish
