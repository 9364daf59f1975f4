#!/usr/bin/env bash
# tests/integration/gpu_worker.sh - GPU use on a machine without a device. Proves: spillctl run --local --gpu 0
# (the executor's GPU thread, on the host emulation of the CUDA plugin: tests/gpuemu, the kernels' own
# per-pixel code) gives a local run's batches, and without a plugin says so and runs on the CPU; a worker with
# --gpu 0 whose plugin or device is missing says so once and serves as a CPU worker; one with the emulated
# plugin makes elements on it (ordered jobs still byte for byte a local run's, RandAugment included), takes
# the job's largest micro-batches by encoded size, shows its GPU in spillctl workers and job, and reports at
# exit what it made there and an arena peak within its budget; a pipeline the GPU cannot make is logged and
# made on the CPU; a budget over the free memory is refused with the reason; a device that fails is logged
# once and the jobs stay identical; a GPU-side worker killed mid-job loses nothing; a client with --gpu and
# a dispatcher makes part of its own splits on the device, identical again, and is planned with its GPU's
# measured rate (as a GPU-side worker's profile reports its own); a dispatcher killed and restarted on its
# journal mid-job beside a GPU-side worker loses nothing and still lists its GPU. Real processes on loopback;
# kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
pipeline() {   # pipeline FILE OPS
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "shuffle": true, "seed": 3, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, $2], "batch": {"size": 32}}
JSON
}
pipeline "$WORK/p.json" '{"op": "random_resized_crop", "size": [48, 48]}, {"op": "random_horizontal_flip"},
  {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}'
pipeline "$WORK/ra.json" '{"op": "random_resized_crop", "size": [48, 48]}, {"op": "random_horizontal_flip"},
  {"op": "rand_augment", "num_ops": 2, "magnitude": 9}, {"op": "to_tensor"}'
pipeline "$WORK/rc.json" '{"op": "resize", "size": 40}, {"op": "invert"}, {"op": "resize", "size": [32, 32]}'
for p in p ra rc; do
  "$B/bin/spillctl" run --local --pipeline "$WORK/$p.json" --threads 2 --dump "$WORK/local-$p" --quiet || exit 1
