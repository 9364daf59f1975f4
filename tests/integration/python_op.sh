#!/usr/bin/env bash
# tests/integration/python_op.sh - a Python op on workers: a dispatcher and two one-thread workers started with
# --python and --python-path (tests/python, whose pyops_fixture the job names), and a third whose path lacks
# it, which refuses the jobs with that reason (they go on with the other two). An rng-drawing stamp is the
# same, batch for batch and byte for byte, in-process, on the workers only (--cut all) and shared between
# the trainer and the workers (--local-cores 1), all ordered. A function that segfaults on the one black
# image fails that image only: the job ends with every other sample exactly once, the workers live on and
# the trainer's log names the signal; one that never returns on it is killed after timeout_s, likewise.
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
export SPILLWAY_PYTHON=$PY SPILLWAY_PYTHONPATH=$ROOT/tests/python   # the workers' --python, --python-path

# 40 noise PNGs in two classes (exact pixels) and black.png
"$PY" "$ROOT/tests/integration/checks.py" python_op_1 "$WORK/data" || exit 1
spec() {   # spec FILE FUNCTION [TIMEOUT_S]
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/data", "seed": 4, "epochs": 2},
 "ops": [{"op": "decode_image"}, {"op": "center_crop", "size": 20},
         {"op": "python", "function": "pyops_fixture:$2", "timeout_s": ${3:-60}}, {"op": "to_tensor"}],
 "batch": {"size": 8}}
JSON
}
spec "$WORK/p-rng.json" stamp_rng
spec "$WORK/p-crash.json" crash_on_black
spec "$WORK/p-hang.json" hang_on_black 2
same_dump() {   # every file of dump $1 equals dump $2's
  [ "$(ls "$WORK/$1" | wc -l)" = "$(ls "$WORK/$2" | wc -l)" ] || return 1
  for f in "$WORK/$2"/*; do cmp -s "$f" "$WORK/$1/$(basename "$f")" || return 1; done
}

"$B/bin/spillctl" run --local --pipeline "$WORK/p-rng.json" --threads 2 --dump "$WORK/local" --quiet || exit 1
start_service 2 --split-size 8 || { finish; exit 1; }   # 6 splits an epoch: the hybrid run can share them
# a third worker whose Python path lacks the module: it refuses the jobs, which go on with the other two
SPILLWAY_PYTHONPATH='' "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 \
  --threads 1 > "$WORK/w3.out" 2> "$WORK/w3.err" &
PIDS+=($!)
wait_port "$WORK/w3.out" > /dev/null || bad "worker 3 starts"
run() {   # run NAME SPEC [spillctl options...]
  local name=$1 p=$2
  shift 2
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$p" --ordered --dump "$WORK/$name" \
    --json --quiet "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}
run remote "$WORK/p-rng.json" --cut all --local-cores 0
check "on the workers only (--cut all): exit 0" test $? -eq 0
check "... the same batches, byte for byte, as in-process" same_dump remote local
remote_count() { sed -n 's/.*"remote": \([0-9]*\).*/\1/p' "$WORK/$1.json"; }
check "... all 82 elements made by the workers ($(remote_count remote))" test "$(remote_count remote)" -eq 82
# at the pace of a trainer (40 elements/s) and over splits of 8: the trainer's own thread, fast at 32 elements per
# helper round trip, would otherwise take every split
run hybrid "$WORK/p-rng.json" --cut all --local-cores 1 --consume-rate 40
check "shared by the trainer and the workers: exit 0" test $? -eq 0
check "... the same batches, byte for byte" same_dump hybrid local
check "... some made by the workers, some by the trainer ($(remote_count hybrid) remote)" \
  test "$(remote_count hybrid)" -gt 0 -a "$(remote_count hybrid)" -lt 82
check "the workers ran the op (their log has no error)" bash -c "! grep -q ' error ' '$WORK/w1.err' '$WORK/w2.err'"

# The planner's profile counts the helper's CPU as the op's: a function that spends 2 ms of CPU per element
# shows up as such, not as the ~30 us the waiting thread itself spends.
spec "$WORK/p-heavy.json" busy
WPORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$WORK/w1.out")
"$B/bin/spillctl" profile --worker "127.0.0.1:$WPORT" --pipeline "$WORK/p-heavy.json" --samples 32 --json \
  > "$WORK/profile.json" 2> "$WORK/profile.err"
us=$("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["cut"]: x["ns_per_element"] for x in d["cuts"]}
print(int((c[2] - c[1]) / 1000))' "$WORK/profile.json" 2>> "$WORK/profile.err")
check "the worker's profile counts the helper's CPU as the python op's (${us:-?} us per element)" \
  test "${us:-0}" -ge 1500

run crash "$WORK/p-crash.json" --cut all --local-cores 0
check "a segfault on one image: the job ends (exit 0)" test $? -eq 0
n=$(wc -l < "$WORK/crash/keys.txt")
check "... with the 80 other samples of its two epochs ($n)" test "$n" -eq 80
check "... each once" test "$(sort "$WORK/crash/keys.txt" | uniq -d | wc -l)" -eq 0
check "... none of them black.png" bash -c "! grep -q black.png '$WORK/crash/keys.txt'"
check "... the trainer's log names the signal and the file" \
  grep -q 'black.png.*its helper process died (signal 11 (Segmentation fault))' "$WORK/crash.err"
check "... the workers live on" bash -c "kill -0 $(pgrep -d ' ' -f "spillway-worker --dispatcher 127.0.0.1:$DPORT")"

run hang "$WORK/p-hang.json" --cut all --local-cores 0
check "a function that never returns on one image (timeout_s 2): the job ends (exit 0)" test $? -eq 0
check "... with the 80 other samples, each once" \
  test "$(sort -u "$WORK/hang/keys.txt" | wc -l)" -eq 80 -a "$(wc -l < "$WORK/hang/keys.txt")" -eq 80
check "... the trainer's log names the timeout and the file" \
  grep -q 'black.png.*no result within its timeout_s of 2 s: the helper was killed' "$WORK/hang.err"
check "... the workers live on" bash -c "kill -0 $(pgrep -d ' ' -f "spillway-worker --dispatcher 127.0.0.1:$DPORT")"

# Checked last: which of the four jobs worker 3 is asked to serve depends on when its task poll falls (the
# first two may end within a second); the timeout job lasts longer than a poll.
check "the worker without the module refused the jobs, saying why" \
  grep -q 'cannot serve job=[0-9]*: ops\[2\] python: cannot import pyops_fixture:[a-z_]*: ModuleNotFoundError' \
  "$WORK/w3.err"
finish
