#!/usr/bin/python3
"""scripts/bench/recipes_peer.py - the torchvision / torchaudio side of scripts/bench/recipes.sh: a recipe file
of examples/pipelines/ as the transforms it was written from, one timed pass over a dataset on one core.

Images: ImageFolder + transforms.Compose (each op of the spec as its torchvision transform; combinators as
RandomApply / RandomChoice / RandomOrder; views as DINO's multi-crop callable returning a list) +
DataLoader(num_workers=0), batch.mix as the classification
references' RandomMixup / RandomCutmix under a RandomChoice in the collate step (re-typed from their
algorithm: Debian's torchvision has no references). Segmentation and detection recipes (a mask field, a COCO
source): the references' datasets and joint transforms on (PIL image, target), re-typed from
references/segmentation and references/detection of torchvision 0.14, their collate. Audio: soundfile, torchaudio.functional.resample, then
per clip torchaudio.compliance.kaldi.fbank and FrequencyMasking / TimeMasking, or Whisper's log-mel front-end
(pad or trim, torch.stft, slaney mel, log10 floored at its max - 8, (x + 4) / 4). torch.set_num_threads(1); the
caller pins the process (taskset). A couple of batches run untimed first. Prints one JSON object.
usage: recipes_peer.py RECIPE.json DATA_DIR"""
import glob
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets

IM = {"nearest": T.InterpolationMode.NEAREST, "bilinear": T.InterpolationMode.BILINEAR,
      "bicubic": T.InterpolationMode.BICUBIC}


class PilBlur:
    """DINO's / DeiT III's GaussianBlur at p=1: ImageFilter.GaussianBlur(radius=random.uniform(lo, hi))."""
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __call__(self, img):
        from PIL import ImageFilter
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.lo, self.hi)))


def transform(o):
    """One spec op as its torchvision transform (a list: normalize is ToTensor + Normalize)."""
    k, g = o["op"], o.get
    interp = IM[g("interpolation", "bilinear")]
    if k in ("decode_jpeg", "decode_image"):
        return []
    table = {
        "resize": lambda: T.Resize(o["size"], interpolation=interp),
        "random_perspective": lambda: T.RandomPerspective(g("distortion_scale", 0.5), g("p", 0.5),
                                                          interpolation=interp),
        "random_crop": lambda: T.RandomCrop(o["size"], padding=g("padding"),
                                            padding_mode=g("padding_mode", "constant")),
        "grayscale": lambda: T.Grayscale(g("num_output_channels", 1)),
        "solarize": lambda: T.RandomSolarize(o["threshold"], p=1.0),
        "pil_gaussian_blur": lambda: PilBlur(*(g("radius", [0.1, 2.0]) if isinstance(g("radius"), list)
                                             else [g("radius")] * 2)),
        "center_crop": lambda: T.CenterCrop(o["size"]),
        "random_resized_crop": lambda: T.RandomResizedCrop(o["size"], scale=tuple(g("scale", (0.08, 1.0))),
                                                           interpolation=interp),
        "random_horizontal_flip": lambda: T.RandomHorizontalFlip(g("p", 0.5)),
        "trivial_augment_wide": lambda: T.TrivialAugmentWide(interpolation=IM[g("interpolation", "nearest")]),
        "rand_augment": lambda: T.RandAugment(g("num_ops", 2), g("magnitude", 9)),
        "aug_mix": lambda: T.AugMix(g("severity", 3), g("mixture_width", 3), g("chain_depth", -1), g("alpha", 1.0),
                                    g("all_ops", True), interpolation=interp, fill=g("fill")),
        "random_erasing": lambda: T.RandomErasing(g("p", 0.5)),
        "color_jitter": lambda: T.ColorJitter(g("brightness", 0), g("contrast", 0), g("saturation", 0),
                                              g("hue", 0)),
        "random_grayscale": lambda: T.RandomGrayscale(g("p", 0.1)),
        "random_posterize": lambda: T.RandomPosterize(o["bits"], g("p", 0.5)),
        "random_solarize": lambda: T.RandomSolarize(o["threshold"], g("p", 0.5)),
        "random_equalize": lambda: T.RandomEqualize(g("p", 0.5)),
        "random_autocontrast": lambda: T.RandomAutocontrast(g("p", 0.5)),
        "random_invert": lambda: T.RandomInvert(g("p", 0.5)),
        "random_adjust_sharpness": lambda: T.RandomAdjustSharpness(o["sharpness_factor"], g("p", 0.5)),
        "gaussian_blur": lambda: T.GaussianBlur(o["kernel_size"], sigma=tuple(g("sigma", (0.1, 2.0)))
                                                if isinstance(g("sigma", [0.1, 2.0]), list) else g("sigma")),
        "random_apply": lambda: T.RandomApply(flat(o["ops"]), p=g("p", 0.5)),
        "random_choice": lambda: T.RandomChoice(flat(o["ops"]), p=g("p")),
        "random_order": lambda: T.RandomOrder(flat(o["ops"])),
    }
    if k == "normalize":
        return [T.ToTensor(), T.Normalize(o["mean"], o["std"])]
    if k == "to_tensor":
        return [T.ToTensor()]
    if k not in table:
        sys.exit("recipes_peer: no torchvision transform for op %r" % k)
    return [table[k]()]