done
same_as_local() {   # same_as_local P DIR: every batch and key identical to the local run of P
  for f in "$WORK/local-$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}
# In one process: spillctl run --local --gpu 0 (the executor's GPU thread) gives the same batches.
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/ra.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/inproc-ra" > /dev/null 2> "$WORK/inproc.err"
check "spillctl run --local --gpu 0: RandAugment batches identical to the CPU's" same_as_local ra "$WORK/inproc-ra"
check "... and the device made some of them" grep -q 'gpu: [1-9][0-9]* elements made on the device' "$WORK/inproc.err"
SPILLWAY_GPU_PLUGIN=/nonexistent.so "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --gpu 0 \
  --dump "$WORK/inproc-p" > /dev/null 2> "$WORK/inproc2.err"
check "... without a plugin it says so and the CPU makes the same batches" bash -c \
  "grep -q 'gpu: device 0 not used, the CPU makes every element: no GPU plugin' '$WORK/inproc2.err'"
check "... identical to a local run" same_as_local p "$WORK/inproc-p"

dispatcher_on d --heartbeat-ms 100 --worker-timeout-ms 600 --work-dir "$WORK/dwork" --metrics-port -1 ||
  { finish; exit 1; }
DM=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")
worker() {   # worker NAME [ENV...] -- FLAGS...: a one-thread worker with a GPU flag
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 \
    --threads 1 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  W=$!
  PIDS+=("$W")
  wait_port "$WORK/$name.out" > /dev/null || { bad "worker $name starts"; return 1; }
}
job() {   # job P NAME: an ordered run of pipeline P with no threads of its own; exit status
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$1.json" --ordered \
    --local-cores 0 --dump "$WORK/$2" --quiet > /dev/null 2> "$WORK/$2-client.err"
}
stop() { kill -TERM "$W"; wait "$W" 2>/dev/null; }

# The plugin this build has (libspillway-gpu.so where nvcc built it, none otherwise), and no device.
worker plain -- --gpu 0
check "--gpu 0 without a device (or plugin): says so once" \
  test "$(grep -c 'gpu: device 0 not used, serving as a CPU worker: no \(CUDA device\|GPU plugin\)' \
    "$WORK/plain.err")" -eq 1
job p plain
check "... and serves the job as a CPU worker: batches identical to a local run" same_as_local p "$WORK/plain"
stop

worker emu SPILLWAY_GPU_PLUGIN="$EMU" -- --gpu 0 --gpu-mem-budget 256Mi
check "--gpu 0 with the emulated plugin: says where it makes elements" \
  grep -q 'gpu: making elements on device 0 (host emulation.*arena 256 MiB of 1024 MiB free' "$WORK/emu.err"
job p emu
check "... an ordered job's batches are identical to a local run's" same_as_local p "$WORK/emu"
check "... spillctl workers shows its GPU" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json |
  grep -q '\"gpu\": \"device 0, arena 256 MiB\"'"
check "... and spillctl job its class worker:N:gpu" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT job 2 \
  --json | grep -q '\"producer\": \"worker:[0-9]*:gpu\"'"
job ra emu-ra
check "... RandAugment: identical to a local run" same_as_local ra "$WORK/emu-ra"
EPORT=$(wait_port "$WORK/emu.out")
"$B/bin/spillctl" profile --worker "127.0.0.1:$EPORT" --pipeline "$WORK/ra.json" --json > "$WORK/emu-profile.json"
check "... spillctl profile measures its GPU as a producer for the planner" \
  grep -q '"gpu_elements_per_s": [1-9][0-9.]*, "gpu_cpu_ns": [1-9]' "$WORK/emu-profile.json"
job rc emu-rc
check "... a resize after an augment op (no GPU kernel): identical to a local run" same_as_local rc "$WORK/emu-rc"
check "... and the worker says it makes that one on the CPU only" \
  grep -q 'job=4 is made on the CPU only: ops\[3\] resize has no GPU kernel' "$WORK/emu.err"
stop
made=$(sed -n 's/.*gpu: \([0-9]*\) elements made on the device.*/\1/p' "$WORK/emu.err")
check "... at exit it reports elements made on the device ($made)" test "${made:-0}" -gt 0
gpu_mean=$(sed -n 's/.*gpu: [0-9]* elements made on the device (\([0-9]*\) encoded bytes each.*/\1/p' "$WORK/emu.err")
all_mean=$(find "$B/data/cli-test/train" -name '*.JPEG' -printf '%s\n' | awk '{s += $1; n++} END {print int(s / n)}')
check "... the largest micro-batches went to it: $gpu_mean encoded bytes per element, $all_mean on average" \
  test "${gpu_mean:-0}" -gt "$all_mean"
check "... and an arena peak within its budget" \
  grep -q "arena peak [1-9][0-9]* of $((256 << 20)) bytes" "$WORK/emu.err"

worker budget SPILLWAY_GPU_PLUGIN="$EMU" SPW_GPUEMU_FREE_MB=64 -- --gpu 0 --gpu-mem-budget 1Gi
check "a budget over the free memory is refused with the reason" \
  grep -q 'gpu: device 0 not used, serving as a CPU worker: gpu_mem_budget 1Gi is more than the 64 MiB free' \
  "$WORK/budget.err"
job p budget
check "... and the worker serves as a CPU worker" same_as_local p "$WORK/budget"
stop

# The device fails a micro-batch (CUDA errors stick to a context): one error line, the rest on the CPU.
worker broken SPILLWAY_GPU_PLUGIN="$EMU" SPW_GPUEMU_FAIL=sync -- --gpu 0
job ra broken
check "a device that fails: the job's batches are still identical to a local run" same_as_local ra "$WORK/broken"
check "... the worker says so once, as an error, and goes on without the device" \
  test "$(grep -c 'error gpu the device failed a micro-batch' "$WORK/broken.err")" -eq 1
stop

# A GPU-side worker dies mid-job beside a CPU worker: its splits are leased again, nothing lost or doubled.
pipeline "$WORK/long.json" '{"op": "random_resized_crop", "size": [48, 48]}, {"op": "rand_augment"},
  {"op": "to_tensor"}'
sed -i 's/"epochs": 2/"epochs": 6/' "$WORK/long.json"
"$B/bin/spillctl" run --local --pipeline "$WORK/long.json" --threads 2 --dump "$WORK/local-long" --quiet || exit 1
worker cpu -- --gpu -1
worker dying SPILLWAY_GPU_PLUGIN="$EMU" -- --gpu 0
DYING=$W
job long killed &
JOB=$!
for _ in $(seq 1 100); do      # until the GPU-side worker has sent a few messages (its log says it serves)
  grep -q 'serving job=' "$WORK/dying.err" && break
  sleep 0.05
done
sleep 0.5
kill -9 "$DYING"
wait "$DYING" 2> /dev/null
wait "$JOB"
check "a GPU-side worker killed mid-job (after it took the job): the job ends (exit 0)" test $? -eq 0
check "... with every batch identical to a local run" same_as_local long "$WORK/killed"
curl -s "http://127.0.0.1:$DM/metrics" > "$WORK/killed-metrics.txt"
check "... and the dispatcher's metrics count the death" python3 "$ROOT/tests/integration/checks.py" gpu_worker_1 "$WORK/killed-metrics.txt"

# The trainer's own GPU with a dispatcher: one more client thread makes the client's own splits on it first.
SPILLWAY_GPU_PLUGIN="$EMU" timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline \
  "$WORK/ra.json" --ordered --local-cores 1 --gpu 0 --gpu-mem-budget 64Mi --dump "$WORK/client-gpu" --json \
  > "$WORK/client-gpu.json" 2> "$WORK/client-gpu.err"
check "a client with --gpu 0 and a dispatcher: RandAugment batches identical to a local run" \
  same_as_local ra "$WORK/client-gpu"
check "... beside the worker, its GPU thread made some of them" grep -q '"local_gpu": [1-9]' "$WORK/client-gpu.json"
SPILLWAY_GPU_PLUGIN="$EMU" timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline \
  "$WORK/ra.json" --ordered --cut auto --gpu 0 --dump "$WORK/client-plan" --quiet 2> "$WORK/client-plan.err"
check "... planned (--cut auto) with its GPU measured: identical to a local run" same_as_local ra "$WORK/client-plan"
check "... and the plan had the GPU's rate" \
  grep -q 'gpu: [1-9][0-9]* elements/s at [0-9]* us of CPU each, for the planner' "$WORK/client-plan.err"
CJOB=$(sed -n 's/.*"job": \([0-9]*\), "cut".*/\1/p' "$WORK/client-gpu.json")
check "... and spillctl job $CJOB shows the class client:rank0:gpu" bash -c "'$B/bin/spillctl' --dispatcher \
  127.0.0.1:$DPORT job '$CJOB' --json | grep -q '\"producer\": \"client:rank0:gpu\"'"

# The dispatcher killed and restarted on its journal while a GPU-side worker serves: nothing lost.
worker emu2 SPILLWAY_GPU_PLUGIN="$EMU" -- --gpu 0 --gpu-mem-budget 128Mi
job long restarted &
JOB=$!
for _ in $(seq 1 100); do
  grep -q 'serving job=' "$WORK/emu2.err" && break
  sleep 0.05
done
kill -9 "$D"
wait "$D" 2> /dev/null
dispatcher_on d2 --heartbeat-ms 100 --worker-timeout-ms 600 --work-dir "$WORK/dwork" || { finish; exit 1; }
wait "$JOB"
check "the dispatcher killed mid-job and restarted on its journal: the job ends (exit 0)" test $? -eq 0
check "... with every batch identical to a local run" same_as_local long "$WORK/restarted"
check "... and the GPU-side worker is still listed with its GPU" bash -c "'$B/bin/spillctl' --dispatcher \
  127.0.0.1:$DPORT workers --json | grep -q '\"gpu\": \"device 0, arena 128 MiB\"'"
finish
