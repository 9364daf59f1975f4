#!/usr/bin/env python3
"""scripts/eval/planner.py - the analysis half of scripts/eval/planner.sh: per condition, medians of every
strategy, the oracle (the best forced plan, re-measured interleaved with the planner), the planner's regret
(paired: its runs interleaved with the oracle's re-measures; "in the sweep": its runs among the forced
plans) and prediction error (all its runs),
FastFlow's rule and offload-everything; the table (table.md), the targets, and the plot (eval.png, gnuplot).

  planner.py OUT_DIR                       analyse OUT_DIR/{results,status}.tsv
  planner.py --best RESULTS COND           print the best forced plan of COND so far (for re-measuring)
"""
import glob
import json
import math
import statistics
import subprocess
import sys

import bench_targets

CUTS = 3        # the evaluated pipelines have 3 fusion groups: cuts 0..3


def rows_of(path, cond=None):
    out = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 5 and (cond is None or f[0] == cond):
            out.append({"cond": f[0], "strat": f[1], "rep": f[2], "v": float(f[3]), "extra": f[4]})
    return out


def forced_medians(rows):
    by = {}
    for r in rows:
        if r["strat"] not in ("planner", "warm") and not r["rep"].startswith(("best", "pair")):
            by.setdefault(r["strat"], []).append(r["v"])
    return {s: statistics.median(v) for s, v in by.items()}


def fastflow_choice(med, rate, workers):
    """FastFlow's rule (ANCHORS 1.2) on Spillway's measurements. Its ELEMENT and BATCH candidates are both
    "everything but batching remote" here (the client always batches): cut CUTS; MIDDLE (client decodes,
    remote does the rest) is not a prefix cut and is not available. GTHP = the trainer's rate (inf when
    unlimited), LTHP = local-only, RTHP = one worker's rate at that cut; dcycle taken as 0."""
    lthp = med["local"]
    gthp = rate if rate > 0 else math.inf
    if gthp / lthp <= 1.3:
        return "local"
    rthp = med["cut%d-off" % CUTS] / workers
    n = workers
    if lthp + rthp * n < gthp:
        ratio = lthp / (lthp + rthp * n)
    else:
        ideal = gthp - lthp
        off = (rthp * n + ideal) / 2 if lthp > rthp * n else max(rthp * n, ideal)
        ratio = max((gthp - off) / gthp, 0)
    return "cut%d-%s" % (CUTS, "on" if ratio > 0 else "off")


def per_cut(out, name, med):
    """The planner's prediction for every cut (from `spillctl explain`, median over repeats) next to the
    forced plan measured at that cut with the local share on."""
    preds = {}
    for path in glob.glob("%s/explain-%s-*.json" % (out, name)):
        try:
            plan = json.load(open(path))
        except (OSError, ValueError):
            continue
        for c in plan.get("candidates", []):
            preds.setdefault(c["cut"], []).append(c["throughput"])
    cells = []
    for k in range(CUTS + 1):
        m = med.get("cut%d-on" % k)
        if k in preds and m:
            p = statistics.median(preds[k])
            cells.append("cut %d: %.0f / %.0f (%+.0f%%)" % (k, p, m, 100 * (p - m) / m))
    return "; ".join(cells)


def label(strat):
    return "local only" if strat == "local" else strat.replace("-on", " +local").replace("-off", " remote only")


