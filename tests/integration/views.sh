#!/usr/bin/env bash
# tests/integration/views.sh - multi-crop views (DINO's 2 global + 4 local crops, SimCLR's 2 views) give the
# same batches wherever they run: ordered through a dispatcher and two workers with the cut in the prefix
# (views made on the client), after the views (shipped packed, split on the client), with the client
# producing too, and with zstd on the wire, each byte-identical to run --local; a batch holds one tensor per
# view instance with its shape, then the labels; a worker killed -9 mid-run changes none of it; the GPU
# producer (emulated) declines views and the CPU makes the same batches. A raw
# CreateJob lying about its views (17 views, 40 repeats, a combinator's count past its list) is refused by
# the dispatcher, naming the field, and it serves on. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
NORM='{"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}'
cat > "$WORK/dino.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 31, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}],
 "views": [{"repeat": 2, "ops": [{"op": "random_resized_crop", "size": 48, "scale": [0.4, 1.0], "interpolation": "bicubic"},
                                 {"op": "random_horizontal_flip"},
                                 {"op": "random_apply", "p": 0.8, "ops": [{"op": "color_jitter", "brightness": 0.4,
                                   "contrast": 0.4, "saturation": 0.2, "hue": 0.1}]},
                                 {"op": "random_grayscale", "p": 0.2},
                                 {"op": "random_apply", "p": 0.5, "ops": [{"op": "gaussian_blur", "kernel_size": 5,
                                   "sigma": [0.1, 2.0]}]},
                                 {"op": "random_solarize", "threshold": 128, "p": 0.2}, $NORM]},
           {"repeat": 4, "ops": [{"op": "random_resized_crop", "size": 24, "scale": [0.05, 0.4], "interpolation": "bicubic"},
                                 {"op": "random_horizontal_flip"}, $NORM]}],
 "batch": {"size": 16}}
JSON
cat > "$WORK/simclr.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 32, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}],
 "views": [{"repeat": 2, "ops": [{"op": "random_resized_crop", "size": 32}, {"op": "random_horizontal_flip"},
                                 {"op": "random_apply", "p": 0.8, "ops": [{"op": "color_jitter", "brightness": 0.8,
                                   "contrast": 0.8, "saturation": 0.8, "hue": 0.2}]},
                                 {"op": "random_grayscale", "p": 0.2}]}],
 "batch": {"size": 16, "layout": "CHW"}}
JSON
for p in dino simclr; do
  "$B/bin/spillctl" run --local --pipeline "$WORK/$p.json" --threads 2 --dump "$WORK/$p-local" --quiet \
    2> "$WORK/$p-local.err"
  check "$p: run --local exits 0" test $? -eq 0
done
check "dino: each batch is 2 x [16, 3, 48, 48] + 4 x [16, 3, 24, 24] float32, then int64 labels" \
  /usr/bin/python3 - "$WORK/dino-local" <<'PY'
import glob, sys, numpy as np
d = sys.argv[1]
want = [((16, 3, 48, 48), "float32")] * 2 + [((16, 3, 24, 24), "float32")] * 4 + [((16,), "int64")]
for t, (shape, dt) in enumerate(want):
    a = np.load("%s/b000000_t%d.npy" % (d, t))
    assert a.shape == shape and a.dtype == dt, (t, a.shape, a.dtype)
assert not glob.glob(d + "/b000000_t7.npy")
assert not np.array_equal(np.load(d + "/b000000_t0.npy"), np.load(d + "/b000000_t1.npy"))
assert len(glob.glob(d + "/b*_t0.npy")) == 10
PY
check "simclr: each batch is 2 x [16, 3, 32, 32] uint8 (CHW), then labels" \
  /usr/bin/python3 - "$WORK/simclr-local" <<'PY'
import sys, numpy as np
d = sys.argv[1]
for t in (0, 1):
    a = np.load("%s/b000000_t%d.npy" % (d, t))
    assert a.shape == (16, 3, 32, 32) and a.dtype == np.uint8, (a.shape, a.dtype)
