#!/usr/bin/env bash
# tests/integration/worker_list.sh - a running job's client learns who serves it from its heartbeats, which
# carry the worker list only when it changed (the client sends the digest of the list it holds): a worker
# that joins mid-job is streamed from, and one killed with -9 mid-job leaves the client's list once the
# dispatcher declares it dead; every key exactly once. Real dispatcher, workers and client on loopback; the
# client paced (--consume-rate 50: ~13 s) so that the job outlives both changes. Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

augment_job "$WORK/p.json" 11 4 "$WORK/local.keys" || exit 1     # 640 elements
dispatcher_on d --heartbeat-ms 100 --worker-timeout-ms 1000 || exit 1
add_workers 1 || exit 1
W1=${PIDS[-1]}
W1_ADDR=127.0.0.1:$(wait_port "$WORK/w1.out")
sleep 0.3
# Only the workers make elements (--local-cores 0); a small window keeps them from running ahead of the pace.
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --consume-rate 50 --prefetch-mb 4 --credit-mb 4 --keys "$WORK/service.keys" --quiet --log-level debug \
  > /dev/null 2> "$WORK/run.err" &
RUN=$!
PIDS+=("$RUN")
# wait_log FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_log() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -le $deadline ]; do
    grep -q -- "$2" "$1" && return 0
    sleep 0.1
  done
  return 1
}
check "the job is created with one worker" wait_log "$WORK/run.err" 'job created .* workers=1' 10
sleep 1                         # ten heartbeats: the client holds the list's digest, the replies carry none

"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w2.out" 2> "$WORK/w2.err" &
PIDS+=($!)
W2_ADDR=127.0.0.1:$(wait_port "$WORK/w2.out")
check "a worker that joins mid-job enters the client's list" \
  wait_log "$WORK/run.err" "worker joined job=[0-9]* worker=$W2_ADDR" 5
sleep 1.5
kill -9 "$W1"
check "a worker killed mid-job leaves the client's list once declared dead" \
  wait_log "$WORK/run.err" "worker left job=[0-9]* worker=$W1_ADDR" 6
check "the job was still running when the worker left" kill -0 "$RUN"

wait "$RUN"
check "the job exits 0" test $? -eq 0
received_from() { sed -n "s/.*stream from worker=$1 closed elements=\([0-9]*\).*/\1/p" "$WORK/run.err" | tail -1; }
check "the worker that joined mid-job sent elements" test "$(received_from "$W2_ADDR")" -gt 0
check "every key exactly once, as a local run" \
  bash -c "cmp -s <(sort '$WORK/local.keys') <(sort '$WORK/service.keys')"
finish
