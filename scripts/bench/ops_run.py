#!/usr/bin/env python3
"""scripts/bench/ops_run.py - one bench/ops.sh run's report: checked, kept as .json, one results.tsv line
(run by scripts/bench/ops.sh with the arguments it passes).
"""
import json, sys
import spw_report
path, case, run, threads, n = sys.argv[1:6]
obj = spw_report.run_report(path)
if int(obj["elements"]) != int(n):
    sys.exit(f"{path}: {obj['elements']} elements, expected {n} (one epoch of the train set)")
if not float(obj["seconds"]) > 0:
    sys.exit(f"{path}: seconds is {obj['seconds']}")
keep = path.rsplit(".", 1)[0] + ".json"
with open(keep, "w") as f:
    json.dump(obj, f, indent=1)
print("\t".join(map(str, [case, "spillway", threads, run, obj["elements_per_s"], obj["elements"],
                          obj["seconds"], keep])))
