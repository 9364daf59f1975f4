#!/usr/bin/env bash
# tests/integration/exactly_once.sh - a dispatcher, real worker processes and a consumer (tests/tools/
# pullclient) on loopback: every (epoch, position) of a 2-epoch job arrives exactly once after dedupe —
# with two healthy workers, with a worker killed (-9) mid-run, with a worker stopped past its timeout and
# continued (a zombie), and for two jobs at once sharing the workers. The fault runs read at 800 elements/s
# (PULLCLIENT_RATE: the workers held back by their credits), so that the faults land mid-run on a fast machine
# too. Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
pipeline() {  # pipeline FILE SEED [EPOCHS]
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": $2, "epochs": ${3:-2}},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON
}
start_cluster() {   # start_cluster NAME: a dispatcher and two workers; sets DPORT, W1, W2
  "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --worker-timeout-ms 800 \
    --speculate-after-ms 3000 > "$WORK/$1-d.out" 2> "$WORK/$1-d.err" &
  PIDS+=($!)
  DPORT=$(wait_port "$WORK/$1-d.out") || return 1
  for i in 1 2; do
    "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
      > "$WORK/$1-w$i.out" 2> "$WORK/$1-w$i.err" &
    PIDS+=($!)
    eval "W$i=$!"
    wait_port "$WORK/$1-w$i.out" > /dev/null || return 1
  done
  sleep 0.3
}

pipeline "$WORK/p1.json" 7
pipeline "$WORK/p2.json" 8
pipeline "$WORK/longer.json" 10 24    # 3840 elements: ~4.8 s at 800 elements/s, the faults at 0.5-2 s

start_cluster healthy || exit 1
timeout 60 "$B/tests/pullclient" "127.0.0.1:$DPORT" "$WORK/p1.json" 40 > "$WORK/healthy.json"
check "healthy: every position of 2 epochs exactly once" test "$(json_field "$WORK/healthy.json" '["exactly_once"]')" = True
check "healthy: 320 elements, none dropped" test "$(json_field "$WORK/healthy.json" '["elements"]')" = 320
check "healthy: both workers produced" bash -c "grep -q 'serving job=' '$WORK/healthy-w1.err' && grep -q 'serving job=' '$WORK/healthy-w2.err'"

timeout 60 "$B/tests/pullclient" "127.0.0.1:$DPORT" "$WORK/p1.json" 40 > "$WORK/j1.json" &
C1=$!
timeout 60 "$B/tests/pullclient" "127.0.0.1:$DPORT" "$WORK/p2.json" 40 > "$WORK/j2.json" &
C2=$!
wait "$C1"; wait "$C2"
check "two jobs at once: both exactly once" bash -c "[ \"\$(sed -n 's/.*\"exactly_once\": \\([a-z]*\\).*/\\1/p' '$WORK/j1.json' '$WORK/j2.json' | sort -u)\" = true ]"

PULLCLIENT_RATE=800 timeout 60 "$B/tests/pullclient" "127.0.0.1:$DPORT" "$WORK/longer.json" 50 > "$WORK/killed.json" &
C=$!
sleep 0.5
kill -9 "$W1"; wait "$W1" 2>/dev/null
sleep 1.2
check "worker killed mid-run: the dispatcher declares it dead" grep -q 'worker dead' "$WORK/healthy-d.err"
check "worker killed mid-run: the job was still running then" bash -c "kill -0 $C 2>/dev/null"
wait "$C"
check "worker killed mid-run: still exactly once" test "$(json_field "$WORK/killed.json" '["exactly_once"]')" = True

"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w3.out" 2> "$WORK/w3.err" &
PIDS+=($!)
W3=$!
wait_port "$WORK/w3.out" > /dev/null
sleep 0.3
PULLCLIENT_RATE=800 timeout 60 "$B/tests/pullclient" "127.0.0.1:$DPORT" "$WORK/longer.json" 50 > "$WORK/zombie.json" &
C=$!
sleep 0.5
kill -STOP "$W2"; sleep 1.5; kill -CONT "$W2"
check "zombie: the job was still running when it came back" bash -c "kill -0 $C 2>/dev/null"
wait "$C"
check "worker stopped past its timeout, then continued: still exactly once" test "$(json_field "$WORK/zombie.json" '["exactly_once"]')" = True
check "the zombie registered again" grep -q 'registering again' "$WORK/healthy-w2.err"
kill -TERM "$W3" "$W2"

finish
