#!/usr/bin/env bash
# tests/integration/client_loss.sh - when the trainer's client dies, the service lets go: a dispatcher with a short
# client timeout expires the client, pauses its job and releases its leases; the workers drop the job from
# their task list, stop its producers and free its buffers (their RSS goes back near where it started).
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
wait_log() {  # wait_log FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -le $deadline ]; do grep -q "$2" "$1" && return 0; sleep 0.1; done
  return 1
}

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 3, "epochs": 0},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --client-timeout-ms 1000 \
  > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 --buffer-mb 64 \
  > "$WORK/w.out" 2> "$WORK/w.err" &
W=$!
PIDS+=("$W")
wait_port "$WORK/w.out" > /dev/null || exit 1
sleep 0.5
BASE=$(rss_kb "$W")

# A trainer (libspillway via spillctl) on a job that never ends: it takes one batch and stalls, then is killed.
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --quiet \
  --consume-rate 0.001 > /dev/null 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
check "the worker starts serving the job" wait_log "$WORK/w.err" 'serving job=' 10
STARTED=$SECONDS
# The consumer stalls after its first message (heartbeating on): the worker's queue fills to its bound, one
# second of what the stream drained lately (worker/jobs.c: 4 MB to --buffer-mb; a loaded machine drains
# slower, so the bound is smaller). Wait until its memory holds still for 2 s, at least 5 s, at most 20 s.
last=$(rss_kb "$W"); still=0
for _ in $(seq 1 100); do
  sleep 0.2
  now=$(rss_kb "$W")
  if [ "$now" -gt $((last + 1024)) ]; then still=0; last=$now; else still=$((still + 1)); fi
  [ $still -ge 10 ] && [ $((SECONDS - STARTED)) -ge 5 ] && break
done
FILLED=$SECONDS
BUSY=$(rss_kb "$W")
check "a stalled consumer: the worker's memory stays bounded (buffer 64 MB + 64 MB slack)" test "$BUSY" -le $((BASE + 128 * 1024))
kill -9 "$C"; wait "$C" 2>/dev/null
check "the dispatcher expires the client" wait_log "$WORK/d.err" 'client expired job=' 5
check "the job pauses and its leases go back" bash -c "sleep 0.5; '$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT jobs --json | grep -q '\"leased\": 0, \"pending\": [0-9]*, \"paused\": true'"
check "the worker stops the job" wait_log "$WORK/w.err" 'stopping job=' 5
sleep 1
AFTER=$(rss_kb "$W")
echo "     worker RSS: ${BASE} kB idle, ${BUSY} kB with the consumer stalled, ${AFTER} kB after"
echo "     (its memory held still $((FILLED - STARTED)) s after the worker started serving)"
check "the stall filled the worker's queue (RSS grew by over 4 MB, its smallest bound)" \
  test "$BUSY" -ge $((BASE + 4 * 1024))
check "the worker frees the job's buffers (RSS within 24 MB of idle, and gave back most of the stall's growth)" \
  test "$AFTER" -le $((BASE + 24 * 1024)) -a $((AFTER - BASE)) -le $(((BUSY - BASE) / 2))
check "the worker is still alive and registered" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json | grep -q '\"alive\": true'"

finish
