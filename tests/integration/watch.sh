#!/usr/bin/env bash
# tests/integration/watch.sh - spillctl watch, live. Proves: run in a terminal (tmux), it shows the running
# job with its rate against the plan and the trainer, its producers, and both workers, redrawn in place (one
# header on the screen) with counts that change between two captures a second apart; with stdout not a
# terminal, --count 2 appends two views; a bad --job is refused with exit 2. Real processes on loopback; kills
# all it starts (and its tmux session).
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

command -v tmux > /dev/null || { echo "watch.sh: needs tmux (scripts/install-deps.sh)"; exit 1; }
SESSION=spw-watch-$$
trap 'tmux kill-session -t "$SESSION" 2> /dev/null; cleanup' EXIT
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "shuffle": true, "seed": 5, "epochs": 400},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
start_service 2 --heartbeat-ms 200 || { finish; exit 1; }
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --cut auto \
  --consume-rate 300 --local-share off --max-seconds 20 --quiet > /dev/null 2> "$WORK/run.err" &
RUN=$!
sleep 3
tmux new-session -d -s "$SESSION" -x 150 -y 40 \
  "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT watch --interval-ms 500; sleep 60"
sleep 2
tmux capture-pane -p -t "$SESSION" > "$WORK/screen1.txt"
sleep 1.5
tmux capture-pane -p -t "$SESSION" > "$WORK/screen2.txt"
check "under tmux it shows the running job (its rate, the plan's 300, the trainer's)" \
  grep -Eq '^1 +running +[0-9]+ +[0-9]+ +300 +[0-9]+ +[0-9.]+%' "$WORK/screen1.txt"
check "... its producers, both workers" bash -c "grep -q ' worker:1 ' '$WORK/screen1.txt' && grep -q ' worker:2 ' \
  '$WORK/screen1.txt'"
check "... and the workers table, both alive" \
  test "$(grep -Ec '^[12] +127\.0\.0\.1:[0-9]+ +yes ' "$WORK/screen1.txt")" = 2
check "... redrawn in place: one header on the screen" test "$(grep -c '^spillway watch:' "$WORK/screen2.txt")" = 1
# The job's elements over both workers: with the trainer the bound, leases may go to either worker, so one
# worker's count alone can stand still between two views.
elements() { sed -n 's/^ *worker:[0-9]* .* \([0-9]*\) elements$/\1/p' "$1" | awk '{ n += $1 } END { print n }'; }
E1=$(elements "$WORK/screen1.txt")
E2=$(elements "$WORK/screen2.txt")
check "... with changing counts (the workers: $E1, then $E2 elements)" \
  test -n "$E1" -a -n "$E2" -a "${E1:-0}" != "${E2:-0}"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" watch --count 2 --interval-ms 200 > "$WORK/plain.txt"
check "not a terminal: --count 2 appends two views" test "$(grep -c '^spillway watch:' "$WORK/plain.txt")" = 2
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" watch --job x > /dev/null 2> "$WORK/bad.err"
check "a bad --job: exit 2" bash -c "[ $? -eq 2 ] && grep -q 'needs a job id' '$WORK/bad.err'"
wait "$RUN"
finish
