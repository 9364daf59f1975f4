#!/usr/bin/env python3
"""scripts/bench/compress_report.py - bench/compress.sh's analysis: medians per link and codec, the table, the targets
(run by scripts/bench/compress.sh with the arguments it passes).
"""
import json, statistics, sys
import bench_targets
rows = [l.rstrip("\n").split("\t", 2) for l in open(sys.argv[1]) if l.strip()]
by = {}
for kind, run, line in rows:
    by.setdefault(kind, []).append(json.loads(line))
med = {k: statistics.median(d["elements_per_s"] for d in v) for k, v in by.items()}
per = {k: statistics.median(d["bytes_received"] / max(d["elements"], 1) for d in v) for k, v in by.items()}
compressed = sum(1 for d in by["planned"] if d["compress_level"] > 0)
gain, ratio = med["zstd"] / med["raw"], per["raw"] / per["zstd"]
lines = ["| plan (worker behind %s, client receiving) | elements/s (median) | bytes/element | |" % sys.argv[3],
         "|---|---:|---:|---|",
         "| default (planned; compressed in %d of %d runs) | %.0f | %.0f | %.2fx raw |" % (
             compressed, len(by["planned"]), med["planned"], per["planned"], med["planned"] / med["raw"]),
         "| forced raw (--compress off) | %.0f | %.0f | |" % (med["raw"], per["raw"]),
         "| forced zstd (--compress zstd) | %.0f | %.0f | %.2fx raw |" % (med["zstd"], per["zstd"], gain),
         "",
         "zstd's gain over raw %.2fx for a %.2fx smaller payload: %s (target: within 15%%)." % (
             gain, ratio, "met" if abs(gain / ratio - 1) <= 0.15 else "NOT met")]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
bench_targets.record("compress", [
    ("zstd on a %s link: gain over raw vs the ratio the bytes shrank by" % sys.argv[3],
     "raw, --compress off (%.0f elements/s)" % med["raw"], "%.2fx gain for a %.2fx ratio" % (gain, ratio),
     "within 15%", abs(gain / ratio - 1) <= 0.15),
    ("the planner's choice on that link", "forced zstd", "compressed in %d of %d runs, %.2fx raw" % (
        compressed, len(by["planned"]), med["planned"] / med["raw"]), "compresses where it wins",
     compressed == len(by["planned"]))])
