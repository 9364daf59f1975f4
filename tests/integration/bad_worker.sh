#!/usr/bin/env bash
# tests/integration/bad_worker.sh - the client does not trust what a worker sends: next to a real worker, a
# hostile one (tests/tools/fakeworker) that the dispatcher lists sends garbage bytes, a message whose sample
# is not the epoch order's, a tensor whose shape claims terabytes, an image of the right sample the pipeline
# cannot have made (8x8 where its crop makes 64x64: it would fail the batch), an 80 MB message over the
# client's receive cap, or a compressed payload (zstd) whose frame is corrupt, declares 60 MB for a 12 KB
# element, or stands for 3 TB; or, on a data connection it offers (lib/direct.h), garbage, a wrong sample, a
# header announcing 80 MB, a message cut short (taken as the worker's end, not a bad message), or a second
# offer. Each time the client says why it drops that stream, delivers every key exactly once from the other
# producers, and exits 0. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 5, "epochs": 10},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "rand_augment", "num_ops": 2, "magnitude": 9}],
 "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --worker-timeout-ms 600 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w.out" 2> "$WORK/w.err" &
PIDS+=($!)
wait_port "$WORK/w.out" > /dev/null || exit 1

for mode in garbage wrong-sample huge-shape small-image oversized zstd-corrupt zstd-lying zstd-bomb direct-garbage \
  direct-wrong-sample direct-oversized direct-cut direct-reoffer; do
  case $mode in
    garbage) why='bad message from worker=.* err="malformed ElementBatch"' ;;
    wrong-sample) why='sample does not match the epoch order' ;;
    huge-shape) why='bad message from worker=.* err="tensor: shape and dtype say [0-9]* bytes, data has 12288"' ;;
    small-image) why='bad message from worker=.* err="element size is not what the pipeline makes at this cut"' ;;
    oversized) why='stream from worker=.* ended status=RESOURCE_EXHAUSTED' ;;
    zstd-corrupt) why='bad message from worker=.* err="compressed element 0 of 1: .*\(checksum\|corrupt\)' ;;
    zstd-lying) why='bad message from worker=.* err="compressed element 0 of 1: its frame declares another size' ;;
    zstd-bomb) why='bad message from worker=.* err="tensor: decompresses to [0-9]* bytes, over the 64 MiB cap' ;;
    direct-garbage) why='bad message from worker=.* err="malformed ElementBatch"' ;;
    direct-wrong-sample) why='sample does not match the epoch order' ;;
    direct-oversized) why='bad message from worker=.* err="data connection: a message of 83886080 bytes, over the' ;;
    direct-cut) why='the data connection from worker=.* broke mid-message (Broken pipe): closing its stream' ;;
    direct-reoffer) why='bad message from worker=.* err="a data connection offered unasked"' ;;
  esac
  "$B/tests/fakeworker" "127.0.0.1:$DPORT" "$mode" 160 5 > "$WORK/f-$mode.out" 2> "$WORK/f-$mode.err" &
  F=$!
  PIDS+=("$F")
  wait_port "$WORK/f-$mode.out" > /dev/null || exit 1
  sleep 0.4                                  # registered and heartbeating: listed to clients
  rm -rf "${WORK:?}/$mode"
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --dump "$WORK/$mode" --quiet > /dev/null 2> "$WORK/c-$mode.err"
  check "$mode: the client exits 0" test $? -eq 0
  check "$mode: the hostile worker was streamed from" grep -q 'sending a bad message' "$WORK/f-$mode.err"
  [ "${mode#direct-}" = "$mode" ] ||
    check "$mode: ... on a data connection" grep -q 'the client took a data connection' "$WORK/f-$mode.err"
  check "$mode: the client says why it dropped the stream" grep -q "$why" "$WORK/c-$mode.err"
  check "$mode: batches identical to a local run (every key once, nothing from the bad worker)" \
    bash -c "for f in '$WORK/local'/*; do cmp -s \"\$f\" '$WORK/$mode/'\$(basename \"\$f\") || exit 1; done"
  kill -TERM "$F"; wait "$F" 2>/dev/null
  sleep 0.3
done

finish
