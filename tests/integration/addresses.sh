#!/usr/bin/env bash
# tests/integration/addresses.sh - workers are registered under addresses their clients can dial, and a
# worker a client cannot reach is never a silent fallback. A dispatcher on :: and three workers: one with
# default flags (listening on 0.0.0.0, no --advertise), one listening on :: that calls the dispatcher over
# [::1], one advertising an address nobody listens on. Proves: the first two are registered under the
# address the dispatcher saw them call from (127.0.0.1:PORT, [::1]:PORT) and both stream elements of a job;
# --advertise wins; the client logs the unreachable one once (id, address, status), the dispatcher stops
# giving it the job and `spillctl job` shows why; every key arrives exactly once. Real processes on
# loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 9, "epochs": 8},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]}, {"op": "rand_augment"}],
 "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1

"$B/bin/spillway-dispatcher" --listen :: --port 0 --heartbeat-ms 100 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
worker() {   # worker NAME DISPATCHER-ADDRESS [FLAGS...]: sets PORT to its bound port
  local name=$1 disp=$2
  shift 2
  "$B/bin/spillway-worker" --dispatcher "$disp" --port 0 --threads 1 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PIDS+=($!)
  PORT=$(wait_port "$WORK/$name.out")
}
worker v4 "127.0.0.1:$DPORT" || exit 1
p4=$PORT
worker v6 "[::1]:$DPORT" --listen :: || exit 1
p6=$PORT
worker lost "127.0.0.1:$DPORT" --listen 127.0.0.1 --advertise 127.0.0.1:9 || exit 1
sleep 0.5
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json > "$WORK/workers.json"
addrs=$(python3 -c 'import json,sys; print(" ".join(sorted(w["address"] for w in json.load(open(sys.argv[1]))["workers"])))' "$WORK/workers.json")
check "default flags: registered as 127.0.0.1:$p4, not 0.0.0.0 (got: $addrs)" grep -q "\"127.0.0.1:$p4\"" "$WORK/workers.json"
check "listening on ::, calling over ::1: registered as [::1]:$p6" grep -q "\"\\[::1\\]:$p6\"" "$WORK/workers.json"
check "--advertise wins" grep -q '"127.0.0.1:9"' "$WORK/workers.json"
check "the worker logs the address it is registered under" grep -q "registered worker=.* address=127.0.0.1:$p4" "$WORK/v4.err"

timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered --local-cores 0 --consume-rate 300 \
  --dump "$WORK/svc" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err"
check "the job exits 0" test $? -eq 0
check "batches identical to a local run (every key once)" \
  bash -c "for f in '$WORK/local'/*; do cmp -s \"\$f\" '$WORK/svc/'\$(basename \"\$f\") || exit 1; done"
check "the client says once that it cannot reach the advertised-only worker" \
  test "$(grep -c 'cannot reach worker=[0-9]* address=127.0.0.1:9 status=UNAVAILABLE' "$WORK/run.err")" -eq 1
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/run.json")
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$job" --json > "$WORK/job.json"
check "both reachable workers produced elements, the lost one none" python3 "$ROOT/tests/integration/checks.py" addresses_1 "$WORK/job.json" "$WORK/workers.json"

finish
