#!/usr/bin/env bash
# tests/integration/stream_cut.sh - a worker's stream cut right after the worker took a message for it (the
# failpoint stream-send:N:cut: as when the client's connection dies between the take and the send): the
# message goes back to the head of the rank's queue, the client opens a new stream and gets it there, and
# the run's batches are byte-identical to run --local, with no duplicate and no element made twice - over
# the data connection and over the gRPC stream. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 5, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1
"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1

for transport in direct grpc; do
  # A fresh worker per run: the failpoint fires once per process, at its 4th message sent.
  SPILLWAY_FAILPOINT=stream-send:4:cut "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" \
    --listen 127.0.0.1 --port 0 --threads 1 > "$WORK/w-$transport.out" 2> "$WORK/w-$transport.err" &
  PIDS+=($!)
  W=$!
  wait_port "$WORK/w-$transport.out" > /dev/null || exit 1
  direct=on
  [ "$transport" = grpc ] && direct=off
  SPILLWAY_DIRECT=$direct timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" \
    --pipeline "$WORK/p.json" --local-cores 0 --ordered --cut 1 --dump "$WORK/$transport" --json --quiet \
    > "$WORK/$transport.json" 2> "$WORK/$transport.err"
  check "$transport: the run exits 0" test $? -eq 0
  check "$transport: the worker cut its stream after taking a message, and kept the message" \
    grep -q 'lost (failpoint stream-send): its message of [1-9][0-9]* elements kept for the rank' \
    "$WORK/w-$transport.err"
  check "$transport: the client saw the stream end and opened another" \
    grep -q 'stream from worker=.* ended status=UNAVAILABLE msg="failpoint stream-send' "$WORK/$transport.err"
  check "$transport: batches byte-identical to run --local" same_batches "$transport" local
  check "$transport: all 320 elements from the worker, none twice, none made twice" \
    /usr/bin/python3 -c "import json,sys; j=json.load(open('$WORK/$transport.json'))
sys.exit(not (j['producers']['remote'] == 320 and j['duplicates_dropped'] == 0))"
  kill -TERM "$W"; wait "$W" 2> /dev/null
done
finish
