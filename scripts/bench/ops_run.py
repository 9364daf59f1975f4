#!/usr/bin/env python3
"""scripts/bench/ops_run.py - one bench/ops.sh run's report: checked, kept as .json, one results.tsv line
(run by scripts/bench/ops.sh with the arguments it passes).
"""
import sys
import spw_report
path, case, run, threads, n = sys.argv[1:6]
obj, keep = spw_report.kept_run(path, n)
print("\t".join(map(str, [case, "spillway", threads, run, obj["elements_per_s"], obj["elements"],
                          obj["seconds"], keep])))
