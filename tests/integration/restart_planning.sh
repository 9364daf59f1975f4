#!/usr/bin/env bash
# tests/integration/restart_planning.sh - the dispatcher (--work-dir) killed -9 and restarted while a planned
# client is between its GetManifest (which started the workers' profiles ahead, dispatcher/profile_ahead.h)
# and its CreateJob (while it measures itself): the new dispatcher has no ask to take, so its CreateJob asks
# the workers itself; the job is created there, once, and runs every key exactly once, the trainer never
# restarted. The client is stopped (SIGSTOP) once it logs the listing, until the worker joined the new one.
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

augment_job "$WORK/p.json" 6 1 "$WORK/local.keys" || exit 1
dispatcher_on d1 --work-dir "$WORK/wd" --heartbeat-ms 100 --log-level debug || exit 1
add_workers 1 || exit 1
sleep 0.4                                   # registered and heartbeating: alive

timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --cut auto \
  --keys "$WORK/service.keys" --log-level info > /dev/null 2> "$WORK/run.err" &
RUN=$!
for _ in $(seq 1 1000); do                  # the GetManifest answered: the client measures itself now (~0.3 s)
  grep -q "source from the dispatcher's listing" "$WORK/run.err" && break
  sleep 0.01
done
SPID=$(pgrep -P "$RUN")                     # spillctl, under timeout
kill -STOP "$SPID"                          # held there while the dispatcher restarts
kill -9 "$D" 2> /dev/null
wait "$D" 2> /dev/null
dispatcher_on d2 --work-dir "$WORK/wd" --heartbeat-ms 100 --log-level debug || exit 1
for _ in $(seq 1 100); do                   # the worker has joined the new dispatcher
  grep -q "worker registered" "$WORK/d2.err" && break
  sleep 0.05
done
kill -CONT "$SPID"
wait "$RUN"
check "the planned job exits 0 across the restart" test $? -eq 0
check "the worker profiled twice: asked ahead by the first dispatcher, then by the second's CreateJob" \
  test "$(grep -c 'profiled cuts=' "$WORK/w1.err")" -eq 2
check "... and was killed before the client's CreateJob (no job created there)" \
  bash -c "! grep -q 'job created' '$WORK/d1.err'"
check "the job was created once, on the restarted dispatcher" test "$(grep -c 'job created' "$WORK/d2.err")" -eq 1
check "... which had no profiles asked ahead to take, and planned" \
  bash -c "! grep -q 'planning with [0-9]* profiles asked ahead' '$WORK/d2.err' && grep -q 'planned offload=' '$WORK/d2.err'"
check "every key exactly once, as a local run" bash -c "cmp -s <(sort '$WORK/local.keys') <(sort '$WORK/service.keys')"
finish
