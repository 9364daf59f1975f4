#!/usr/bin/env bash
# tests/integration/audio_service.sh - an audio pipeline through the service like the image ones: a real
# dispatcher and two workers on loopback, speech clips of 2-10 s (espeak-ng), decode_wav | stft+mel+log |
# spec_augment with padded variable-length batches. With --ordered, every cut (0-3) and hybrid mode give
# batches (padded features, labels, lengths) byte-identical to `run --local`; unordered, every key once.
# Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/speech-test
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$DATA" 20 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "wav_folder", "path": "$DATA/train", "shuffle": true, "seed": 11, "epochs": 2},
 "ops": [{"op": "decode_wav"}, {"op": "stft", "n_fft": 512, "hop_length": 160, "win_length": 400},
         {"op": "mel", "sample_rate": 16000, "n_mels": 80}, {"op": "log", "eps": 1e-6},
         {"op": "spec_augment", "freq_mask_param": 27, "time_mask_param": 100, "num_time_masks": 2}],
 "batch": {"size": 6}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1
check "local batches are padded with a lengths tensor" test -f "$WORK/local/b000000_t2.npy"

start_service 2 --heartbeat-ms 100 || { finish; exit; }

run_service() {     # run_service NAME [spillctl options...]
  local name=$1
  shift
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
    --dump "$WORK/$name" --quiet "$@" 2> "$WORK/$name.err"
}
for cut in 0 1 2 3; do
  run_service "cut$cut" --cut "$cut" --ordered --local-cores 0
  check "cut $cut, workers only: batches identical to the local run" same_batches "cut$cut" local
done
run_service hybrid --cut 1 --ordered --local-cores 1
check "cut 1 with the client producing too: batches identical" same_batches hybrid local
run_service unordered --cut 2
check "unordered: every key of the job exactly once" \
  cmp -s <(sort "$WORK/local/keys.txt") <(sort "$WORK/unordered/keys.txt")
finish
