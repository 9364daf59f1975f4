#!/usr/bin/python3
"""tests/unit/audio_cases.py OUTDIR - the files tests/unit/check_audio_decode.c reads, made at test time from
espeak-ng's speech (22050 Hz PCM16) with Debian's encoders: mono.wav (about 1.3 s) and stereo.wav (the speech
and its reverse at half level), each as .flac (flac), .mp3 (lame), .ogg (oggenc) and .opus (opusenc). Small on
purpose: the unit tests walk the prefixes of every file."""
import os
import subprocess
import sys
import wave

import numpy as np

out = sys.argv[1]


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


speech = os.path.join(out, "speech.wav")
run("espeak-ng", "-v", "en", "-s", "170", "-w", speech, "seven four two")
with wave.open(speech) as w:
    rate = w.getframerate()
    x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
x = x[: int(1.3 * rate)]


def write(name, frames):
    with wave.open(os.path.join(out, name), "wb") as w:
        w.setnchannels(frames.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames.astype("<i2").tobytes())


write("mono.wav", x[:, None])
write("stereo.wav", np.stack([x, x[::-1] // 2], axis=1))
for name in ("mono", "stereo"):
    wav = os.path.join(out, name + ".wav")
    run("flac", "-s", "-f", "-o", os.path.join(out, name + ".flac"), wav)
    run("lame", "--quiet", "-b", "64", wav, os.path.join(out, name + ".mp3"))
    run("oggenc", "-Q", "-q", "1", "-o", os.path.join(out, name + ".ogg"), wav)
    run("opusenc", "--quiet", "--bitrate", "24", wav, os.path.join(out, name + ".opus"))
