"""tests/equiv/check_mix.py - batch.mix (MixUp / CutMix) against torchvision's classification references
(references/classification/transforms.py: RandomMixup and RandomCutmix under a RandomChoice, as train.py
builds them; re-typed here from their algorithm, since Debian's torchvision does not ship the references).
Proves: (1) at the engine's own draws, every mixed batch and its soft labels are byte-equal to the reference's
tensor ops applied to the same unmixed batch (spillctl run --local with and without batch.mix, dumped);
(2) the draws follow the reference's distributions over 10,000 batches: which transform (chi-square), the p
gate, Beta(alpha, alpha) lambdas and CutMix's box and final lambda (Kolmogorov-Smirnov, alpha = 0.001).
Prints one line per check and "N passed, M failed".
usage: check_mix.py SPILLCTL FUSEDCHECK DATASET_DIR"""
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

SPILLCTL, FUSED, DATA = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = tempfile.mkdtemp(prefix="spw-mix-")
passed = failed = 0


def result(name, ok, detail):
    global passed, failed
    print("%s %-62s %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)
    passed, failed = passed + bool(ok), failed + (not ok)


def ks(a, b):
    a, b = np.sort(a), np.sort(b)
    allv = np.concatenate([a, b])
    d = np.max(np.abs(np.searchsorted(a, allv, side="right") / len(a) -
                      np.searchsorted(b, allv, side="right") / len(b)))
    return d, 1.95 * math.sqrt((len(a) + len(b)) / (len(a) * len(b)))


def spec(path, mix, size=24, batch=16):
    s = {"source": {"format": "image_folder", "path": DATA, "shuffle": True, "seed": 11, "epochs": 1},
         "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [size, size + 8]},
                 {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
         "batch": {"size": batch}}
    if mix:
        s["batch"]["mix"] = mix
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def reference(batch, target, num_classes, kind, lam, box):
    """RandomMixup / RandomCutmix's forward after their draws (kind 0: the p gate left the batch)."""
    batch = batch.clone()
    target = torch.nn.functional.one_hot(target, num_classes=num_classes).to(dtype=batch.dtype)
    if kind == 0:
        return batch, target
    batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
    if kind == 1:
        batch_rolled.mul_(1.0 - lam)
        batch.mul_(lam).add_(batch_rolled)
    else:
        x1, y1, x2, y2 = box
        batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
    target_rolled.mul_(1.0 - lam)
    target.mul_(lam).add_(target_rolled)
    return batch, target


def check_batches():
    mix = {"num_classes": 12, "mixup_alpha": 0.2, "cutmix_alpha": 1.0, "p": 0.9}
    plain, mixed = os.path.join(TMP, "plain"), os.path.join(TMP, "mixed")
    for d, m in ((plain, None), (mixed, mix)):
        subprocess.run([SPILLCTL, "run", "--local", "--pipeline", spec(d + ".json", m), "--threads", "2",
                        "--dump", d, "--quiet"], check=True)
    n = len([f for f in os.listdir(plain) if f.endswith("_t0.npy")])
    out = subprocess.run([FUSED, "mix", os.path.join(TMP, "mixed.json"), str(n), "32", "24"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    kinds = collections.Counter()
    for b in range(n):
        k, lam, x1, y1, x2, y2 = out[b].split()
        kind, lam, box = int(k), float(lam), (int(x1), int(y1), int(x2), int(y2))
        kinds[kind] += 1
        x, y = torch.from_numpy(np.load("%s/b%06d_t0.npy" % (plain, b))), \
            torch.from_numpy(np.load("%s/b%06d_t1.npy" % (plain, b)))
        rx, ry = reference(x, y, 12, kind, lam, box)
        ox, oy = np.load("%s/b%06d_t0.npy" % (mixed, b)), np.load("%s/b%06d_t1.npy" % (mixed, b))
        same = ox.dtype == np.float32 and oy.dtype == np.float32 and oy.shape == (len(y), 12) and \
            np.array_equal(ox.view(np.uint32), rx.numpy().view(np.uint32)) and \
            np.array_equal(oy.view(np.uint32), ry.numpy().view(np.uint32))
        result("batch %d (%s, lambda %.4f): data and labels byte-equal to the reference" % (
            b, ["unmixed", "mixup", "cutmix"][kind], lam), same, "n=%d" % len(y))
    result("the run's batches took every path (none, mixup, cutmix)", len(kinds) == 3, str(dict(kinds)))


def reference_draw(mixup_alpha, cutmix_alpha, p, W, H):
    """One batch's draws as the references make them: (kind, mixup/cutmix beta lambda, box, final lambda)."""
    ts = [t for t, a in ((1, mixup_alpha), (2, cutmix_alpha)) if a > 0]
    t = random.choices(ts)[0]
    if torch.rand(1).item() >= p:
        return 0, None, None, 1.0
    alpha = mixup_alpha if t == 1 else cutmix_alpha
    lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
    if t == 1:
        return 1, lam, None, lam
    r_x, r_y = torch.randint(W, (1,)), torch.randint(H, (1,))
    r = 0.5 * math.sqrt(1.0 - lam)
    r_w_half, r_h_half = int(r * W), int(r * H)
    x1, y1 = int(torch.clamp(r_x - r_w_half, min=0)), int(torch.clamp(r_y - r_h_half, min=0))
    x2, y2 = int(torch.clamp(r_x + r_w_half, max=W)), int(torch.clamp(r_y + r_h_half, max=H))
    return 2, lam, (x1, y1, x2, y2), float(1.0 - (x2 - x1) * (y2 - y1) / (W * H))


def check_draws(n=10000, W=224, H=160):
    for m in ({"num_classes": 5, "mixup_alpha": 0.2, "cutmix_alpha": 1.0},
              {"num_classes": 5, "mixup_alpha": 0.8, "cutmix_alpha": 0, "p": 0.6},
              {"num_classes": 5, "mixup_alpha": 0, "cutmix_alpha": 1.0, "p": 0.5}):
        out = subprocess.run([FUSED, "mix", spec(os.path.join(TMP, "d.json"), m), str(n), str(W), str(H)],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        ours = [[float(v) for v in line.split()] for line in out]
        random.seed(0)
        torch.manual_seed(0)
        ref = [reference_draw(m["mixup_alpha"], m["cutmix_alpha"], m.get("p", 1.0), W, H) for _ in range(n)]
        name = "mix %s" % json.dumps({k: v for k, v in m.items() if k != "num_classes"})
        co, cr = collections.Counter(int(o[0]) for o in ours), collections.Counter(r[0] for r in ref)
        chi = sum((co[k] - (co[k] + cr[k]) / 2) ** 2 / ((co[k] + cr[k]) / 2) * 2 for k in set(co) | set(cr))
        crit = {0: 0.0, 1: 10.83, 2: 13.82}[len(set(co) | set(cr)) - 1]
        result(name + ": which transform", chi <= crit, "ours %s, reference %s, chi2 %.2f" % (
            dict(co), dict(cr), chi))
        mo = np.array([o[1] for o in ours if o[0] == 1])
        mr = np.array([r[1] for r in ref if r[0] == 1])
        if len(mr):
            d, c = ks(mo, mr)
            result(name + ": MixUp's lambda", d < c, "KS D=%.4f crit=%.4f (%d, %d)" % (d, c, len(mo), len(mr)))
        cut_o = [o for o in ours if o[0] == 2]
        cut_r = [r for r in ref if r[0] == 2]
        if cut_r:
            for what, fo, fr in (("box left", lambda o: o[2], lambda r: r[2][0]),
                                 ("box top", lambda o: o[3], lambda r: r[2][1]),
                                 ("box width", lambda o: o[4] - o[2], lambda r: r[2][2] - r[2][0]),
                                 ("final lambda", lambda o: o[1], lambda r: r[3])):
                d, c = ks(np.array([fo(o) for o in cut_o]), np.array([fr(r) for r in cut_r]))
                result(name + ": CutMix's " + what, d < c, "KS D=%.4f crit=%.4f" % (d, c))


check_batches()
check_draws()
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
