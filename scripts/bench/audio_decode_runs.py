#!/usr/bin/env python3
"""scripts/bench/audio_decode_runs.py - bench/audio-decode.sh's runs: spillctl against soundfile / opusdec per codec, interleaved, medians
(run by scripts/bench/audio-decode.sh with the arguments it passes).
"""
import glob, os, statistics, subprocess, sys, time

import numpy as np
import soundfile as sf

ctl, work, runs, cpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
files = sorted(glob.glob(os.path.join(work, "flac", "*", "*.flac")))
samples = sum(sf.info(f).frames for f in files)
peer = ("import sys, time, soundfile as sf\n"
        "files = sys.argv[1:]\n"
        "t = time.perf_counter()\n"
        "for f in files: sf.read(f, dtype='float32')\n"
        "print(time.perf_counter() - t)\n")
dump = os.path.join(work, "dump")
# once, untimed: the engine's samples equal soundfile's (lossless), clip for clip
subprocess.run(["rm", "-rf", dump], check=True)
subprocess.run([ctl, "run", "--local", "--threads", "1", "--pipeline", os.path.join(work, "spec.json"), "--dump",
                dump, "--quiet"], check=True)
with open(os.path.join(dump, "keys.txt")) as f:
    keys = [line.split()[2] for line in f if line.strip()]
for i, k in enumerate(keys):
    x = np.load(os.path.join(dump, "b%06d_t0.npy" % i))[0, 0]
    if not np.array_equal(x, sf.read(k, dtype="float32")[0]):
        sys.exit("bench-audio-decode: %s decodes differently from soundfile" % k)
ours, theirs = [], []
for _ in range(runs):
    t = time.perf_counter()
    subprocess.run(["taskset", "-c", cpu, ctl, "run", "--local", "--threads", "1", "--pipeline",
                    os.path.join(work, "spec.json"), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    ours.append(time.perf_counter() - t)
    r = subprocess.run(["taskset", "-c", cpu, sys.executable, "-c", peer] + files, check=True,
                       capture_output=True, text=True)
    theirs.append(float(r.stdout))
o, p = statistics.median(ours), statistics.median(theirs)
print("FLAC decode, one core, %d clips (%.1f s of 16 kHz speech), median of %d:" % (len(files), samples / 16000, runs))
print("  spillway decode_audio (spillctl run, whole process): %7.1f clips/s  %6.1f Msamples/s" % (len(files) / o, samples / o / 1e6))
print("  soundfile.read(dtype=float32):                       %7.1f clips/s  %6.1f Msamples/s" % (len(files) / p, samples / p / 1e6))
print("  ratio spillway / soundfile: %.2fx" % (p / o))
