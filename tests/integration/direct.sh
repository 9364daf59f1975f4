#!/usr/bin/env bash
# tests/integration/direct.sh - data connections (lib/direct.h) on real processes: by default a worker's
# elements reach the client on a data connection, batches byte-identical to a local run; with
# SPILLWAY_DIRECT=off, or from a worker started with --data-port -1, they come on the gRPC stream, identical
# too; peers that connect to a worker's data port without its ticket while a job streams from it (an HTTP
# request, a guessed ticket, one that says nothing, a flood of 40) are refused, closed, counted in a metric
# and logged at most once a second, and the job is unaffected; the worker's metrics show the job's stream on
# a data connection. Real processes on loopback; kills all it starts. (direct_blocked.sh: a data port the
# client cannot reach.)
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 7, "epochs": 6},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1

dispatcher_on d --heartbeat-ms 100 --worker-timeout-ms 600 || { finish; exit 1; }
# worker NAME [FLAGS...]: a one-thread worker logging at debug level to WORK/NAME.out and .err; sets W.
worker() {
  local name=$1
  shift
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    --log-level debug "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  W=$!
  PIDS+=("$W")
  wait_port "$WORK/$name.out" > /dev/null || bad "worker $name starts"
  sleep 0.4                                   # registered: listed to clients
}
# run NAME [spillctl run FLAGS...]: the job, ordered, every element from the workers; its batches to WORK/NAME.
run() {
  local name=$1
  shift
  SPILLWAY_LOG_LEVEL=debug timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
    --ordered --cut all --local-cores 0 --dump "$WORK/$name" --quiet "$@" > /dev/null 2> "$WORK/c-$name.err"
}
# same NAME RC: the run exited 0 and its batches are byte-identical to the local run's.
same() {
  [ "$2" -eq 0 ] || return 1
  for f in "$WORK/local"/*; do cmp -s "$f" "$WORK/$1/$(basename "$f")" || return 1; done
}

worker w1
check "a worker listens for data connections by default" grep -q '^data listening on 127.0.0.1:[0-9]*$' "$WORK/w1.out"
run default
check "default: exit 0, batches byte-identical to a local run" same default $?
check "... the elements came on a data connection (client and worker say so)" bash -c \
  "grep -q 'elements on a data connection to port' '$WORK/c-default.err' && grep -q 'elements on a data connection' '$WORK/w1.err'"

SPILLWAY_DIRECT=off run off
check "SPILLWAY_DIRECT=off: exit 0, batches byte-identical" same off $?
check "... no data connection asked for" bash -c "! grep -q 'data connection' '$WORK/c-off.err'"

kill "$W"; wait "$W" 2> /dev/null
worker w2 --data-port -1
check "--data-port -1: no data listener" bash -c "grep -q '^listening on' '$WORK/w2.out' && ! grep -q 'data listening' '$WORK/w2.out'"
run noport
check "... exit 0, batches byte-identical" same noport $?
check "... on the gRPC stream" bash -c "! grep -q 'on a data connection' '$WORK/c-noport.err'"
kill "$W"; wait "$W" 2> /dev/null

# Hostile peers on the data port of the worker a paced job streams from (~5 s).
worker w3 --metrics-port -1
MPORT=$(sed -n 's/^metrics listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/w3.out")
DATA_PORT=$(sed -n 's/^data listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/w3.out")
run hostile --consume-rate 200 & RUN=$!
sleep 1
curl -s "http://127.0.0.1:$MPORT/metrics" > "$WORK/metrics-during.txt"
check "the worker's metrics say the job's stream is on a data connection" \
  grep -Eq '^spillway_worker_data_connections\{job_id="[0-9]+"\} 1$' "$WORK/metrics-during.txt"
exec 3<> "/dev/tcp/127.0.0.1/$DATA_PORT"
printf 'GET / HTTP/1.1\r\nHost: worker\r\n\r\n' >&3
timeout 4 cat <&3 > /dev/null 2>&1
check "an HTTP request to the data port: closed at once" test $? -ne 124
exec 3>&-
exec 3<> "/dev/tcp/127.0.0.1/$DATA_PORT"
{ printf 'SPWD'; head -c 16 /dev/urandom; } >&3
timeout 4 cat <&3 > /dev/null 2>&1
check "a guessed ticket: closed at once" test $? -ne 124
exec 3>&-
FLOOD=()
for _ in $(seq 1 40); do
  exec {fd}<> "/dev/tcp/127.0.0.1/$DATA_PORT" && FLOOD+=("$fd")
done
exec 3<> "/dev/tcp/127.0.0.1/$DATA_PORT"
T0=$(date +%s%N)
timeout 5 cat <&3 > /dev/null 2>&1
T1=$(date +%s%N)
check "one that says nothing: closed after 2 s ($(((T1 - T0) / 1000000)) ms)" \
  test $(((T1 - T0) / 1000000)) -ge 1500 -a $(((T1 - T0) / 1000000)) -lt 4500
exec 3>&-
for fd in "${FLOOD[@]}"; do exec {fd}>&-; done
wait "$RUN"
check "the job meanwhile: exit 0, batches byte-identical" same hostile $?
check "... on a data connection" grep -q 'elements on a data connection to port' "$WORK/c-hostile.err"
REFUSED=$(curl -s "http://127.0.0.1:$MPORT/metrics" | sed -n 's/^spillway_worker_data_connections_refused_total \([0-9]*\)$/\1/p')
check "the worker refused all 43 (its metric: $REFUSED)" test "${REFUSED:-0}" -eq 43
check "... logged why, one line a second at most, with the count" bash -c \
  "grep -q 'refused a data connection: not a Spillway data connection (1 refused in all)' '$WORK/w3.err' &&
   [ \$(grep -c 'refused a data connection' '$WORK/w3.err') -le 8 ]"
check "... and still serves: it is alive" kill -0 "$W"
finish
