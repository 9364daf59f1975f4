#!/usr/bin/env bash
# tests/integration/fields_restart.sh - detection boxes (a COCO set) through a journaled dispatcher and two
# workers while both kinds of failure hit one ordered run: a worker killed -9 and the dispatcher killed -9 and
# restarted on its journal. Proves the boxes and their class ids travel with their elements across both: the
# run exits 0 and its batches (padded images, shapes, boxes, labels, counts) are byte-identical to the local
# run's; a worker lying about boxes (a count past its bytes, a NaN corner) has its stream dropped, saying why,
# and the batches stay the local run's. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
/usr/bin/python3 "$ROOT/scripts/data/make_targets.py" "$B/data/cli-test/train" "$WORK/targets" > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "coco", "path": "$B/data/cli-test/train", "annotations": "$WORK/targets/instances.json",
            "shuffle": true, "seed": 4, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resize", "min_size": 40, "max_size": 64},
         {"op": "random_horizontal_flip"}, {"op": "to_tensor"}],
 "batch": {"size": 4, "pad": true}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet 2> "$WORK/local.err"
check "run --local: exits 0" test $? -eq 0
check "run --local: each batch has images, shapes, boxes, class ids and counts" \
  bash -c "[ \$(ls '$WORK/local' | grep -c '^b000000_t[0-4].npy\$') = 5 ]"

WD=$WORK/wd
dispatcher_on d0 --work-dir "$WD" --heartbeat-ms 200 --worker-timeout-ms 2000 || { finish; exit 1; }
add_workers 2 || { finish; exit 1; }
sleep 0.5
# 320 elements at 60/s: about 5 s, so both failures land mid-run.
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
  --local-cores 0 --consume-rate 60 --dump "$WORK/svc" --quiet 2> "$WORK/svc.err" &
C=$!
PIDS+=("$C")
sleep 1.2
kill -9 "${PIDS[1]}"; wait "${PIDS[1]}" 2> /dev/null
sleep 1
check "the run was still going when the dispatcher was killed" kill -0 "$C"
kill -9 "$D"; wait "$D" 2> /dev/null
sleep 0.5
dispatcher_on d1 --work-dir "$WD" --heartbeat-ms 200 --worker-timeout-ms 2000 || bad "the dispatcher restarts"
wait "$C"
check "a worker and the dispatcher killed -9 mid-run: the run exits 0" test $? -eq 0
check "... the restarted dispatcher replayed the job from its journal" \
  grep -q "journal replayed dir=.* jobs=[1-9]" "$WORK/d1.err"
check "... batches with their boxes byte-identical to run --local" same_batches svc local

# A worker lying about the boxes (tests/tools/fakeworker, beside the real ones): a count its bytes cannot hold,
# a corner that is not a number. The client drops its stream saying why; the batches are the local run's.
lying_worker fields-boxes 160 4 'element 0: field boxes: 5000 boxes in 4 bytes' || exit 1
lying_worker fields-boxes-nan 160 4 'element 0: field boxes: box 0 is not finite' || exit 1
finish
