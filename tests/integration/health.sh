#!/usr/bin/env bash
# tests/integration/health.sh - grpc.health.v1.Health/Check as Kubernetes probes see it (tests/tools/
# healthcheck makes the same call as a `grpc:` probe). Proves: a worker is NOT_SERVING while starting
# (no dispatcher yet) and SERVING once registered; the dispatcher is SERVING; "liveness" answers SERVING and
# an unknown service NOT_FOUND; with --auth-token the main port refuses an unauthenticated check while
# --health-port answers it; on SIGTERM a worker with splits in hand is NOT_SERVING while it drains, sends
# what it holds, then exits 0, and the job still delivers every key exactly once. Real processes on
# loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
TEST_TOKENS=(s3cret)

HC=$B/tests/healthcheck
free_port() {   # a port nobody listens on now (a dispatcher binds port 0 and goes)
  "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 > "$WORK/fp.out" 2>/dev/null &
  local pid=$!
  wait_port "$WORK/fp.out"
  kill "$pid"; wait "$pid" 2>/dev/null
}
until_serving() {   # until_serving ADDR WANT [SERVICE [TOKEN]]: polls for up to 5 s
  local addr=$1 want=$2
  shift 2
  for _ in $(seq 1 50); do
    "$HC" "$addr" "$@" 2>/dev/null | grep -q "serving=$want" && return 0
    sleep 0.1
  done
  return 1
}
DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1

DPORT=$(free_port) || exit 1
HPORT=$(free_port) || exit 1
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 --auth-token s3cret --insecure \
  --health-port "$HPORT" --drain-ms 20000 > "$WORK/w.out" 2> "$WORK/w.err" &
W=$!
PIDS+=("$W")
WPORT=$(wait_port "$WORK/w.out") || exit 1
check "worker, no dispatcher yet: NOT_SERVING" bash -c "'$HC' 127.0.0.1:$HPORT | grep -q 'status=OK serving=NOT_SERVING'"
check "worker: liveness SERVING meanwhile" bash -c "'$HC' 127.0.0.1:$HPORT liveness | grep -q 'serving=SERVING'"
check "worker: an unknown service is NOT_FOUND" bash -c "'$HC' 127.0.0.1:$HPORT spillway.v1.Nope | grep -q 'status=NOT_FOUND'"
check "worker main port without the token: UNAUTHENTICATED" \
  bash -c "'$HC' 127.0.0.1:$WPORT | grep -q 'status=UNAUTHENTICATED'"
check "the health port prints its own line" grep -q "^health listening on 127.0.0.1:$HPORT$" "$WORK/w.out"

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port "$DPORT" --auth-token s3cret --insecure --heartbeat-ms 100 \
  > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
wait_port "$WORK/d.out" > /dev/null || exit 1
check "worker registered: SERVING (health port)" until_serving "127.0.0.1:$HPORT" SERVING
check "worker registered: SERVING (main port, with the token)" until_serving "127.0.0.1:$WPORT" SERVING "" s3cret
check "dispatcher: SERVING under its service name" until_serving "127.0.0.1:$DPORT" SERVING spillway.v1.Dispatcher s3cret

# A slow consumer keeps splits in the worker's hands; SIGTERM drains them.
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 4, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --auth-token s3cret --insecure --pipeline "$WORK/p.json" --local-cores 1 \
  --consume-rate 100 --keys "$WORK/svc.keys" --quiet > /dev/null 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
for _ in $(seq 1 50); do grep -q 'serving job=' "$WORK/w.err" && break; sleep 0.1; done
sleep 0.5
kill -TERM "$W"
sleep 0.2
check "draining worker: NOT_SERVING, still answering" \
  bash -c "kill -0 $W && '$HC' 127.0.0.1:$HPORT | grep -q 'status=OK serving=NOT_SERVING'"
check "draining worker: liveness still SERVING" bash -c "'$HC' 127.0.0.1:$HPORT liveness | grep -q 'serving=SERVING'"
wait "$W"
check "the worker exits 0 after its drain" test $? -eq 0
check "it sent every split it held" grep -q 'drained: every split held was sent' "$WORK/w.err"
wait "$C"
check "the job finishes (on the client's own thread)" test $? -eq 0
check "every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"

finish
