#!/usr/bin/env bash
# tests/integration/grey_output.sh - one-channel outputs (grayscale with num_output_channels 1) give the same
# batches wherever they run: a normalized pipeline ([n, 1, H, W] float32; aug_mix and elastic_transform
# before its grayscale, so they meet the worker kill too) and a uint8 one that ends on the
# grayscale ([n, H, W, 1], and [n, 1, H, W] in CHW), ordered through a dispatcher and two workers at every
# cut, workers only and with the client producing too, byte-identical to run --local, and with a worker
# killed -9 mid-run; the GPU producer (emulated plugin) declines them and the CPU makes them, the same bytes;
# raw CreateJobs lying (a one-channel grayscale in a combinator; aug_mix's alpha as a pair) are refused,
# naming the field. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/t.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 41, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [36, 36]},
         {"op": "aug_mix", "mixture_width": 2}, {"op": "elastic_transform", "alpha": 20.0, "sigma": 3.0},
         {"op": "grayscale", "num_output_channels": 1}, {"op": "rotate", "angle": 12, "fill": 40},
         {"op": "random_apply", "p": 0.6, "ops": [{"op": "color_jitter", "brightness": 0.4, "contrast": 0.4}]},
         {"op": "center_crop", "size": 32}, {"op": "normalize", "mean": [0.5], "std": [0.25]}],
 "batch": {"size": 16}}
JSON
cat > "$WORK/u.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 42, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [24, 28]}, {"op": "random_horizontal_flip"},
         {"op": "random_equalize", "p": 0.5}, {"op": "grayscale", "num_output_channels": 1}],
 "batch": {"size": 16}}
JSON
sed 's/"batch": {"size": 16}/"batch": {"size": 16, "layout": "CHW"}/' "$WORK/u.json" > "$WORK/c.json"
shape() {   # shape DUMP WANT: the first batch's images have shape WANT
  /usr/bin/python3 -c "import numpy, sys; s = numpy.load(sys.argv[1] + '/b000000_t0.npy').shape
sys.exit(str(list(s)) != sys.argv[2])" "$WORK/$1" "$2"
}
for p in t u c; do
  "$B/bin/spillctl" run --local --pipeline "$WORK/$p.json" --threads 2 --dump "$WORK/local-$p" --quiet \
    2> "$WORK/local-$p.err"
  check "run --local $p.json: exits 0" test $? -eq 0
done
check "normalized: batches of [16, 1, 32, 32] float32" shape local-t "[16, 1, 32, 32]"
check "uint8 HWC: batches of [16, 24, 28, 1]" shape local-u "[16, 24, 28, 1]"
check "uint8 CHW: batches of [16, 1, 24, 28]" shape local-c "[16, 1, 24, 28]"
EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/u.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/gpu-u" > /dev/null 2> "$WORK/gpu-u.err"
check "GPU producer (emulated): the same batches, made by the CPU" same_batches gpu-u local-u
check "... and the device made none" bash -c "! grep -q 'gpu: [1-9][0-9]* elements made on the device' \
  '$WORK/gpu-u.err'"
start_service 2 --heartbeat-ms 100 || exit 1
for p in t u; do
  n=$(/usr/bin/python3 -c "import json, sys; print(len(json.load(open(sys.argv[1]))['ops']))" "$WORK/$p.json")
  for cut in $(seq 1 $((n - 1))); do
    timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$p.json" --ordered \
      --cut "$cut" --local-cores 0 --dump "$WORK/$p-cut$cut" --quiet 2> "$WORK/$p-cut$cut.err"
    rc=$?
    grep -q "cut $cut is past" "$WORK/$p-cut$cut.err" 2> /dev/null && continue   # fewer groups than ops
    check "$p.json cut $cut, workers only: exits 0" test $rc -eq 0
    check "$p.json cut $cut, workers only: batches byte-identical to run --local" same_batches "$p-cut$cut" \
      "local-$p"
  done
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$p.json" --ordered \
    --local-cores 1 --dump "$WORK/$p-hybrid" --quiet 2> "$WORK/$p-hybrid.err"
  check "$p.json hybrid: exits 0" test $? -eq 0
  check "$p.json hybrid: batches byte-identical to run --local" same_batches "$p-hybrid" "local-$p"
done
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/c.json" --ordered \
  --local-cores 0 --dump "$WORK/c-remote" --quiet 2> "$WORK/c-remote.err"
check "c.json (CHW) workers only: batches byte-identical to run --local" same_batches c-remote local-c
# A worker killed -9 mid-run: the one-channel batches come out unchanged (three epochs, the trainer's pace).
sed 's/"epochs": 1/"epochs": 3/' "$WORK/t.json" > "$WORK/t3.json"
"$B/bin/spillctl" run --local --pipeline "$WORK/t3.json" --threads 2 --dump "$WORK/t3-local" --quiet \
  2> "$WORK/t3-local.err"
killed_run "$WORK/t3.json" t3-killed --consume-rate 150
check "... batches byte-identical to run --local" same_batches t3-killed t3-local
# Lies sent raw (tests/tools/oldpeer): refused by the dispatcher, naming the field; it serves on.
OLDPEER=$B/tests/oldpeer
[ -x "$OLDPEER" ] || make -s -C "$ROOT" "$OLDPEER" > /dev/null || exit 1
for lie in "grey:ops\[1\]\.ops\[0\]\.num_output_channels: 1 inside a combinator" "alpha:ops\[1\]\.alpha: "; do
  "$OLDPEER" "127.0.0.1:$DPORT" spec "${lie%%:*}" > "$WORK/lie.out" 2>&1
  check "a CreateJob with ${lie%%:*} lying: refused, naming the field" \
    grep -q "^status=INVALID_ARGUMENT msg=${lie#*:}" "$WORK/lie.out"
done
check "... and the dispatcher serves on" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json |
  /usr/bin/python3 -c 'import json, sys; json.load(sys.stdin)'"
finish
