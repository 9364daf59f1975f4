#!/usr/bin/env bash
# scripts/data/make-audio-dataset.sh [OUT_DIR] [N] - build the deterministic speech dataset (OUT/train/<word>/*.wav,
# 16 kHz PCM16, 2-10 s, espeak-ng) and OUT/tones for the audio tests and benchmark; see docs/benchmarks.md.
# Skips the work when OUT/stamp.json records the same parameters.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT_DIR=${1:-$ROOT/build/data/speech}
N=${2:-200}
PY=/usr/bin/python3

if ! command -v espeak-ng > /dev/null || ! "$PY" -c 'import soundfile, torchaudio' 2>/dev/null; then
  echo "make-audio-dataset: espeak-ng and $PY with soundfile and torchaudio are required (bash scripts/install-deps.sh)" >&2
  exit 1
fi
exec "$PY" "$ROOT/scripts/data/make_audio_dataset.py" --out "$OUT_DIR" --n "$N"
