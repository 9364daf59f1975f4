#!/usr/bin/env bash
# tests/integration/restart.sh - a dispatcher with --work-dir survives kill -9: its journal of durable updates
# (jobs, acks, incarnations, ids) is replayed at start, the workers register again under their ids and the
# running trainer's heartbeats find its job, so the job completes with every key exactly once and the trainer
# never sees an error. Three restarts at different points of the job, and one of a job with a Python op;
# then a torn record at the journal's end (cut off and logged), ids that are never reused, and a second
# dispatcher refused on the same directory; a dispatcher gone for good fails the trainer after
# --dispatcher-wait-ms; one not up yet is waited for.
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

image_job "$WORK/p.json" 2 5 "$WORK/local.keys" || exit 1
export SPILLWAY_PYTHON=/usr/bin/python3 SPILLWAY_PYTHONPATH=$ROOT/tests/python   # the Python-op job's function

WD=$WORK/wd
dispatcher() {   # dispatcher NAME: on the journal in $WD, on the same port each time; sets D, DPORT
  dispatcher_on "$1" --work-dir "$WD" --heartbeat-ms 200 --worker-timeout-ms 2000
}
dispatcher d0 || exit 1
add_workers 2 || exit 1
sleep 0.5

n=0
for at in 1.0 2.5 4.0; do     # seconds into the job (800 elements at 100/s: about 8 s, so the restarted
  n=$((n + 1))                # dispatcher answers while the job still runs)
  "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 100 \
    --keys "$WORK/svc$n.keys" --json --quiet > "$WORK/c$n.json" 2> "$WORK/c$n.err" &
  C=$!
  PIDS+=("$C")
  sleep "$at"
  kill -9 "$D"; wait "$D" 2>/dev/null
  sleep 0.5
  dispatcher "d$n" || continue
  wait "$C"
  check "restart at ${at}s: the trainer exits 0" test $? -eq 0
  check "restart at ${at}s: every key exactly once" \
    bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc$n.keys') > /dev/null"
  check "restart at ${at}s: the journal was replayed with the job in it" \
    grep -q "journal replayed dir=.* records=[1-9][0-9]* .* jobs=[1-9]" "$WORK/d$n.err"
  check "restart at ${at}s: the trainer logged no failure" bash -c "! grep -q ' error \\|run failed' '$WORK/c$n.err'"
  check "restart at ${at}s: the trainer said it waits for the dispatcher, then that it is back" \
    bash -c "grep -q 'does not answer .*retrying for up to 300 s' '$WORK/c$n.err' && grep -q 'the dispatcher answers again after' '$WORK/c$n.err'"
done

# A job with a Python op, on the workers only, across a restart: the same exactly-once, and the helpers the
# workers started go on serving it (the dispatcher restart is no worker's restart).
/usr/bin/python3 "$ROOT/tests/integration/checks.py" restart_1 "$WORK/p.json" "$WORK/py.json"
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/py.json" --local-cores 0 --cut all \
  --consume-rate 100 --keys "$WORK/py.keys" --json --quiet > "$WORK/py.out" 2> "$WORK/py.err" &
C=$!
PIDS+=("$C")
sleep 2
kill -9 "$D"; wait "$D" 2>/dev/null
sleep 0.5
dispatcher d-py || exit 1
wait "$C"
check "a Python-op job across a restart: the trainer exits 0" test $? -eq 0
check "... every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/py.keys') > /dev/null"
check "... the workers ran the op, without an error" bash -c "! grep -q 'python.* error\| error .*python' '$WORK'/w*.err"
jobs_before=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/py.out")

# A torn record at the end (a crash mid-append): cut off and logged; the journal goes on.
kill -9 "$D"; wait "$D" 2>/dev/null
printf '\x40\x00\x00\x00\x12\x34' >> "$WD/journal"
dispatcher d4 || exit 1
check "a torn tail is cut off and logged" grep -q 'cut a bad tail off .*dropped_bytes=6 why="a torn record' "$WORK/d4.err"
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --max-batches 2 \
  --json --quiet > "$WORK/c5.json" 2> "$WORK/c5.err"
check "a job after the restarts gets a new id (never reused)" \
  python3 -c "import json,sys; sys.exit(json.load(open('$WORK/c5.json'))['job'] <= $jobs_before)"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json > "$WORK/workers.json"
check "the workers are known under their first ids, alive" \
  python3 -c "import json,sys; w=json.load(open('$WORK/workers.json'))['workers']; sys.exit(sorted((x['worker_id'], x['alive']) for x in w) != [(1, True), (2, True)])"
"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --work-dir "$WD" > /dev/null 2> "$WORK/second.err"
check "a second dispatcher on the same directory is refused, naming the holder" \
  bash -c "test $? -ne 0 && grep -q 'is in use by another process (pid $D)' '$WORK/second.err'"

# A dispatcher gone for good: the trainer waits --dispatcher-wait-ms, then fails naming it.
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --consume-rate 50 \
  --dispatcher-wait-ms 1500 --quiet > /dev/null 2> "$WORK/gone.err" &
C=$!
PIDS+=("$C")
sleep 1
kill -9 "$D"; wait "$D" 2>/dev/null
t0=$(date +%s)
wait "$C"
rc=$?
check "a dispatcher gone for good fails the trainer (exit 1) within seconds" \
  test "$rc" -eq 1 -a $(( $(date +%s) - t0 )) -le 10
check "... naming the dispatcher and how long it waited" \
  grep -q "run failed: .*lost the dispatcher at 127.0.0.1:$DPORT: no heartbeat answered for 1 s" "$WORK/gone.err"

# A trainer that starts before its dispatcher (pods start in any order) waits for it, then runs.
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 \
  --keys "$WORK/early.keys" --quiet > /dev/null 2> "$WORK/early.err" &
C=$!
PIDS+=("$C")
sleep 2
dispatcher d5
wait "$C"
check "a trainer started before the dispatcher waits for it, and the job completes (exit 0)" test $? -eq 0
check "... every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/early.keys') > /dev/null"
check "... having said once that it waits" \
  test "$(grep -c 'does not take the job yet (UNAVAILABLE' "$WORK/early.err")" -eq 1

finish
