"""tests/equiv/check_distributions.py - the random ops draw from torchvision's distributions.
Two-sample tests between Spillway's draws (fusedcheck, the real parameter functions and policy code) and
torchvision 0.14's own sampler run here: RandomResizedCrop.get_params (area fraction, aspect ratio, offsets;
Kolmogorov-Smirnov at alpha = 0.001) on several image shapes, including ones that hit the fallback; and
RandAugment's op choice (chi-square homogeneity over the 14 ops) and magnitudes (the same value set, with
signs split evenly); and how often each random_<op> row runs its op (two-proportion z-test against
torchvision's RandomX on the same image, 10,000 draws each); and what the combinators run (random_apply:
whether, random_choice: which op, random_order: which order), against torchvision's RandomApply,
RandomChoice and RandomOrder over recording callables (chi-square homogeneity, 10,000 draws each); and
gaussian_blur's sigma against GaussianBlur.get_params (KS). Prints one line per check and "N passed,
M failed".
usage: check_distributions.py FUSEDCHECK"""
import collections
import json
import math
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as AA
from PIL import Image

FUSED, TMP = sys.argv[1], tempfile.mkdtemp(prefix="spw-dist-")
passed = failed = 0


def result(name, ok, detail):
    global passed, failed
    print("%s %-58s %s" % ("ok  " if ok else "FAIL", name, detail))
    if ok:
        passed += 1
    else:
        failed += 1


def spec_file(op):
    path = os.path.join(TMP, "spec.json")
    with open(path, "w") as f:
        json.dump({"source": {"format": "image_folder", "path": "/x", "seed": 123},
                   "ops": [{"op": "decode_jpeg"}, op], "batch": {"size": 1}}, f)
    return path


def ks(a, b):
    a, b = np.sort(a), np.sort(b)
    allv = np.concatenate([a, b])
    d = np.max(np.abs(np.searchsorted(a, allv, side="right") / len(a) -
                      np.searchsorted(b, allv, side="right") / len(b)))
    crit = 1.95 * math.sqrt((len(a) + len(b)) / (len(a) * len(b)))     # alpha = 0.001
    return d, crit


def check_rrc(W, H, scale, ratio, n=20000):
    spec = spec_file({"op": "random_resized_crop", "size": 224, "scale": scale, "ratio": ratio})
    out = subprocess.run([FUSED, "rrc", spec, str(W), str(H), str(n)], capture_output=True, text=True, check=True)
    ours = np.array([[int(v) for v in line.split()] for line in out.stdout.splitlines()], dtype=np.float64)
    torch.manual_seed(0)
    img = Image.new("RGB", (W, H))
    ref = []
    for _ in range(n):
        i, j, h, w = T.RandomResizedCrop.get_params(img, scale, ratio)
        ref.append([j, i, w, h])
    ref = np.array(ref, dtype=np.float64)
    for name, f in [("area", lambda a: a[:, 2] * a[:, 3] / (W * H)), ("aspect", lambda a: a[:, 2] / a[:, 3]),
                    ("left", lambda a: a[:, 0]), ("top", lambda a: a[:, 1])]:
        d, crit = ks(f(ours), f(ref))
        result("rrc %dx%d scale=%s ratio=%s %s" % (W, H, scale, ratio, name), d < crit,
               "KS D=%.4f crit=%.4f" % (d, crit))


