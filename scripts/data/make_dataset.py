#!/usr/bin/python3
"""scripts/data/make_dataset.py - deterministic ImageNet-like JPEG dataset cut from Debian's wallpaper photos.

Every image is a seeded random crop of one of the photographs shipped by plasma-workspace-wallpapers and
mate-backgrounds, resized to an ImageNet-like size and saved by Pillow as a baseline 4:2:0 JPEG. All random
parameters are drawn up front from random.Random(seed) in one process, so the bytes do not depend on how the
work is split between the worker processes. Called by scripts/data/make-dataset.sh; see docs/benchmarks.md.
"""
import argparse
import fcntl
import glob
import hashlib
import io
import json
import multiprocessing
import os
import random
import shutil
import sys
import tarfile
import time

import PIL
from PIL import Image

# Bump when the generation method changes: a different version regenerates existing datasets.
GENERATOR_VERSION = 1

# The photographic wallpapers (renders, paintings and abstract art left out: Autumn, Flow, Honeywave,
# PastelHills, SafeLanding, Shell, Volna). Plasma ships each photo at many resolutions; the largest is used.
PLASMA_PHOTOS = ["BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf",
                 "Grey", "Kite", "OneStandsOut", "Path", "summer_1am"]
MATE_PHOTOS = ["Aqua", "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "LadyBird", "RainDrops",
               "Storm", "TwoWings", "Wood", "YellowFlower"]

STAMP = "stamp.json"
CHUNK = 48  # images per worker job; each job decodes its source photo once


def find_sources():
    """Return the sorted list of source photo paths that are installed."""
    out = []
    for name in PLASMA_PHOTOS:
        files = glob.glob(f"/usr/share/wallpapers/{name}/contents/images/*.jpg")
        if files:
            # File names are WxH.jpg; pick the largest area.
            def area(f):
                w, _, h = os.path.basename(f)[:-4].partition("x")
                return int(w) * int(h) if w.isdigit() and h.isdigit() else 0
            out.append(max(sorted(files), key=area))
    for name in MATE_PHOTOS:
        f = f"/usr/share/backgrounds/mate/nature/{name}.jpg"
        if os.path.exists(f):
            out.append(f)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def draw_size(rng):
    """An ImageNet-like output size (w, h): sides in 300..800, mean about 490x420, mostly landscape."""
    r = rng.random()
    if r < 0.20:
        w, h = 500, 375          # the two most common ImageNet sizes
    elif r < 0.30:
        w, h = 500, 333
    else:
        long_side = int(round(rng.triangular(300, 800, 440)))
        short_side = int(round(long_side / rng.uniform(1.0, 1.55)))
        w, h = long_side, max(300, min(short_side, long_side))
    if rng.random() < 0.15:      # portrait
        w, h = h, w
    return w, h


def draw_image(rng, src_sizes, class_sources):
    """Draw every random parameter of one image, in a fixed order."""
    ow, oh = draw_size(rng)
    src = rng.choice(class_sources)
    sw, sh = src_sizes[src]
    aspect = ow / oh
    hi = min(sw, sh * aspect)            # widest crop with the output's aspect that fits
    cw = max(float(ow), rng.uniform(0.3, 1.0) * hi)  # never upscale
    cw = min(cw, hi)
    ch = cw / aspect
    x0 = rng.uniform(0, sw - cw)
    y0 = rng.uniform(0, sh - ch)
    quality = rng.randint(85, 95)
    gray = rng.random() < 0.02
    return {"src": src, "box": (x0, y0, x0 + cw, y0 + ch), "size": (ow, oh), "quality": quality, "gray": gray}


def render(job):
    """Worker: cut, resize and encode every image of one job (all from one source photo)."""
    src, root, tasks = job
    with Image.open(src) as im:
        photo = im.convert("RGB")
    results = []
    for t in tasks:
        img = photo.resize(tuple(t["size"]), Image.Resampling.BICUBIC, box=tuple(t["box"]), reducing_gap=3.0)
        if t["gray"]:
            img = img.convert("L")
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=t["quality"], subsampling=2, optimize=False, progressive=False)
        data = buf.getvalue()
        path = os.path.join(root, t["rel"])
        with open(path, "wb") as f:
            f.write(data)
        results.append((t["rel"], img.size[0], img.size[1], len(data), t["gray"]))
    return results


def plan(params, sources, src_sizes):
    """Draw the parameters of every train and val image."""
    classes = [f"class_{k:02d}" for k in range(params["classes"])]
    # Source photo j belongs to class j % classes; each class draws its images from its own photos.
    by_class = [[s for j, s in enumerate(sources) if j % len(classes) == k] for k in range(len(classes))]
    train, val = [], []
    rng = random.Random(params["seed"])
    for i in range(params["n"]):
        k = i % len(classes)            # balanced classes, like ImageNet's ~1300 per class
        t = draw_image(rng, src_sizes, by_class[k])
        t.update(cls=k, key=f"{classes[k]}_{i:05d}", rel=f"train/{classes[k]}/{classes[k]}_{i:05d}.JPEG")
        train.append(t)
    rng = random.Random(params["seed"] + 1)
    for i in range(params["val_n"]):
        k = i % len(classes)
        t = draw_image(rng, src_sizes, by_class[k])
        t.update(cls=k, rel=f"val/{classes[k]}/val_{i:05d}.JPEG")
        val.append(t)
    return classes, train, val


