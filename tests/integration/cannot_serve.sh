#!/usr/bin/env bash
# tests/integration/cannot_serve.sh - a worker that cannot serve a job stays alive and says why: next to a
# good worker, one runs in a private mount namespace where the dataset's folder is missing (a node without the
# mount) and one where a listed file is missing (data that differs from the dispatcher's listing), while one
# whose folder holds an extra file serves the job from the dispatcher's listing. Proves:
# both log `cannot serve job=N: <reason>` once and keep running; the dispatcher stops giving them the job and
# `spillctl job`/`workers` show the reasons; the job finishes exactly once from the good worker; with the good
# worker gone, a client with no threads of its own fails naming the reason instead of crawling, and one with
# its own threads finishes the job itself. Real processes on loopback (root: unshare -m); kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

if ! unshare --mount --propagation private true 2>/dev/null; then
  echo "cannot_serve: needs root for a private mount namespace (unshare -m)" >&2
  exit 1
fi
DATA=$WORK/data
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
mkdir -p "$DATA" && cp -r "$B/data/cli-test/train" "$DATA/train"
cp -r "$DATA/train" "$WORK/train-extra"
first=$(find "$WORK/train-extra" -name '*.JPEG' | sort | head -1)
cp "$first" "$(dirname "$first")/zz-extra.JPEG"
cp -r "$DATA/train" "$WORK/train-missing"
rm "$(find "$WORK/train-missing" -name '*.JPEG' | sort | tail -1)"
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 3, "epochs": 3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]}, {"op": "random_horizontal_flip"}],
 "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --worker-timeout-ms 600 \
  > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
declare -A WPID
worker() {   # worker NAME [SHELL COMMANDS RUN FIRST IN ITS OWN MOUNT NAMESPACE]
  local name=$1 setup=${2:-true}
  unshare --mount --propagation private bash -c "$setup && exec \"\$0\" \"\$@\"" "$B/bin/spillway-worker" \
    --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PIDS+=($!)
  WPID[$name]=$!
  wait_port "$WORK/$name.out" > /dev/null || { bad "worker $name starts"; finish; exit 1; }
}
worker good
worker nomount "mount -t tmpfs none '$DATA'"
worker missing "mount --bind '$WORK/train-missing' '$DATA/train'"
worker extra "mount --bind '$WORK/train-extra' '$DATA/train'"
sleep 0.5

same_as_local() {   # same_as_local DIR: every batch and key identical to the local run
  for f in "$WORK/local"/*; do cmp -s "$f" "$1/$(basename "$f")" || return 1; done
}
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
  --local-cores 0 --dump "$WORK/j1" --quiet > /dev/null 2> "$WORK/c1.err"
check "job 1 exits 0 with two of four workers unable to serve it" test $? -eq 0
check "job 1: batches identical to a local run (every key once)" same_as_local "$WORK/j1"
check "the worker without the mount is alive" kill -0 "${WPID[nomount]}"
check "the worker missing a file is alive" kill -0 "${WPID[missing]}"
check "the worker without the mount says why, once" \
  test "$(grep -c 'cannot serve job=1: .*train' "$WORK/nomount.err")" -eq 1
check "the worker missing a file says why, once" \
  test "$(grep -c 'cannot serve job=1: the dataset listing differs from the dispatcher.s (159 samples' "$WORK/missing.err")" -eq 1
check "... having found the file missing from the dispatcher's listing" \
  grep -q "listing the source here job=1: the dispatcher's listing: the dispatcher's listing names .*: No such file" \
  "$WORK/missing.err"
check "neither produced for job 1" bash -c "! grep -q 'serving job=1' '$WORK/nomount.err' '$WORK/missing.err'"
check "the worker with an extra file serves job 1 from the dispatcher's listing" bash -c \
  "grep -q \"source from the dispatcher's listing job=1 samples=160\" '$WORK/extra.err' && grep -q 'serving job=1' '$WORK/extra.err'"
check "the dispatcher logs each refusal once" test "$(grep -c 'worker cannot serve .*job=1 ' "$WORK/d.err")" -eq 2
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job 1 > "$WORK/job1.txt" 2>&1
check "spillctl job shows both reasons" \
  bash -c "grep -q 'cannot serve this job: .*listing differs' '$WORK/job1.txt' && grep -q 'cannot serve this job: .*train' '$WORK/job1.txt'"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json > "$WORK/workers.json" 2>&1
check "spillctl workers --json lists each refusal under its worker" python3 "$ROOT/tests/integration/checks.py" cannot_serve_1 "$WORK/workers.json"

# The good workers go: nobody else can serve the next jobs.
kill -9 "${WPID[good]}" "${WPID[extra]}"; wait "${WPID[good]}" "${WPID[extra]}" 2>/dev/null
sleep 1
timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --quiet > /dev/null 2> "$WORK/c2.err"
rc=$?
check "job 2 with no producer fails (exit 1, not a timeout): got $rc" test "$rc" -eq 1
check "job 2's error names the reason" \
  grep -q 'no producer can serve job 2: every worker refused it; worker [0-9]*: ' "$WORK/c2.err"
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
  --local-cores 1 --dump "$WORK/j3" --quiet > /dev/null 2> "$WORK/c3.err"
check "job 3 with its own thread finishes from the client" test $? -eq 0
check "job 3: batches identical to a local run" same_as_local "$WORK/j3"
check "job 3's client says no worker can serve it" grep -q 'no worker can serve job=3: ' "$WORK/c3.err"
check "both refusing workers still alive at the end" kill -0 "${WPID[nomount]}" "${WPID[missing]}"

finish
