#!/usr/bin/env python3
"""scripts/bench/audio_run.py - one bench/audio.sh run's report: checked, kept as .json, one results.tsv line
(run by scripts/bench/audio.sh with the arguments it passes).
"""
import sys
import spw_report
path, run, n = sys.argv[1:4]
obj, keep = spw_report.kept_run(path, n, no_skips=True)
print("\t".join(map(str, ["spillway", run, obj["elements_per_s"], obj["elements"], obj["seconds"], keep])))