assert np.load(d + "/b000000_t2.npy").dtype == np.int64
PY
# The GPU producer (the emulated plugin) declines views (it makes one output per element) and the CPU makes
# them: the same batches.
EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/simclr.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/simclr-gpu" > /dev/null 2> "$WORK/simclr-gpu.err"
check "simclr with the GPU producer (emulated): batches byte-identical to run --local" same_batches simclr-gpu \
  simclr-local
check "... made by the CPU (the device made none)" bash -c "! grep -q 'gpu: [1-9][0-9]* elements made on the \
device' '$WORK/simclr-gpu.err'"

start_service 2 --heartbeat-ms 100 || exit 1
run_views() {   # NAME PIPELINE ARGS...: an ordered run through the service, dumped to WORK/NAME
  local name=$1 p=$2
  shift 2
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$p.json" --ordered \
    --dump "$WORK/$name" --json --quiet "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}
for p in dino simclr; do
  for cut in 1 2; do
    run_views "$p-cut$cut" "$p" --cut "$cut" --local-cores 0
    check "$p: cut $cut, workers only: exits 0" test $? -eq 0
    check "$p: cut $cut: batches byte-identical to run --local" same_batches "$p-cut$cut" "$p-local"
  done
done
run_views dino-hybrid dino --cut 2 --local-cores 1
check "dino: views on the workers and on the client: exits 0" test $? -eq 0
check "dino: ... batches byte-identical to run --local" same_batches dino-hybrid dino-local
run_views dino-zstd dino --cut 2 --local-cores 0 --compress zstd
check "dino: packed views compressed on the wire: exits 0" test $? -eq 0
check "dino: ... batches byte-identical to run --local" same_batches dino-zstd dino-local

# A worker killed -9 mid-run (3 epochs, the trainer consuming at 120 elements/s): the run finishes and its
# batches are still byte-identical to run --local's.
/usr/bin/python3 - "$WORK/dino.json" "$WORK/dino3.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["source"]["epochs"] = 3
json.dump(s, open(sys.argv[2], "w"))
PY
"$B/bin/spillctl" run --local --pipeline "$WORK/dino3.json" --threads 2 --dump "$WORK/dino3-local" --quiet \
  2> "$WORK/dino3-local.err"
run_views dino3-killed dino3 --cut 2 --local-cores 0 --consume-rate 120 &
RUN=$!
sleep 1.5
check "dino: the run was still going when a worker was killed" kill -0 "$RUN"
check "dino: ... and that worker was serving it" grep -q 'serving job=' "$WORK/w1.err"
kill -9 "${PIDS[1]}"
wait "${PIDS[1]}" 2> /dev/null
wait "$RUN"
check "dino: a worker killed -9 mid-run: the run finishes" test $? -eq 0
check "dino: ... batches byte-identical to run --local" same_batches dino3-killed dino3-local

# Lies about the views' structure, sent raw (tests/tools/oldpeer): refused before anything is nested or run,
# naming where, and the dispatcher serves on. spillctl refuses the same before it sends.
OLDPEER=$B/tests/oldpeer
[ -x "$OLDPEER" ] || make -s -C "$ROOT" "$OLDPEER" > /dev/null || exit 1
for lie in "views:views: 17 views: give 1 to 16" "repeat:views\[0\].repeat: 40 is outside \[1, 32\]" \
           "children:views\[0\].ops\[0\].children: 9: a combinator has 1 to 16 ops"; do
  "$OLDPEER" "127.0.0.1:$DPORT" spec "${lie%%:*}" > "$WORK/lie.out" 2>&1
  check "a CreateJob lying about ${lie%%:*}: refused, naming it" grep -q "^status=INVALID_ARGUMENT msg=${lie#*:}" \
    "$WORK/lie.out"
done
check "... and the dispatcher serves on" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json |
  grep -q '\"address\"'"
/usr/bin/python3 - "$WORK/dino.json" "$WORK/many.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["views"][1]["repeat"] = 31
json.dump(s, open(sys.argv[2], "w"))
PY
"$B/bin/spillctl" validate --pipeline "$WORK/many.json" > /dev/null 2> "$WORK/many.err"
check "33 view instances: spillctl validate refuses them" grep -q \
  'views: 33 view instances (repeats summed) or more: at most 32' "$WORK/many.err"
finish
