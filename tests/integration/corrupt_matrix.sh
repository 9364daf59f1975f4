#!/usr/bin/env bash
# tests/integration/corrupt_matrix.sh - the job's on_error policy holds wherever a sample is produced: 20 good
# JPEGs and 4 broken files (cut short, zero bytes, not a JPEG, absurd dimensions) run in-process, through a
# dispatcher and a worker with the client's own thread (hybrid), with --local-share off (every sample on the
# worker) and at --cut 0 (the worker ships file bytes, the client decodes), each under on_error skip and
# fail. Proves: every mode gives the same exit code; under skip the same 20 keys, 4 skipped, and each broken
# file named in the trainer's own log; under fail a run that fails naming a broken file. Real processes on
# loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
mkdir -p "$WORK/bad/a" "$WORK/bad/b"
find "$DATA/train" -name '*.JPEG' | LC_ALL=C sort | head -20 | xargs cp -t "$WORK/bad/a"
good=$(find "$DATA/train" -name '*.JPEG' | LC_ALL=C sort | head -1)
python3 "$ROOT/tests/data/make_broken_jpegs.py" "$good" "$WORK/bad/b" || exit 1
for policy in skip fail; do
  cat > "$WORK/$policy.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/bad", "shuffle": true, "seed": 1, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"}],
 "batch": {"size": 8}, "on_error": "$policy"}
JSON
done

start_service 1 --heartbeat-ms 100 || exit 1
declare -A FLAGS=([local]="--local --threads 2" [hybrid]="--dispatcher 127.0.0.1:$DPORT --local-cores 1"
                  [remote]="--dispatcher 127.0.0.1:$DPORT --local-share off"
                  [cut0]="--dispatcher 127.0.0.1:$DPORT --cut 0 --local-share off")
keys() { awk '{print $1, $2}' "$1/keys.txt" | sort; }
for mode in local hybrid remote cut0; do
  for policy in skip fail; do
    out=$WORK/$mode-$policy
    # shellcheck disable=SC2086  # FLAGS hold several words
    timeout 120 "$B/bin/spillctl" run ${FLAGS[$mode]} --pipeline "$WORK/$policy.json" --dump "$out" --json \
      > "$out.json" 2> "$out.err"
    echo $? > "$out.rc"
  done
  check "$mode, skip: exits 0" test "$(cat "$WORK/$mode-skip.rc")" -eq 0
  check "$mode, skip: the same 20 keys as in-process" \
    bash -c "[ \"\$(awk '{print \$1, \$2}' '$WORK/$mode-skip/keys.txt' | sort)\" = \"\$(awk '{print \$1, \$2}' '$WORK/local-skip/keys.txt' | sort)\" ] && [ \$(wc -l < '$WORK/$mode-skip/keys.txt') -eq 20 ]"
  check "$mode, skip: 4 skipped" \
    python3 -c "import json,sys; sys.exit(json.load(open('$WORK/$mode-skip.json'))['skipped'] != 4)"
  for f in truncated empty text huge; do
    check "$mode, skip: the trainer's log names $f.jpg" grep -q "skipped .*path=\"[^\"]*/bad/b/$f.jpg\"" \
      "$WORK/$mode-skip.err"
  done
  check "$mode, skip: no stream was closed as malformed" bash -c "! grep -q 'bad message from worker' '$WORK/$mode-skip.err'"
  check "$mode, fail: exits 1" test "$(cat "$WORK/$mode-fail.rc")" -eq 1
  check "$mode, fail: the error names a broken file" grep -q 'run failed:.*/bad/b/[a-z]*\.jpg' "$WORK/$mode-fail.err"
done
check "the worker produced for the remote modes" grep -q 'skipped job=.* path=".*/bad/b/' "$WORK/w1.err"

finish
