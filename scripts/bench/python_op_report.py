#!/usr/bin/env python3
"""scripts/bench/python_op_report.py - bench/python-op.sh's analysis: per-element overhead and scaling medians, the table, the targets
(run by scripts/bench/python-op.sh with the arguments it passes).
"""
import statistics, sys
import bench_targets
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[3])
def med(case, threads, col, photos=n):
    return statistics.median(float(r[col]) for r in rows if r[0] == case and r[1] == threads and int(r[4]) == photos)
def ident_ns(r, photos):   # one round's identity op: its time in all over that many elements
    return [float(x[5]) for x in rows if x[0] == "identity" and int(x[4]) == photos and x[6] == r][0]
def steady(r):            # (its time over 3 N - over N) / 2 N, in ns
    return (ident_ns(r, 3 * n) - ident_ns(r, n)) / (2 * n)
rounds = sorted({r[6] for r in rows})
ident_us = statistics.median(steady(r) for r in rounds) / 1000
start_ms = statistics.median((ident_ns(r, n) - steady(r) * n) / 1e6 for r in rounds)
heavy_us = med("heavy", "1", 3) / 1000
scale = med("heavy", "2", 2) / med("heavy", "1", 2)
lines = ["| Python op, %s photos at 224 x 224 | per element (median) |" % sys.argv[3], "|---|---:|",
         "| pipeline without it, 1 thread | %.0f elements/s |" % med("base", "1", 2),
         "| identity function: the op's time, steady state | %.1f us |" % ident_us,
         "| identity function: the helper's start, once per thread | %.0f ms |" % start_ms,
         "| identity function: the op's time, all in (start spread over %d) | %.1f us |" % (
             n, med("identity", "1", 3) / 1000),
         "| numpy 5-tap blur both ways: the op's time | %.1f us |" % heavy_us,
         "| numpy-heavy pipeline, 2 threads / 1 thread | %.2fx |" % scale, "",
         "identity %.1f us (target <= 20 us): %s; scaling %.2fx (target >= 1.8x): %s" % (
             ident_us, "met" if ident_us <= 20 else "NOT met", scale, "met" if scale >= 1.8 else "NOT met")]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
bench_targets.record("python-op", [
    ("Python op overhead per element (identity, 224x224x3)", "none", "%.1f us" % ident_us, "<= 20 us",
     ident_us <= 20),
    ("Python op scaling, numpy-heavy, 2 threads / 1", "1 thread", "%.2fx" % scale, ">= 1.8x", scale >= 1.8)])