def check_rand_augment(n=14000):
    spec = spec_file({"op": "rand_augment", "num_ops": 2, "magnitude": 9})
    out = subprocess.run([FUSED, "ra", spec, str(n)], capture_output=True, text=True, check=True)
    ours = [(line.split()[0], float(line.split()[1])) for line in out.stdout.splitlines()]
    ref = []
    orig = AA._apply_op

    def spy(img, op_name, magnitude, interpolation, fill):
        ref.append((op_name, float(magnitude)))
        return img
    AA._apply_op = spy
    try:
        torch.manual_seed(0)
        ra = T.RandAugment(num_ops=2, magnitude=9)
        img = Image.new("RGB", (32, 24))
        for _ in range(n):
            ra(img)
    finally:
        AA._apply_op = orig
    co, cr = collections.Counter(o for o, _ in ours), collections.Counter(o for o, _ in ref)
    ops = sorted(set(co) | set(cr))
    result("rand_augment op set equals torchvision's 14", len(ops) == 14 and set(co) == set(cr), str(ops))
    # chi-square test of homogeneity, 13 dof, 99.9% critical value 34.53
    chi = 0.0
    for o in ops:
        tot = co[o] + cr[o]
        for c, m in ((co[o], len(ours)), (cr[o], len(ref))):
            e = tot * m / (len(ours) + len(ref))
            chi += (c - e) ** 2 / e
    result("rand_augment op frequencies match (chi-square)", chi < 34.53, "chi2=%.1f" % chi)
    for o in ops:
        mo = sorted(set(round(abs(m), 4) for op, m in ours if op == o))
        mr = sorted(set(round(abs(m), 4) for op, m in ref if op == o))
        result("rand_augment %s |magnitude| values" % o, mo == mr, "%s vs %s" % (mo, mr))
        signed = [m for op, m in ours if op == o and m != 0]
        if signed and any(m < 0 for op, m in ref if op == o):
            neg = sum(1 for m in signed if m < 0) / len(signed)
            sd = 0.5 / math.sqrt(len(signed))
            result("rand_augment %s sign is a fair coin" % o, abs(neg - 0.5) < 4 * sd, "P(neg)=%.3f" % neg)


GATES = [  # (our op, torchvision's transform with the same p)
    ({"op": "random_grayscale"}, T.RandomGrayscale()),
    ({"op": "random_posterize", "bits": 4, "p": 0.3}, T.RandomPosterize(4, p=0.3)),
    ({"op": "random_solarize", "threshold": 128, "p": 0.7}, T.RandomSolarize(128, p=0.7)),
    ({"op": "random_equalize"}, T.RandomEqualize()),
    ({"op": "random_autocontrast", "p": 0.2}, T.RandomAutocontrast(p=0.2)),
    ({"op": "random_invert", "p": 0.9}, T.RandomInvert(p=0.9)),
    ({"op": "random_adjust_sharpness", "sharpness_factor": 2.0}, T.RandomAdjustSharpness(2.0)),
]


