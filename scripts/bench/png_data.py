#!/usr/bin/env python3
"""scripts/bench/png_data.py - bench/png.sh's data: the first N benchmark photos re-encoded as PNG by Pillow
(run by scripts/bench/png.sh with the arguments it passes).
"""
import os, sys
from PIL import Image
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(os.path.join(c, f) for c in os.listdir(src) for f in os.listdir(os.path.join(src, c)))[:n]
for rel in files:
    os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
    Image.open(os.path.join(src, rel)).convert("RGB").save(os.path.join(dst, os.path.splitext(rel)[0] + ".png"))
