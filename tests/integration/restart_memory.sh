#!/usr/bin/env bash
# tests/integration/restart_memory.sh - a dispatcher without --work-dir (state in memory only) is no worse
# restarted than not: killed -9 and restarted mid-job, the trainer re-creates its job from what it has been
# given (a resume point) and completes with every key exactly once; a trainer still draining its prefetch
# buffer after its finished job left the table is not failed by the dispatcher's NOT_FOUND. Real processes
# on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

image_job "$WORK/p.json" 12 3 "$WORK/local.keys" || exit 1
sed 's/"epochs": 3/"epochs": 30/' "$WORK/p.json" > "$WORK/p30.json"     # more than the trainer's credit holds
"$B/bin/spillctl" run --local --pipeline "$WORK/p30.json" --threads 2 --keys "$WORK/local30.keys" --quiet || exit 1

dispatcher() {   # dispatcher NAME [FLAGS...]: in memory, on the same port each time; sets D, DPORT
  local name=$1
  shift
  dispatcher_on "$name" --heartbeat-ms 200 --worker-timeout-ms 2000 "$@"
}
dispatcher d0 || exit 1
add_workers 2 || exit 1
sleep 0.5

n=0
for at in 0.8 2.0; do        # seconds into a 3.2 s job (4800 elements at 1500/s)
  n=$((n + 1))
  "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p30.json" --local-cores 0 \
    --consume-rate 1500 --keys "$WORK/k$n.keys" --quiet > /dev/null 2> "$WORK/c$n.err" &
  C=$!
  PIDS+=("$C")
  sleep "$at"
  kill -9 "$D"; wait "$D" 2>/dev/null
  sleep 0.3
  dispatcher "d$n" || continue
  wait "$C"
  check "restart at ${at}s without a journal: the trainer exits 0" test $? -eq 0
  check "restart at ${at}s: every key exactly once" \
    bash -c "diff <(sort '$WORK/local30.keys') <(sort '$WORK/k$n.keys') > /dev/null"
  check "restart at ${at}s: the trainer re-attached its job, saying so" \
    grep -q 'the dispatcher no longer knew job=.*re-attached as job=' "$WORK/c$n.err"
  check "restart at ${at}s: the new dispatcher made the job again from the delivered point" \
    grep -q 'client joined job=.* resume_epoch=' "$WORK/d$n.err"
  check "restart at ${at}s: the workers served the new job (the trainer never had to make a batch itself)" \
    bash -c "! grep -q 'head batch stalled' '$WORK/c$n.err'"
done

# A finished job leaves the table (after --finished-job-ms) while its trainer still drains what it holds.
kill -9 "$D"; wait "$D" 2>/dev/null
dispatcher d9 --finished-job-ms 300 || exit 1
sleep 2.5                                   # the workers find the dispatcher again
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 120 \
  --keys "$WORK/slow.keys" --quiet > /dev/null 2> "$WORK/slow.err"
check "a trainer slower than its job's grace period exits 0" test $? -eq 0
check "... every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/slow.keys') > /dev/null"
check "... after the job left the table under it" \
  bash -c "grep -q 'job removed job=.* state=finished' '$WORK/d9.err' &&
           grep -q 'left the dispatcher.s table after it finished; no more heartbeats' '$WORK/slow.err'"

finish
