"""tests/equiv/photos.py - makes the equivalence tests' photo set: real photographs shipped by Debian
(plasma-workspace-wallpapers, mate-backgrounds) cropped and resized to odd sizes, saved as JPEG in the
variants a dataset holds (4:2:0, 4:4:4, greyscale, progressive). Deterministic for a given seed."""
import glob
import os
import random
import sys

from PIL import Image

SOURCES = ["/usr/share/wallpapers/*/contents/images/*.jpg", "/usr/share/backgrounds/mate/nature/*.jpg"]


def source_photos():
    paths = []
    for pat in SOURCES:
        paths += sorted(glob.glob(pat))
    if not paths:
        sys.exit("photos.py: no Debian wallpapers found; run scripts/install-deps.sh")
    return paths


def make(out_dir, count=24, seed=11):
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(seed)
    srcs = source_photos()
    made = []
    for i in range(count):
        src = srcs[(i * 7) % len(srcs)]
        name = os.path.join(out_dir, "photo%02d.jpg" % i)
        made.append(name)
        if os.path.exists(name):
            continue
        im = Image.open(src).convert("RGB")
        W, H = im.size
        cw, ch = rng.randint(W // 3, W), rng.randint(H // 3, H)
        x, y = rng.randint(0, W - cw), rng.randint(0, H - ch)
        long_side = rng.randint(301, 901) | 1                  # odd sizes
        scale = long_side / max(cw, ch)
        size = (max(33, int(cw * scale) | 1), max(33, int(ch * scale) | 1))
        im = im.crop((x, y, x + cw, y + ch)).resize(size, Image.BILINEAR)
        kind = i % 8
        if kind == 5:
            im.convert("L").save(name, quality=90)
        elif kind == 6:
            im.save(name, quality=92, progressive=True)
        elif kind == 7:
            im.save(name, quality=95, subsampling=0)           # 4:4:4
        else:
            im.save(name, quality=rng.randint(85, 95), subsampling=2)
    return made


if __name__ == "__main__":
    for p in make(sys.argv[1]):
        print(p)
