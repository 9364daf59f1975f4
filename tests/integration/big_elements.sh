#!/usr/bin/env bash
# tests/integration/big_elements.sh - elements too big to send or to make fail clearly, never by a silent
# rescue: a spec whose elements are fixed above the 64 MiB message cap (by a resize, or by what a Python op
# declares) is refused at CreateJob naming the op and size; a 5000x5000 photo decoded on a worker (cut 1) is over the cap once made, and a 4500x4500 one on a
# worker under `ulimit -v` cannot be allocated: under on_error fail the run fails naming the file and the
# cause within seconds, under skip the other samples arrive and the trainer's log says why that one did not.
# Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
for n in 5000 4500; do
  mkdir -p "$WORK/d$n/a"
  find "$DATA/train" -name '*.JPEG' | LC_ALL=C sort | head -7 | xargs cp -t "$WORK/d$n/a"
  /usr/bin/python3 "$ROOT/tests/integration/checks.py" big_elements_1 "$n" "$WORK/d$n/a/big.jpg" || exit 1
done
spec() {   # spec FILE DIR OPS POLICY
  printf '{"source": {"format": "image_folder", "path": "%s", "shuffle": false}, "ops": %s, "batch": {"size": 4}, "on_error": "%s"}\n' \
    "$2" "$3" "$4" > "$1"
}
CUT1='[{"op": "decode_jpeg"}, {"op": "adjust_brightness", "factor": 1.1}, {"op": "center_crop", "size": [64, 64]}]'

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --worker-timeout-ms 600 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w.out" 2> "$WORK/w.err" &
W=$!
PIDS+=("$W")
wait_port "$WORK/w.out" > /dev/null || exit 1
idle=$(awk '/^VmSize/ {print $2}' "/proc/$W/status")     # kB: the worker's address space before any job
run() {    # run NAME SPEC [FLAGS]: through the dispatcher, everything on the workers
  local name=$1 spec=$2
  shift 2
  timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$spec" --local-share off --json \
    "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
  echo $? > "$WORK/$name.rc"
}

spec "$WORK/fixed.json" "$WORK/d5000" '[{"op": "decode_jpeg"}, {"op": "resize", "size": [5000, 5000]}, {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}]' fail
run fixed "$WORK/fixed.json"
check "fixed-size elements over the cap: CreateJob refused (exit 1)" test "$(cat "$WORK/fixed.rc")" -eq 1
check "... naming the op and the size" \
  grep -q 'ops\[2\] (normalize) makes elements of 300000000 bytes at cut 1, over the [0-9]*-byte message cap' "$WORK/fixed.err"

# a Python op that declares its output: the size is known before any worker imports the function
spec "$WORK/fixed-py.json" "$WORK/d5000" '[{"op": "decode_jpeg"}, {"op": "center_crop", "size": 64}, {"op": "python", "function": "no_such_module:f", "output_shape": [4096, 4096, 3], "output_dtype": "float32"}]' fail
run fixed-py "$WORK/fixed-py.json" --cut all
check "a Python op declaring elements over the cap: CreateJob refused (exit 1)" \
  test "$(cat "$WORK/fixed-py.rc")" -eq 1
check "... naming the op and the size" \
  grep -q 'ops\[2\] (python) makes elements of 201326592 bytes at cut 2, over the [0-9]*-byte message cap' \
  "$WORK/fixed-py.err"

spec "$WORK/over-fail.json" "$WORK/d5000" "$CUT1" fail
run over-fail "$WORK/over-fail.json" --cut 1
check "an element made over the cap, fail: exit 1" test "$(cat "$WORK/over-fail.rc")" -eq 1
check "... naming the file, the size and the op" \
  grep -q 'run failed:.*/d5000/a/big.jpg: an element of 75000000 bytes (after decode_jpeg) exceeds the message cap' \
  "$WORK/over-fail.err"
check "... without rescuing a head batch" bash -c "! grep -q 'head batch stalled' '$WORK/over-fail.err'"
spec "$WORK/over-skip.json" "$WORK/d5000" "$CUT1" skip
run over-skip "$WORK/over-skip.json" --cut 1
check "an element made over the cap, skip: exit 0, 7 of 8 delivered" \
  python3 -c "import json,sys; j=json.load(open('$WORK/over-skip.out')); sys.exit(not (j['elements'] == 7 and j['skipped'] == 1))"
check "... the trainer's log says why" grep -q 'skipped .*path=".*/d5000/a/big.jpg" err="an element of 75000000 bytes' \
  "$WORK/over-skip.err"

# The same worker under a virtual-memory limit: room to run, not to hold a 4500x4500 photo twice.
kill "$W"; wait "$W" 2>/dev/null
(ulimit -v $((idle + 90 * 1024)); exec "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 \
  --port 0 --threads 1 > "$WORK/wl.out" 2> "$WORK/wl.err") &
WL=$!
PIDS+=("$WL")
wait_port "$WORK/wl.out" > /dev/null || exit 1
sleep 1.2                                   # the killed worker is dead at the dispatcher (600 ms)
spec "$WORK/oom-fail.json" "$WORK/d4500" "$CUT1" fail
run oom-fail "$WORK/oom-fail.json" --cut 1 --workers 1
check "a worker out of memory, fail: exit 1" test "$(cat "$WORK/oom-fail.rc")" -eq 1
check "... naming the file and the cause" grep -q 'run failed:.*/d4500/a/big.jpg: .*\(out of memory\|no memory\)' \
  "$WORK/oom-fail.err"
check "... the worker logs it and stays alive" \
  bash -c "grep -q 'failed job=.*big.jpg.*memory' '$WORK/wl.err' && kill -0 $WL"

finish
