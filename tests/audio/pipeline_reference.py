# tests/audio/pipeline_reference.py SPILLCTL DATA_DIR - the audio pipeline end to end against independent
# references: each case runs `spillctl run --local --dump` over WAV files (batch 1: whole clips of any length)
# and recomputes every element from the same file with soundfile + torch.stft + torchaudio (melscale_fbanks,
# resample, AmplitudeToDB), Kaldi fbank against torchaudio.compliance.kaldi.fbank, and Whisper's log-mel
# front-end. Also: spec_augment masks are zero bands, the same per sample key in two runs and
# different across keys. Prints one line per case; exits 1 on any failure.
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import soundfile
import torch
import torchaudio

SPILLCTL, DATA = sys.argv[1], sys.argv[2]
failures = 0


def report(name, ok, detail):
    global failures
    failures += not ok
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))


def run(folder, ops, seed=0, epochs=1):
    """Elements of a local run over folder (a wav_folder), in order, with their paths."""
    spec = {"source": {"format": "wav_folder", "path": folder, "shuffle": False, "seed": seed, "epochs": epochs},
            "ops": ops, "batch": {"size": 1}}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "p.json")
        json.dump(spec, open(p, "w"))
        subprocess.run([SPILLCTL, "run", "--local", "--pipeline", p, "--threads", "2", "--dump", d + "/out",
                        "--quiet"], check=True)
        keys = [l.split(maxsplit=2) for l in open(d + "/out/keys.txt").read().splitlines()]
        outs = [np.load(f)[0] for f in sorted(glob.glob(d + "/out/b*_t0.npy"))]
    return [k[-1] for k in keys], outs


def load(path):
    x, rate = soundfile.read(path, dtype="float32", always_2d=True)
    return torch.from_numpy(x.T.copy()).mean(0, keepdim=True), rate


def spectrogram(x, n_fft, hop, win, center, power):
    s = torch.stft(x[0].double(), n_fft, hop, win, window=torch.hann_window(win, dtype=torch.float64),
                   center=center, pad_mode="reflect", return_complex=True).abs()
    return s ** power


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def check_features(folder, label, n_fft, hop, win, center, power, n_mels, scale, norm, tail):
    ops = [{"op": "decode_wav"}, {"op": "stft", "n_fft": n_fft, "hop_length": hop, "win_length": win,
                                  "center": center, "power": power}]
    if n_mels:
        ops.append({"op": "mel", "sample_rate": 16000, "n_mels": n_mels, "mel_scale": scale, "norm": norm})
    ops += tail
    paths, outs = run(folder, ops)
    worst = 0.0
    for path, got in zip(paths, outs):
        x, rate = load(path)
        ref = spectrogram(x, n_fft, hop, win, center, power)
        if n_mels:
            fb = torchaudio.functional.melscale_fbanks(n_fft // 2 + 1, 0.0, rate / 2.0, n_mels, rate, norm,
                                                       scale).double()
            ref = (ref.T @ fb).T
        for t in tail:
            if t["op"] == "log":
                ref = torch.log(ref + t["eps"])
            if t["op"] == "amplitude_to_db":
                ref = torchaudio.transforms.AmplitudeToDB(t["stype"], t.get("top_db"))(ref.float()).double()
        ref = ref.numpy()
        if got.shape != ref.shape:
            report(label, False, "%s: shape %s, reference %s" % (path, got.shape, ref.shape))
            return
        # log and dB outputs are compared absolutely (their zero is arbitrary), magnitudes relative to the max
        err = float(np.max(np.abs(got - ref))) if tail else rel_err(got, ref)
        worst = max(worst, err)
    limit = 2e-3 if tail else 1e-4
    report(label, worst <= limit, "%d clips, max %s error %.2e (limit %.0e)" %
           (len(outs), "absolute" if tail else "relative", worst, limit))


def check_fbank(folder, label, fields, scale_dither=False):
    """fbank against torchaudio.compliance.kaldi.fbank (its [frames, bins], transposed here) within 1e-4 of the
    largest value; with dither the noise differs draw for draw, so the shape and each clip's mean feature
    (within 1% of torchaudio's) are checked."""
    paths, outs = run(folder, [{"op": "decode_wav"}, dict({"op": "fbank"}, **fields)])
    worst, shapes_ok, mean_gap = 0.0, True, 0.0
    for path, got in zip(paths, outs):
        x, rate = load(path)
        want = torchaudio.compliance.kaldi.fbank(x, **fields).numpy().T
        shapes_ok &= got.shape == want.shape
        if got.shape == want.shape:
            worst = max(worst, rel_err(got, want))
            mean_gap = max(mean_gap, abs(float(np.mean(got)) - float(np.mean(want))) / abs(float(np.mean(want))))
    ok = shapes_ok and (mean_gap < 0.01 if scale_dither else worst <= 1e-4)
    report("fbank " + label, ok, "%d clips, shapes equal: %s, worst error %.2e of the max, clip means %.2e apart" % (
        len(outs), shapes_ok, worst, mean_gap))