def flat(ops):
    return [t for o in ops for t in transform(o)]


def mixer(mix):
    """The references' collate: RandomChoice([RandomMixup, RandomCutmix]) on (batch, target)."""
    def mixup(b, t, alpha):
        rb, rt = b.roll(1, 0), t.roll(1, 0)
        lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
        rb.mul_(1.0 - lam)
        b.mul_(lam).add_(rb)
        rt.mul_(1.0 - lam)
        t.mul_(lam).add_(rt)
        return b, t

    def cutmix(b, t, alpha):
        rb, rt = b.roll(1, 0), t.roll(1, 0)
        lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
        H, W = b.shape[-2:]
        rx, ry = int(torch.randint(W, (1,))), int(torch.randint(H, (1,)))
        r = 0.5 * math.sqrt(1.0 - lam)
        rw, rh = int(r * W), int(r * H)
        x1, y1, x2, y2 = max(rx - rw, 0), max(ry - rh, 0), min(rx + rw, W), min(ry + rh, H)
        b[:, :, y1:y2, x1:x2] = rb[:, :, y1:y2, x1:x2]
        lam = 1.0 - (x2 - x1) * (y2 - y1) / (W * H)
        rt.mul_(1.0 - lam)
        t.mul_(lam).add_(rt)
        return b, t
    ways = [(f, a) for f, a in ((mixup, mix.get("mixup_alpha", 0)), (cutmix, mix.get("cutmix_alpha", 0))) if a > 0]

    def collate(items):
        b, t = torch.utils.data.default_collate(items)
        t = torch.nn.functional.one_hot(t, num_classes=mix["num_classes"]).to(b.dtype)
        f, a = random.choice(ways)
        return f(b, t, a) if torch.rand(1).item() < mix.get("p", 1.0) else (b, t)
    return collate


class Views:
    """DINO's DataAugmentationDINO / SimCLR's view generator: the prefix once, then each view's transform on
    it, repeat times, as a list (the default collate stacks each position into its batch)."""
    def __init__(self, prefix, views):
        self.prefix = T.Compose(prefix)
        self.views = [(T.Compose(flat(v["ops"])), v.get("repeat", 1)) for v in views]

    def __call__(self, img):
        img = self.prefix(img)
        return [tf(img) for tf, r in self.views for _ in range(r)]


def images(spec, data, warmup=2):
    tf = Views(flat(spec["ops"]), spec["views"]) if spec.get("views") else T.Compose(flat(spec["ops"]))
    ds = datasets.ImageFolder(data, transform=tf)
    mix = spec["batch"].get("mix")
    return timed(DataLoader(ds, batch_size=spec["batch"]["size"], shuffle=True, num_workers=0,
                            collate_fn=mixer(mix) if mix else None, generator=torch.Generator().manual_seed(7)),
                 warmup)


def timed(loader, warmup):
    """A couple of batches untimed, then one timed pass: (elements, seconds)."""
    it = iter(loader)
    for _ in range(min(warmup, len(loader))):
        next(it)
    n, t0 = 0, time.perf_counter()
    for _, labels in loader:
        n += len(labels)
    return n, time.perf_counter() - t0


