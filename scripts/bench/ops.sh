#!/usr/bin/env bash
# scripts/bench/ops.sh - `make bench`: Spillway vs torchvision+PIL, same images, each pinned to one core.
# Cases a-d (docs/benchmarks.md), BENCH_RUNS interleaved runs, medians; prints a table and writes
# build/bench/ops.md + build/bench/ops.json. A missed target prints FAIL but exits 0; a crash exits 1.
# Env: BENCH_N (2000) BENCH_RUNS (3) BENCH_WARMUP_BATCHES (3) BENCH_CPU (1) BENCH_CPUS2 (0,1)
# BENCH_SIDES (both|torchvision) SPILLCTL.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
N=${BENCH_N:-2000}
RUNS=${BENCH_RUNS:-3}
WARMUP=${BENCH_WARMUP_BATCHES:-3}   # untimed batches before each timed epoch, the same on both sides
CPU=${BENCH_CPU:-1}
CPUS2=${BENCH_CPUS2:-0,1}
SIDES=${BENCH_SIDES:-both}
SPILLCTL=${SPILLCTL:-build/bin/spillctl}
# Both sides run with glibc keeping freed memory in the process: on this kind of VM a first touch of a page
# costs ~10 us, and torchvision's collate allocates a fresh 38.5 MB batch (over glibc's 32 MB mmap cap)
# every batch, which would slow the peer by ~1.5 ms/image for reasons unrelated to preprocessing.
# Set BENCH_GLIBC_TUNABLES= (empty) to measure with glibc's defaults.
TUNABLES=${BENCH_GLIBC_TUNABLES-glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295}
OUT=build/bench
CASES=(a b c d)

die() { echo "bench-ops: error: $*" >&2; exit 1; }

[[ $N =~ ^[0-9]+$ && $N -ge 10 ]] || die "BENCH_N must be an integer >= 10 (got '$N')"
[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || die "BENCH_RUNS must be an integer >= 1 (got '$RUNS')"
[[ $SIDES == both || $SIDES == torchvision ]] || die "BENCH_SIDES must be 'both' or 'torchvision' (got '$SIDES')"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
taskset -c "$CPU" true 2>/dev/null || die "cannot pin to CPU $CPU (BENCH_CPU); this machine has $(nproc) CPUs"
"$PY" -c 'import torch, torchvision, PIL' 2>/dev/null ||
  die "$PY cannot import torch, torchvision and PIL (bash scripts/install-deps.sh)"
if [[ $SIDES == both ]]; then
  [[ -x $SPILLCTL ]] || die "$SPILLCTL not found or not executable: build it first ('make all'; 'make bench'
  builds it), set SPILLCTL=PATH, or run only the peer with BENCH_SIDES=torchvision"
  taskset -c "$CPUS2" true 2>/dev/null || die "cannot pin to CPUs $CPUS2 (BENCH_CPUS2) for the scaling run"
fi
[[ $N -ge 1000 ]] || echo "bench-ops: note: BENCH_N=$N is below the specified 1000 images; numbers are indicative only"

DATA=build/data/imagenet-like
[[ $N -eq 2000 ]] || DATA=build/data/imagenet-like-n$N
bash scripts/data/make-dataset.sh "$DATA" "$N"
TRAIN=$ROOT/$DATA/train

rm -rf "$OUT/raw" "$OUT/pipelines"
mkdir -p "$OUT/raw" "$OUT/pipelines"
RESULTS=$OUT/raw/results.tsv
printf 'case\tside\tthreads\trun\timg_per_s\telements\tseconds\tfile\n' >"$RESULTS"

# Pipeline specs: (a) decode + random_resized_crop + flip + normalize; (b) + rand_augment after the flip;
# (c) + auto_augment after the flip; (d) decode only, batch size 1.
"$PY" - "$TRAIN" "$OUT/pipelines" <<'EOF'
import json, sys
train, out = sys.argv[1], sys.argv[2]
head = [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
        {"op": "random_horizontal_flip", "p": 0.5}]
