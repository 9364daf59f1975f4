#!/usr/bin/env bash
# tests/integration/compression.sh - element payloads compressed on the wire (--compress zstd[:N]): through a
# dispatcher and two workers, ordered runs of a uint8 pipeline and a float32 one deliver batches byte-identical
# to a local run with fewer bytes on the wire than raw, noise photographs (which zstd cannot shrink) arrive
# raw and identical, the workers count what they compressed (/metrics); a
# worker killed -9 mid-run still leaves every key exactly once; bad --compress values are refused naming the
# flag, and a level out of range sent straight to a worker is refused by it. Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
pipeline() {    # pipeline FILE SEED EPOCHS [NORMALIZE]: decode, crop 64, flip (uint8; float32 with normalize)
  local norm=""
  [ -n "${4:-}" ] && norm=', {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}'
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": $2, "epochs": $3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]},
         {"op": "random_horizontal_flip"}$norm],
 "batch": {"size": 16}}
JSON
}
run_service() {     # run_service NAME PIPELINE [spillctl options...]: dump to WORK/NAME, JSON to WORK/NAME.json
  local name=$1 p=$2
  shift 2
  rm -rf "${WORK:?}/$name"
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$p" --dump "$WORK/$name" --json \
    --quiet --local-cores 0 "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}
start_worker() {    # start_worker N [--metrics-port P]: sets WN
  local n=$1
  shift
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 "$@" \
    > "$WORK/w$n.out" 2> "$WORK/w$n.err" &
  PIDS+=($!)
  eval "W$n=$!"
  wait_port "$WORK/w$n.out" > /dev/null
}

pipeline "$WORK/u8.json" 3 2
pipeline "$WORK/f32.json" 4 2 normalize
for p in u8 f32; do
  "$B/bin/spillctl" run --local --pipeline "$WORK/$p.json" --threads 2 --dump "$WORK/$p-local" --quiet || exit 1
done
dispatcher_on d --heartbeat-ms 100 --worker-timeout-ms 800 || { finish; exit; }
start_worker 1 --metrics-port -1
start_worker 2
sleep 0.3

for p in u8 f32; do
  run_service "$p-raw" "$WORK/$p.json" --ordered --compress off
  run_service "$p-zstd" "$WORK/$p.json" --ordered --compress zstd
  check "$p: --compress zstd exits 0" test $? -eq 0
  check "$p: batches byte-identical to a local run" same_batches "$p-zstd" "$p-local"
  check "$p: the JSON says level 1" test "$(json_field "$WORK/$p-zstd.json" '["compress_level"]')" = 1
  raw=$(json_field "$WORK/$p-raw.json" '["bytes_received"]')
  z=$(json_field "$WORK/$p-zstd.json" '["bytes_received"]')
  echo "     $p: bytes received raw $raw, zstd $z"
  check "$p: fewer bytes on the wire than raw" test "$z" -lt "$raw"
done
run_service f32-z9 "$WORK/f32.json" --ordered --compress zstd:9
check "zstd:9: batches byte-identical to a local run" same_batches f32-z9 f32-local
# Elements zstd cannot shrink (noise photographs) go raw, and say so: before, such a message claimed zstd
# and the client closed the stream as a bad one.
mkdir -p "$WORK/noise/train/a"
"$PY" -c "
import numpy as np, PIL.Image as I
r = np.random.default_rng(5)
for i in range(48):
    I.fromarray(r.integers(0, 256, (72, 72, 3), dtype=np.uint8)).save('$WORK/noise/train/a/%02d.jpg' % i, quality=100)"
cat > "$WORK/noise.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/noise/train", "shuffle": true, "seed": 3, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [64, 64]}], "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/noise.json" --threads 2 --dump "$WORK/noise-local" --quiet || exit 1
run_service noise-zstd "$WORK/noise.json" --ordered --compress zstd
check "noise: --compress zstd exits 0, no bad message" \
  bash -c "test $? -eq 0 && ! grep -q 'bad message' '$WORK/noise-zstd.err'"
check "noise: batches byte-identical to a local run" same_batches noise-zstd noise-local

MPORT=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/w1.out" | head -1)
if [ -n "$MPORT" ]; then
  curl -s "http://127.0.0.1:$MPORT/metrics" > "$WORK/w1.metrics"
  check "the worker counts what it compressed, and that it shrank" "$PY" "$ROOT/tests/integration/checks.py" compression_1 "$WORK/w1.metrics"
else
  bad "worker 1 printed its metrics port"
fi

# A worker killed (-9) mid-run while it streams compressed messages: every key exactly once, in order.
pipeline "$WORK/long.json" 11 20 normalize
"$B/bin/spillctl" run --local --pipeline "$WORK/long.json" --threads 2 --dump "$WORK/long-local" --quiet || exit 1
run_service kill "$WORK/long.json" --ordered --compress zstd & C=$!
sleep 0.7
kill -9 "$W1"; wait "$W1" 2> /dev/null
wait "$C"
check "worker killed mid-run: exits 0" test $? -eq 0
check "worker killed mid-run: batches identical to a local run" same_batches kill long-local

run_service bad1 "$WORK/u8.json" --compress zstd:20
check "--compress zstd:20: refused as a usage error (2)" test $? -eq 2
check "... naming the flag" grep -q -- '--compress: "zstd:20" is not auto, off, zstd or zstd:N' "$WORK/bad1.err"
run_service bad2 "$WORK/u8.json" --compress lz4
check "--compress lz4: refused" test $? -eq 2
finish
