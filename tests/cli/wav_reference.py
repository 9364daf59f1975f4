#!/usr/bin/env python3
"""tests/cli/wav_reference.py [SPILLCTL] - every WAV scipy ships for its own tests (scipy/io/tests/data, package
python3-scipy) through spillctl's decode_wav and through soundfile.read(dtype="float32"): the files soundfile
reads decode to its samples (max abs difference <= 1e-7 for integer encodings, equal for float), the files it
refuses are refused with a "WAV: ..." reason (spillctl exit 1), and no file crashes spillctl. Two files
soundfile reads are refused on purpose, each with its reason checked: a data chunk cut short (soundfile reads
what is there; the engine refuses truncated data) and a block align that is not channels x bytes per sample.
SPILLCTL defaults to $SPILLCTL, else build/bin/spillctl. Prints one line per file and the counts; exits 1 on
any mismatch.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import soundfile as sf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CTL = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SPILLCTL", os.path.join(ROOT, "build/bin/spillctl"))
# Refused although soundfile reads them: file -> fragment of the engine's reason.
REFUSED_ON_PURPOSE = {
    "test-44100Hz-le-1ch-4bytes-early-eof.wav": "truncated data: data chunk says 17640 bytes",
    "test-8000Hz-le-3ch-5S-24bit-inconsistent.wav": "block_align is 4, not channels 3 * 3 bytes",
}


def scipy_wavs():
    try:
        import scipy.io
    except ImportError:
        sys.exit("wav_reference: scipy is missing (apt-get install python3-scipy)")
    files = sorted(glob.glob(os.path.join(os.path.dirname(scipy.io.__file__), "tests", "data", "*.wav")))
    if not files:
        sys.exit("wav_reference: no WAVs under scipy/io/tests/data")
    return files


def engine(path, work):
    """(samples [channels, frames] or None, spillctl's exit code, its stderr): path alone in a wav_folder."""
    folder = os.path.join(work, "src")
    os.makedirs(os.path.join(folder, "x"), exist_ok=True)
    for old in os.listdir(os.path.join(folder, "x")):
        os.unlink(os.path.join(folder, "x", old))
    os.symlink(path, os.path.join(folder, "x", os.path.basename(path)))
    spec = {"source": {"format": "wav_folder", "path": folder, "shuffle": False},
            "ops": [{"op": "decode_wav", "mono": False}], "batch": {"size": 1}, "on_error": "fail"}
    with open(os.path.join(work, "spec.json"), "w") as f:
        json.dump(spec, f)
    dump = os.path.join(work, "dump")
    subprocess.run(["rm", "-rf", dump], check=True)
    r = subprocess.run([CTL, "run", "--local", "--pipeline", os.path.join(work, "spec.json"), "--dump", dump,
                        "--quiet"], capture_output=True, text=True, timeout=60)
    x = np.load(os.path.join(dump, "b000000_t0.npy"))[0] if r.returncode == 0 else None
    return x, r.returncode, r.stderr.strip()


def main():
    if not os.access(CTL, os.X_OK):
        sys.exit("wav_reference: %s is not an executable (build it, or pass SPILLCTL)" % CTL)
    files = scipy_wavs()
    bad, n_sf, n_engine = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="spw-wavref-") as work:
        for path in files:
            name = os.path.basename(path)
            try:
                ref, _ = sf.read(path, dtype="float32", always_2d=True)
                ref, subtype = ref.T, sf.info(path).subtype
            except (RuntimeError, sf.LibsndfileError) as e:
                ref, subtype = None, "refused: %s" % str(e).splitlines()[0][-60:]
            x, rc, err = engine(path, work)
            n_sf += ref is not None
            n_engine += x is not None
            if rc not in (0, 1):
                verdict = "CRASH (exit %d): %s" % (rc, err[-200:])
            elif x is not None and ref is None:
                verdict = "MISMATCH: the engine reads a file soundfile refuses"
            elif x is not None:
                tol = 0.0 if subtype in ("FLOAT", "DOUBLE") else 1e-7
                if x.shape != ref.shape or x.dtype != np.float32:
                    verdict = "MISMATCH: shape %s %s, soundfile %s" % (x.shape, x.dtype, ref.shape)
                else:
                    diff = float(np.max(np.abs(x - ref), initial=0.0))
                    ok = diff <= tol or (tol == 0.0 and np.array_equal(x, ref, equal_nan=True))
                    verdict = ("ok" if ok else "MISMATCH") + ": %s %s, max abs diff %g" % (subtype, x.shape, diff)
            else:
                m = re.search(r'WAV: ([^"\n]+)', err)
                reason = m.group(1) if m else None
                if reason is None:
                    verdict = "MISMATCH: refused without a WAV reason: %s" % err[-200:]
                elif ref is None:
                    verdict = "ok: both refuse; engine: %s" % reason
                elif name in REFUSED_ON_PURPOSE and REFUSED_ON_PURPOSE[name] in reason:
                    verdict = "ok: refused on purpose (soundfile reads %s); engine: %s" % (subtype, reason)
                else:
                    verdict = "MISMATCH: soundfile reads it (%s), the engine refuses: %s" % (subtype, reason)
            if not verdict.startswith("ok"):
                bad.append(name)
            print("%-4s %s: %s" % ("ok" if verdict.startswith("ok") else "FAIL", name, verdict.split(": ", 1)[1]))
    print("wav_reference: engine reads %d of %d scipy test WAVs, soundfile %d; %d mismatches"
          % (n_engine, len(files), n_sf, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
