#!/usr/bin/env bash
# tests/integration/ddp_example.sh - examples/ddp.py end to end: two data-parallel ranks (torch.distributed,
# gloo on loopback, DistributedDataParallel) train one small CNN, both fed by one Spillway job (job_name)
# through a dispatcher and two workers. Checks: the run exits 0, both ranks ran every step, they shared one
# job the workers produced for, each rank's epoch holds its own 64 samples (4 batches of 16, drop_remainder)
# disjoint from the other rank's, and the loss falls. Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
start_service 2 || { finish; exit; }
mkdir -p "$WORK/keys"
# In its own process group: the ranks it spawns go too, whatever happens to it.
SPILLWAY_LIB=$B/lib/libspillway.so setsid timeout 600 "$PY" "$ROOT/examples/ddp.py" --data "$DATA/train" \
  --dispatcher "127.0.0.1:$DPORT" --steps 40 --json --keys-out "$WORK/keys" > "$WORK/ddp.out" 2> "$WORK/ddp.err" &
group=$!
wait $group
rc=$?
kill -9 -- -$group 2> /dev/null
check "the two-rank run exits 0" test $rc -eq 0
sed -n 's/^ddp: /     /p' "$WORK/ddp.out"
check "both ranks ran 40 steps" "$PY" -c "
import json, sys; s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert s['steps'] == [40, 40], s" \
  "$WORK/ddp.out"
check "the ranks shared one job and the workers produced for both" "$PY" -c "
import json, sys
r = [json.load(open('%s/rank%d.json' % (sys.argv[1], i))) for i in (0, 1)]
assert r[0]['job'] == r[1]['job'] > 0 and all(x['remote_elements'] > 0 for x in r), [(x['job'], x['remote_elements']) for x in r]" \
  "$WORK/keys"
check "each epoch: 64 samples per rank, disjoint" "$PY" -c "
import json, sys
keys = [json.load(open('%s/rank%d.json' % (sys.argv[1], i)))['keys'] for i in (0, 1)]
full = 40 // 4                                  # epochs wholly trained on: 4 batches per rank each
for e in range(full):
    mine = [[s for ep, s in k if ep == e] for k in keys]
    assert all(len(m) == 64 == len(set(m)) for m in mine), (e, [len(m) for m in mine])
    assert not set(mine[0]) & set(mine[1]), ('epoch %d: the ranks share samples' % e)" "$WORK/keys"
check "the loss falls (last 10 steps under 75% of the first 10)" "$PY" -c "
import json, sys; s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert s['last_loss'] < 0.75 * s['first_loss'], s" "$WORK/ddp.out"
finish
