#!/usr/bin/env bash
# scripts/data/make-dataset.sh [OUT_DIR] [N] - build the deterministic ImageNet-like benchmark dataset
# (OUT/train, OUT/val, OUT/shards/*.tar) from Debian's wallpaper photos; see docs/benchmarks.md.
# Skips the work when OUT/stamp.json records the same parameters. Env: DATASET_VAL_N, DATASET_PROCS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT_DIR=${1:-$ROOT/build/data/imagenet-like}
N=${2:-2000}
PY=/usr/bin/python3

if ! "$PY" -c 'import PIL' 2>/dev/null; then
  echo "make-dataset: $PY with Pillow is required (bash scripts/install-deps.sh)" >&2
  exit 1
fi
exec "$PY" "$ROOT/scripts/data/make_dataset.py" --out "$OUT_DIR" --n "$N" \
  --val-n "${DATASET_VAL_N:-200}" --procs "${DATASET_PROCS:-2}"
