#!/usr/bin/env bash
# tests/integration/augment_placement.sh - the recipe ops give the same batches wherever they run: a pipeline
# of the SSL colour ops (random_grayscale, random_posterize, random_solarize, random_equalize,
# random_autocontrast, random_invert, random_adjust_sharpness) run ordered through a dispatcher and
# two workers at every cut, workers only and with the client producing too, is byte-identical to run
# --local: each op's draws come from the sample's own stream, not from the thread or machine that runs it.
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 21, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]},
         {"op": "random_grayscale", "p": 0.2}, {"op": "random_posterize", "bits": 4},
         {"op": "random_solarize", "threshold": 128, "p": 0.3}, {"op": "random_equalize", "p": 0.4},
         {"op": "random_autocontrast"}, {"op": "random_invert", "p": 0.2},
         {"op": "random_adjust_sharpness", "sharpness_factor": 2.0},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet \
  2> "$WORK/local.err"
check "run --local: exits 0" test $? -eq 0
start_service 2 --heartbeat-ms 100 || exit 1
for cut in 1 2 3; do
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --cut "$cut" --local-cores 0 --dump "$WORK/cut$cut" --json --quiet > "$WORK/cut$cut.json" 2> "$WORK/cut$cut.err"
  check "cut $cut, workers only: exits 0" test $? -eq 0
  check "cut $cut, workers only: batches byte-identical to run --local" same_batches "cut$cut" local
done
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered --cut 2 \
  --local-cores 1 --dump "$WORK/hybrid" --json --quiet > "$WORK/hybrid.json" 2> "$WORK/hybrid.err"
check "cut 2, hybrid: exits 0" test $? -eq 0
check "cut 2, hybrid: batches byte-identical to run --local" same_batches hybrid local
check "cut 2, hybrid: both the workers and the client produced" /usr/bin/python3 -c "import json,sys
p=json.load(open('$WORK/hybrid.json'))['producers']; sys.exit(not (p['remote'] > 0 and p['local'] > 0))"
finish