def check_fbank_dither_noise():
    """The dither alone: on a silent 4 s clip every feature is the noise's, so its distribution is the dither's.
    fbank's values against torchaudio's kaldi.fbank on the same silence (dither 1.0, its own torch.randn), by
    two-sample Kolmogorov-Smirnov over the 80 x 398 features (alpha 0.001), and their means and spreads."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "silence"))
        soundfile.write(os.path.join(d, "silence", "zeros.wav"), np.zeros(64000, np.float32), 16000,
                        subtype="FLOAT")
        fields = {"num_mel_bins": 80, "dither": 1.0}
        _, outs = run(d, [{"op": "decode_wav"}, dict({"op": "fbank"}, **fields)])
    torch.manual_seed(0)
    want = torchaudio.compliance.kaldi.fbank(torch.zeros(1, 64000), **fields).numpy().T.ravel()
    got = outs[0].ravel() if outs else np.zeros(0)
    a, b = np.sort(got), np.sort(want)
    allv = np.concatenate([a, b])
    dist = np.max(np.abs(np.searchsorted(a, allv, side="right") / max(len(a), 1) -
                         np.searchsorted(b, allv, side="right") / len(b)))
    crit = 1.95 * np.sqrt((len(a) + len(b)) / (max(len(a), 1) * len(b)))
    ok = len(a) == len(b) and dist < crit and abs(a.mean() - b.mean()) < 0.02 and abs(a.std() / b.std() - 1) < 0.02
    report("fbank dither on silence: the noise's features against torchaudio's", ok,
           "%d values, KS D=%.4f (crit %.4f), mean %.3f vs %.3f, sd %.3f vs %.3f" % (
               len(a), dist, crit, a.mean() if len(a) else 0, b.mean(), a.std() if len(a) else 0, b.std()))


def check_whisper(folder, n_mels):
    """Whisper's log_mel_spectrogram (openai/whisper audio.py, re-typed: pad_or_trim to 30 s, torch.stft(400,
    160, hann), the last frame dropped, |X|^2, librosa's slaney mel bank (as torchaudio's slaney/slaney),
    log10 clamped at 1e-10, floored at max - 8, (x + 4) / 4) against the pipeline of existing ops that makes
    it: pad_audio with trim, stft, mel, trim_frames, amplitude_to_db (top_db 80), scale_shift (1/40, +1)."""
    ops = [{"op": "decode_wav"}, {"op": "pad_audio", "samples": 480000, "trim": True},
           {"op": "stft", "n_fft": 400, "hop_length": 160}, {"op": "mel", "sample_rate": 16000, "n_mels": n_mels,
                                                              "mel_scale": "slaney", "norm": "slaney"},
           {"op": "trim_frames", "frames": 3000}, {"op": "amplitude_to_db", "top_db": 80.0},
           {"op": "scale_shift", "factor": 0.025, "offset": 1.0}]
    paths, outs = run(folder, ops)
    fb = torchaudio.functional.melscale_fbanks(201, 0.0, 8000.0, n_mels, 16000, norm="slaney", mel_scale="slaney").T
    worst = 0.0
    for path, got in zip(paths, outs):
        x, rate = load(path)
        a = torch.nn.functional.pad(x[0], (0, max(0, 480000 - x.shape[1])))[:480000]
        st = torch.stft(a, 400, 160, window=torch.hann_window(400), return_complex=True)
        mel = fb @ (st[..., :-1].abs() ** 2)
        ls = torch.clamp(mel, min=1e-10).log10()
        ls = (torch.maximum(ls, ls.max() - 8.0) + 4.0) / 4.0
        worst = max(worst, float(np.max(np.abs(got - ls.numpy()))) if got.shape == tuple(ls.shape) else 1e9)
    report("Whisper log-mel, %d mels (pad_audio trim + stft + mel + trim_frames + amplitude_to_db + scale_shift)"
           % n_mels, worst <= 2e-4, "%d clips, [%d, 3000] each, max abs error %.2e (limit 2e-4)" % (
               len(outs), n_mels, worst))


def check_pad_or_trim(folder):
    """pad_audio with trim is whisper.pad_or_trim: a clip longer than `samples` becomes its first samples."""
    paths, outs = run(folder, [{"op": "decode_wav"}, {"op": "pad_audio", "samples": 16000, "trim": True}])
    ok = all(got.shape == (1, 16000) and np.array_equal(got, load(p)[0][:, :16000].numpy())
             for p, got in zip(paths, outs))
    report("pad_audio trim: longer clips cut to their first 16000 samples", ok and len(outs) > 0,
           "%d clips" % len(outs))


def check_resample(folder):
    paths, outs = run(folder, [{"op": "decode_wav"}, {"op": "resample", "rate": 16000}])
    worst = 0.0
    for path, got in zip(paths, outs):
        x, rate = load(path)
        ref = torchaudio.functional.resample(x.double(), rate, 16000).float().numpy()
        worst = max(worst, float(np.max(np.abs(got - ref))))
    report("resample to 16 kHz (tones at 8/16/22.05 kHz)", worst <= 1e-5, "max abs error %.2e" % worst)


def check_spec_augment(folder):
    ops = [{"op": "decode_wav"}, {"op": "pad_audio", "samples": 16000}, {"op": "random_crop_audio", "samples": 16000},
           {"op": "stft", "n_fft": 512, "hop_length": 160}, {"op": "mel", "n_mels": 80},
           {"op": "spec_augment", "freq_mask_param": 27, "time_mask_param": 40}]
    _, a = run(folder, ops, seed=3)
    _, b = run(folder, ops, seed=3)
    _, c = run(folder, ops, seed=4)
    same = all(np.array_equal(x, y) for x, y in zip(a, b))
    _, plain = run(folder, ops[:-1], seed=3)
    # masked rows (columns): all zero after spec_augment but not before (empty mel filters are zero anyway)
    # (a column whose energy lies only in masked rows is zeroed by the frequency mask: not a time mask)
    masks = []
    for x, o in zip(a, plain):
        rows = ~x.any(axis=1) & o.any(axis=1)
        masks.append((np.where(rows)[0], np.where(~x.any(axis=0) & o[~rows].any(axis=0))[0]))
    untouched = all(np.array_equal(x[x != 0], o[x != 0]) for x, o in zip(a, plain))
    def band(idx, already_zero):
        """idx is one run, allowing gaps where the input was zero already (silence, empty filters)."""
        return len(idx) == 0 or all(i in set(idx) or already_zero[i] for i in range(idx[0], idx[-1] + 1))
    bands = all(band(f, ~o.any(axis=1)) and band(t, ~o.any(axis=0)) for (f, t), o in zip(masks, plain))
    widths_ok = all(len(f) < 27 and len(t) < 40 for f, t in masks)
    differ = sum(not np.array_equal(x, y) for x, y in zip(a, c))
    keyed = len({(tuple(f), tuple(t)) for f, t in masks}) > 1
    report("spec_augment deterministic per sample key", same and differ > 0 and keyed,
           "same seed equal: %s; other seed differs on %d/%d; distinct masks across keys: %s" %
           (same, differ, len(a), keyed))
    report("spec_augment masks are zero bands under the widths", bands and widths_ok and untouched,
           "contiguous: %s, widths within params: %s, the rest unchanged: %s" % (bands, widths_ok, untouched))


def subset(n):
    """A wav_folder with the first n clips of the speech set (one class folder per clip's class)."""
    d = tempfile.mkdtemp()
    clips = sorted(glob.glob(os.path.join(DATA, "train", "*", "*.wav")))[:n]
    for p in clips:
        cls = os.path.join(d, os.path.basename(os.path.dirname(p)))
        os.makedirs(cls, exist_ok=True)
        os.symlink(p, os.path.join(cls, os.path.basename(p)))
    return d


def tone_folder():
    d = tempfile.mkdtemp()
    os.symlink(os.path.join(DATA, "tones"), os.path.join(d, "tones"))
    return d


speech = subset(6)
check_features(speech, "stft power 2, center, win 400 < n_fft 512", 512, 160, 400, True, 2, 0, None, None, [])
check_features(speech, "stft power 1, no center, odd hop", 400, 101, 400, False, 1, 0, None, None, [])
check_features(speech, "mel 80 htk + log", 512, 160, 400, True, 2, 80, "htk", None, [{"op": "log", "eps": 1e-6}])
check_features(speech, "mel 40 slaney/slaney + amplitude_to_db top_db 80", 1024, 256, 1024, True, 2, 40, "slaney",
               "slaney", [{"op": "amplitude_to_db", "stype": "power", "top_db": 80.0}])
check_features(speech, "mel 128 htk magnitude, no center", 256, 128, 200, False, 1, 128, "htk", None, [])
check_fbank(speech, "Kaldi defaults (23 bins, povey, snip_edges)", {})
check_fbank(speech, "80 bins, use_energy, hamming, 20-7600 Hz, no dc removal", {
    "num_mel_bins": 80, "use_energy": True, "window_type": "hamming", "low_freq": 20.0, "high_freq": 7600.0,
    "remove_dc_offset": False})
check_fbank(speech, "40 bins, snip_edges off, htk_compat energy, raw_energy off, frames 20/8 ms, high_freq -400", {
    "num_mel_bins": 40, "snip_edges": False, "use_energy": True, "htk_compat": True, "raw_energy": False,
    "frame_length": 20.0, "frame_shift": 8.0, "high_freq": -400.0, "window_type": "blackman",
    "preemphasis_coefficient": 0.5, "energy_floor": 0.0})
check_fbank(speech, "rectangular / hanning windows, no preemphasis", {
    "num_mel_bins": 64, "window_type": "rectangular", "preemphasis_coefficient": 0.0})
check_fbank(speech, "hanning window", {"num_mel_bins": 24, "window_type": "hanning"})
check_fbank(speech, "dither 1e-4 (noise: the shapes and each clip's mean)", {"num_mel_bins": 80, "dither": 1e-4},
            scale_dither=True)
check_fbank_dither_noise()
check_pad_or_trim(subset(3))
check_whisper(subset(3), 80)
check_whisper(subset(2), 128)
check_resample(tone_folder())
check_spec_augment(speech)
sys.exit(1 if failures else 0)
