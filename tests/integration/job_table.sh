#!/usr/bin/env bash
# tests/integration/job_table.sh - a long-lived dispatcher serves jobs without end: 1000 small jobs one after
# another, then 300 more from 8 concurrent clients, on one dispatcher with its default limits (256 unfinished
# jobs, finished ones kept 60 s). Proves: every CreateJob succeeds (each job delivers its keys once), the
# dispatcher's RSS after the first 100 jobs stays within 10 MB, ended jobs stay listable (bounded history),
# and an unfinished job whose clients are gone leaves the table after --paused-job-ms. Real processes on
# loopback (spillway.Loader over libspillway.so); kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH}
export SPILLWAY_LIB=$B/lib/libspillway.so
mkdir -p "$WORK/data/a"
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
find "$B/data/cli-test/train" -name '*.JPEG' | sort | head -8 | xargs cp -t "$WORK/data/a"

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --paused-job-ms 3000 > "$WORK/d.out" 2> "$WORK/d.err" &
DPID=$!
PIDS+=("$DPID")
DPORT=$(wait_port "$WORK/d.out") || exit 1
rss() { awk '/^VmRSS/ {print $2}' "/proc/$DPID/status"; }   # kB
churn() { /usr/bin/python3 "$ROOT/tests/integration/job_churn.py" "127.0.0.1:$DPORT" "$WORK/data" "$1"; }
watch_rss() { while kill -0 "$DPID" 2>/dev/null; do rss >> "$WORK/rss.txt"; sleep 0.2; done; }

churn 100 > "$WORK/c0.out" 2> "$WORK/c0.err"
check "the first 100 sequential jobs succeed" grep -q '^ok 100$' "$WORK/c0.out"
base=$(rss)
: > "$WORK/rss.txt"
watch_rss &
WATCH=$!
PIDS+=("$WATCH")
t0=$(date +%s)
churn 900 > "$WORK/c1.out" 2> "$WORK/c1.err"
check "900 more sequential jobs succeed (1000 in all, past the old lifetime cap of 256)" \
  grep -q '^ok 900$' "$WORK/c1.out"
echo "   1000 sequential jobs: $(( $(date +%s) - t0 )) s for the last 900"
cpids=()
for c in $(seq 1 8); do
  churn 38 > "$WORK/p$c.out" 2> "$WORK/p$c.err" &
  cpids+=($!)
done
okc=0
for c in $(seq 1 8); do wait "${cpids[$((c - 1))]}" && grep -q '^ok 38$' "$WORK/p$c.out" && okc=$((okc + 1)); done
check "304 jobs from 8 concurrent clients succeed ($okc of 8 clients ok)" test "$okc" -eq 8
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
peak=$(sort -n "$WORK/rss.txt" | tail -1)
echo "   dispatcher RSS: ${base} kB after 100 jobs, peak ${peak} kB over the next 1204"
check "dispatcher RSS stays within 10 MB of where it was after 100 jobs" test $((peak - base)) -le 10240
check "no CreateJob was refused" bash -c "! grep -q 'too many' '$WORK'/*.err"

"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json > "$WORK/jobs.json" 2>&1
check "spillctl jobs lists the live table and a bounded history of ended jobs" python3 "$ROOT/tests/integration/checks.py" job_table_1 "$WORK/jobs.json"
first_ended=$(python3 -c 'import json,sys; print([j["job"] for j in json.load(open(sys.argv[1]))["jobs"] if j["ended"]][0])' "$WORK/jobs.json")
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$first_ended" > "$WORK/ended.txt" 2>&1
check "spillctl job shows an ended job's summary" grep -q 'ended: the job left the dispatcher' "$WORK/ended.txt"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job 1 > "$WORK/gone.txt" 2>&1
check "a job older than the history is unknown, and says so" grep -q 'ended longer ago than the' "$WORK/gone.txt"

# A client that leaves mid-job keeping its job (--keep-job): the job pauses, stays resumable for
# --paused-job-ms, then leaves the table.
cat > "$WORK/forever.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/data", "shuffle": true, "seed": 1, "epochs": 0},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [16, 16]}], "batch": {"size": 4}}
JSON
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/forever.json" --max-batches 3 --keep-job \
  --quiet > /dev/null 2> "$WORK/f.err"
id=$("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json | python3 -c \
  'import json,sys; print(max(j["job"] for j in json.load(sys.stdin)["jobs"]))')
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$id" > "$WORK/paused.txt" 2>&1
check "a job its client left is paused, still in the table" grep -q "^$id .* paused" "$WORK/paused.txt"
sleep 4
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$id" > "$WORK/expired.txt" 2>&1
check "after --paused-job-ms it has left the table as expired" \
  bash -c "grep -q '^$id .* expired' '$WORK/expired.txt' && grep -q 'ended: the job left' '$WORK/expired.txt'"
check "the dispatcher logged its removal" grep -q "job removed job=$id state=expired" "$WORK/d.err"

# Caps are per client host: three unfinished jobs from one host fill --max-jobs-per-client 3; a fourth from it
# is refused naming the cap, one from another address (::1) is served.
"$B/bin/spillway-dispatcher" --listen :: --insecure --port 0 --max-jobs-per-client 3 > "$WORK/d2.out" 2> "$WORK/d2.err" &
PIDS+=($!)
D2=$(wait_port "$WORK/d2.out") || exit 1
for k in 1 2 3; do
  "$B/bin/spillctl" run --dispatcher "127.0.0.1:$D2" --pipeline "$WORK/forever.json" --consume-rate 5 --quiet \
    > /dev/null 2> "$WORK/hold$k.err" &
  PIDS+=($!)
done
for _ in $(seq 1 100); do
  [ "$(grep -c 'job created' "$WORK/d2.err")" -ge 3 ] && break
  sleep 0.1
done
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$D2" --pipeline "$WORK/forever.json" --max-batches 1 --quiet \
  > /dev/null 2> "$WORK/fourth.err"
check "a fourth unfinished job from one host is refused (exit 1)" test $? -eq 1
check "... naming the host and the per-client cap" \
  grep -q 'RESOURCE_EXHAUSTED.*client [0-9a-f:.]* has 3 unfinished jobs (cap 3 per client)' "$WORK/fourth.err"
"$B/bin/spillctl" run --dispatcher "[::1]:$D2" --pipeline "$WORK/forever.json" --max-batches 1 --quiet \
  > /dev/null 2> "$WORK/other.err"
check "a job from another client address is served" test $? -eq 0
"$B/bin/spillctl" --dispatcher "[::1]:$D2" jobs --json > "$WORK/jobs2.json"
check "spillctl jobs names each job's client host" python3 "$ROOT/tests/integration/checks.py" job_table_2 "$WORK/jobs2.json"

finish