def analyse(out):
    status = [l.rstrip("\n").split("\t") for l in open(out + "/status.tsv") if l.strip()]
    rows = rows_of(out + "/results.tsv")
    table = ["| condition | status | oracle plan | oracle el/s | planner plan | planner el/s | in the sweep | "
             "regret | predicted | error | FastFlow | offload-all | local-only |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    regrets, errors, vs_local, oracle_cuts, local_wins = [], [], [], set(), set()
    cut_lines = ["| condition | predicted / measured elements/s per cut (local share on) |", "|---|---|"]
    dat = []
    failed = 0
    for name, st, pipe, cap, ccores, nw, wcores, rate in status:
        if st != "RUN":
            failed += 1
            table.append("| %s | FAIL | | | | | | | | | | | |" % name)
            continue
        rs = [r for r in rows if r["cond"] == name]
        med = forced_medians(rs)
        best = max(med, key=med.get)
        again = [r["v"] for r in rs if r["rep"].startswith("best")]
        oracle = statistics.median(again) if again else med[best]
        pl = [r for r in rs if r["strat"] == "planner"]
        # Regret pairs the planner with the oracle's plan: the runs of both interleaved after the sweep
        # ("pair" repeats), so a drift of this machine's speed during a condition moves both alike.
        paired = [r["v"] for r in pl if r["rep"].startswith("pair")]
        first_runs = statistics.median(r["v"] for r in pl if not r["rep"].startswith("pair"))
        planner = statistics.median(paired) if paired else first_runs
        plans = [r["extra"].split(",") for r in pl]
        chosen = statistics.mode("local" if p[0] == "0" else "cut%s %s" % (p[1], "+local" if float(p[2]) >= 0.02
                                                                           else "remote only") for p in plans)
        # The prediction as the run ended: a re-plan on the costs measured in the run may have moved it (and
        # the cut: fields 5 and 6 come from `spillctl explain` after the run).
        ended = [p for p in plans if len(p) > 5]
        if ended and statistics.mode(p[4] for p in ended) != statistics.mode(p[1] for p in ended):
            last = statistics.mode(p[4] for p in ended)
            chosen += " -> handed back" if last == "-1" else " -> cut%s" % last
        first = statistics.median(float(p[3]) for p in plans)
        predicted = statistics.median(float(p[5]) if len(p) > 5 else float(p[3]) for p in plans)
        off = "cut%d-off" % CUTS          # offload-everything; absent when EVAL_STRATEGIES left it out
        ff = fastflow_choice(med, float(rate), int(nw)) if off in med else None
        show = lambda s: "%.0f" % med[s] if s in med else "-"
        regret = max(0.0, (oracle - planner) / oracle)
        measured = statistics.median(r["v"] for r in pl)       # all its runs, sweep and paired
        err = (predicted - measured) / measured
        regrets.append(regret)
        errors.append(abs(err))
        vs_local.append((med["local"] - first_runs) / med["local"])   # both from the sweep's interleaved runs
        oracle_cuts.add("local" if best == "local" else best.split("-")[0])
        if best != "local":
            local_wins.add(best.split("-")[1])
        shown = "%.0f" % predicted if abs(first - predicted) < 0.5 else "%.0f -> %.0f" % (first, predicted)
        table.append("| %s | RUN | %s | %.0f | %s | %.0f | %.0f | %.1f%% | %s | %+.0f%% | %s (%s) | %s | %.0f |" % (
            name, label(best), oracle, chosen, planner, first_runs, 100 * regret, shown, 100 * err, show(ff),
            label(ff) if ff else "-", show(off), med["local"]))
        cut_lines.append("| %s | %s |" % (name, per_cut(out, name, med) or "-"))
        dat.append("%s %.1f %.1f %.1f %.1f %.1f" % (name, oracle, planner, med.get(ff, 0), med.get(off, 0),
                                                    med["local"]))
    n = len(regrets)
    lines = ["%d conditions run, %d failed" % (n, failed)]
    if n:
        checks = [
            ("mean regret vs the oracle <= 5%%", "%.1f%%" % (100 * sum(regrets) / n), sum(regrets) / n <= 0.05),
            ("max regret <= 15%%", "%.1f%%" % (100 * max(regrets)), max(regrets) <= 0.15),
            ("never worse than local-only by > 5%%", "worst %.1f%%" % (100 * max(vs_local)), max(vs_local) <= 0.05),
            ("predicted within +-20%% of measured", "worst %.0f%%" % (100 * max(errors)), max(errors) <= 0.20),
            ("at least 3 different oracle plans (cuts or local)", ", ".join(sorted(oracle_cuts)),
             len(oracle_cuts) >= 3),
            ("local share on and off each win somewhere", ", ".join(sorted(local_wins)) or "-",
             local_wins == {"on", "off"}),
        ]
        for what, got, ok in checks:
            lines.append("- %s: %s: %s" % (what.replace("%%", "%"), got, "MET" if ok else "NOT MET"))
        bench_targets.record("planner", [("the planner's plan, %d conditions" % n,
                                          "the oracle: the best forced plan, re-measured", got,
                                          what.replace("%%", "%"), ok) for what, got, ok in checks])
    try:
        steady = open(out + "/steady.tsv").read().split()
    except OSError:
        steady = []
    if steady and steady[0] == "RUN":
        ok = int(steady[3]) <= 2
        lines.append("- a steady %s s planned run changes its cut at most twice: %s re-plans, %s cut changes: %s" % (
            steady[1], steady[2], steady[3], "MET" if ok else "NOT MET"))
    elif steady:
        lines.append("- steady run: FAIL")
    text = "\n".join(table) + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(cut_lines) + "\n"
    open(out + "/table.md", "w").write(text)
    print(text)
    open(out + "/eval.dat", "w").write("condition oracle planner FastFlow offload-all local-only\n" +
                                       "\n".join(dat) + "\n")
    plot = """set terminal pngcairo size 1100,520 font ',10'
set output '%s/eval.png'
set title 'Spillway planner vs the oracle, FastFlow rule, offload-everything, local-only (median elements/s)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set ylabel 'elements/s'
set yrange [0:*]
set xtics rotate by -20
set key top right
plot for [i=2:6] '%s/eval.dat' using i:xtic(1) title columnheader(i)
""" % (out, out)
    if dat:
        subprocess.run(["gnuplot"], input=plot.encode(), check=True)
        print("plot: %s/eval.png" % out)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--best":
        med = forced_medians(rows_of(sys.argv[2], sys.argv[3]))
        if med:             # none when EVAL_STRATEGIES ran no forced plan: nothing to re-measure
            print(max(med, key=med.get))
    elif len(sys.argv) == 2:
        analyse(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
