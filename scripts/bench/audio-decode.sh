#!/usr/bin/env bash
# scripts/bench/audio-decode.sh - `make bench`: FLAC decode per core, Spillway's decode_audio (libFLAC over the
# file's buffer, planar float32) vs soundfile.read(dtype="float32") (libsndfile over libFLAC), the same clips
# (the espeak-ng speech set, 16 kHz mono, 2-10 s, encoded with flac -5), each side pinned to one core.
# BENCH_RUNS interleaved runs, medians; prints both rates and the ratio. Informational: exits 0 unless a side
# crashes or decodes something else; a spillctl without decode_audio (an old build) is reported and skipped.
# Env: BENCH_FLAC_N (60) BENCH_RUNS (3) BENCH_CPU (1) SPILLCTL (build/bin/spillctl).
set -euo pipefail

# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_FLAC_N:-60}
RUNS=${BENCH_RUNS:-3}
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
WORK=build/bench/audio-decode

die() { echo "bench-audio-decode: error: $*" >&2; exit 1; }
[[ $N =~ ^[0-9]+$ && $N -ge 10 ]] || die "BENCH_FLAC_N must be an integer >= 10 (got '$N')"
[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || die "BENCH_RUNS must be an integer >= 1 (got '$RUNS')"
command -v flac > /dev/null || die "flac not found (bash scripts/install-deps.sh)"
command -v taskset > /dev/null || die "taskset not found (util-linux)"
if [ ! -x "$SPILLCTL" ]; then
  echo "bench-audio-decode: skipped: $SPILLCTL is not built (make all)"
  exit 0
fi

mkdir -p "$WORK"
bash scripts/data/make-audio-dataset.sh "$WORK/speech" "$N" > /dev/null
if [ ! -f "$WORK/flac/stamp" ] || ! cmp -s "$WORK/speech/stamp.json" "$WORK/flac/stamp"; then
  rm -rf "$WORK/flac"
  (cd "$WORK/speech/train" && find . -name '*.wav') | while read -r f; do
    mkdir -p "$WORK/flac/$(dirname "$f")"
    flac -s -5 -o "$WORK/flac/${f%.wav}.flac" "$WORK/speech/train/$f"
  done
  cp "$WORK/speech/stamp.json" "$WORK/flac/stamp"
fi
cat > "$WORK/spec.json" <<EOF
{"source": {"format": "audio_folder", "path": "$ROOT/$WORK/flac", "shuffle": false},
 "ops": [{"op": "decode_audio"}], "batch": {"size": 1}, "on_error": "fail"}
EOF
if ! "$SPILLCTL" validate --pipeline "$WORK/spec.json" > /dev/null 2>&1; then
  echo "bench-audio-decode: skipped: $SPILLCTL does not know decode_audio/audio_folder (rebuild: make all)"
  exit 0
fi

"$PY" "$ROOT/scripts/bench/audio_decode_runs.py" "$SPILLCTL" "$WORK" "$RUNS" "$CPU"
