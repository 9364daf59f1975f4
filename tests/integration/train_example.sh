#!/usr/bin/env bash
# tests/integration/train_example.sh - examples/train_resnet.py end to end: a real training loop (a small CNN
# on the 10 classes of the generated image set) fed through a dispatcher and two workers on loopback with
# Spillway's PyTorch loader. Checks the run exits 0, the workers produced elements and the loss falls
# (the mean of the last 10 steps under 70% of the first 10's). Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
start_service 2 || { finish; exit; }
SPILLWAY_LIB=$B/lib/libspillway.so timeout 600 "$PY" "$ROOT/examples/train_resnet.py" --data "$DATA/train" \
  --dispatcher "127.0.0.1:$DPORT" --steps 60 --json > "$WORK/train.out" 2> "$WORK/train.err"
check "the training run exits 0" test $? -eq 0
sed -n 's/^train_resnet: /     /p' "$WORK/train.out"
check "the workers produced elements for it" "$PY" -c "
import json, sys; s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert s['remote_elements'] > 0, s" \
  "$WORK/train.out"
check "the loss falls (last 10 steps under 70% of the first 10)" "$PY" -c "
import json, sys; s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert s['steps'] == 60 and s['last_loss'] < 0.7 * s['first_loss'], s" "$WORK/train.out"
finish
