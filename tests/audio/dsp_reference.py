#!/usr/bin/python3
"""tests/audio/dsp_reference.py - proves ops/stft and ops/mel (through tests/tools/dsp_tool) give what
torch.stft(...).abs()**power and torchaudio 0.13's melscale_fbanks give. Test only, not a benchmark; single
process, runs the tool once per case. Needs Debian's /usr/bin/python3 with torch and torchaudio.
Usage: /usr/bin/python3 tests/audio/dsp_reference.py build/tests/dsp_tool  -> one line per case, then
`N passed, M failed`; exit status 1 on any failure.
"""
# STFT: max|ours - ref| / max|ref| <= 1e-4 per case, against torch in float32 (what users compare with) and
# against torch in float64 on the same float32 samples (the exact answer; both errors are printed).
# Mel filterbanks: max|ours - ref| <= 1e-5 absolute against torchaudio run with float64 as torch's default
# dtype (the exact formulas; ours are computed in double, so this error is float32 storage, ~3e-8). Against
# torchaudio's float32 default the gap is torchaudio's own float32 rounding (its corner frequencies carry
# ~1e-3 Hz of error, divided by filter widths of tens of Hz), up to 1.5e-5 on this grid with 128 mels; so
# there the bound is 1e-5 plus how far torchaudio float32 is from torchaudio float64 for that case.
import math
import subprocess
import sys
import warnings

import numpy as np
import torch
import torchaudio.functional as AF

STFT_TOL = 1e-4
MEL_TOL = 1e-5


def run_tool(tool, args, stdin=b""):
    r = subprocess.run([tool] + [str(a) for a in args], input=stdin, capture_output=True)
    return r.returncode, np.frombuffer(r.stdout, dtype="<f4"), r.stderr.decode().strip()


def signal(kind, n, sr, seed):
    t = np.arange(n, dtype=np.float64) / sr
    if kind == "tone":
        x = 0.7 * np.sin(2 * math.pi * 440.0 * t) + 0.2 * np.cos(2 * math.pi * (sr / 7.3) * t + 0.3)
    elif kind == "chirp":  # linear sweep 50 Hz .. 0.45 sr over the clip
        dur = n / sr
        f1 = 0.45 * sr
        x = 0.9 * np.sin(2 * math.pi * (50.0 * t + (f1 - 50.0) * t * t / (2 * dur)))
    else:
        x = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    return x.astype(np.float32)


def torch_stft(x, n_fft, hop, win, center, power, dtype):
    xt = torch.from_numpy(x).to(dtype)
    s = torch.stft(xt, n_fft, hop_length=hop, win_length=win, window=torch.hann_window(win, dtype=dtype),
                   center=center, pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    return (s.abs() ** power).numpy().astype(np.float64)


def check_stft(tool, n_fft, hop, win, center, power, kind, sr, n, seed):
    x = signal(kind, n, sr, seed)
    name = f"stft n_fft={n_fft} hop={hop} win={win} center={int(center)} power={power} {kind} sr={sr} n={n}"
    rc, out, err = run_tool(tool, ["stft", n_fft, hop, win, int(center), power, n], x.tobytes())
    ref32 = torch_stft(x, n_fft, hop, win, center, power, torch.float32)
    ref64 = torch_stft(x, n_fft, hop, win, center, power, torch.float64)
    if rc != 0 or out.size != ref64.size:
        print(f"FAIL {name}: tool rc={rc} gave {out.size} values, want {ref64.shape} ({err})")
        return False
    ours = out.astype(np.float64).reshape(ref64.shape)
    e32 = np.abs(ours - ref32).max() / np.abs(ref32).max()
    e64 = np.abs(ours - ref64).max() / np.abs(ref64).max()
    ok = e32 <= STFT_TOL and e64 <= STFT_TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name} frames={ref64.shape[1]} rel_err_vs_f32={e32:.2e} "
          f"rel_err_vs_f64={e64:.2e}")
    return ok