norm = [{"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}]
cases = {
    "a": (head + norm, 64),
    "b": (head + [{"op": "rand_augment", "num_ops": 2, "magnitude": 9}] + norm, 64),
    "c": (head + [{"op": "auto_augment", "policy": "imagenet"}] + norm, 64),
    "d": ([{"op": "decode_jpeg"}], 1),
}
for name, (ops, batch) in cases.items():
    spec = {"source": {"format": "image_folder", "path": train, "shuffle": True, "seed": 7, "epochs": 1},
            "ops": ops, "batch": {"size": batch, "drop_remainder": False}}
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
EOF

errors=0

# run_tv CASE RUN: one torchvision process, pinned; OpenBLAS overrides unset for this command only.
run_tv() {
  local c=$1 r=$2 log="$OUT/raw/tv-$1-r$2"
  if env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE GLIBC_TUNABLES="$TUNABLES" taskset -c "$CPU" \
      "$PY" scripts/bench/torchvision_peer.py --data "$TRAIN" --case "$c" --warmup-batches "$WARMUP" >"$log.json" 2>"$log.err"; then
    "$PY" -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("\t".join(map(str, [sys.argv[2], "torchvision", 1, sys.argv[3], d["img_per_s"], d["images"], d["seconds"], sys.argv[1]])))' \
      "$log.json" "$c" "$r" >>"$RESULTS"
    printf '  run %s/%s  (%s) torchvision          %8.1f img/s\n' "$r" "$RUNS" "$c" "$(tail -n1 "$RESULTS" | cut -f5)"
  else
    errors=$((errors + 1))
    echo "bench-ops: ERROR: torchvision case $c run $r failed; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  fi
}

# spw_report OUT CASE RUN THREADS: checks spillctl's report (the last JSON object on stdout) and prints a
# results.tsv line; keeps the object as .json beside the raw output. Exits non-zero with a reason.
spw_report() {
  PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$@" "$N" <<'EOF'
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
EOF
}

# run_spw CASE RUN THREADS CPUS: one spillctl run, pinned to CPUS.
run_spw() {
  local c=$1 r=$2 t=$3 cpus=$4 log="$OUT/raw/spw-$1-t$3-r$2" line rc=0
  GLIBC_TUNABLES="$TUNABLES" taskset -c "$cpus" "$SPILLCTL" run --local --pipeline "$OUT/pipelines/$c.json" \
    --threads "$t" --warmup-batches "$WARMUP" --json >"$log.out" 2>"$log.err" || rc=$?
  if ((rc != 0)); then
    errors=$((errors + 1))
    echo "bench-ops: ERROR: spillway case $c run $r (threads=$t): spillctl exited with $rc; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  elif ! line=$(spw_report "$log.out" "$c" "$r" "$t" 2>&1); then
    errors=$((errors + 1))
    echo "bench-ops: ERROR: spillway case $c run $r (threads=$t): $line" >&2
  else
    echo "$line" >>"$RESULTS"
    printf '  run %s/%s  (%s) spillway  %s thread%s  %8.1f img/s\n' "$r" "$RUNS" "$c" "$t" \
      "$( ((t == 1)) && echo ' ' || echo s)" "$(cut -f5 <<<"$line")"
  fi
}

# run_pair RUN: two independent 1-thread spillctl runs of case (a) at once, one per CPU of CPUS2; records
# their summed img/s as side "pair". That is what the machine gives two busy cores right now (shared caches,
# memory bandwidth, SMT siblings or host contention under a VM), the ceiling for any 2-thread scaling.
run_pair() {
  local r=$1 total=0 pids=() i=0 cpu log v
  IFS=, read -r -a pair_cpus <<<"$CPUS2"
  for cpu in "${pair_cpus[@]}"; do
    log="$OUT/raw/spw-a-pair$i-r$r"
    GLIBC_TUNABLES="$TUNABLES" taskset -c "$cpu" "$SPILLCTL" run --local --pipeline "$OUT/pipelines/a.json" \
      --threads 1 --warmup-batches "$WARMUP" --json >"$log.out" 2>"$log.err" &
    pids+=($!)
    i=$((i + 1))
  done
  for pid in "${pids[@]}"; do wait "$pid" || errors=$((errors + 1)); done
  for ((i = 0; i < ${#pair_cpus[@]}; i++)); do
    v=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["elements_per_s"])' \
      "$OUT/raw/spw-a-pair$i-r$r.out") || { errors=$((errors + 1)); return; }
    total=$("$PY" -c "print($total + $v)")
  done
  printf 'a\tpair\t1\t%s\t%s\t-\t-\t-\n' "$r" "$total" >>"$RESULTS"
  printf '  run %s/%s  (a) 2 independent 1-thread processes at once  %8.1f img/s (sum)\n' "$r" "$RUNS" "$total"
}

echo "bench-ops: $N images from $DATA, $RUNS runs, one core (CPU $CPU) per side, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= RUNS; r++)); do
  for c in "${CASES[@]}"; do
    # Alternate which side goes first so neither always runs on a cache the other just warmed.
    if [[ $SIDES == torchvision ]]; then
      run_tv "$c" "$r"
    elif ((r % 2)); then
      run_tv "$c" "$r"; run_spw "$c" "$r" 1 "$CPU"
    else
      run_spw "$c" "$r" 1 "$CPU"; run_tv "$c" "$r"
    fi
  done
  [[ $SIDES == torchvision ]] || { run_spw a "$r" 2 "$CPUS2"; run_pair "$r"; }
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$RESULTS" "$OUT" "$N" "$RUNS" "$CPU" "$CPUS2" "$SIDES" "$ROOT/$DATA/stamp.json" "$TUNABLES" \
  "$LOAD_BEFORE" "$LOAD_AFTER" "$errors" <<'EOF'
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
EOF

if ((errors)); then
  echo "bench-ops: $errors measurement(s) failed (see above and $OUT/raw/)" >&2
  exit 1
fi