def check_gates(n=10000):
    k = [(i * 37 + (i // 3) * 11) % 176 for i in range(32 * 24 * 3)]
    data = np.array([40 + x * x // 176 for x in k], np.uint8)
    img = Image.fromarray(data.reshape(24, 32, 3), "RGB")      # the image fusedcheck gate uses
    torch.manual_seed(0)
    for op, tv in GATES:
        out = subprocess.run([FUSED, "gate", spec_file(op), str(n)], capture_output=True, text=True, check=True)
        k1 = sum(int(x) for x in out.stdout.split())
        k2 = sum(1 for _ in range(n) if not np.array_equal(np.asarray(tv(img)), data.reshape(24, 32, 3)))
        p1, p2, pool = k1 / n, k2 / n, (k1 + k2) / (2 * n)
        z = abs(p1 - p2) / math.sqrt(max(pool * (1 - pool) * 2 / n, 1e-12))
        result("%s ran its op" % op["op"], z < 3.29 and abs(p1 - tv.p) < 0.02,
               "P=%.4f torchvision %.4f (p %.2f) z=%.2f" % (p1, p2, tv.p, z))


def chi_square(ours, ref):
    """Chi-square homogeneity statistic of two samples of outcomes, and its degrees of freedom."""
    co, cr = collections.Counter(ours), collections.Counter(ref)
    chi = 0.0
    for o in set(co) | set(cr):
        tot = co[o] + cr[o]
        for c, m in ((co[o], len(ours)), (cr[o], len(ref))):
            e = tot * m / (len(ours) + len(ref))
            chi += (c - e) ** 2 / e
    return chi, len(set(co) | set(cr)) - 1


CHI_CRIT = {1: 10.83, 2: 13.82, 5: 20.52, 12: 32.91}     # alpha = 0.001


def check_combinators(n=10000):
    kids = [{"op": "invert"}, {"op": "equalize"}, {"op": "autocontrast"}]
    cases = [({"op": "random_apply", "ops": kids[:2], "p": 0.3}, lambda f: T.RandomApply(f[:2], p=0.3)),
             ({"op": "random_choice", "ops": kids}, lambda f: T.RandomChoice(f)),
             ({"op": "random_choice", "ops": kids, "p": [1, 2, 5]}, lambda f: T.RandomChoice(f, p=[1, 2, 5])),
             ({"op": "random_order", "ops": kids}, lambda f: T.RandomOrder(f))]
    for op, make in cases:
        out = subprocess.run([FUSED, "plan", spec_file(op), str(n)], capture_output=True, text=True, check=True)
        ours = out.stdout.splitlines()
        log = []

        def rec(k):
            def f(img):
                log.append(k)
                return img
            return f
        t = make([rec(0), rec(1), rec(2)])
        random.seed(0)
        torch.manual_seed(0)
        ref = []
        for _ in range(n):
            log.clear()
            t(None)
            ref.append(" ".join(str(k) for k in log) or "-")
        chi, dof = chi_square(ours, ref)
        name = "%s%s" % (op["op"], " p=%s" % op["p"] if "p" in op else "")
        result("%s: what it runs" % name, len(ours) == n and chi < CHI_CRIT[dof],
               "chi2=%.2f dof=%d (crit %.2f); %d outcomes" % (chi, dof, CHI_CRIT[dof], dof + 1))


def check_blur_sigma(n=10000):
    for lo, hi in ((0.1, 2.0), (0.5, 0.5), (1.0, 7.5)):
        spec = spec_file({"op": "gaussian_blur", "kernel_size": 23, "sigma": [lo, hi]})
        out = subprocess.run([FUSED, "sigma", spec, str(n)], capture_output=True, text=True, check=True)
        ours = np.array([float(x) for x in out.stdout.split()])
        torch.manual_seed(0)
        ref = np.array([T.GaussianBlur.get_params(lo, hi) for _ in range(n)])
        d, crit = ks(ours, ref)
        result("gaussian_blur sigma in [%g, %g]" % (lo, hi), len(ours) == n and d < crit and ours.min() >= lo and
               ours.max() <= hi, "KS D=%.4f crit=%.4f" % (d, crit))
    # pil_gaussian_blur's radius: DINO's random.uniform(radius_min, radius_max)
    spec = spec_file({"op": "pil_gaussian_blur", "radius": [0.1, 2.0]})
    out = subprocess.run([FUSED, "sigma", spec, str(n)], capture_output=True, text=True, check=True)
    ours = np.array([float(x) for x in out.stdout.split()])
    random.seed(0)
    ref = np.array([random.uniform(0.1, 2.0) for _ in range(n)])
    d, crit = ks(ours, ref)
    result("pil_gaussian_blur radius in [0.1, 2]", d < crit, "KS D=%.4f crit=%.4f" % (d, crit))


def check_perspective(n=10000, W=224, H=160):
    """random_perspective's p gate and corners against RandomPerspective: how often it runs (chi-square) and
    each of the 8 corner coordinates (KS)."""
    spec = spec_file({"op": "random_perspective", "distortion_scale": 0.5, "p": 0.7})
    out = subprocess.run([FUSED, "persp", spec, str(n), str(W), str(H)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    ours = [[int(v) for v in line.split()] for line in out if line != "-"]
    torch.manual_seed(0)
    t = T.RandomPerspective(distortion_scale=0.5, p=0.7)
    ran, ref = 0, []
    for _ in range(n):
        if torch.rand(1) < t.p:
            ran += 1
            _, end = T.RandomPerspective.get_params(W, H, 0.5)
            ref.append([v for pt in end for v in pt])
    chi, dof = chi_square(["run"] * len(ours) + ["skip"] * (n - len(ours)), ["run"] * ran + ["skip"] * (n - ran))
    result("random_perspective ran", chi < CHI_CRIT[dof], "ours %d, torchvision %d of %d" % (len(ours), ran, n))
    names = ["top-left x", "top-left y", "top-right x", "top-right y", "bottom-right x", "bottom-right y",
             "bottom-left x", "bottom-left y"]
    for k, name in enumerate(names):
        d, crit = ks(np.array([o[k] for o in ours], float), np.array([r[k] for r in ref], float))
        result("random_perspective %s" % name, d < crit, "KS D=%.4f crit=%.4f" % (d, crit))


def main():
    check_rrc(500, 375, [0.08, 1.0], [3 / 4, 4 / 3])
    check_rrc(301, 799, [0.08, 1.0], [3 / 4, 4 / 3])
    check_rrc(1000, 60, [0.5, 1.0], [3 / 4, 4 / 3])      # mostly the central fallback
    check_rrc(640, 480, [0.25, 0.5], [0.5, 2.0])
    check_rand_augment()
    check_gates()
    check_combinators()
    check_blur_sigma()
    check_perspective()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
