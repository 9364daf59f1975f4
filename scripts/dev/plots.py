#!/usr/bin/env python3
"""scripts/dev/plots.py - `make plots`: the benchmark figures as PNGs in docs/ (gnuplot, pngcairo), each from the
benchmark's own output under build/ when a run left one, else from docs/data/ (the medians published in
docs/benchmarks.md, in the same formats). Prints which source each plot used.
  plot-engine.png   Spillway vs torchvision + PIL, img/s per pipeline, one core each (bench/ops.sh)
  plot-scaling.png  Spillway's train pipeline on 1 and 2 threads vs 2 independent processes (bench/ops.sh)
  plot-offload.png  a 1-core client alone vs with one remote worker core, per cut (bench/offload.sh)
  plot-offload-cores.png  the offload gain against the remote worker's share of a core (bench/offload.sh with
                    BENCH_REMOTE_CORES)
  plot-stream.png   element streaming vs raw TCP, MB/s by element size (bench/stream.sh)
  plot-planner.png  the planner's plan vs the oracle and the other policies per condition (eval/planner.sh)
  plot-dispatcher.png  the dispatcher's client-heartbeat p99 latency per load point, new vs old
                    (bench/dispatcher.sh)
Usage: plots.py [--out DIR]   (default docs/; tests draw into build/)"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD, DATA = os.path.join(ROOT, "build"), os.path.join(ROOT, "docs", "data")
DOCS = os.path.abspath(sys.argv[2]) if len(sys.argv) == 3 and sys.argv[1] == "--out" else os.path.join(ROOT, "docs")
WORK = os.path.join(BUILD, "plots")


def source(fresh, recorded):
    """The benchmark's output when a run left one, else the recorded copy."""
    path = os.path.join(BUILD, fresh)
    return (path, "run") if os.path.exists(path) else (os.path.join(DATA, recorded), "docs/data")


def gnuplot(name, data_rows, header, script):
    dat = os.path.join(WORK, name + ".dat")
    with open(dat, "w") as f:
        f.write(" ".join(header) + "\n")
        for row in data_rows:
            f.write(" ".join(str(x) for x in row) + "\n")
    png = os.path.join(DOCS, "plot-%s.png" % name)
    common = ("set terminal pngcairo size 900,460 font ',10'\nset output '%s'\nset style data histograms\n"
              "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\nset yrange [0:*]\n"
              "set key top right\nset grid ytics\n" % png)
    subprocess.run(["gnuplot"], input=(common + script.replace("DAT", dat)).encode(), check=True)
    return png


def engine_and_scaling():
    path, src = source("bench/ops.json", "ops.json")
    m = json.load(open(path))["median_img_per_s"]
    names = {"a": "train", "b": "RandAugment", "c": "AutoAugment", "d": "decode-only"}
    rows = [('"%s"' % names[c], m["torchvision"][c], m["spillway"][c]) for c in "abcd"
            if m["torchvision"].get(c) and m["spillway"].get(c)]
    yield gnuplot("engine", rows, ["case", "torchvision+PIL", "Spillway"],
                  "set title 'Images/s on one core: Spillway vs torchvision + PIL (medians)'\n"
                  "set ylabel 'images/s'\nplot for [i=2:3] 'DAT' using i:xtic(1) title columnheader(i)\n"), src
    one, two, pair = m["spillway"]["a"], m["spillway_2_threads"]["a"], m["machine_two_processes"]["a"]
    rows = [('"1 thread"', one), ('"2 threads"', two), ('"2 processes (ceiling)"', pair)]
    yield gnuplot("scaling", rows, ["config", "img/s"],
                  "set title 'Spillway train pipeline: thread scaling against the machine ceiling (%.2fx, %.2fx)'\n"
                  "set ylabel 'images/s'\nset key off\nplot 'DAT' using 2:xtic(1) title columnheader(2)\n"
                  % (two / one, pair / one)), src


