#!/usr/bin/python3
"""scripts/bench/audio_peer.py - the peer of scripts/bench/audio.sh: soundfile + torch + torchaudio per clip.

soundfile.read (PCM16 -> float32), torch.stft(512/160/400, periodic Hann, center) -> |.|^2, 80-mel matmul,
log(x + 1e-6), FrequencyMasking(27)/TimeMasking(100) twice each; window and mel matrix made once. One process,
torch.set_num_threads(1), pinned by the caller; warm-up clips, then one timed pass. Prints one JSON object,
with the BLAS this process really loaded (the mel matmul goes through it). --blas-only: just that check.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import soundfile
import torch
import torchaudio

N_FFT, HOP, WIN, N_MELS, RATE = 512, 160, 400, 80, 16000


def wav_files(root):
    """The clips in wav_folder order: class folders sorted, then files sorted within each."""
    out = []
    for cls in sorted(os.listdir(root)):
        d = os.path.join(root, cls)
        if os.path.isdir(d):
            out += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.lower().endswith(".wav")]
    return out


def mapped_libs():
    """Resolved paths of the shared objects mapped into this process."""
    with open("/proc/self/maps") as f:
        return sorted({fields[-1] for fields in map(str.split, f) if len(fields) >= 6 and ".so" in fields[-1]})


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def sgemm_provider(libs):
    """The file whose sgemm_ libtorch_cpu's calls bind to, or None. Debian's torch links libblas.so.3 and
    liblapack.so.3 (BLAS_INFO=generic), so OpenBLAS's libraries can be mapped while the reference sgemm_ is
    the one used (e.g. a reference libblas beside OpenBLAS's liblapack): ask the dynamic linker which it is."""
    torch_cpu = [p for p in libs if os.path.basename(p).startswith("libtorch_cpu.so")]
    if not torch_cpu:
        return None
    try:
        h = ctypes.CDLL(torch_cpu[0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        addr = ctypes.cast(h.sgemm_, ctypes.c_void_p).value
        info = DlInfo()
        if not ctypes.CDLL(None).dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.dli_fname:
            return None
        return os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError):
        return None


def blas_check():
    """Which BLAS torch's float32 matmul really runs on: the library providing sgemm_ (openblas / reference /
    mkl / unknown), the BLAS-like libraries mapped, and a 512^3 sgemm's GFLOP/s (reference BLAS: ~2-3)."""
    a = torch.randn(512, 512)
    a @ a
    t0 = time.perf_counter()
    a @ a
    gflops = 2 * 512 ** 3 / (time.perf_counter() - t0) / 1e9
    libs = mapped_libs()
    provider = sgemm_provider(libs)
    name = provider or " ".join(p for p in libs if "blas" in os.path.basename(p))
    kind = ("openblas" if "openblas" in name else "mkl" if "mkl" in name else
            "reference" if "/blas/libblas.so" in name else "unknown")
    config = torch.__config__.show().replace(",", " ").split()
    return {"blas": kind, "sgemm_from": provider,
            "blas_libs": [p for p in libs if any(k in os.path.basename(p) for k in ("blas", "lapack", "mkl"))],
            "sgemm_512_gflops": round(gflops, 1),
            "torch_blas_info": next((s.split("=", 1)[1] for s in config if s.startswith("BLAS_INFO=")), "?")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="wav_folder root (DIR/<class>/*.wav)")
    ap.add_argument("--warmup-clips", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--blas-only", action="store_true", help="print only the BLAS check and exit")
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    blas = blas_check()
    if a.blas_only:
        print(json.dumps(blas))
        return
    if not a.data:
        ap.error("--data is required")

    window = torch.hann_window(WIN, periodic=True)
    fb = torchaudio.functional.melscale_fbanks(N_FFT // 2 + 1, 0.0, RATE / 2, N_MELS, RATE).to(torch.float32)
    masks = [torchaudio.transforms.FrequencyMasking(27), torchaudio.transforms.FrequencyMasking(27),
             torchaudio.transforms.TimeMasking(100), torchaudio.transforms.TimeMasking(100)]

    def clip(path):
        data, rate = soundfile.read(path, dtype="float32")
        if rate != RATE:
            sys.exit(f"bench_audio_peer: {path} is {rate} Hz, expected {RATE}")
        x = torch.from_numpy(data)[None]   # (channel, time), as torchaudio's masking wants (channel, freq, time)
        spec = torch.stft(x, N_FFT, hop_length=HOP, win_length=WIN, window=window, center=True,
                          return_complex=True).abs() ** 2
        # as torchaudio.transforms.MelScale: (time, freq) @ (freq, mels), back to (mels, time)
        mel = torch.matmul(spec.transpose(-1, -2), fb).transpose(-1, -2)
        feat = torch.log(mel + 1e-6)
        for m in masks:
            feat = m(feat)
        return feat, len(data)

    files = wav_files(a.data)
    if not files:
        sys.exit(f"bench_audio_peer: no .wav files under {a.data}")
    for path in files[: a.warmup_clips]:
        clip(path)

    clips = samples = frames = 0
    feat = None
    t0 = time.perf_counter()
    for path in files:
        feat, n = clip(path)
        clips += 1
        samples += n
        frames += feat.shape[-1]
    seconds = time.perf_counter() - t0

    print(json.dumps({"side": "peer", "clips": clips, "seconds": round(seconds, 4),
                      "clips_per_s": round(clips / seconds, 2), "audio_seconds": round(samples / RATE, 2),
                      "audio_s_per_s": round(samples / RATE / seconds, 1), "frames": frames,
                      "feature_shape_last": list(feat.shape), "dtype": str(feat.dtype),
                      "torch": torch.__version__, "torchaudio": torchaudio.__version__,
                      "soundfile": soundfile.__version__, "threads": torch.get_num_threads(),
                      "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
                      **blas}))


if __name__ == "__main__":
    main()
