#!/usr/bin/env bash
# tests/audio/run.sh - the audio kernels and pipeline against torch/torchaudio (run by `make equiv`): STFT and
# mel filterbanks (dsp_reference.py over dsp_tool), resampling (resample_reference.py over resample_tool),
# decode_audio's FLAC/MP3/Vorbis/Opus against soundfile and opusdec (codec_reference.py over spillctl), and
# whole pipelines over a small espeak-ng speech set (pipeline_reference.py over spillctl). SPW_BUILD selects
# the build. Exits non-zero when any check fails.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${SPW_BUILD:-$ROOT/build}
PY=/usr/bin/python3
DATA=$B/data/speech-test
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$DATA" 20 || exit 1
rc=0
echo "== STFT and mel filterbanks vs torch.stft / torchaudio.functional.melscale_fbanks"
"$PY" "$ROOT/tests/audio/dsp_reference.py" "$B/tests/dsp_tool" > "$B/dsp_reference.log" 2>&1 || rc=1
grep -c "^ok" "$B/dsp_reference.log" | sed 's/^/   cases ok: /'
grep -v "^ok" "$B/dsp_reference.log"
echo "== resampling vs torchaudio.functional.resample"
"$PY" "$ROOT/tests/audio/resample_reference.py" "$B/tests/resample_tool" > "$B/resample_reference.log" 2>&1 || rc=1
grep -ci "^ok" "$B/resample_reference.log" | sed 's/^/   cases ok: /'
grep -vi "^ok" "$B/resample_reference.log"
echo "== decode_audio: FLAC, MP3, Ogg Vorbis, Opus (spillctl) vs soundfile / opusdec"
SPILLCTL=$B/bin/spillctl "$PY" "$ROOT/tests/audio/codec_reference.py" > "$B/codec_reference.log" 2>&1 || rc=1
grep -c "^ok" "$B/codec_reference.log" | sed 's/^/   checks ok: /'
grep -v "^ok" "$B/codec_reference.log"
echo "== audio pipelines (spillctl) vs torch/torchaudio"
"$PY" -W ignore::UserWarning "$ROOT/tests/audio/pipeline_reference.py" "$B/bin/spillctl" "$DATA" || rc=1
exit $rc
