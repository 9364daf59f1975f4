#!/usr/bin/python3
"""scripts/bench/recipes_report.py - recipes.sh's table: per recipe the medians of both sides' samples/s on one
core and their ratio against the target (3x), printed, written as markdown and recorded as bench targets.
usage: recipes_report.py RESULTS.tsv OUT.md N RUNS CPU"""
import collections
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bench_targets  # noqa: E402

TARGET = 3.0


def main():
    results, out, n, runs, cpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    by = collections.OrderedDict()
    for line in open(results):
        name, _, tv, sp = line.rstrip("\n").split("\t")
        by.setdefault(name, []).append((float(tv), float(sp)))
    lines = ["| recipe | peer | peer samples/s | Spillway samples/s | ratio (target >= %gx) |" % TARGET,
             "|---|---|---|---|---|"]
    rows = []
    for name, rs in by.items():
        tv, sp = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
        ratio = sp / tv
        spec = json.load(open(os.path.join(os.path.dirname(results), name + ".json")))
        audio = spec["source"]["format"] in ("audio_folder", "wav_folder")
        peer = "torchaudio (one thread)" if audio else "torchvision (PIL, one thread)"
        lines.append("| %s | %s | %.1f | %.1f | %.2fx %s |" % (name, peer.split(" ")[0], tv, sp, ratio,
                                                            "met" if ratio >= TARGET else "NOT met"))
        rows.append(("recipe %s per core, %s" % (name, "200 speech clips" if audio else "%d photos" % n), peer,
                     "%.2fx" % ratio, ">= %gx" % TARGET, ratio >= TARGET))
    text = "\n".join(lines)
    print(text)
    with open(out, "w") as f:
        f.write("Medians of %d runs, %d real-photo crops, one core (CPU %s).\n\n%s\n" % (runs, n, cpu, text))
    bench_targets.record("recipes", rows)


if __name__ == "__main__":
    main()
