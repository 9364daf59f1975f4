#!/usr/bin/env bash
# tests/integration/recipes.sh - every recipe in examples/pipelines/ (README.md there says which training
# recipe each one is) passes `spillctl validate` as written, and, with its source moved to the test photos
# (an image folder, or the same photos as WebDataset shards; masks and COCO boxes made for them by
# scripts/data/make_targets.py) or speech and batches of 8, runs for two batches in
# process and through a dispatcher and a worker, ordered, with the same bytes. Real processes on loopback;
# kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
SPEECH=$B/data/speech-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$SPEECH" 20 > /dev/null || exit 1
/usr/bin/python3 "$ROOT/scripts/data/make_targets.py" "$DATA/train" "$WORK/targets" || exit 1
start_service 1 --heartbeat-ms 100 || exit 1
n=0
for recipe in "$ROOT"/examples/pipelines/*.json; do
  name=$(basename "$recipe" .json)
  n=$((n + 1))
  "$B/bin/spillctl" validate --pipeline "$recipe" > /dev/null 2> "$WORK/$name.validate.err"
  check "$name: validates as written" test $? -eq 0
  /usr/bin/python3 "$ROOT/tests/integration/checks.py" recipes_on_test_data "$recipe" "$DATA" "$WORK/$name.json" \
    "$SPEECH"
  "$B/bin/spillctl" run --local --pipeline "$WORK/$name.json" --threads 2 --max-batches 2 \
    --dump "$WORK/$name-local" --quiet 2> "$WORK/$name-local.err"
  batches=("$WORK/$name-local"/*_t0.npy)
  check "$name: two batches in process" test "${#batches[@]}" -eq 2
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$name.json" --ordered \
    --local-cores 0 --max-batches 2 --dump "$WORK/$name-remote" --quiet 2> "$WORK/$name-remote.err"
  check "$name: the same two batches through a worker" same_batches "$name-remote" "$name-local"
done
check "every recipe file was tried ($n)" test "$n" -ge 9
finish
