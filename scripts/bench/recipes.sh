#!/usr/bin/env bash
# scripts/bench/recipes.sh - the recipes of examples/pipelines/ per core: Spillway (spillctl run --local
# --threads 1) against the transforms each was written from (scripts/bench/recipes_peer.py: torchvision on
# PIL, DataLoader with num_workers=0, torch on one thread, the references' MixUp/CutMix collate; torchaudio's
# kaldi.fbank or Whisper's front-end per clip), on the same BENCH_RECIPES_N (default 500) real-photo crops of
# the benchmark set (scripts/data/make-dataset.sh) or the 200-clip speech set of scripts/bench/audio.sh, one
# core (BENCH_CPU, default 1), runs interleaved, medians of BENCH_RUNS (default 3). Both sides first make two
# batches untimed; Spillway's side then runs BENCH_RECIPES_EPOCHS (default 4) epochs of the data (its
# fastest recipes take about 0.3 s an epoch, too short to time), the peer's one: samples per second on the
# same files either way. Recipes over shards run on the same photos as a folder (the decode is what costs).
# Prints samples/s per side and the ratio (target >= 3x per core); writes build/bench/recipes.md and its
# rows of the targets table. Image batches of 64 on both sides (segmentation and detection: 8, with masks and
# COCO boxes made for the photos by scripts/data/make_targets.py), audio batches of 16. BENCH_RECIPES: the
# names to run (default all).
set -euo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_RECIPES_N:-500}
RUNS=${BENCH_RUNS:-3}
EPOCHS=${BENCH_RECIPES_EPOCHS:-4}   # Spillway's side: its fast recipes would run well under a second in one
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
OUT=$B/bench/recipes
need_built "$SPILLCTL"
bash scripts/data/make-dataset.sh "$B/data/imagenet-like" 2000 > /dev/null
bash scripts/data/make-audio-dataset.sh "$B/data/speech-bench" 200 > /dev/null      # as scripts/bench/audio.sh
SPEECH=$B/data/speech-bench/train
DATA=$OUT/data
rm -rf "$OUT"
mkdir -p "$DATA"
# N photos spread over the set's classes (every k-th by name), as symlinks: both sides read the same files.
find "$B/data/imagenet-like/train" -name '*.JPEG' | sort > "$OUT/all.txt"
"$PY" -c 'import sys
paths = open(sys.argv[1]).read().split()
n = int(sys.argv[2])
print("\n".join(paths[i * len(paths) // n] for i in range(min(n, len(paths)))))' "$OUT/all.txt" "$N" > "$OUT/picked.txt"
while read -r f; do
  c=$(basename "$(dirname "$f")")
  mkdir -p "$DATA/$c"
  ln -s "$f" "$DATA/$c/"
done < "$OUT/picked.txt"
# masks and COCO boxes for the picked photos (segmentation and detection recipes)
"$PY" scripts/data/make_targets.py "$DATA" "$OUT/targets"
: > "$OUT/results.tsv"
echo "bench-recipes: $RUNS runs of $N photos on CPU $CPU; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for recipe in examples/pipelines/*.json; do
  name=$(basename "$recipe" .json)
  [[ -z "${BENCH_RECIPES:-}" || " $BENCH_RECIPES " == *" $name "* ]] || continue
  "$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))
if s["source"]["format"] in ("audio_folder", "wav_folder"):    # per clip on the peer, batches of 16 here
    s["source"].update(path=sys.argv[5], shuffle=True, seed=7, epochs=1)
    s["batch"].update(size=16, drop_remainder=False)
elif s["source"]["format"] == "coco" or s["source"].get("fields"):   # detection, segmentation: batches of 8
    s["source"].update(path=sys.argv[2], shuffle=True, seed=7, epochs=1)
    if s["source"]["format"] == "coco":
        s["source"]["annotations"] = sys.argv[6] + "/instances.json"
    for f in s["source"].get("fields", {}).values():
        f["path"] = sys.argv[6] + "/masks"
    s["batch"].update(size=8, drop_remainder=False)
else:
    s["source"].update(format="image_folder", path=sys.argv[2], shuffle=True, seed=7, epochs=1)
    s["ops"][0]["op"] = "decode_jpeg"
    s["batch"].update(size=64, drop_remainder=False)     # both sides: batches of 64, as scripts/bench/ops.sh
mix = s["batch"].get("mix")
if mix:
    mix["num_classes"] = 1000
json.dump(s, open(sys.argv[3], "w"))
s["source"]["epochs"] = int(sys.argv[4])
json.dump(s, open(sys.argv[3].replace(".json", "-sp.json"), "w"))' "$recipe" "$DATA" "$OUT/$name.json" "$EPOCHS" \
    "$SPEECH" "$OUT/targets" || continue
  data=$DATA
  grep -q '"decode_audio"\|"decode_wav"' "$recipe" && data=$SPEECH
  for r in $(seq 1 "$RUNS"); do
    tv=$(taskset -c "$CPU" "$PY" scripts/bench/recipes_peer.py "$OUT/$name.json" "$data" |
      "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["per_s"])')
    sp=$(taskset -c "$CPU" "$SPILLCTL" run --local --threads 1 --pipeline "$OUT/$name-sp.json" --warmup-batches 2 \
      --json --quiet |
      "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["elements_per_s"])')
    printf '%s\t%s\t%s\t%s\n' "$name" "$r" "$tv" "$sp" >> "$OUT/results.tsv"
    echo "  $name run $r: peer $tv/s, Spillway $sp/s"
  done
done
echo "bench-recipes: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" scripts/bench/recipes_report.py "$OUT/results.tsv" "$OUT/recipes.md" "$N" "$RUNS" "$CPU"
