#!/usr/bin/env python3
"""scripts/bench/python_heap_report.py - bench/python-heap.sh's analysis: medians per set-up and the ratios
(run by scripts/bench/python-heap.sh with the arguments it passes).
"""
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, us, faults = line.split()
    runs.setdefault(name, []).append((float(us), float(faults)))
med = {k: (statistics.median(u for u, _ in v), statistics.median(f for _, f in v)) for k, v in runs.items()}
print("Python trainer, 150 KB elements through the service, trainer at %s core; medians of %d rounds"
      % (sys.argv[2], len(runs["library"])))
for k in ("library", "tunables", "glibc"):
    print("  %-9s %7.0f us CPU per element  %6.2f minor faults per element" % (k, med[k][0], med[k][1]))
print("library/tunables CPU per element: %.2f   glibc/tunables: %.2f"
      % (med["library"][0] / med["tunables"][0], med["glibc"][0] / med["tunables"][0]))
