#!/usr/bin/env python3
"""scripts/eval/workers_rates.py - eval/workers.sh's trainer rates to ask for, from the measured runs
(run by scripts/eval/workers.sh with the arguments it passes).
"""
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    phase, rate, k, rep, v, need = line.rstrip("\n").split("\t")
    if phase == "capacity":
        t.setdefault(int(k), []).append(float(v))
m = [statistics.median(t[k]) for k in range(int(sys.argv[2]) + 1)]
print(round(0.8 * m[0], 1))
for k in range(1, len(m)):
    print(round((m[k - 1] + m[k]) / 2, 1))
