#!/usr/bin/env python3
"""scripts/bench/png_report.py - bench/png.sh's analysis: Pillow's and Spillway's medians, the table, the target
(run by scripts/bench/png.sh with the arguments it passes).
"""
import statistics, sys
import bench_targets
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
m = {k: statistics.median(float(v) for s, v in rows if s == k) for k in ("pillow", "spillway")}
r = m["spillway"] / m["pillow"]
lines = ["| PNG decode, one core (%s photos as PNG) | images/s (median) |" % sys.argv[3], "|---|---:|",
         "| Pillow open + load + convert(\"RGB\") | %.1f |" % m["pillow"],
         "| Spillway decode_image (libpng) | %.1f |" % m["spillway"], "",
         "ratio %.2fx (target >= 1.0): %s" % (r, "met" if r >= 1.0 else "NOT met")]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
bench_targets.record("png", [("PNG decode per core", "Pillow (%.1f img/s)" % m["pillow"],
                              "%.1f img/s, %.2fx" % (m["spillway"], r), ">= 1.0x", r >= 1.0)])
