# tests/audio/resample_reference.py - ops/wave_resample against torchaudio.functional.resample (defaults:
# lowpass_filter_width 6, rolloff 0.99, Hann-windowed sinc) on tones, noise and odd lengths.
#   /usr/bin/python3 tests/audio/resample_reference.py build/tests/resample_tool
# One line per case; exits 1 when any output differs in length or by more than 1e-5 * max(1, peak).
# Single process; runs the tool once per case.
import subprocess
import sys

import numpy as np
import torch
import torchaudio

RATES = [(48000, 16000), (44100, 16000), (16000, 22050), (8000, 16000), (22050, 8000)]
TOLERANCE = 1e-5


def signals(orig):
    rng = np.random.default_rng(1234)
    t = np.arange(orig) / orig
    yield "tone 440 Hz", np.sin(2 * np.pi * 440 * t)
    yield "tone 0.45*orig", 0.8 * np.sin(2 * np.pi * 0.45 * orig * t)
    yield "noise", rng.standard_normal(orig)
    yield "noise odd length 997", rng.standard_normal(997)
    yield "noise length 1", rng.standard_normal(1)
    yield "loud noise odd length 4801", 20 * rng.standard_normal(4801)


def run_tool(tool, orig, new, x):
    proc = subprocess.run([tool, str(orig), str(new), str(len(x))], input=x.tobytes(), capture_output=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode().strip())
    return np.frombuffer(proc.stdout, dtype=np.float32)


def check_case(tool, orig, new, name, x):
    x = x.astype(np.float32)
    want = torchaudio.functional.resample(torch.from_numpy(x)[None], orig, new)[0].numpy()
    got = run_tool(tool, orig, new, x)
    if got.shape != want.shape:
        print(f"FAIL {orig}->{new} {name}: length {got.shape[0]}, torchaudio {want.shape[0]}")
        return False
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    ok = err <= TOLERANCE * max(1.0, peak)
    print(f"{'ok  ' if ok else 'FAIL'} {orig}->{new} {name}: n={x.size} out={got.size} max_abs_err={err:.3g}")
    return ok


def main():
    if len(sys.argv) != 2:
        print("usage: resample_reference.py RESAMPLE_TOOL", file=sys.stderr)
        return 2
    ok = True
    for orig, new in RATES:
        for name, x in signals(orig):
            ok &= check_case(sys.argv[1], orig, new, name, x)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