def check_stft_refuses_short(tool):
    """center needs n > n_fft // 2 for reflection; torch refuses such input too."""
    n_fft, n = 512, 256
    x = signal("noise", n, 16000, 1)
    rc, out, _ = run_tool(tool, ["stft", n_fft, 128, n_fft, 1, 2, n], x.tobytes())
    try:
        torch_stft(x, n_fft, 128, n_fft, True, 2, torch.float32)
        torch_refuses = False
    except RuntimeError:
        torch_refuses = True
    ok = rc == 1 and out.size == 0 and torch_refuses
    print(f"{'ok  ' if ok else 'FAIL'} stft n_fft={n_fft} center=1 n={n} refused (tool rc={rc}, "
          f"torch refuses={torch_refuses})")
    return ok


def torchaudio_fbanks(n_freqs, f_min, f_max, n_mels, sr, norm, scale, dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # all-zero filters: we allow them too
            fb = AF.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sr, norm, scale)
    finally:
        torch.set_default_dtype(old)
    return fb.numpy().astype(np.float64)


def check_mel(tool, n_freqs, f_min, f_max, n_mels, sr, scale, norm):
    name = f"mel n_freqs={n_freqs} f_min={f_min} f_max={f_max} n_mels={n_mels} sr={sr} scale={scale} norm={norm}"
    rc, out, err = run_tool(tool, ["mel", n_freqs, f_min, f_max, n_mels, sr, scale, norm])
    ta_norm = None if norm == "none" else "slaney"
    ref32 = torchaudio_fbanks(n_freqs, f_min, f_max, n_mels, sr, ta_norm, scale, torch.float32)
    ref64 = torchaudio_fbanks(n_freqs, f_min, f_max, n_mels, sr, ta_norm, scale, torch.float64)
    if rc != 0 or out.size != ref64.size:
        print(f"FAIL {name}: tool rc={rc} gave {out.size} values, want {ref64.shape} ({err})")
        return False
    ours = out.astype(np.float64).reshape(ref64.shape)
    e32 = np.abs(ours - ref32).max()
    e64 = np.abs(ours - ref64).max()
    ta32_own = np.abs(ref32 - ref64).max()
    ok = e64 <= MEL_TOL and e32 <= MEL_TOL + ta32_own
    print(f"{'ok  ' if ok else 'FAIL'} {name} abs_err_vs_f64={e64:.2e} abs_err_vs_f32={e32:.2e} "
          f"(torchaudio_f32_vs_f64={ta32_own:.2e}) max_weight={np.abs(ref64).max():.3g}")
    return ok


# (n_fft, hop, win): every n_fft and hop of the brief, win < n_fft (400 in 512 and 800 in 1024) and odd n_fft
STFT_SHAPES = [(256, 128, 256), (400, 160, 400), (512, 160, 400), (512, 128, 512), (1024, 100, 1024),
               (1024, 128, 800), (401, 100, 333)]
RATES = [8000, 16000, 22050]
KINDS = ["tone", "chirp", "noise"]


def stft_cases():
    i = 0
    for n_fft, hop, win in STFT_SHAPES:
        for center in (False, True):
            for power in (1, 2):
                for kind in KINDS:
                    sr = RATES[i % len(RATES)]
                    n = sr // 4 + 2 * (i % 5) + 1  # odd lengths, frames ending at different offsets
                    yield n_fft, hop, win, center, power, kind, sr, n, i
                    i += 1
    # edges: the shortest signal center accepts, and exactly one uncentred frame
    yield 512, 128, 400, True, 2, "noise", 16000, 257, 1001
    yield 512, 128, 400, False, 1, "noise", 16000, 512, 1002
    yield 1024, 100, 1024, True, 1, "chirp", 22050, 22050 * 3 + 1, 1003


def mel_cases():
    i = 0
    for n_mels in (40, 80, 128):
        for scale in ("htk", "slaney"):
            for norm in ("none", "slaney"):
                for sr in RATES:
                    n_fft = (256, 400, 512, 1024)[i % 4]
                    f_min, f_max = ((0.0, sr / 2), (20.0, sr / 2 - 400), (300.0, 3800.0))[i % 3]
                    yield n_fft // 2 + 1, f_min, f_max, n_mels, sr, scale, norm
                    i += 1
    # many mels over few bins: filters with no weight at all
    yield 33, 0.0, 4000.0, 128, 8000, "htk", "slaney"
    yield 201, 0.0, 11025.0, 128, 22050, "slaney", "none"


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    results = [check_stft(tool, *c) for c in stft_cases()]
    results.append(check_stft_refuses_short(tool))
    results += [check_mel(tool, *c) for c in mel_cases()]
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
