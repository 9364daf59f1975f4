#!/usr/bin/env bash
# tests/cli/audio.sh - spillctl on audio end to end (run by tests/cli/run.sh, or alone): malformed and
# unsupported WAVs under on_error skip (every good clip once, each bad one logged with its reason) and fail
# (exit 1 naming the first bad file), no crash on any of them; unusual valid layouts decoded sample for
# sample as soundfile reads them, scipy's test WAVs too (tests/cli/wav_reference.py); resampled lengths;
# "mono": false; the max_samples cap on decode, resample and pad_audio; wav_folder with labels.tsv (labels,
# and its errors); WAV tar shards; source/op mismatches.
# Inputs come from make_wav_cases.py. SPW_BUILD selects the build (e.g. SPW_BUILD=build-address).
# Prints one line per check and "audio: N passed, M failed"; exits 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${SPW_BUILD:-$ROOT/build}
case $B in /*) ;; *) B=$ROOT/$B ;; esac
CTL=$B/bin/spillctl
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/spw-cli-audio-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# A sanitizer report must not pass for spillctl's ordinary "exit 1".
export ASAN_OPTIONS=${ASAN_OPTIONS:-exitcode=99} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:exitcode=99}
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

spec() {  # spec FILE SOURCE_JSON OPS_JSON BATCH_JSON [EXTRA]
  printf '{"source": %s, "ops": %s, "batch": %s%s}\n' "$2" "$3" "$4" "${5:-}" > "$1"
}
json_field() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
# ctl NAME ARGS...: spillctl with stdout in $WORK/NAME.out and stderr in $WORK/NAME.err; its exit code in rc.
# Anything but 0, 1 or 2 (a signal, a sanitizer report) is a failure of its own.
ctl() {
  local name=$1; shift
  "$CTL" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  if [ "$rc" -gt 2 ]; then bad "$name: spillctl exited $rc (crash?)"; sed 's/^/     /' "$WORK/$name.err" | head -20; fi
  return 0
}
# says CODE FRAGMENT FILE: the last ctl exited CODE and FILE holds FRAGMENT (fixed string).
says() { [ "$rc" -eq "$1" ] && grep -qF -- "$2" "$3"; }
# logged PATH FRAGMENT FILE: FILE logs PATH as skipped or failed with FRAGMENT in its error.
logged() { grep -F "path=\"$1\" err=\"" "$3" | grep -qF -- "$2"; }

A=$WORK/aud
"$PY" "$ROOT/tests/cli/make_wav_cases.py" "$A" || { echo "FAIL make_wav_cases.py"; exit 1; }
folder() { printf '{"format": "%s", "path": "%s", "shuffle": false}' "$1" "$2"; }

# --- malformed and unsupported WAVs among good clips ---
# main.bad: PATH<TAB>fragment of the message the skip must log for it (bad RIFF magic, truncated header and
# data, a data chunk claiming 4 GiB, fmt past the end, MS ADPCM, GSM in WAVE_FORMAT_EXTENSIBLE, 36-bit PCM,
# 16-bit float, a block align that is not channels x bytes, zero channels, data before fmt, no data chunk, an
# empty file, random bytes, clips too short for stft with center, one over max_samples).
MAIN_OPS='[{"op": "decode_wav"}, {"op": "random_crop_audio", "samples": 16000}, {"op": "stft", "n_fft": 512, "hop_length": 160}, {"op": "mel", "n_mels": 80}]'
n_good=$(wc -l < "$A/main.good") n_bad=$(wc -l < "$A/main.bad")
spec "$WORK/skip.json" "$(folder wav_folder "$A/main")" "$MAIN_OPS" '{"size": 4}' ', "max_samples": 200000, "on_error": "skip"'
ctl validate_audio validate --pipeline "$WORK/skip.json"
check "audio spec validates" test "$rc" -eq 0
ctl skip2 run --local --pipeline "$WORK/skip.json" --threads 2 --dump "$WORK/s2" --json --quiet
check "skip: run succeeds" test "$rc" -eq 0
ctl skip1 run --local --pipeline "$WORK/skip.json" --threads 1 --dump "$WORK/s1" --json --quiet
check "skip: every good clip delivered exactly once ($n_good)" \
  diff <(awk '{print $3}' "$WORK/s2/keys.txt" | LC_ALL=C sort) "$A/main.good"
check "skip: $n_bad bad clips counted as skipped" test "$(json_field "$WORK/skip2.out" skipped)" = "$n_bad"
check "skip: one warning per bad clip" test "$(grep -c 'warn executor skipped sample=' "$WORK/skip2.err")" = "$n_bad"
while IFS=$'\t' read -r path frag; do
  check "skip: $(basename "$path") logged: $frag" logged "$path" "$frag" "$WORK/skip2.err"
done < "$A/main.bad"
check "skip: dumps byte-identical for --threads 1 and 2" diff -r -q "$WORK/s1" "$WORK/s2"
"$PY" "$ROOT/tests/cli/audio_checks.py" skip_batches "$WORK/s2" && ok "skip: mel batches [n, 80, 101] float32, finite; labels cat=0 dog=1" || bad "skip: batch tensors"

# on_error fail: one thread visits the sorted listing in order, so the first bad file is the one named
first_bad=$(head -1 "$A/main.bad" | cut -f1)
spec "$WORK/fail.json" "$(folder wav_folder "$A/main")" "$MAIN_OPS" '{"size": 4}' ', "max_samples": 200000, "on_error": "fail"'
ctl fail1 run --local --pipeline "$WORK/fail.json" --threads 1 --quiet
check "fail: exits 1 naming the first bad file and why" says 1 "$first_bad: WAV: not a RIFF/WAVE file" "$WORK/fail1.err"
check "fail: ... on the 'run failed' line" grep -qF "run failed: " "$WORK/fail1.err"
ctl fail2 run --local --pipeline "$WORK/fail.json" --threads 2 --quiet
names_bad() { [ "$rc" -eq 1 ] && grep 'run failed: ' "$WORK/fail2.err" | grep -qF -f <(cut -f1 "$A/main.bad"); }
check "fail (2 threads): exits 1 naming a bad file" names_bad
# each bad file alone, under fail: exit 1 with its own message, never a crash
alone_bad=0
while IFS=$'\t' read -r path frag; do
  mkdir -p "$WORK/one/x" && rm -f "$WORK"/one/x/* && cp "$path" "$WORK/one/x/"
  spec "$WORK/one.json" "$(folder wav_folder "$WORK/one")" "$MAIN_OPS" '{"size": 1}' ', "max_samples": 200000, "on_error": "fail"'
  ctl one run --local --pipeline "$WORK/one.json" --quiet
  says 1 "$frag" "$WORK/one.err" || { alone_bad=1; echo "     $(basename "$path") (rc $rc): $(cat "$WORK/one.err")"; }
done < "$A/main.bad"
check "fail alone: each of the $n_bad bad files exits 1 with its message" test "$alone_bad" -eq 0

# --- valid layouts: stereo PCM16, float32, WAVE_FORMAT_EXTENSIBLE (PCM16, 3-channel float), LIST + fact, unsigned
# 8, 24 and 32-bit PCM, float64, A-law, mu-law, RIFX, EXTENSIBLE with 20 valid bits in 24 ---
n_dec=$(find "$A/decode" -name '*.wav' | wc -l)
for mono in false true; do
  spec "$WORK/dec.json" "$(folder wav_folder "$A/decode")" '[{"op": "decode_wav", "mono": '$mono'}]' '{"size": 1}' ', "on_error": "fail"'
  ctl "dec_$mono" run --local --pipeline "$WORK/dec.json" --dump "$WORK/dec_$mono" --quiet
  "$PY" "$ROOT/tests/cli/audio_checks.py" decode_equals_soundfile "$WORK/dec_$mono" "$mono" "$n_dec" && ok "decode (mono $mono): $n_dec layouts equal soundfile's float32" || bad "decode (mono $mono)"
done

# --- "mono": false keeps both channels through crop and stft ---
spec "$WORK/st.json" "$(folder wav_folder "$A/stereo")" '[{"op": "decode_wav", "mono": false}, {"op": "random_crop_audio", "samples": 12000}]' '{"size": 3}'
ctl st run --local --pipeline "$WORK/st.json" --dump "$WORK/st" --quiet
spec "$WORK/st2.json" "$(folder wav_folder "$A/stereo")" '[{"op": "decode_wav", "mono": false}, {"op": "stft", "n_fft": 512, "hop_length": 160}]' '{"size": 3}'
ctl st2 run --local --pipeline "$WORK/st2.json" --dump "$WORK/st2" --quiet
"$PY" "$ROOT/tests/cli/audio_checks.py" mono_false_shapes "$WORK" && ok "mono false: [3, 2, 12000] waveforms (left != right), [3, 2, 257, 101] spectrograms" || bad "mono false shapes"

# --- scipy's own test WAVs (python3-scipy) against soundfile: equal where it reads them, refused with a reason
# otherwise, no crash (tests/cli/wav_reference.py prints one line per file) ---
"$PY" "$ROOT/tests/cli/wav_reference.py" "$CTL" > "$WORK/wavref.out" 2>&1
wavref_rc=$?
check "scipy test WAVs: $(tail -1 "$WORK/wavref.out")" test "$wavref_rc" -eq 0
[ "$wavref_rc" -eq 0 ] || grep -v '^ok ' "$WORK/wavref.out" | sed 's/^/     /' | head -20

# --- resample to 16 kHz: ceil(16000 * n / orig) samples (22050, 44100, 8000 Hz; a 1-sample clip) ---
spec "$WORK/rs.json" "$(folder wav_folder "$A/rates")" '[{"op": "decode_wav"}, {"op": "resample", "rate": 16000}]' '{"size": 1}' ', "on_error": "fail"'
ctl rs run --local --pipeline "$WORK/rs.json" --dump "$WORK/rs" --quiet
"$PY" "$ROOT/tests/cli/audio_checks.py" resample_lengths "$WORK/rs" && ok "resample: 4 clips have ceil(16000 n / orig) samples" || bad "resample lengths"

# --- max_samples bounds what resample and pad_audio make, not only what decode makes ---
spec "$WORK/slow.json" "$(folder wav_folder "$A/slow")" '[{"op": "decode_wav"}, {"op": "resample", "rate": 16000}]' '{"size": 1}' ', "max_samples": 20000, "on_error": "fail"'
ctl slow run --local --pipeline "$WORK/slow.json" --quiet
check "cap: a 1 kHz clip resampled past max_samples exits 1 naming op and cap" \
  says 1 'ops[1] resample: 256000 samples x 1 channels exceed max_samples 20000' "$WORK/slow.err"
spec "$WORK/pad.json" "$(folder wav_folder "$A/stereo")" '[{"op": "decode_wav", "mono": false}, {"op": "pad_audio", "samples": 30000}]' '{"size": 3}' ', "max_samples": 40000, "on_error": "fail"'
ctl pad run --local --pipeline "$WORK/pad.json" --quiet
check "cap: pad_audio of 2 channels past max_samples exits 1 naming op and cap" \
  says 1 'ops[1] pad_audio: 30000 samples x 2 channels exceed max_samples 40000' "$WORK/pad.err"
sed 's/"mono": false/"mono": true/' "$WORK/pad.json" > "$WORK/pad1.json"
ctl pad1 run --local --pipeline "$WORK/pad1.json" --dump "$WORK/pad1" --quiet
check "cap: the same pad of 1 channel is within the cap" test "$rc" -eq 0
check "cap: ... and gives [3, 1, 30000]" "$PY" -c "import numpy as np; assert np.load('$WORK/pad1/b000000_t0.npy').shape == (3, 1, 30000)"

# --- a flat folder with labels.tsv ---
spec "$WORK/flat.json" "$(folder wav_folder "$A/flat")" '[{"op": "decode_wav"}, {"op": "pad_audio", "samples": 16000}]' '{"size": 4}' ', "on_error": "fail"'
ctl flat run --local --pipeline "$WORK/flat.json" --dump "$WORK/flat" --quiet
check "labels.tsv: run succeeds" test "$rc" -eq 0
"$PY" "$ROOT/tests/cli/audio_checks.py" labels_tsv "$WORK/flat" "$A/flat.expect" && ok "labels.tsv: listed clips once, sorted by path, labels = sorted class names" || bad "labels.tsv: keys and labels"
# labels.tsv errors: LINES (printf format) and the message fragment; each exits 1 naming labels.tsv:LINE
good_wav=$(head -1 "$A/main.good")
while IFS='|' read -r name lines frag; do
  rm -rf "$WORK/lt" && mkdir -p "$WORK/lt" && cp "$good_wav" "$WORK/lt/a.wav"
  # shellcheck disable=SC2059  # the lines are a printf format on purpose (\t, \n)
  printf "$lines" > "$WORK/lt/labels.tsv"
  spec "$WORK/lt.json" "$(folder wav_folder "$WORK/lt")" '[{"op": "decode_wav"}]' '{"size": 1}'
  ctl lt run --local --pipeline "$WORK/lt.json" --quiet
  check "labels.tsv $name: exits 1, says $frag" says 1 "$WORK/lt/labels.tsv:2: $frag" "$WORK/lt.err"
done <<'EOF'
missing file|a.wav\tcat\ngone.wav\tdog\n|"gone.wav" is not a file
no tab|a.wav\tcat\na.wav cat\n|expected "FILE<TAB>CLASS" with FILE inside the folder
absolute path|a.wav\tcat\n/etc/hostname\tdog\n|"/etc/hostname" is not inside the folder
.. path|a.wav\tcat\nsub/../../lt/a.wav\tdog\n|"sub/../../lt/a.wav" is not inside the folder
EOF

# --- tar shards with KEY.wav + KEY.cls (a KEY.txt beside, a lone .wav, one truncated clip) ---
spec "$WORK/tar.json" '{"format": "tar_shards", "path": "'"$A"'/shards/*.tar", "shuffle": true, "seed": 5}' '[{"op": "decode_wav"}, {"op": "random_crop_audio", "samples": 16000}]' '{"size": 3}' ', "on_error": "skip"'
ctl tar run --local --pipeline "$WORK/tar.json" --threads 2 --dump "$WORK/tar" --json --quiet
check "tar shards: run succeeds" test "$rc" -eq 0
check "tar shards: 9 key pairs are samples (lone .wav ignored)" test "$(json_field "$WORK/tar.out" samples_in_source)" = 9
"$PY" "$ROOT/tests/cli/audio_checks.py" tar_shards "$WORK/tar" "$A/shards.expect" && ok "tar shards: every good sample once with its .cls label" || bad "tar shards: keys and labels"
check "tar shards: the truncated member is skipped, named shard:key" \
  logged "$A/shards/shard-1.tar:clips/s1_bad.wav" "WAV: truncated data" "$WORK/tar.err"

# --- sources and first ops that do not match ---
spec "$WORK/img.json" "$(folder image_folder "$A/main")" '[{"op": "decode_jpeg"}, {"op": "resize", "size": 32}]' '{"size": 1}'
ctl img run --local --pipeline "$WORK/img.json" --quiet
check "image_folder over WAVs: exits 1, holds no JPEG samples" says 1 "\"$A/main\" holds no JPEG samples" "$WORK/img.err"
spec "$WORK/wj.json" "$(folder wav_folder "$A/main")" '[{"op": "decode_jpeg"}, {"op": "resize", "size": 32}]' '{"size": 1}'
ctl wj validate --pipeline "$WORK/wj.json"
check "wav_folder with decode_jpeg: validate exits 2 naming the formats" \
  says 2 'source.format: "wav_folder" does not hold images (ops[0] is "decode_jpeg"; use image_folder or tar_shards)' "$WORK/wj.err"
spec "$WORK/iw.json" "$(folder image_folder "$A/main")" "$MAIN_OPS" '{"size": 1}'
ctl iw validate --pipeline "$WORK/iw.json"
check "image_folder with decode_wav: validate exits 2 naming the formats" \
  says 2 'source.format: "image_folder" does not hold audio (ops[0] is "decode_wav"; use wav_folder or tar_shards)' "$WORK/iw.err"

echo "audio: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
