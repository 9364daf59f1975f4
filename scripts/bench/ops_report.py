#!/usr/bin/env python3
"""scripts/bench/ops_report.py - bench/ops.sh's analysis: medians per case and side, ratios, the table, the targets
(run by scripts/bench/ops.sh with the arguments it passes).
"""
import csv, json, os, platform, statistics, sys, time
(results, out, n, runs, cpu, cpus2, sides, stamp_path, tunables, load_before, load_after,
 errors) = sys.argv[1:13]
rows = list(csv.DictReader(open(results), delimiter="\t"))

def med(case, side, threads=1):
    v = [float(r["img_per_s"]) for r in rows
         if r["case"] == case and r["side"] == side and int(r["threads"]) == threads]
    return (statistics.median(v), len(v)) if v else (None, 0)

def fmt(x, nd=1):
    return "n/a" if x is None else f"{x:.{nd}f}"

titles = {"a": "(a) decode + random_resized_crop(224) + flip + normalize",
          "b": "(b) (a) + rand_augment(2, 9)",
          "c": "(c) (a) + auto_augment(imagenet)",
          "d": "(d) decode only (full decode; PIL open+load+convert)"}
table, raw = [], {"torchvision": {}, "spillway": {}, "spillway_2_threads": {}}
for c in "abcd":
    tv, ntv = med(c, "torchvision")
    sp, nsp = med(c, "spillway")
    raw["torchvision"][c], raw["spillway"][c] = (None if x is None else round(x, 2) for x in (tv, sp))
    ratio = sp / tv if tv and sp else None
    target = 3.0 if c != "d" else 1.0       # (d): full-image decode per core at least PIL's
    verdict = "-" if target is None else ("n/a" if ratio is None else ("PASS" if ratio >= target else "FAIL"))
    table.append([titles[c], fmt(tv), fmt(sp), fmt(ratio, 2) + ("x" if ratio else ""),
                  f">= {target:.1f}x" if target else "-", verdict])
sp_a, pil_d = raw["spillway"]["a"], raw["torchvision"]["d"]
r_dec = sp_a / pil_d if sp_a and pil_d else None
t2, _ = med("a", "spillway", 2)
raw["spillway_2_threads"]["a"] = None if t2 is None else round(t2, 2)
r_scale = t2 / sp_a if t2 and sp_a else None
def verdict(x, target):
    return "n/a" if x is None else ("PASS" if x >= target else "FAIL")
pair, _ = med("a", "pair")
raw["machine_two_processes"] = {"a": None if pair is None else round(pair, 2)}
r_pair = pair / sp_a if pair and sp_a else None
r_eff = t2 / pair if t2 and pair else None
extra = [["Spillway (a) / PIL decode only", fmt(pil_d), fmt(sp_a), fmt(r_dec, 2) + ("x" if r_dec else ""),
          ">= 1.3x", verdict(r_dec, 1.3)],
         [f"Spillway (a) scaling: 2 threads on CPUs {cpus2} / 1 thread", fmt(sp_a), fmt(t2),
          fmt(r_scale, 2) + ("x" if r_scale else ""), ">= 1.85x", verdict(r_scale, 1.85)],
         ["  machine ceiling: 2 independent 1-thread processes / 1", fmt(sp_a), fmt(pair),
          fmt(r_pair, 2) + ("x" if r_pair else ""), "-", "-"],
         ["  Spillway 2 threads / 2 independent processes", fmt(pair), fmt(t2),
          fmt(r_eff, 2) + ("x" if r_eff else ""), "-", "-"]]

head = ["case", "torchvision img/s", "spillway img/s", "ratio", "target", "result"]
extra_head = ["check", "baseline img/s", "spillway img/s", "ratio", "target", "result"]
widths = [max(len(str(x[i])) for x in table + extra + [head, extra_head]) for i in range(6)]
def line(cells):
    return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
print()
print(line(head)); print("  ".join("-" * w for w in widths))
for row in table: print(line(row))
print()
print(line(extra_head)); print("  ".join("-" * w for w in widths))
for row in extra: print(line(row))
fails = [r[0] for r in table + extra if r[5] == "FAIL"]
print()
missing = [r[0] for r in table + extra if r[5] == "n/a"]
if sides != "both":
    print("bench-ops: Spillway side skipped (BENCH_SIDES=torchvision): no targets checked")
elif missing:
    print(f"bench-ops: INCOMPLETE: {errors} measurement(s) failed; no result for: " + "; ".join(missing))
    if fails:
        print("bench-ops: FAIL: " + "; ".join(fails))
elif fails:
    print("bench-ops: FAIL: " + "; ".join(fails))
else:
    print("bench-ops: all targets PASS")
print(f"bench-ops: medians of {runs} runs, {n} images; load average before {load_before}, after {load_after}")
if sides == "both":
    import bench_targets
    anchors = {"a": "torchvision + PIL", "b": "torchvision + PIL", "c": "torchvision + PIL", "d": "PIL"}
    bench_targets.record("ops", [(r[0], anchors[c] + " (%s img/s), one core" % r[1], "%s img/s, %s" % (r[2], r[3]),
                                  r[4], r[5]) for c, r in zip("abcd", table)] +
                         [(r[0], "%s img/s" % r[1], "%s img/s, %s" % (r[2], r[3]), r[4], r[5]) for r in extra[:2]])

stamp = json.load(open(stamp_path))
meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(), "nproc": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "images": int(n), "runs": int(runs), "cpu_pinned": cpu, "cpus_scaling": cpus2, "sides": sides,
        "glibc_tunables": tunables, "load_before": load_before, "load_after": load_after,
        "dataset": stamp["train"], "errors": int(errors)}
tv_files = [r["file"] for r in rows if r["side"] == "torchvision"]
if tv_files:
    d = json.loads(open(tv_files[0]).read().strip().splitlines()[-1])
    meta.update({k: d[k] for k in ("torch", "torchvision", "pillow")})
ops = {}
for r in rows:  # per-op stats of each Spillway case's last run
    if r["side"] == "spillway":
        ops[f'{r["case"]}_t{r["threads"]}'] = json.load(open(r["file"])).get("ops")
with open(f"{out}/ops.json", "w") as f:
    json.dump({"meta": meta, "median_img_per_s": raw,
               "ratios": {c: (raw["spillway"][c] / raw["torchvision"][c]
                              if raw["spillway"][c] and raw["torchvision"][c] else None) for c in "abcd"},
               "spillway_a_over_pil_decode": r_dec, "spillway_scaling_2_threads": r_scale,
               "machine_two_process_scaling": r_pair, "spillway_2_threads_over_two_processes": r_eff,
               "spillway_ops": ops, "runs": rows}, f, indent=1)
    f.write("\n")
with open(f"{out}/ops.md", "w") as f:
    f.write(f"Measured {meta['date']} on {meta['cpu']} ({meta['nproc']} CPUs), {n} images "
            f"(mean {stamp['train']['mean_w']:.0f}x{stamp['train']['mean_h']:.0f}, "
            f"{stamp['train']['mean_bytes'] / 1000:.1f} kB), medians of {runs} runs, one core per side; "
            f"load average before {load_before}, after {load_after}.\n\n")
    for h, rs in ((head, table), (extra_head, extra)):
        f.write("| " + " | ".join(h) + " |\n|" + "|".join(["---"] + ["---:"] * 5) + "|\n")
        for row in rs:
            f.write("| " + " | ".join(str(c) for c in row) + " |\n")
        f.write("\n")
print(f"bench-ops: wrote {out}/ops.md and {out}/ops.json")
