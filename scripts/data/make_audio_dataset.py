# scripts/data/make_audio_dataset.py - a deterministic speech dataset for the audio tests and benchmark: N clips
# of English speech synthesized by espeak-ng (Debian), 2-10 s each, in 10 classes (the spoken digit word),
# resampled to 16 kHz mono PCM16 (torchaudio) and written as OUT/train/<class>/<n>.wav. Also OUT/tones: a few
# synthetic tone clips at 8, 16 and 22.05 kHz for reference checks. Run by scripts/data/make-audio-dataset.sh.
import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np
import soundfile
import torch
import torchaudio

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
FILLER = "the quick brown fox jumps over a lazy dog while seven sailors sing softly".split()
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029"]
RATE = 16000


def speak(text, voice, speed, pitch):
    """espeak-ng's WAV (22050 Hz PCM16 mono) as float32 samples and its rate."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "--stdout", text],
                         check=True, capture_output=True).stdout
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "spw-espeak-%d.wav" % os.getpid())
    with open(tmp, "wb") as f:
        f.write(wav)
    data, rate = soundfile.read(tmp, dtype="float32")
    os.unlink(tmp)
    return data, rate


def clip(rng, label):
    """One 2-10 s utterance of class label: its word among filler, at a voice, speed and pitch."""
    target = rng.uniform(2.0, 10.0)
    words, data, rate = [], None, 22050
    for _ in range(40):
        words += [WORDS[label]] + rng.sample(FILLER, rng.randint(0, 3))
        data, rate = speak(" ".join(words), rng.choice(VOICES), rng.randint(130, 220), rng.randint(20, 80))
        if len(data) >= target * rate:
            break
    data = data[: int(10.0 * rate)]
    out = torchaudio.functional.resample(torch.from_numpy(data)[None], rate, RATE)[0].numpy()
    return np.clip(out, -1.0, 1.0)


def tones(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for rate in (8000, 16000, 22050):
        t = np.arange(int(rate * 2.5)) / rate
        for freq in (220.0, 1000.0, 0.4 * rate):
            x = 0.5 * np.sin(2 * np.pi * freq * t) + 0.1 * np.sin(2 * np.pi * 3.1 * freq * t % (2 * np.pi))
            soundfile.write(os.path.join(out_dir, "tone_%d_%d.wav" % (rate, int(freq))), x.astype(np.float32),
                            rate, subtype="PCM_16")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    stamp = {"n": a.n, "seed": a.seed, "rate": RATE, "version": 1}
    stamp_path = os.path.join(a.out, "stamp.json")
    if os.path.exists(stamp_path) and json.load(open(stamp_path)) == stamp:
        return 0
    rng = random.Random(a.seed)
    seconds = 0.0
    for i in range(a.n):
        label = i % len(WORDS)
        d = os.path.join(a.out, "train", WORDS[label])
        os.makedirs(d, exist_ok=True)
        x = clip(rng, label)
        seconds += len(x) / RATE
        soundfile.write(os.path.join(d, "%05d.wav" % i), x, RATE, subtype="PCM_16")
    tones(os.path.join(a.out, "tones"))
    json.dump(stamp, open(stamp_path, "w"))
    print("make-audio-dataset: %d clips, %.0f s of speech at %d Hz in %s" % (a.n, seconds, RATE, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
