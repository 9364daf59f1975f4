#!/usr/bin/python3
"""tests/equiv/check_ops.py - proves Spillway's image kernels (ops/color, ops/geometry, ops/policy) give what
torchvision 0.14 + Pillow 9.4 give on the same PIL images (real photos at odd sizes, edge cases, all 2^24
colours). Test only, not a benchmark; needs Debian's /usr/bin/python3 with python3-torchvision.
Usage: /usr/bin/python3 tests/equiv/check_ops.py build/tests/opcheck  -> one line per case, then
`N passed, M failed`; exit status 1 on any failure.
"""
# Point ops and brightness/contrast/saturation/sharpness must be bit-exact; hue, rotate and affine must have a
# mean abs difference <= 1.0 (today they are exact too; the worst values are printed as `summary` lines).
# Policies (nearest and bilinear) are checked by replaying the ops opcheck reports through torchvision's own
# _apply_op, and their magnitudes against torchvision's tables.
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image, ImageFilter
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import (AutoAugment, AutoAugmentPolicy, RandAugment,
                                                TrivialAugmentWide, _apply_op)

NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR
IM = {"nearest": NEAREST, "bilinear": BILINEAR}

passed = failed = 0
worst = {}   # label -> (max mean abs diff, max abs diff)


def report(ok, label, detail):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'PASS' if ok else 'FAIL'} {label} {detail}", flush=True)


