#!/usr/bin/env bash
# tests/integration/augment_placement.sh - the recipe ops give the same batches wherever they run: a pipeline
# of the SSL colour ops (random_grayscale, random_posterize, random_solarize, random_equalize,
# random_autocontrast, random_invert, random_adjust_sharpness, gaussian_blur, pad and random_crop with a
# padding_mode, random_perspective, aug_mix, elastic_transform) and the combinators (random_apply,
# random_choice with weights, random_order, nested), batches mixed (batch.mix: MixUp / CutMix, on the
# client), run ordered through a dispatcher and
# two workers at every cut, workers only and with the client producing too, is byte-identical to run
# --local: each op's draws come from the sample's own stream, not from the thread or machine that runs it.
# The GPU producer (on the host emulation of the CUDA plugin, tests/gpuemu) makes a pipeline of the ones
# with GPU kernels, nested combinators and a bilinear TrivialAugmentWide included, identical to the CPU, in
# the executor and in a GPU-side worker. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 21, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]},
         {"op": "random_crop", "size": 48, "padding": 4, "padding_mode": "reflect"},
         {"op": "pad", "padding": [2, 1], "padding_mode": "symmetric"},
         {"op": "random_perspective", "distortion_scale": 0.4}, {"op": "aug_mix", "mixture_width": 2},
         {"op": "elastic_transform", "alpha": 20.0, "sigma": 3.0},
         {"op": "random_grayscale", "p": 0.2}, {"op": "random_posterize", "bits": 4},
         {"op": "random_solarize", "threshold": 128, "p": 0.3}, {"op": "random_equalize", "p": 0.4},
         {"op": "random_autocontrast"}, {"op": "random_invert", "p": 0.2},
         {"op": "random_adjust_sharpness", "sharpness_factor": 2.0},
         {"op": "random_apply", "p": 0.8, "ops": [{"op": "color_jitter", "brightness": 0.4, "contrast": 0.4,
                                                   "saturation": 0.2, "hue": 0.1}]},
         {"op": "random_apply", "ops": [{"op": "gaussian_blur", "kernel_size": 23}]},
         {"op": "random_choice", "p": [1, 2, 1], "ops": [{"op": "grayscale", "num_output_channels": 3},
           {"op": "random_order", "ops": [{"op": "posterize", "bits": 5}, {"op": "random_horizontal_flip"},
                                          {"op": "rotate", "angle": 10}]},
           {"op": "rand_augment"}]},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 16, "mix": {"num_classes": 10, "mixup_alpha": 0.2, "cutmix_alpha": 1.0}}}
JSON
# The GPU's: every op has a kernel (grayscale has none yet).
cat > "$WORK/g.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 22, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [40, 40]}, {"op": "random_horizontal_flip"},
         {"op": "random_posterize", "bits": 4}, {"op": "random_solarize", "threshold": 128, "p": 0.3},
         {"op": "random_equalize", "p": 0.4}, {"op": "random_autocontrast"}, {"op": "random_invert", "p": 0.2},
         {"op": "random_adjust_sharpness", "sharpness_factor": 2.0}, {"op": "random_grayscale", "p": 0.3},
         {"op": "random_apply", "p": 0.8, "ops": [{"op": "color_jitter", "brightness": 0.4, "contrast": 0.4,
                                                   "saturation": 0.2, "hue": 0.1}]},
         {"op": "random_choice", "p": [1, 2, 1, 1], "ops": [{"op": "invert"},
           {"op": "grayscale", "num_output_channels": 3},
           {"op": "random_order", "ops": [{"op": "posterize", "bits": 5}, {"op": "random_vertical_flip"},
                                          {"op": "rotate", "angle": 10}]},
           {"op": "rand_augment"}]},
         {"op": "trivial_augment_wide", "interpolation": "bilinear"},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 16}}
JSON
for p in p g; do
  "$B/bin/spillctl" run --local --pipeline "$WORK/$p.json" --threads 2 --dump "$WORK/local-$p" --quiet \
    2> "$WORK/local-$p.err"
  check "run --local $p.json: exits 0" test $? -eq 0
done
mv "$WORK/local-p" "$WORK/local"
EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/g.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/gpu-local" > /dev/null 2> "$WORK/gpu-local.err"
check "GPU producer (emulated), in the executor: batches byte-identical to the CPU's" same_batches gpu-local local-g
check "... and the device made some of them" grep -q 'gpu: [1-9][0-9]* elements made on the device' \
  "$WORK/gpu-local.err"
start_service 2 --heartbeat-ms 100 || exit 1
for cut in 1 2 3; do
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --cut "$cut" --local-cores 0 --dump "$WORK/cut$cut" --json --quiet > "$WORK/cut$cut.json" 2> "$WORK/cut$cut.err"
  check "cut $cut, workers only: exits 0" test $? -eq 0
  check "cut $cut, workers only: batches byte-identical to run --local" same_batches "cut$cut" local
done
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered --cut 2 \
  --local-cores 1 --dump "$WORK/hybrid" --json --quiet > "$WORK/hybrid.json" 2> "$WORK/hybrid.err"
check "cut 2, hybrid: exits 0" test $? -eq 0
check "cut 2, hybrid: batches byte-identical to run --local" same_batches hybrid local
check "cut 2, hybrid: both the workers and the client produced" /usr/bin/python3 -c "import json,sys
p=json.load(open('$WORK/hybrid.json'))['producers']; sys.exit(not (p['remote'] > 0 and p['local'] > 0))"
# batch.mix with fewer classes than the source has labels (0-9): refused at the start, locally and through the
# service, saying which labels, rather than one-hot labels that would fail a batch later.
sed 's/"num_classes": 10/"num_classes": 5/' "$WORK/p.json" > "$WORK/few.json"
"$B/bin/spillctl" run --local --pipeline "$WORK/few.json" --max-batches 1 --quiet > /dev/null 2> "$WORK/few-local.err"
rc=$?
check "batch.mix num_classes below the labels: run --local refuses (exit $rc), saying why" bash -c "[ $rc -ne 0 ] &&
  grep -q 'batch.mix.num_classes: 5, but the source has labels up to 9' '$WORK/few-local.err'"
timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/few.json" --local-cores 0 \
  --max-batches 1 --quiet > /dev/null 2> "$WORK/few-remote.err"
rc=$?
check "... and so does a run through the service (exit $rc)" bash -c "[ $rc -ne 0 -a $rc -ne 124 ] &&
  grep -q 'batch.mix.num_classes: 5, but the source has labels up to 9' '$WORK/few-remote.err'"
# A GPU-side worker (emulated plugin), the only worker of a dispatcher of its own.
DPORT=0
dispatcher_on d2 --heartbeat-ms 100 || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 \
  --threads 1 --gpu 0 --gpu-mem-budget 64Mi > "$WORK/wg.out" 2> "$WORK/wg.err" &
WG=$!
PIDS+=("$WG")
wait_port "$WORK/wg.out" > /dev/null || exit 1
sleep 0.3
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/g.json" --ordered \
  --local-cores 0 --dump "$WORK/gpu-worker" --json --quiet > "$WORK/gpu-worker.json" 2> "$WORK/gpu-worker.err"
check "GPU-side worker: exits 0" test $? -eq 0
check "GPU-side worker: batches byte-identical to the CPU's" same_batches gpu-worker local-g
kill -TERM "$WG"; wait "$WG" 2> /dev/null
check "... and its device made some of them" grep -q 'gpu: [1-9][0-9]* elements made on the device' "$WORK/wg.err"
finish
