#!/usr/bin/env bash
# scripts/demo.sh - `make demo`: a local Spillway training pipeline (decode, random_resized_crop, flip,
# rand_augment, normalize) on the generated ImageNet-like set with all cores, then an eval pipeline on val,
# then the same training job through the service: a dispatcher and two workers on loopback and a simulated
# trainer (spillctl run --dispatcher), `spillctl job` for it, its throughput next to the local run's, and a
# clean shutdown (no process left behind). Env: SPILLCTL.
set -euo pipefail

# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/lib/harness.sh"     # ROOT, wait_port, stop_daemons, json_field
cd "$ROOT"
PY=/usr/bin/python3
SPILLCTL=${SPILLCTL:-build/bin/spillctl}
DATA=build/data/imagenet-like
OUT=build/demo
THREADS=$(nproc)

die() { echo "demo: error: $*" >&2; exit 1; }
[[ -x $SPILLCTL ]] || die "$SPILLCTL not found or not executable: build it first ('make all'; 'make demo' builds it)"

bash scripts/data/make-dataset.sh "$DATA"
mkdir -p "$OUT"

"$PY" - "$ROOT/$DATA" "$OUT" <<'EOF'
import json, sys
data, out = sys.argv[1], sys.argv[2]
norm = {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
train = {"source": {"format": "image_folder", "path": f"{data}/train", "shuffle": True, "seed": 7, "epochs": 1},
         "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
                 {"op": "random_horizontal_flip", "p": 0.5}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
                 norm],
         "batch": {"size": 64, "drop_remainder": False}}
# Eval as torchvision recipes do it: Resize(256) (shorter side to 256) + CenterCrop(224) + Normalize.
evalp = {"source": {"format": "image_folder", "path": f"{data}/val", "shuffle": False, "epochs": 1},
         "ops": [{"op": "decode_jpeg"}, {"op": "resize", "size": 256}, {"op": "center_crop", "size": [224, 224]},
                 norm],
         "batch": {"size": 64, "drop_remainder": False}}
for name, spec in (("train", train), ("eval", evalp)):
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
EOF

# run_pipeline NAME: runs spillctl on $OUT/NAME.json; its stdout goes to $OUT/NAME.out.
run_pipeline() {
  local rc=0
  "$SPILLCTL" run --local --pipeline "$OUT/$1.json" --threads "$THREADS" --json >"$OUT/$1.out" 2>"$OUT/$1.err" || rc=$?
  if ((rc != 0)); then
    echo "demo: error: the $1 pipeline failed (spillctl exited with $rc); its stderr ends:" >&2
    tail -n 20 "$OUT/$1.err" >&2
    exit 1
  fi
}

echo
echo "== Spillway demo: local training pipeline, $THREADS thread(s)"
echo "   decode_jpeg -> random_resized_crop(224) -> random_horizontal_flip -> rand_augment(2, 9) -> normalize"
run_pipeline train
# Summary of spillctl's --json report (its last line): throughput, then per-op time, largest first.
PYTHONPATH=scripts/lib /usr/bin/python3 -c '
import sys
import spw_report
obj = spw_report.run_report(sys.argv[1])
print("   %d elements in %d batches, %.2f s: %.0f elements/s" % (
    obj["elements"], obj["batches"], obj["seconds"], obj["elements_per_s"]))
print("   fusion groups (the cut points): " + " | ".join("+".join(g["ops"]) for g in obj["groups"]))
ops = sorted(obj["ops"], key=lambda o: -o["ns_per_element"])
total = sum(o["ns_per_element"] for o in ops) or 1
print("   where the time goes (time per element in its worker thread):")
for o in ops:
    print("     %-58s %6.1f us  %5.1f%%   out %6.0f kB" % (o["name"], o["ns_per_element"] / 1e3,
          100 * o["ns_per_element"] / total, o["out_bytes_per_element"] / 1e3))
' "$OUT/train.out"

echo
echo "== eval pipeline: val set, no shuffle, resize(256) -> center_crop(224) -> normalize"
run_pipeline eval
VAL_N=$(find "$DATA/val" -name '*.JPEG' | wc -l)
PYTHONPATH=scripts/lib /usr/bin/python3 -c '
import sys
import spw_report
n_val = int(sys.argv[2])
obj = spw_report.run_report(sys.argv[1], ("elements",))
ok = int(obj["elements"]) == n_val
print("   %d elements in %s batches (val set: %d images) %.0f elements/s  %s" % (
    obj["elements"], obj.get("batches", "?"), n_val, obj["elements_per_s"], "OK" if ok else "MISMATCH"))
sys.exit(0 if ok else "demo: error: the eval pipeline returned %d elements, the val set has %d" % (obj["elements"], n_val))
' "$OUT/eval.out" "$VAL_N"

echo
echo "== the same training job through the service: a dispatcher and 2 workers (1 thread each) on loopback"
trap 'stop_daemons TERM' EXIT
build/bin/spillway-dispatcher --listen 127.0.0.1 --port 0 > "$OUT/dispatcher.out" 2> "$OUT/dispatcher.log" &
PIDS+=($!)
DPORT=$(wait_port "$OUT/dispatcher.out") || die "the dispatcher did not start; see $OUT/dispatcher.log"
for i in 1 2; do
  build/bin/spillway-worker --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    > "$OUT/worker$i.out" 2> "$OUT/worker$i.log" &
  PIDS+=($!)
  wait_port "$OUT/worker$i.out" > /dev/null || die "worker $i did not start; see $OUT/worker$i.log"
done
sleep 0.5
"$SPILLCTL" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$OUT/train.json" --local-cores 1 --json \
  > "$OUT/service.out" 2> "$OUT/service.err" || { tail -n 20 "$OUT/service.err" >&2; die "the service run failed"; }
JOB=$(json_field "$OUT/service.out" '["job"]')
sleep 1.2     # producers report their final counts in their next heartbeat (1 s)
"$SPILLCTL" --dispatcher "127.0.0.1:$DPORT" job "$JOB" | sed 's/^/   /'
PYTHONPATH=scripts/lib /usr/bin/python3 -c '
import sys
import spw_report
svc = spw_report.run_report(sys.argv[1], ("elements", "batches", "seconds", "elements_per_s", "producers", "cut",
                                         "groups"))
loc = spw_report.run_report(sys.argv[2], ("elements", "elements_per_s", "threads"))
p = svc["producers"]
print("   service: %d elements in %d batches, %.2f s: %.0f elements/s (from workers %d, client threads %d, "
      "rescued %d; cut %d of %d groups)" % (svc["elements"], svc["batches"], svc["seconds"], svc["elements_per_s"],
      p["remote"], p["local"], p["rescue"], svc["cut"], len(svc["groups"])))
print("   local:   %d elements, %.0f elements/s with %d threads in one process" % (
      loc["elements"], loc["elements_per_s"], loc["threads"]))
print("   (here all of it shares this machine'"'"'s %s cores; on a real cluster the workers add their own cores)" % sys.argv[3])
sys.exit(0 if svc["elements"] == loc["elements"] else "demo: error: the service delivered %d elements, the local run %d" % (svc["elements"], loc["elements"]))
' "$OUT/service.out" "$OUT/train.out" "$THREADS"
STARTED=("${PIDS[@]}")
stop_daemons TERM
for p in "${STARTED[@]}"; do ! kill -0 "$p" 2>/dev/null || die "process $p was left behind"; done
echo "   dispatcher and workers stopped (SIGTERM, drained)"

echo
echo "demo: pipeline specs and raw reports are in $OUT/"
