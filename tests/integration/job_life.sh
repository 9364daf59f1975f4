#!/usr/bin/env bash
# tests/integration/job_life.sh - a job's life follows its trainer, and nobody's leftover jobs lock a host
# out. From one host: 300 sequential `spillctl run --max-batches 1` (past the per-host cap of 64 four times
# over and past the 256 ended jobs the dispatcher keeps) and 200 Python loaders opened and closed
# early all succeed, each ending its job as it closes; a loader that took a state_dict leaves its job paused
# for a resume; a process killed -9 after creating 64 jobs (the per-host cap) does not block the host's next
# job (the silent jobs are ended to make room); `spillctl job cancel` ends a running job and its trainer
# fails saying so instead of re-creating it. SIGTERM and SIGINT stop spillctl within 1 s - while it retries
# CreateJob and mid-run - with 128 + the signal, ending its job. Real processes on loopback; kills all it
# starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH}
export SPILLWAY_LIB=$B/lib/libspillway.so
image_job "$WORK/p.json" 1 50 "$WORK/local.keys" > /dev/null || exit 1
start_service 1 || exit 1
CTL=$B/bin/spillctl
jobs_json() { "$CTL" --dispatcher "127.0.0.1:$DPORT" jobs --json; }
# in_table STATE: how many jobs in the dispatcher's table (not ended) are in STATE (running, paused)
in_table() {
  jobs_json | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs']; st=sys.argv[1]
print(sum(1 for x in j if not x['ended'] and not x['finished'] and (x['paused'] if st == 'paused' else not x['paused'])))" "$1"
}

fails=0
for _ in $(seq 1 300); do
  "$CTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --max-batches 1 --quiet \
    > /dev/null 2>> "$WORK/runs.err" || fails=$((fails + 1))
done
check "300 sequential --max-batches 1 runs from one host: all succeed" test "$fails" -eq 0
check "... each ended its job on exit (none left running or paused)" \
  test "$(in_table running)$(in_table paused)" = 00
check "... listed as closed" bash -c "'$CTL' --dispatcher 127.0.0.1:$DPORT jobs | awk '\$10 == \"closed\"' | grep -q ."

/usr/bin/python3 "$ROOT/tests/integration/checks.py" job_life_1 "127.0.0.1:$DPORT" "$B/data/cli-test/train" > "$WORK/py.out" 2> "$WORK/py.err"
check "200 Python loaders opened and closed early: all succeed" grep -q '^ok 200$' "$WORK/py.out"
check "... each ended its job (none left running or paused)" test "$(in_table running)$(in_table paused)" = 00

/usr/bin/python3 "$ROOT/tests/integration/checks.py" job_life_2 "127.0.0.1:$DPORT" "$B/data/cli-test/train" > "$WORK/keep.out" 2> "$WORK/keep.err"
check "a loader that took a state_dict, and one with keep_job, leave their jobs paused for a resume" \
  bash -c "grep -q '^ok$' '$WORK/keep.out' && test $(in_table paused) -eq 2"

for id in $(jobs_json | python3 -c "import json,sys; print(*[x['job'] for x in json.load(sys.stdin)['jobs'] if x['paused'] and not x['ended']])"); do
  "$CTL" --dispatcher "127.0.0.1:$DPORT" job cancel "$id" > /dev/null
done
check "spillctl job cancel ends paused jobs too" test "$(in_table paused)" -eq 0

# A process that creates 64 jobs (the per-host cap) and is killed -9: the host's next job still runs.
/usr/bin/python3 "$ROOT/tests/integration/checks.py" job_life_3 "127.0.0.1:$DPORT" "$B/data/cli-test/train" > "$WORK/k.out" 2> "$WORK/k.err" &
K=$!
PIDS+=("$K")
for _ in $(seq 1 300); do grep -q created "$WORK/k.out" && break; sleep 0.1; done
check "a process created jobs up to the host's cap (64)" test "$(in_table running)" -eq 64
kill -9 "$K"; wait "$K" 2>/dev/null
t0=$(date +%s%N)
"$CTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --max-batches 1 --quiet \
  > /dev/null 2> "$WORK/after.err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "... killed -9: the host's next job runs (exit 0, in ${ms} ms)" test "$rc" -eq 0 -a "$ms" -lt 15000
check "... a silent job was ended to make room" grep -q 'job ended to make room .* state=silent' "$WORK/d.err"

# spillctl job cancel: the job ends, its trainer fails saying so (it does not create the job again).
"$CTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --consume-rate 200 --json \
  --quiet > "$WORK/cancel.json" 2> "$WORK/cancel.err" &
C=$!
PIDS+=("$C")
sleep 1.5
id=$(jobs_json | python3 -c "import json,sys; print(max(x['job'] for x in json.load(sys.stdin)['jobs'] if not x['ended'] and not x['paused'] and not x['finished']))")
check "spillctl job cancel ID ends a running job" bash -c "'$CTL' --dispatcher 127.0.0.1:$DPORT job cancel $id | grep -q 'job $id cancelled'"
wait "$C"
check "... its trainer fails (exit 1), saying it was cancelled" \
  bash -c "test $? -eq 1 && grep -q 'job $id was cancelled (spillctl job cancel)' '$WORK/cancel.err'"
check "... listed as cancelled" bash -c "'$CTL' --dispatcher 127.0.0.1:$DPORT jobs | awk '\$1 == $id { print \$10 }' | grep -qx cancelled"
check "cancelling an unknown job is an error" bash -c "! '$CTL' --dispatcher 127.0.0.1:$DPORT job cancel 999999 2> /dev/null"

# Signals: within 1 s, 128 + the signal, the job ended.
stop_in() {     # stop_in SIGNAL: signal spillctl $C; sets RC (its status) and MS (how long it took to exit)
  local t0
  t0=$(date +%s%N)
  kill -s "$1" "$C"
  wait "$C"
  RC=$?
  MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}
FREE=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$CTL" run --dispatcher "127.0.0.1:$FREE" --pipeline "$WORK/p.json" --local-cores 1 --quiet 2> "$WORK/sig1.err" &
C=$!
PIDS+=("$C")
sleep 1.5
stop_in TERM
check "SIGTERM while CreateJob is retried: exit 143 within 1 s ($MS ms)" test "$RC" -eq 143 -a "$MS" -lt 1000
check "... having said it was retrying, then that it was interrupted" \
  bash -c "grep -q 'does not take the job yet' '$WORK/sig1.err' && grep -q 'interrupted by Terminated' '$WORK/sig1.err'"
for sig in TERM INT; do
  "$CTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --consume-rate 100 --quiet \
    2> "$WORK/sig$sig.err" &
  C=$!
  PIDS+=("$C")
  sleep 1.5
  id=$(jobs_json | python3 -c "import json,sys; print(max(x['job'] for x in json.load(sys.stdin)['jobs'] if not x['ended'] and not x['paused'] and not x['finished']))")
  want=$((128 + $(kill -l "$sig")))
  stop_in "$sig"
  check "SIG$sig mid-run: exit $want within 1 s ($MS ms)" test "$RC" -eq "$want" -a "$MS" -lt 1000
  check "... its job $id ended (closed, no lease held)" bash -c "'$CTL' --dispatcher 127.0.0.1:$DPORT jobs --json |
    python3 -c \"import json,sys; j=[x for x in json.load(sys.stdin)['jobs'] if x['job'] == $id]; sys.exit(not (j and j[-1]['closed'] and j[-1]['leased'] == 0))\""
done
finish
