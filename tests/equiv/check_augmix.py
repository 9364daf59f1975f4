"""tests/equiv/check_augmix.py - the tensor-path ops against torchvision 0.14 on real photos: aug_mix against
AugMix, elastic_transform against ElasticTransform.
Bytes: the engine resizes a photo (odd sizes too), then runs aug_mix through the real element runner
(fusedcheck), which reports the draws it made; torchvision's own AugMix.forward then runs on the engine's
resized image with those draws fed to it (its _sample_dirichlet and torch.randint replaced by the reported
values), and the two images must be byte-equal. Configurations: the defaults, one op per chain at every
severity (each op alone at every bin), nearest with a fill, and all_ops false. Distributions: the draws over
10,000 samples against torchvision's sampler (Dirichlet weights by KS, depth, op, bin and sign by
chi-square). elastic_transform: the engine reports the displacement it drew (fusedcheck writes it beside
the image); F.elastic_transform with it must give the same bytes (bilinear and nearest, fills, odd sizes);
the displacement's values at a pixel and beside it against get_params' over 10,000 draws (KS: the noise,
its blur and its scale). Prints one line per check and "N passed, M failed".
usage: check_augmix.py FUSEDCHECK PHOTO_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import photos  # noqa: E402
from check_distributions import chi_square, ks, CHI_CRIT  # noqa: E402
from fused_run import fused_run  # noqa: E402

FUSED, TMP = sys.argv[1], tempfile.mkdtemp(prefix="spw-augmix-")
passed = failed = 0


def result(name, ok, detail):
    global passed, failed
    print("%s %-62s %s" % ("ok  " if ok else "FAIL", name, detail))
    passed, failed = passed + ok, failed + (not ok)


class Replayed(T.AugMix):
    """torchvision's AugMix with its random draws replaced by the engine's."""

    def __init__(self, draws, **kw):
        super().__init__(**kw)
        m, dirichlet, ints = draws
        self._weights = [torch.tensor([m], dtype=torch.float32), torch.tensor([dirichlet], dtype=torch.float32)]
        self._ints = list(ints)

    def _sample_dirichlet(self, params):
        return self._weights.pop(0)

    def forward(self, img):
        real = torch.randint
        torch.randint = lambda *a, **k: torch.tensor([self._ints.pop(0)])
        try:
            return super().forward(img)
        finally:
            torch.randint = real


def torch_kwargs(op):
    kw = {k: op[k] for k in ("severity", "mixture_width", "chain_depth", "alpha", "all_ops", "fill") if k in op}
    if "interpolation" in op:
        kw["interpolation"] = getattr(T.InterpolationMode, op["interpolation"].upper())
    return kw


def check_bytes(imgs):
    configs = [({"op": "aug_mix"}, 6),
               ({"op": "aug_mix", "severity": 10, "mixture_width": 1, "chain_depth": 1}, 40),
               ({"op": "aug_mix", "severity": 5, "interpolation": "nearest", "fill": [30, 60, 90]}, 6),
               ({"op": "aug_mix", "all_ops": False, "alpha": 0.5, "chain_depth": 3, "fill": 128}, 4)]
    sizes = [(224, 224), (181, 97), (255, 257), (64, 43)]
    for ci, (op, samples) in enumerate(configs):
        bad = total = 0
        for i, path in enumerate(imgs[:4]):
            h, w = sizes[i % len(sizes)]
            prefix = [{"op": "decode_jpeg"}, {"op": "resize", "size": [h, w]}]
            src, _ = fused_run(FUSED, TMP, prefix, path)
            for s in range(samples):
                ours, rep = fused_run(FUSED, TMP, prefix + [op], path, sample=1000 * ci + 10 * i + s)
                ref = Replayed(rep["augmix"], **torch_kwargs(op))(torch.from_numpy(src).permute(2, 0, 1).contiguous())
                ref = ref.permute(1, 2, 0).numpy()
                total += 1
                if ours.shape != ref.shape or (ours != ref).any():
                    bad += 1
                    if bad <= 3:
                        d = np.abs(ours.astype(int) - ref.astype(int)) if ours.shape == ref.shape else None
                        print("     %s %dx%d sample %d draws %s: %s" % (
                            os.path.basename(path), w, h, s, rep["augmix"],
                            "shape" if d is None else "%d values differ, max %d" % ((d > 0).sum(), d.max())))
        result("aug_mix %s" % json.dumps({k: v for k, v in op.items() if k != "op"}), bad == 0,
               "%d of %d images byte-equal" % (total - bad, total))


def check_draws(n=10000):
    """The engine's draws against AugMix's own sampler, statistic by statistic."""
    op = {"op": "aug_mix", "severity": 3, "mixture_width": 3, "chain_depth": -1, "alpha": 0.5}
    spec = os.path.join(TMP, "spec.json")
    with open(spec, "w") as f:
        json.dump({"source": {"format": "image_folder", "path": "/x", "seed": 77},
                   "ops": [{"op": "decode_jpeg"}, op], "batch": {"size": 1}}, f)
    out = subprocess.run([FUSED, "augmix", spec, str(n)], capture_output=True, text=True, check=True).stdout
    ours = [json.loads("[" + line + "]") for line in out.splitlines()]
    t = T.AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=0.5)
    meta = t._augmentation_space(10, (224, 224))
    names = list(meta.keys())
    torch.manual_seed(0)
    ref = []
    for _ in range(n):
        m = t._sample_dirichlet(torch.tensor([[0.5, 0.5]]))[0].tolist()
        d = t._sample_dirichlet(torch.tensor([[0.5] * 3]))[0].tolist()
        ints = []
        for _ in range(3):
            depth = int(torch.randint(low=1, high=4, size=(1,)).item())
            ints.append(depth)
            for _ in range(depth):
                k = int(torch.randint(len(names), (1,)).item())
                ints.append(k)
                mags, signed = meta[names[k]]
                if mags.ndim > 0:
                    ints.append(int(torch.randint(3, (1,)).item()))
                if signed:
                    ints.append(int(torch.randint(2, (1,)).item()))
        ref.append([m, d, ints])

    def stat(rows, what):
        """(depths, ops, bins, signs) pulled apart from the int streams."""
        out = {"depth": [], "op": [], "bin": [], "sign": []}
        for _, _, ints in rows:
            it = iter(ints)
            for _ in range(3):
                depth = next(it)
                out["depth"].append(depth)
                for _ in range(depth):
                    k = next(it)
                    out["op"].append(k)
                    mags, signed = meta[names[k]]
                    if mags.ndim > 0:
                        out["bin"].append(next(it))
                    if signed:
                        out["sign"].append(next(it))
        return out[what]

    for what in ("depth", "op", "bin", "sign"):
        chi, dof = chi_square(stat(ours, what), stat(ref, what))
        result("aug_mix %s" % what, chi < CHI_CRIT[dof], "chi-square %.1f, %d dof" % (chi, dof))
    d, crit = ks(np.array([o[0][0] for o in ours]), np.array([r[0][0] for r in ref]))
    result("aug_mix Beta weight of the image (m0)", d < crit, "KS D=%.4f crit=%.4f" % (d, crit))
    for i in range(3):
        d, crit = ks(np.array([o[1][i] for o in ours]), np.array([r[1][i] for r in ref]))
        result("aug_mix Dirichlet weight %d" % i, d < crit, "KS D=%.4f crit=%.4f" % (d, crit))


def check_elastic_bytes(imgs):
    configs = [{"op": "elastic_transform"},
               {"op": "elastic_transform", "alpha": [30.0, 80.0], "sigma": [3.0, 6.0], "interpolation": "nearest",
                "fill": 90},
               {"op": "elastic_transform", "alpha": 120.0, "sigma": 0}]
    sizes = [(224, 224), (181, 97), (64, 43)]
    for op in configs:
        bad = total = 0
        for i, path in enumerate(imgs[:3]):
            h, w = sizes[i]
            prefix = [{"op": "decode_jpeg"}, {"op": "resize", "size": [h, w]}]
            src, _ = fused_run(FUSED, TMP, prefix, path)
            for s in range(3):
                ours, _ = fused_run(FUSED, TMP, prefix + [op], path, sample=100 * i + s)
                disp = torch.from_numpy(np.load(os.path.join(TMP, "out.npy.disp.npy")))[None]
                interp = getattr(T.InterpolationMode, op.get("interpolation", "bilinear").upper())
                ref = F.elastic_transform(torch.from_numpy(src).permute(2, 0, 1).contiguous(), disp, interp,
                                          float(op.get("fill", 0))).permute(1, 2, 0).numpy()
                total += 1
                if ours.shape != ref.shape or (ours != ref).any():
                    bad += 1
                    if bad <= 3 and ours.shape == ref.shape:
                        d = np.abs(ours.astype(int) - ref.astype(int))
                        print("     %s %dx%d sample %d: %d values differ, max %d" % (
                            os.path.basename(path), w, h, s, (d > 0).sum(), d.max()))
        result("elastic_transform %s" % json.dumps({k: v for k, v in op.items() if k != "op"}), bad == 0,
               "%d of %d images byte-equal" % (total - bad, total))


def check_elastic_draws(n=10000, W=40, H=32):
    alpha, sigma = [40.0, 60.0], [2.0, 1.5]
    spec = os.path.join(TMP, "spec.json")
    with open(spec, "w") as f:
        json.dump({"source": {"format": "image_folder", "path": "/x", "seed": 78},
                   "ops": [{"op": "decode_jpeg"}, {"op": "elastic_transform", "alpha": alpha, "sigma": sigma}],
                   "batch": {"size": 1}}, f)
    out = subprocess.run([FUSED, "elastic", spec, str(n), str(W), str(H)], capture_output=True, text=True,
                         check=True).stdout
    ours = np.array([[float(v) for v in line.split()] for line in out.splitlines()])
    torch.manual_seed(0)
    ref = []
    for _ in range(n):
        d = T.ElasticTransform.get_params(alpha, sigma, [H, W])[0]
        cy, cx = H // 2, W // 2
        ref.append([float(d[cy, cx, 0]), float(d[cy, cx, 1]), float(d[cy, cx + 3, 0]), float(d[cy + 3, cx, 1])])
    ref = np.array(ref)
    names = ["dx at the centre", "dy at the centre", "dx 3 px right", "dy 3 px down"]
    for k, name in enumerate(names):
        d, crit = ks(ours[:, k], ref[:, k])
        result("elastic_transform %s" % name, len(ours) == n and d < crit, "KS D=%.4f crit=%.4f" % (d, crit))
    # neighbours move together as much: the correlation of dx at the centre and 3 px right
    c_ours, c_ref = np.corrcoef(ours[:, 0], ours[:, 2])[0, 1], np.corrcoef(ref[:, 0], ref[:, 2])[0, 1]
    result("elastic_transform smoothness (corr. of dx 3 px apart)", abs(c_ours - c_ref) < 0.05,
           "%.3f vs torchvision %.3f" % (c_ours, c_ref))


def main():
    imgs = photos.make(sys.argv[2])
    check_bytes(imgs)
    check_draws()
    check_elastic_bytes(imgs)
    check_elastic_draws()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
