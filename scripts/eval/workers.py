#!/usr/bin/env python3
"""scripts/eval/workers.py - the analysis half of scripts/eval/workers.sh: the capacity T(k) per worker count
(medians), per trainer rate R the measured count (the smallest k with T(k) >= REACH x R), the planner's counts
before the job and at a paced job's end (medians over repeats, the lower middle), the rate that job reached,
and whether each count is within one worker of the measured one. Writes OUT/table.md.

  eval_workers.py OUT REACH CLIENT_CORES WORKER_CORES SECONDS
"""
import statistics
import sys

import bench_targets


def main():
    out, reach = sys.argv[1], float(sys.argv[2])
    runs = [l.rstrip("\n").split("\t") for l in open(out + "/runs.tsv") if l.strip()]
    cap, got, during, before, demand = {}, {}, {}, {}, {}
    for phase, rate, k, rep, v, need in runs:
        if phase == "demand":
            demand.setdefault(float(rate), []).append(int(float(need)) if need != "-" else -1)
        elif phase == "capacity":
            cap.setdefault(int(k), []).append(float(v))
        elif phase == "paced":
            got.setdefault(float(rate), []).append(float(v))
            during.setdefault(float(rate), []).append(int(need) if need != "-" else -1)
    for l in open(out + "/plans.tsv"):
        rate, rep, need = l.split()
        before.setdefault(float(rate), []).append(int(need))
    t = {k: statistics.median(v) for k, v in sorted(cap.items())}
    lines = ["Capacity T(k), unpaced, medians (k = 0: local-only; k > 0: k workers at cut 2, the client producing too):",
             "", "| workers k | " + " | ".join(str(k) for k in t) + " |", "|---|" + "---:|" * len(t),
             "| elements/s | " + " | ".join("%.0f" % v for v in t.values()) + " |", "",
             "| trainer rate R | measured count (smallest k with T(k) >= %.2f R) | planner before the job | planner at the "
             "job's end | the planned job reached | within one | demand, no rate stated, no worker | within one |"
             % reach, "|---:|---:|---:|---:|---:|---|---:|---|"]
    ok_all, n_within, demand_ok, n_demand = True, 0, True, 0
    for rate in sorted(got):
        measured = next((k for k in t if t[k] >= reach * rate), None)
        pre = statistics.median_low(before.get(rate, [-1]))
        end = statistics.median_low(during[rate])
        within = measured is not None and all(n >= 0 and abs(n - measured) <= 1 for n in (pre, end))
        ok_all &= within
        n_within += within
        dem = statistics.median_low(demand[rate]) if rate in demand else None
        dem_within = dem is not None and measured is not None and dem >= 0 and abs(dem - measured) <= 1
        demand_ok &= dem_within
        n_demand += dem_within
        lines.append("| %.0f | %s | %d | %d | %.0f (%.0f%%) | %s | %s | %s |" % (
            rate, "more than %d" % max(t) if measured is None else measured, pre, end, statistics.median(got[rate]),
            100 * statistics.median(got[rate]) / rate, "yes" if within else "NO",
            "-" if dem is None else dem, "yes" if dem_within else "NO"))
    lines += ["", "Client %s core, workers %s core each, %s s per run; the planner's counts are medians over the repeats "
              "(the lower middle); -1: it could not say." % (sys.argv[3], sys.argv[4], sys.argv[5]),
              "Target: within one worker at every rate: planner %s; demand (issue 39) %s" % (
                  "PASS" if ok_all else "FAIL", "PASS" if demand_ok else "FAIL")]
    open(out + "/table.md", "w").write("\n".join(lines) + "\n")
    bench_targets.record("workers", [("the worker count the planner says a trainer rate needs",
                                      "the smallest count that measured reaches it (%d rates)" % len(got),
                                      "within one at %d of %d rates" % (n_within, len(got)),
                                      "within one worker", ok_all),
                                     ("the worker count a trainer's measured demand gives (no rate stated, no worker)",
                                      "the smallest count that measured reaches its rate (%d rates)" % len(got),
                                      "within one at %d of %d rates" % (n_demand, len(got)), "within one worker",
                                      demand_ok)])
    print("\n".join(lines))


main()