def write_shards(root, train, nshards):
    """WebDataset shards: KEY.jpg + KEY.cls (class index as ASCII), contiguous slices of the train set."""
    os.makedirs(os.path.join(root, "shards"))
    n = len(train)
    for s in range(nshards):
        part = train[s * n // nshards:(s + 1) * n // nshards]
        path = os.path.join(root, "shards", f"shard-{s:04d}.tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for t in part:
                with open(os.path.join(root, t["rel"]), "rb") as f:
                    jpg = f.read()
                for name, data in ((t["key"] + ".jpg", jpg), (t["key"] + ".cls", str(t["cls"]).encode())):
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime, info.mode = len(data), 946684800, 0o644  # fixed: same bytes every run
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(data))


def summarize(results):
    n = len(results)
    return {
        "images": n,
        "mean_w": round(sum(r[1] for r in results) / n, 1),
        "mean_h": round(sum(r[2] for r in results) / n, 1),
        "mean_bytes": round(sum(r[3] for r in results) / n),
        "min_side": min(min(r[1], r[2]) for r in results),
        "max_side": max(max(r[1], r[2]) for r in results),
        "odd_width": sum(r[1] % 2 for r in results),
        "gray": sum(1 for r in results if r[4]),
    }


def count_jpegs(root, sub):
    return sum(len([f for f in fs if f.endswith(".JPEG")]) for _, _, fs in os.walk(os.path.join(root, sub)))


def summary_line(out, stamp, note):
    s, p = stamp["train"], stamp["params"]
    return (f"make-dataset: {out}: {s['images']} train + {p['val_n']} val JPEGs, {p['classes']} classes, "
            f"{p['shards']} shards; train mean {s['mean_w']:.0f}x{s['mean_h']:.0f} px, "
            f"{s['mean_bytes'] / 1000:.1f} kB, {s['gray']} gray, {s['odd_width']} odd widths ({note})")


def generate(out, params, sources, src_sizes, procs):
    classes, train, val = plan(params, sources, src_sizes)
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for split in ("train", "val"):
        for c in classes:
            os.makedirs(os.path.join(tmp, split, c))
    jobs = []
    for src in sources:  # group by source photo so each job decodes its photo once
        tasks = [t for t in train + val if t["src"] == src]
        for j in range(0, len(tasks), CHUNK):
            jobs.append((src, tmp, tasks[j:j + CHUNK]))
    jobs.sort(key=lambda j: -len(j[2]))  # longest first, for balance
    done = {}
    with multiprocessing.Pool(procs) as pool:
        for res in pool.imap_unordered(render, jobs):
            for r in res:
                done[r[0]] = r
    write_shards(tmp, train, params["shards"])
    stamp = {"params": params, "classes": classes,
             "train": summarize([done[t["rel"]] for t in train]),
             "val": summarize([done[t["rel"]] for t in val])}
    with open(os.path.join(tmp, STAMP), "w") as f:
        json.dump(stamp, f, indent=1)
        f.write("\n")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(tmp, out)
    return stamp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=2000, help="train images")
    ap.add_argument("--val-n", type=int, default=200, help="val images")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--procs", type=int, default=2)
    a = ap.parse_args()
    if a.classes < 1 or a.n < max(a.classes, a.shards) or a.val_n < a.classes or a.shards < 1:
        sys.exit(f"make-dataset: need n >= classes, n >= shards and val-n >= classes "
                 f"(n={a.n} val-n={a.val_n} classes={a.classes} shards={a.shards})")
    if a.n < 1000:
        print(f"make-dataset: note: n={a.n} is below the 1000 images the benchmarks are specified for",
              file=sys.stderr)

    sources = find_sources()
    if len(sources) < a.classes:
        sys.exit(f"make-dataset: found {len(sources)} source photos, need at least {a.classes}; "
                 "install plasma-workspace-wallpapers and mate-backgrounds (scripts/install-deps.sh)")
    with open(os.path.abspath(__file__), "rb") as f:
        gen_hash = hashlib.sha256(f.read()).hexdigest()
    params = {"version": GENERATOR_VERSION, "generator_sha256": gen_hash, "pillow": PIL.__version__,
              "seed": a.seed, "n": a.n, "val_n": a.val_n, "classes": a.classes, "shards": a.shards,
              "sources": [[s, sha256_file(s)] for s in sources]}

    out = a.out.rstrip("/") or "/"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # One generator at a time per OUT (make bench and make demo may run side by side).
    with open(os.path.abspath(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp_path = os.path.join(out, STAMP)
        if os.path.exists(stamp_path):
            with open(stamp_path) as f:
                try:
                    old = json.load(f)
                except ValueError:
                    old = {}
            if (old.get("params") == params and count_jpegs(out, "train") == a.n
                    and count_jpegs(out, "val") == a.val_n):
                print(summary_line(out, old, "up to date"))
                return
        elif os.path.isdir(out) and os.listdir(out):
            sys.exit(f"make-dataset: {out} exists, is not empty and has no {STAMP}: "
                     "refusing to replace it; remove it or pick another OUT_DIR")
        t0 = time.monotonic()
        src_sizes = {}
        for s in sources:
            with Image.open(s) as im:
                src_sizes[s] = im.size
        stamp = generate(out, params, sources, src_sizes, max(1, a.procs))
        print(summary_line(out, stamp, f"generated in {time.monotonic() - t0:.1f} s"))


if __name__ == "__main__":
    main()