class Targets(torch.utils.data.Dataset):
    """The references' datasets as the bench feeds them: (PIL image, target) per photo of an image folder,
    the target a PIL label map from the parallel mask folder (segmentation: VOCSegmentation's pairs) or the
    boxes and labels of a COCO instances file (detection: CocoDetection + ConvertCocoPolysToMask's boxes,
    xywh to xyxy, clamped to the image, empty ones dropped), then the joint transform."""
    def __init__(self, spec, data, joint):
        src, self.joint = spec["source"], joint
        if src["format"] == "coco":
            coco = json.load(open(src["annotations"]))
            anns = {}
            for a in coco["annotations"]:
                anns.setdefault(a["image_id"], []).append(a)
            self.items = [(os.path.join(data, im["file_name"]), anns.get(im["id"], [])) for im in coco["images"]]
        else:
            masks = next(f["path"] for f in src["fields"].values() if f.get("as") == "mask")
            self.items = [(os.path.join(d, f), os.path.join(masks, os.path.relpath(os.path.join(d, f), data))
                           .rsplit(".", 1)[0] + ".png")
                          for d, _, fs in sorted(os.walk(data, followlinks=True)) for f in sorted(fs)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, t = self.items[i]
        img = Image.open(path).convert("RGB")
        if isinstance(t, str):
            return self.joint(img, Image.open(t))
        w, h = img.size
        b = torch.as_tensor([a["bbox"] for a in t if not a.get("iscrowd")], dtype=torch.float32).reshape(-1, 4)
        b[:, 2:] += b[:, :2]
        b[:, 0::2].clamp_(min=0, max=w)
        b[:, 1::2].clamp_(min=0, max=h)
        labels = torch.tensor([a["category_id"] for a in t if not a.get("iscrowd")], dtype=torch.int64)
        keep = (b[:, 3] > b[:, 1]) & (b[:, 2] > b[:, 0])
        return self.joint(img, {"boxes": b[keep], "labels": labels[keep]})


def pad_if_smaller(img, size, fill=0):
    """The segmentation references' pad_if_smaller."""
    if min(img.size) < size:
        ow, oh = img.size
        img = F.pad(img, (0, 0, size - ow if ow < size else 0, size - oh if oh < size else 0), fill=fill)
    return img


def joint_transform(ops):
    """The references' segmentation / detection transforms (references/segmentation/transforms.py and
    references/detection/transforms.py of torchvision 0.14, re-typed) for the spec's ops, on (image, target)."""
    def run(img, t):
        for o in ops:
            k = o["op"]
            seg = not isinstance(t, dict)
            if k == "random_resize":                    # RandomResize: random.randint, F.resize both
                size = random.randint(o["min_size"], o.get("max_size") or o["min_size"])
                img = F.resize(img, size)
                t = F.resize(t, size, interpolation=T.InterpolationMode.NEAREST)
            elif k == "random_shortest_size":           # RandomShortestSize
                sizes = o["min_size"] if isinstance(o["min_size"], list) else [o["min_size"]]
                _, h, w = F.get_dimensions(img)
                s = sizes[torch.randint(len(sizes), (1,)).item()]
                r = min(s / min(h, w), o["max_size"] / max(h, w))
                nw, nh = int(w * r), int(h * r)
                img = F.resize(img, [nh, nw], interpolation=T.InterpolationMode.BILINEAR)
                t["boxes"][:, 0::2] *= nw / w
                t["boxes"][:, 1::2] *= nh / h
            elif k == "random_horizontal_flip":
                if seg and random.random() < o.get("p", 0.5):   # segmentation's: random.random
                    img, t = F.hflip(img), F.hflip(t)
                elif not seg and torch.rand(1) < o.get("p", 0.5):   # detection's: torch.rand, boxes mirrored
                    img = F.hflip(img)
                    _, _, w = F.get_dimensions(img)
                    t["boxes"][:, [0, 2]] = w - t["boxes"][:, [2, 0]]
            elif k == "pad_if_smaller":                 # segmentation's RandomCrop: pad, then a window
                img, t = pad_if_smaller(img, o["size"]), pad_if_smaller(t, o["size"], fill=255)
            elif k == "random_crop":
                p = T.RandomCrop.get_params(img, (o["size"], o["size"]))
                img, t = F.crop(img, *p), F.crop(t, *p)
            elif k in ("normalize", "to_tensor"):       # PILToTensor + ConvertImageDtype(float) [+ Normalize]
                img = F.convert_image_dtype(F.pil_to_tensor(img), torch.float)
                if k == "normalize":
                    img = F.normalize(img, mean=o["mean"], std=o["std"])
                if seg:
                    t = torch.as_tensor(np.array(t), dtype=torch.int64)
            elif k not in ("decode_jpeg", "decode_image"):
                sys.exit("recipes_peer: no reference transform for op %r" % k)
        return img, t
    return run


def targets(spec, data, warmup=2):
    """Segmentation (default collate: the crops share a size) or detection (the references' collate_fn:
    tuple(zip(*batch)), images of their own sizes)."""
    ds = Targets(spec, data, joint_transform(spec["ops"]))
    coco = spec["source"]["format"] == "coco"
    return timed(DataLoader(ds, batch_size=spec["batch"]["size"], shuffle=True, num_workers=0,
                            collate_fn=(lambda b: tuple(zip(*b))) if coco else None,
                            generator=torch.Generator().manual_seed(7)), warmup)


def whisper_features(ops):
    """whisper.log_mel_spectrogram(whisper.pad_or_trim(audio)) as openai-whisper writes it, with librosa's
    slaney mel bank taken from torchaudio (the same filters; whisper ships them precomputed)."""
    import torchaudio
    n, n_fft, hop = ops["pad_audio"]["samples"], ops["stft"]["n_fft"], ops["stft"]["hop_length"]
    mel = ops["mel"]
    filters = torchaudio.functional.melscale_fbanks(n_fft // 2 + 1, 0.0, mel["sample_rate"] / 2, mel["n_mels"],
                                                    mel["sample_rate"], norm="slaney", mel_scale="slaney").T
    window = torch.hann_window(n_fft)

    def features(w):
        x = w[0, :n] if w.shape[1] >= n else torch.nn.functional.pad(w[0], (0, n - w.shape[1]))
        stft = torch.stft(x, n_fft, hop, window=window, return_complex=True)
        mags = stft[..., :-1].abs() ** 2
        log_spec = torch.clamp(filters @ mags, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
        return (log_spec + 4.0) / 4.0
    return features


def kaldi_features(ops):
    """torchaudio.compliance.kaldi.fbank, then FrequencyMasking / TimeMasking as the recipe counts them."""
    import torchaudio
    fb, sa = ops["fbank"], ops.get("spec_augment")
    fields = {k: v for k, v in fb.items() if k != "op"}
    fm = torchaudio.transforms.FrequencyMasking(sa["freq_mask_param"]) if sa else None
    tm = torchaudio.transforms.TimeMasking(sa["time_mask_param"]) if sa else None

    def features(w):
        f = torchaudio.compliance.kaldi.fbank(w, **fields).T[None]
        for _ in range(sa.get("num_freq_masks", 1) if sa else 0):
            f = fm(f)
        for _ in range(sa.get("num_time_masks", 1) if sa else 0):
            f = tm(f)
        return f
    return features


def audio(spec, data, warmup=4):
    import soundfile
    import torchaudio
    ops = {o["op"]: o for o in spec["ops"]}
    rate = ops.get("resample", {}).get("rate")
    features = kaldi_features(ops) if "fbank" in ops else whisper_features(ops)
    files = sorted(glob.glob(os.path.join(data, "*", "*.wav")) + glob.glob(os.path.join(data, "*", "*.flac")))

    def one(path):
        x, r = soundfile.read(path, dtype="float32", always_2d=True)
        w = torch.from_numpy(x.T.copy()).mean(0, keepdim=True)
        if rate and r != rate:
            w = torchaudio.functional.resample(w, r, rate)
        return features(w)
    for p in files[:warmup]:
        one(p)
    t0 = time.perf_counter()
    for p in files:
        one(p)
    return len(files), time.perf_counter() - t0


def main():
    spec, data = json.load(open(sys.argv[1])), sys.argv[2]
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(7)
    random.seed(7)
    is_audio = spec["source"]["format"] in ("audio_folder", "wav_folder")
    has_targets = spec["source"]["format"] == "coco" or spec["source"].get("fields")
    n, s = (audio if is_audio else targets if has_targets else images)(spec, data)
    print(json.dumps({"side": "torchaudio" if is_audio else "torchvision", "elements": n, "seconds": round(s, 4),
                      "per_s": round(n / s, 2)}))


if __name__ == "__main__":
    main()
