#!/usr/bin/env bash
# scripts/gpu-check.sh - the checks that need a GPU, as one prepared run. Two halves:
#   bash scripts/gpu-check.sh --prepare   here, where the project builds: the CUDA plugin (nvcc), gpucheck
#       (tests/tools/gpucheck.c), 400 real photos (scripts/data/make-dataset.sh) and the shared libraries gpucheck
#       needs besides glibc go to build/gpu-carry (under the device tool's 64 MiB carry limit).
#   bash scripts/gpu-check.sh             on the device machine (device tool, carry build/gpu-carry): nvidia-smi,
#       gpucheck (every pipeline's GPU elements against the CPU's, throughput of GPU / CPU / both, memory
#       against the budget, the executor's batches handed over on the device vs on the host), torchvision on
#       the GPU over the same photos (scripts/gpu_torch_bench.py peer) and
#       a ResNet-50 training loop alone and beside Spillway's GPU augmentation (train). Results in $OUT
#       (default build/gpu-out): gpucheck.jsonl, torch.jsonl, nvidia-smi.txt, and a summary on stdout.
#       A dry run without a device: GPU_CHECK_PLUGIN=build/lib/libspillway-gpuemu.so GPU_CHECK_TORCH_DEVICE=cpu.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
C=$ROOT/build/gpu-carry
SECONDS_PER_RUN=${GPU_CHECK_SECONDS:-8}

if [ "${1:-}" = "--prepare" ]; then
  set -e
  make -C "$ROOT" -s all build/tests/gpucheck
  [ -f "$ROOT/build/lib/libspillway-gpu.so" ] || { echo "gpu-check: no nvcc here, no plugin built" >&2; exit 1; }
  bash "$ROOT/scripts/data/make-dataset.sh" "$ROOT/build/data/gpu-check" 400 > /dev/null
  rm -rf "$C" && mkdir -p "$C/bin" "$C/lib" "$C/data"
  cp "$ROOT/build/tests/gpucheck" "$C/bin/"
  cp "$ROOT/build/lib/libspillway-gpu.so" "$C/lib/"
  cp -r "$ROOT/build/data/gpu-check/train" "$C/data/train"
  # every library gpucheck loads except glibc's own (the device image has its own, newer glibc)
  ldd "$C/bin/gpucheck" | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$C/lib"
  du -sh "$C"
  exit 0
fi

OUT=${OUT:-$ROOT/build/gpu-out}
mkdir -p "$OUT"
[ -x "$C/bin/gpucheck" ] || { echo "gpu-check: run --prepare first (and carry build/gpu-carry)" >&2; exit 1; }
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SPILLWAY_GPU_PLUGIN=${GPU_CHECK_PLUGIN:-$C/lib/libspillway-gpu.so}
TORCH_DEVICE=${GPU_CHECK_TORCH_DEVICE:-cuda}
PY=${GPU_CHECK_PYTHON:-python3}        # the device image's python3 holds torch
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
THREADS=$(( $(nproc) > 8 ? 8 : $(nproc) ))
"$C/bin/gpucheck" "$C/data/train" "$SECONDS_PER_RUN" "$THREADS" 0.25 | tee "$OUT/gpucheck.jsonl"
"$PY" "$ROOT/scripts/gpu_torch_bench.py" peer --data "$C/data/train" --seconds "$SECONDS_PER_RUN" \
  --device "$TORCH_DEVICE" | tee "$OUT/torch.jsonl"
"$PY" "$ROOT/scripts/gpu_torch_bench.py" train --data "$C/data/train" --steps "${GPU_CHECK_STEPS:-80}" \
  --device "$TORCH_DEVICE" --command "'$C/bin/gpucheck' '$C/data/train' 60 0 0.25" | tee -a "$OUT/torch.jsonl"
"$PY" "$ROOT/scripts/gpu_check_report.py" "$OUT"
