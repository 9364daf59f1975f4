#!/usr/bin/env python3
"""tests/audio/codec_reference.py [SPILLCTL] - decode_audio on FLAC, MP3, Ogg Vorbis and Opus files encoded
here from espeak-ng speech with Debian's encoders (flac, lame, oggenc, opusenc), through spillctl and through
the reference readers: soundfile.read(dtype="float32") (libsndfile 1.2, which decodes with the same libFLAC,
libmpg123 and libvorbis), and for Opus at 48 kHz opusdec --float (opus-tools; libsndfile decodes Opus at the
header's input rate when Opus has it, 16 or 24 kHz here, while libopusfile always gives 48 kHz; a 48 kHz
source is compared with soundfile too). Measured tolerance: 0 for every format (the same decoder libraries
give the same floats); the check allows none. Also: "mono": true equals the channel mean in float32; the
folder lists the five extensions for decode_audio and only .wav for decode_wav; a truncated FLAC and a cut
Ogg page are refused with their reason; an Opus clip resamples from 48 kHz. SPILLCTL defaults to $SPILLCTL,
else build/bin/spillctl. Prints one line per check; exits 1 on any failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CTL = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SPILLCTL", os.path.join(ROOT, "build/bin/spillctl"))
TOOLS = ("espeak-ng", "flac", "lame", "oggenc", "opusenc", "opusdec")
failures = []


def report(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def speech(work, text, voice):
    path = os.path.join(work, "speech.wav")
    run("espeak-ng", "-v", voice, "-s", "165", "-w", path, text)
    x, rate = sf.read(path, dtype="float32")
    return x, rate


def make_files(src, work):
    """The encoded clips in src/a/ (name -> how to get its reference)."""
    a, b = speech(work, "the quick brown fox jumps over the lazy dog", "en")[0], None
    b, rate = speech(work, "seven eight nine, one two three", "en-us")
    n = min(len(a), len(b))
    wavs = {
        "m16": (resample_poly(a, 160, 221).astype(np.float32)[:, None], 16000, "PCM_16"),
        "s44": (np.stack([resample_poly(a[:n], 2, 1), resample_poly(b[:n], 2, 1) * 0.5], 1), 44100, "PCM_16"),
        "m48": (resample_poly(b, 320, 147)[:, None], 48000, "PCM_16"),
        "s24": (np.stack([a[:n], b[:n]], 1) * 0.9, rate, "PCM_24"),
    }
    for name, (x, r, subtype) in wavs.items():
        sf.write(os.path.join(work, name + ".wav"), np.clip(x, -1, 1), r, subtype=subtype)
    d = os.path.join(src, "a")
    os.makedirs(d)
    w = lambda name: os.path.join(work, name + ".wav")      # noqa: E731
    o = lambda name: os.path.join(d, name)                   # noqa: E731
    run("flac", "-s", "-5", "-o", o("m16.flac"), w("m16"))
    run("flac", "-s", "-8", "-o", o("s44.flac"), w("s44"))
    run("flac", "-s", "-o", o("s24.flac"), w("s24"))         # 24-bit
    run("lame", "--quiet", "-V", "2", w("m16"), o("m16.mp3"))
    run("lame", "--quiet", "-b", "128", w("s44"), o("s44.mp3"))
    run("lame", "--quiet", "--tt", "a title", "--add-id3v2", w("m48"), o("m48_id3.mp3"))
    run("oggenc", "-Q", "-q", "3", "-o", o("m16.ogg"), w("m16"))
    run("oggenc", "-Q", "-q", "6", "-o", o("s44.ogg"), w("s44"))
    run("opusenc", "--quiet", w("m16"), o("m16.opus"))
    run("opusenc", "--quiet", "--bitrate", "96", w("s44"), o("s44.opus"))
    run("opusenc", "--quiet", w("m48"), o("m48.opus"))
    return sorted(os.listdir(d))


def reference(path, work):
    """The reference samples [channels, frames] and their rate, and who gave them."""
    x, rate = sf.read(path, dtype="float32", always_2d=True)
    if path.endswith(".opus") and rate != 48000:
        out = os.path.join(work, "opusdec.wav")
        run("opusdec", "--quiet", "--rate", "48000", "--float", path, out)
        x, rate = sf.read(out, dtype="float32", always_2d=True)
        return x.T, rate, "opusdec --float"
    return x.T, rate, "soundfile"


def spillctl(work, fmt, path, ops, extra=None, tag="run"):
    """(exit code, stderr, [(key path, samples)]) for a local run with batch size 1, unshuffled."""
    spec = {"source": {"format": fmt, "path": path, "shuffle": False}, "ops": ops, "batch": {"size": 1},
            "on_error": "fail"}
    spec.update(extra or {})
    sp, dump = os.path.join(work, tag + ".json"), os.path.join(work, tag + "-dump")
    with open(sp, "w") as f:
        json.dump(spec, f)
    shutil.rmtree(dump, ignore_errors=True)
    r = subprocess.run([CTL, "run", "--local", "--pipeline", sp, "--dump", dump, "--quiet"], capture_output=True,
                       text=True, timeout=300)
    out = []
    if r.returncode == 0:
        with open(os.path.join(dump, "keys.txt")) as f:
            keys = [line.split()[2] for line in f if line.strip()]
        out = [(k, np.load(os.path.join(dump, "b%06d_t0.npy" % i))[0]) for i, k in enumerate(keys)]
    return r.returncode, r.stderr, out


def main():
    if not os.access(CTL, os.X_OK):
        sys.exit("codec_reference: %s is not an executable (build it, or pass SPILLCTL)" % CTL)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        sys.exit("codec_reference: %s missing (bash scripts/install-deps.sh)" % ", ".join(missing))
    with tempfile.TemporaryDirectory(prefix="spw-codecref-") as work:
        src = os.path.join(work, "src")
        names = make_files(src, work)
        rc, err, planar = spillctl(work, "audio_folder", src, [{"op": "decode_audio", "mono": False}])
        report(rc == 0 and len(planar) == len(names), "decode_audio reads all %d files (exit %d) %s"
               % (len(names), rc, err.strip()[-200:]))
        rc, err, mono = spillctl(work, "audio_folder", src, [{"op": "decode_audio"}], tag="mono")
        report(rc == 0 and len(mono) == len(names), "decode_audio mono reads all %d files" % len(names))
        for (key, x), (_, m) in zip(planar, mono):
            name = os.path.basename(key)
            ref, rate, who = reference(key, work)
            info = sf.info(key)
            same = x.shape == ref.shape and x.dtype == np.float32
            diff = float(np.max(np.abs(x - ref), initial=0.0)) if same else float("nan")
            report(same and np.array_equal(x, ref), "%-12s %s %s, %d Hz: %s vs %s, max abs diff %g"
                   % (name, info.subtype, x.shape, rate, "equal" if same else "shape %s" % (ref.shape,), who, diff))
            want = x[0]
            for c in range(1, x.shape[0]):
                want = want + x[c]
            want = want * np.float32(1.0 / x.shape[0]) if x.shape[0] > 1 else want
            report(m.shape == (1, x.shape[1]) and np.array_equal(m[0], want.astype(np.float32)),
                   "%-12s mono: the channel mean" % name)

        # the folder lists by the decode op: five extensions for decode_audio, .wav alone for decode_wav
        lst = os.path.join(work, "list", "c")
        os.makedirs(lst)
        sf.write(os.path.join(lst, "w.wav"), np.zeros(800, np.float32), 16000, subtype="PCM_16")
        for n in names:
            if n.startswith("m16."):
                shutil.copy(os.path.join(src, "a", n), os.path.join(lst, "x" + os.path.splitext(n)[1]))
        open(os.path.join(lst, "notes.txt"), "w").write("not audio\n")
        rc, _, got = spillctl(work, "audio_folder", os.path.dirname(lst), [{"op": "decode_audio"}], tag="list")
        exts = sorted(os.path.splitext(k)[1] for k, _ in got)
        report(rc == 0 and exts == [".flac", ".mp3", ".ogg", ".opus", ".wav"],
               "audio_folder + decode_audio lists .flac .mp3 .ogg .opus .wav: %s" % exts)
        rc, _, got = spillctl(work, "wav_folder", os.path.dirname(lst), [{"op": "decode_wav"}], tag="listw")
        report(rc == 0 and [os.path.basename(k) for k, _ in got] == ["w.wav"],
               "wav_folder + decode_wav lists the .wav alone, as before")

        # truncated files are refused with their reason
        bad = os.path.join(work, "bad", "c")
        os.makedirs(bad)
        for n, cut, reason in (("m16.flac", 0.6, "FLAC: truncated or damaged"), ("s44.ogg", 0.5, "Ogg Vorbis: truncated")):
            with open(os.path.join(src, "a", n), "rb") as f:
                data = f.read()
            for old in os.listdir(bad):
                os.unlink(os.path.join(bad, old))
            with open(os.path.join(bad, n), "wb") as f:
                f.write(data[: int(len(data) * cut)])
            rc, err, _ = spillctl(work, "audio_folder", os.path.dirname(bad), [{"op": "decode_audio"}], tag="bad")
            report(rc == 1 and reason in err, "a cut %s: exit %d, \"%s\" in %s" % (n, rc, reason, err.strip()[-160:]))

        # the rate is carried: an Opus clip (48 kHz) resamples to 16 kHz
        one = os.path.join(work, "one", "c")
        os.makedirs(one)
        shutil.copy(os.path.join(src, "a", "m48.opus"), one)
        rc, _, got = spillctl(work, "audio_folder", os.path.dirname(one),
                              [{"op": "decode_audio"}, {"op": "resample", "rate": 16000}], tag="rs")
        n48 = sf.info(os.path.join(src, "a", "m48.opus")).frames
        report(rc == 0 and len(got) == 1 and got[0][1].shape == (1, -(-n48 // 3)),
               "Opus 48 kHz -> resample 16000: %s samples from %d" % (got[0][1].shape if got else None, n48))
    print("codec_reference: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