def offload():
    path, src = source("bench/offload/results.tsv", "offload.tsv")
    runs, sweep = {}, {}
    for line in open(path):
        cols = line.rstrip("\n").split("\t")
        kind, cut, _, v = cols[:4]
        if kind == "remote":
            sweep.setdefault(float(cols[4]), []).append(float(v))
            continue
        runs.setdefault("local-only" if kind == "local" else "cut %s" % cut, []).append(float(v))
    base = statistics.median(runs["local-only"])
    order = sorted(runs.items(), key=lambda kv: (kv[0] != "local-only", kv[0]))
    rows = [('"%s"' % k, round(statistics.median(v))) for k, v in order]
    if sweep:                   # the gain against the worker's share of its core (0: local-only)
        pts = [(0, 1.0)] + [(c, round(statistics.median(v) / base, 3)) for c, v in sorted(sweep.items())]
        cut = next(l.split("\t")[1] for l in open(path) if l.startswith("remote\t"))
        yield gnuplot("offload-cores", pts, ["remote_cores", "gain"],
                      "set style data linespoints\nset title 'Offload gain of a 1-core client against the remote "
                      "worker core it gets (cut %s; medians)'\nset xlabel 'remote worker cores'\n"
                      "set ylabel 'elements/s vs local-only'\nset xrange [0:1.05]\nset yrange [0:2.2]\nset key top left\n"
                      "plot 'DAT' using 1:2 title 'measured' lw 2 pt 7, 1.8 dt 2 lc 'black' title 'target 1.8x'\n"
                      % cut), src
    yield gnuplot("offload", rows, ["config", "elements/s"],
                   "set title 'A 1-core client alone and with one remote worker core (train pipeline; medians)'\n"
                   "set ylabel 'elements/s'\nset key top left\n"
                   "plot 'DAT' using 2:xtic(1) notitle, %g with lines dt 2 lc 'black' title 'target: 1.8x local-only'\n"
                   % (1.8 * base)), src


def stream():
    path, src = source("bench/stream.tsv", "stream.tsv")
    mbs = {}
    for line in open(path):
        mode, elem, _, cli = line.rstrip("\n").split("\t")[:4]
        mbs.setdefault((mode, int(elem)), []).append(json.loads(cli)["mb_per_s"])
    rows = []
    for elem in sorted({e for _, e in mbs}):
        if all((m, elem) in mbs for m in ("tcp", "direct", "grpc")):
            rows.append(('"%d kB"' % round(elem / 1000), statistics.median(mbs[("tcp", elem)]),
                         statistics.median(mbs[("direct", elem)]), statistics.median(mbs[("grpc", elem)])))
    return gnuplot("stream", rows, ["element", "raw-TCP", "Spillway", "gRPC-fallback"],
                   "set title 'Element streaming vs raw TCP on loopback (medians; target 0.70x)'\n"
                   "set ylabel 'MB/s'\nset key outside right\n"
                   "plot for [i=2:4] 'DAT' using i:xtic(1) title columnheader(i)\n"), src


def planner():
    path, src = source("eval/planner/eval.dat", "planner.tsv")
    lines = [l.split() for l in open(path) if l.strip()]
    return gnuplot("planner", lines[1:], lines[0],
                   "set title 'The planner vs the oracle, FastFlow rule, offload-everything, local-only (elements/s)'\n"
                   "set ylabel 'elements/s'\nset xtics rotate by -20\n"
                   "plot for [i=2:6] 'DAT' using i:xtic(1) title columnheader(i)\n"), src


def dispatcher():
    path, src = source("bench-dispatcher/scale.tsv", "dispatcher-scale.tsv")
    p99 = {}
    for line in open(path):
        side, w, j, splits, js = line.rstrip("\n").split("\t", 4)
        d = json.loads(js) if js.strip() else {}
        p99[(int(splits), int(j), int(w), side)] = d.get("methods", {}).get("ClientHeartbeat", {}).get("p99_ms", 0)
    # "before" only when the run measured an older dispatcher too (BENCH_DISPATCHER_OLD): an all-zero column
    # on a log scale is an error to gnuplot.
    before = any(side == "old" for (_, _, _, side) in p99)
    rows = [('"%dx%d, %s"' % (w, j, "20k" if splits >= 1000 else splits), p99[(splits, j, w, "new")])
            + ((p99.get((splits, j, w, "old"), 0),) if before else ())
            for splits, j, w, side in sorted(p99) if side == "new"]
    return gnuplot("dispatcher", rows, ["point", "now"] + (["before"] if before else []),
                   "set title 'Client heartbeat p99 under load: workers x jobs, splits per epoch (one core each)'\n"
                   "set ylabel 'ms (log)'\nset logscale y\nset yrange [0.1:*]\nset xtics rotate by -30\n"
                   "plot for [i=2:%d] 'DAT' using i:xtic(1) title columnheader(i)\n" % (3 if before else 2)), src


def main():
    if len(sys.argv) not in (1, 3) or (len(sys.argv) == 3 and sys.argv[1] != "--out"):
        print(__doc__.strip().splitlines()[-1])
        return 2
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(DOCS, exist_ok=True)
    made = list(engine_and_scaling()) + list(offload()) + [stream(), planner(), dispatcher()]
    for png, src in made:
        print("plots: %s (from %s)" % (os.path.relpath(png, ROOT), src))
    return 0


if __name__ == "__main__":
    sys.exit(main())
