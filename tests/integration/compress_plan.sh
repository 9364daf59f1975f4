#!/usr/bin/env bash
# tests/integration/compress_plan.sh - the planner weighs compression: a worker in a network namespace this
# test creates, its link to the client capped (tc tbf, 30 Mbit/s). A trainer with default flags (no --cut, no
# --compress: planned) measures its own elements' compression, the plan compresses the payloads, the batches
# are byte-identical to a local run and `spillctl explain` says so; the same run with --compress off does not
# compress; with the cap lifted the plan ships raw. Needs root (ip netns, tc): else SKIP. Kills and removes
# all it creates.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1
unset SPILLWAY_CUT          # the users' default: planned
netns_usable
DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
# Float32 tensors at the last cut compress about 2.5x (photos, normalized); uint8 images less.
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 8, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [96, 96]}, {"op": "random_horizontal_flip"},
         {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1
run() {             # run NAME [spillctl options...]: ordered, no local share, dump to WORK/NAME
  local name=$1
  shift
  timeout 300 "$B/bin/spillctl" run --dispatcher $NS_NET.1:"$DPORT" --pipeline "$WORK/p.json" --ordered \
    --local-share off --dump "$WORK/$name" --json --quiet "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}

"$B/bin/spillway-dispatcher" --listen $NS_NET.1 --port 0 --heartbeat-ms 200 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || { bad "dispatcher starts"; finish; exit; }
netns_worker 1 || { finish; exit; }
netns_cap 1 30mbit
sleep 0.6

run capped
check "capped, default flags: the run exits 0" test $? -eq 0
level=$(json_field "$WORK/capped.json" '["compress_level"]')
echo "     plan: $(json_field "$WORK/capped.json" '["plan"]["why"]')"
check "capped, default flags: planned, and the streams compressed (level $level)" \
  test "$(json_field "$WORK/capped.json" '["plan"]["planned"]')" = True -a "$level" -ge 1
check "capped: batches byte-identical to a local run" same_batches capped local
JOB=$(json_field "$WORK/capped.json" '["job"]')
"$B/bin/spillctl" --dispatcher $NS_NET.1:"$DPORT" explain "$JOB" > "$WORK/explain.txt" 2>&1
check "spillctl explain says the payloads are compressed" grep -q "payloads compressed (zstd" "$WORK/explain.txt"
run off --compress off
check "capped, --compress off: raw" test "$(json_field "$WORK/off.json" '["compress_level"]')" = 0
check "capped, --compress off: batches byte-identical to a local run" same_batches off local
echo "     bytes received: compressed $(json_field "$WORK/capped.json" '["bytes_received"]'), raw $(json_field "$WORK/off.json" '["bytes_received"]')"

netns_cap 1 off
run free
check "no cap: the run exits 0" test $? -eq 0
echo "     plan: $(json_field "$WORK/free.json" '["plan"]["why"]')"
check "no cap: the plan ships raw" test "$(json_field "$WORK/free.json" '["compress_level"]')" = 0
check "no cap: batches byte-identical to a local run" same_batches free local
finish
