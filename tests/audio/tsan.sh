#!/usr/bin/env bash
# tests/audio/tsan.sh - the threaded audio path under ThreadSanitizer (`make tsan-audio`, run by CI): the
# STFT unit tests (plans made from 4 threads at once) and a 2-thread local run of a pipeline that makes
# resampling and FFTW plans concurrently on first use, each built with SANITIZER=thread (build-thread/).
# Any TSan report fails it (halt_on_error). gRPC is not involved (Debian's is not instrumented).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-thread
DATA=$ROOT/build/data/speech-test
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$DATA" 20 > /dev/null
WORK=$(mktemp -d /tmp/spw-tsan-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/p.json" <<JSON
{"source": {"format": "wav_folder", "path": "$DATA/train", "shuffle": true, "epochs": 2},
 "ops": [{"op": "decode_wav"}, {"op": "resample", "rate": 8000}, {"op": "random_crop_audio", "samples": 24000},
         {"op": "normalize_audio"}, {"op": "stft", "n_fft": 256, "hop_length": 80},
         {"op": "mel", "sample_rate": 8000, "n_mels": 40}, {"op": "amplitude_to_db", "top_db": 80},
         {"op": "spec_augment", "freq_mask_param": 10, "time_mask_param": 30}],
 "batch": {"size": 4}}
JSON
export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
echo "== check_stft under TSan"
"$B/tests/check_stft"
echo "== a 2-thread audio pipeline under TSan"
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --quiet --json > "$WORK/out.json"
grep -q '"elements": 40' "$WORK/out.json" || { echo "tsan-audio: expected 40 elements: $(cat "$WORK/out.json")"; exit 1; }
echo "tsan-audio: clean"