def run_opcheck(opcheck, ppm, out, spec):
    p = subprocess.run([opcheck, ppm, out, json.dumps(spec)], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return np.load(out), p.stdout.strip()


def compare(label, group, name, got, want, exact):
    want = np.asarray(want)
    if got is None or got.shape != want.shape:
        report(False, label, f"img={name} shape {None if got is None else got.shape} != {want.shape}")
        return
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    mx, mean = int(d.max()), float(d.mean())
    w = worst.get(group, (0.0, 0))
    worst[group] = (max(w[0], mean), max(w[1], mx))
    ok = mx == 0 if exact else mean <= 1.0
    report(ok, label, f"img={name} max={mx} mean={mean:.4f}")


# ---------------------------------------------------------------- inputs

def photo_images(tmp):
    """A few real photos at odd sizes (and one square one for rotate's 90-degree fast path)."""
    paths = sorted(glob.glob("/usr/share/backgrounds/mate/nature/*.jpg")) + \
        sorted(glob.glob("/usr/share/wallpapers/*/contents/images/*.jpg"))
    if not paths:
        sys.exit("check_ops: no JPEGs under /usr/share/backgrounds/mate/nature or /usr/share/wallpapers")
    picks = [paths[0], paths[len(paths) // 2], paths[-1]]
    sizes = [(333, 517), (517, 333), (101, 101)]
    out = []
    for i, (p, size) in enumerate(zip(picks, sizes)):
        img = Image.open(p).convert("RGB").resize(size, Image.BILINEAR)
        parts = p.split(os.sep)
        theme = parts[parts.index("wallpapers") + 1] if "wallpapers" in parts else "mate"
        out.append((f"{theme}-{os.path.basename(p)}@{size[0]}x{size[1]}", img))
    return out


def edge_images():
    """Tiny, flat and sparse-histogram images that hit the special cases of the point ops and filters."""
    rng = np.random.default_rng(7)
    few = np.full((9, 40, 3), 10, np.uint8)          # equalize: step of 0 or LUT entries above 255
    few[0, :3] = 200
    few[1, :7] = (250, 3, 128)
    ramp = np.tile(np.arange(0, 256, 5, dtype=np.uint8)[None, :, None], (4, 1, 3))
    return [
        ("flat-7x5", Image.fromarray(np.full((5, 7, 3), 77, np.uint8))),
        ("noise-2x2", Image.fromarray(rng.integers(0, 256, (2, 2, 3), dtype=np.uint8))),
        ("noise-1x6", Image.fromarray(rng.integers(0, 256, (6, 1, 3), dtype=np.uint8))),
        ("noise-3x3", Image.fromarray(rng.integers(0, 256, (3, 3, 3), dtype=np.uint8))),
        ("sparse-40x9", Image.fromarray(few)),
        ("ramp-52x4", Image.fromarray(ramp)),
    ]


def all_colours_image():
    """Every 24-bit RGB value once (4096 x 4096), for exhaustive checks of the per-pixel colour maps."""
    v = np.arange(1 << 24, dtype=np.uint32)
    rgb = np.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255], -1).astype(np.uint8)
    return Image.fromarray(rgb.reshape(4096, 4096, 3))


# ---------------------------------------------------------------- deterministic kernels

def point_cases():
    cases = [({"op": "invert"}, F.invert), ({"op": "equalize"}, F.equalize),
             ({"op": "autocontrast"}, F.autocontrast),
             ({"op": "grayscale"}, lambda i: F.rgb_to_grayscale(i, 3))]
    for r in (0.0, 0.1, 0.37, 1.0, 1.7777, 2.0, 5.5, 40.0):   # Pillow's GaussianBlur (DINO's, DeiT III's)
        cases.append(({"op": "pil_gaussian_blur", "radius": r},
                      lambda i, r=r: i.filter(ImageFilter.GaussianBlur(radius=r))))
    for bits in (0, 1, 3, 4, 7, 8):
        cases.append(({"op": "posterize", "bits": bits}, lambda i, b=bits: F.posterize(i, b)))
    for t in (0, 1, 100.5, 128, 255, 256):
        cases.append(({"op": "solarize", "threshold": t}, lambda i, t=t: F.solarize(i, t)))
    return cases


def enhance_cases():
    cases = []
    for f in (0.0, 0.1, 0.5, 0.87, 1.0, 1.01, 1.5, 1.9):
        cases.append(({"op": "brightness", "factor": f}, lambda i, f=f: F.adjust_brightness(i, f)))
        cases.append(({"op": "contrast", "factor": f}, lambda i, f=f: F.adjust_contrast(i, f)))
        cases.append(({"op": "saturation", "factor": f}, lambda i, f=f: F.adjust_saturation(i, f)))
        cases.append(({"op": "sharpness", "factor": f}, lambda i, f=f: F.adjust_sharpness(i, f)))
    return cases


def hue_cases(factors=(-0.5, -0.31, -0.001, 0.0, 0.004, 0.2, 0.5)):
    return [({"op": "hue", "factor": h}, lambda i, h=h: F.adjust_hue(i, h)) for h in factors]


def geometry_cases():
    cases = []
    for interp in ("nearest", "bilinear"):
        for a in (0, 30, -47.3, 90, -90, 180, 270, 135.7, 359.99, 360, 725.5, 1e-9):
            fill = [10, 200, 30.7] if a in (30, 135.7) else None
            spec = {"op": "rotate", "angle": a, "interpolation": interp}
            if fill:
                spec["fill"] = fill
            cases.append((spec, lambda i, a=a, m=IM[interp], fl=fill: F.rotate(i, a, m, fill=fl)))
        for angle, tr, sc, sh, ctr in ((12, [5, -7], 1.2, [10, -4], None), (-33.3, [0, 0], 0.7, [0, 0], None),
                                       (0, [13, 0], 1.0, [0, 0], None), (0, [0, -21], 1.0, [0, 0], None),
                                       (0, [0, 0], 1.37, [0, 0], None), (0, [0, 0], 1.0, [16.7, 0], [0, 0]),
                                       (0, [0, 0], 1.0, [0, -12.5], [0, 0]), (45, [3, 4], 1.0, [5, 5], [20, 31]),
                                       (0, [90000, 0], 1.0, [0, 0], None)):
            spec = {"op": "affine", "angle": angle, "translate": tr, "scale": sc, "shear": sh,
                    "interpolation": interp}
            if ctr:
                spec["center"] = ctr
            cases.append((spec, lambda i, a=angle, t=tr, s=sc, h=sh, c=ctr, m=IM[interp]:
                          F.affine(i, a, t, s, h, m, center=c)))
    return cases


def group_of(spec):
    g = spec["op"]
    return g + "/" + spec["interpolation"] if "interpolation" in spec else g


def check_kernels(opcheck, tmp, images, cases, exact):
    for name, img in images:
        ppm = os.path.join(tmp, "in.ppm")
        img.save(ppm)
        for spec, fn in cases:
            got, err = run_opcheck(opcheck, ppm, os.path.join(tmp, "out.npy"), spec)
            label = json.dumps(spec, separators=(",", ":"))
            if got is None:
                report(False, label, f"img={name} opcheck failed: {err}")
                continue
            compare(label, group_of(spec), name, got, fn(img), exact(spec))


# ---------------------------------------------------------------- policies (replayed through torchvision)

def magnitude_ok(got, want):
    """Tables are float32 torch.linspace values; allow one float32 ulp for hosts whose torch build
    rounds differently from the AVX2 kernel ops/policy.c mirrors."""
    return abs(abs(got) - want) <= 1e-6 * max(1.0, abs(want))


def replay(img, steps, fill, interpolation="nearest"):
    for s in steps:
        if s["name"] is not None:
            img = _apply_op(img, s["name"], s["magnitude"], interpolation=IM[interpolation], fill=fill)
    return img


def check_policies(opcheck, tmp, images):
    fills = (None, [128, 64, 32])
    for name, img in images[:2]:
        ppm = os.path.join(tmp, "in.ppm")
        img.save(ppm)
        h, w = img.height, img.width
        jobs = []
        for seed in range(36):
            fill = fills[seed % 2]
            interp = "bilinear" if seed % 3 == 2 else None      # the ResNet-50 v2 recipe's TA-wide: bilinear
            mag, bins = [(9, 31), (30, 31), (0, 31), (5, 10)][seed % 4]
            jobs.append(({"op": "rand_augment", "seed": seed, "num_ops": 3, "magnitude": mag, "num_bins": bins,
                          "fill": fill, "interpolation": interp}, "rand"))
            jobs.append(({"op": "trivial_augment", "seed": seed, "num_bins": 31, "fill": fill,
                          "interpolation": interp}, "trivial"))
            pol = ["imagenet", "cifar10", "svhn"][seed % 3]
            jobs.append(({"op": "auto_augment", "seed": seed, "policy": pol, "fill": fill, "interpolation": interp},
                         "auto"))
        for spec, kind in jobs:
            label = json.dumps({k: v for k, v in spec.items() if v is not None}, separators=(",", ":"))
            got, out = run_opcheck(opcheck, ppm, os.path.join(tmp, "out.npy"), spec)
            if got is None:
                report(False, label, f"img={name} opcheck failed: {out}")
                continue
            rep = json.loads(out)
            steps = rep["steps"]
            bad = []
            if kind == "rand":
                meta = RandAugment()._augmentation_space(spec["num_bins"], (h, w))
                for s in steps:
                    mags, signed = meta[s["name"]]
                    want = float(mags[spec["magnitude"]].item()) if mags.ndim > 0 else 0.0
                    if not magnitude_ok(s["magnitude"], want) or (s["magnitude"] < 0 and not signed):
                        bad.append(f"{s['name']} magnitude {s['magnitude']!r} vs table {want!r}")
            elif kind == "trivial":
                meta = TrivialAugmentWide()._augmentation_space(spec["num_bins"])
                mags, signed = meta[steps[0]["name"]]
                table = [float(x) for x in mags.reshape(-1).tolist()]
                if not any(magnitude_ok(steps[0]["magnitude"], t) for t in table):
                    bad.append(f"{steps[0]['name']} magnitude {steps[0]['magnitude']!r} not in table")
            else:
                aa = AutoAugment(AutoAugmentPolicy(spec["policy"]))
                meta = aa._augmentation_space(10, (h, w))
                sub = aa.policies[rep["subpolicy"]]
                for s, (op_name, p, mid) in zip(steps, sub):
                    if s["name"] is None:
                        continue
                    want = float(meta[op_name][0][mid].item()) if mid is not None else 0.0
                    if s["name"] != op_name or not magnitude_ok(s["magnitude"], want):
                        bad.append(f"{s['name']}/{s['magnitude']!r} vs policy {op_name}/{want!r}")
            if bad:
                report(False, label, f"img={name} " + "; ".join(bad))
                continue
            desc = ",".join(f"{s['name']}:{s['magnitude']:.4g}" for s in steps if s["name"])
            compare(label + " [" + desc + "]", "policy/" + kind, name, got,
                    replay(img, steps, spec["fill"], spec["interpolation"] or "nearest"), exact=False)


def check_color_jitter(opcheck, tmp, images):
    fns = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]
    ranges = [{"brightness": [0.6, 1.4], "contrast": [0.6, 1.4], "saturation": [0.6, 1.4], "hue": [-0.1, 0.1]},
              {"brightness": [0.0, 2.0], "hue": [-0.5, 0.5]},
              {"contrast": [1, 1], "saturation": [0.2, 0.3]}]
    for name, img in images[:2]:
        ppm = os.path.join(tmp, "in.ppm")
        img.save(ppm)
        for seed in range(6):
            spec = dict(ranges[seed % 3], op="color_jitter", seed=seed)
            label = json.dumps(spec, separators=(",", ":"))
            got, out = run_opcheck(opcheck, ppm, os.path.join(tmp, "out.npy"), spec)
            if got is None:
                report(False, label, f"img={name} opcheck failed: {out}")
                continue
            rep = json.loads(out)
            want = img
            for k in rep["order"]:
                if rep["factors"][k] is not None:
                    want = fns[k](want, rep["factors"][k])
            compare(label, "policy/color_jitter", name, got, want, exact=False)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OPCHECK")
    opcheck = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    exact_all = lambda spec: True
    exact_colour = lambda spec: spec["op"] not in ("hue", "rotate", "affine")
    with tempfile.TemporaryDirectory(prefix="spw-check-ops-") as tmp:
        photos = photo_images(tmp)
        edges = edge_images()
        check_kernels(opcheck, tmp, photos + edges, point_cases(), exact_all)
        check_kernels(opcheck, tmp, photos + edges, enhance_cases() + hue_cases(), exact_colour)
        check_kernels(opcheck, tmp, photos + edges[1:4], geometry_cases(), exact_colour)
        cube = [("all-colours-4096x4096", all_colours_image())]
        check_kernels(opcheck, tmp, cube, hue_cases((-0.5, -0.2, 0.0, 0.37)), exact_colour)
        check_kernels(opcheck, tmp, cube, [c for c in enhance_cases() if c[0]["op"] == "saturation"
                                           and c[0]["factor"] in (0.5, 1.5)], exact_colour)
        check_policies(opcheck, tmp, photos)
        check_color_jitter(opcheck, tmp, photos)
    for group in sorted(worst):
        print(f"summary {group} worst_mean_abs={worst[group][0]:.4f} worst_max_abs={worst[group][1]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
