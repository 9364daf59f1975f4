#!/usr/bin/env python3
"""scripts/bench/audio_run.py - one bench/audio.sh run's report: checked, kept as .json, one results.tsv line
(run by scripts/bench/audio.sh with the arguments it passes).
"""
import json, sys
import spw_report
path, run, n = sys.argv[1:4]
obj = spw_report.run_report(path)
if int(obj["elements"]) != int(n) or int(obj.get("skipped", 0)):
    sys.exit(f"{path}: {obj['elements']} clips ({obj.get('skipped')} skipped), expected {n} (one epoch)")
if not float(obj["seconds"]) > 0:
    sys.exit(f"{path}: seconds is {obj['seconds']}")
keep = path.rsplit(".", 1)[0] + ".json"
with open(keep, "w") as f:
    json.dump(obj, f, indent=1)
print("\t".join(map(str, ["spillway", run, obj["elements_per_s"], obj["elements"], obj["seconds"], keep])))
