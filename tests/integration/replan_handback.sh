#!/usr/bin/env bash
# tests/integration/replan_handback.sh - re-planning hands a running job back to its client: a planned job
# (--cut auto) offloads to one worker on loopback; the worker is killed (-9) mid-run; once the dispatcher
# declares it dead, the re-plan finds no cut that beats the client alone, marks the job client-only (workers
# get no leases, `spillctl jobs` shows STATE client), the client's heartbeat says so and its own threads
# produce every split - including threads the plan had held in reserve. Every sample key arrives exactly once.
# Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
augment_job "$WORK/p.json" 9 100 "$WORK/local-keys.txt" || exit 1

start_service 1 --heartbeat-ms 200 --worker-timeout-ms 1500 || { finish; exit; }
W1=${PIDS[1]}
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/p.json" --cut auto --local-cores 1 \
  --keys "$WORK/keys.txt" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err" & C=$!
for _ in $(seq 1 100); do grep -q "job created" "$WORK/d.err" && break; sleep 0.1; done
JOB=$(sed -n 's/.*job created job=\([0-9]*\) .*/\1/p' "$WORK/d.err" | head -1)
check "the planner offloaded the job" test -n "$JOB"
sleep 1
kill -9 "$W1"
for _ in $(seq 1 100); do grep -q "handed back" "$WORK/d.err" && break; sleep 0.1; done
"$B/bin/spillctl" --dispatcher 127.0.0.1:"$DPORT" jobs > "$WORK/jobs.txt" 2>&1
wait $C
check "the run exits 0" test $? -eq 0
grep -E "re-planned|worker dead" "$WORK/d.err" | sed 's/^/     /'
check "the dispatcher handed the job back once the worker was dead" \
  grep -q "re-planned job=$JOB why=\"workers changed\".*->client.*handed back" "$WORK/d.err"
check "spillctl jobs shows it as the client's" grep -Eq "^$JOB .* client" "$WORK/jobs.txt"
check "the client heard it and produced the rest itself" grep -q "handed back to this client" "$WORK/run.err"
check "every key of the job exactly once" cmp -s <(sort "$WORK/local-keys.txt") <(sort "$WORK/keys.txt")
check "most elements came from the client's own threads" "$PY" "$ROOT/tests/integration/checks.py" replan_handback_1 "$WORK/run.json"
finish
