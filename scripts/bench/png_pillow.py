#!/usr/bin/env python3
"""scripts/bench/png_pillow.py - the Pillow side of bench/png.sh: open, load and convert every PNG, as JSON images/s
(run by scripts/bench/png.sh with the arguments it passes).
"""
import os, sys, time
from PIL import Image
root = sys.argv[1]
files = sorted(os.path.join(root, c, f) for c in os.listdir(root) for f in os.listdir(os.path.join(root, c)))
t0 = time.perf_counter()
for p in files:
    with open(p, "rb") as f:
        im = Image.open(f)
        im.load()
        im.convert("RGB")
print(len(files) / (time.perf_counter() - t0))
