#!/usr/bin/env bash
# tests/integration/client_memory.sh - a trainer that stalls does not make the client or the workers grow
# without bound: 4 workers stream 600 KB float32 elements to a client (spillctl run --dispatcher on
# libspillway) that consumes one batch and then stalls for 30 s. The client's peak RSS stays within credits +
# prefetch budget + 20 MB of an idle client's (same job, no workers), after the workers delivered more than
# its credits to it (a real load: how much of it the RSS shows depends on what the allocator reuses); each
# worker stays within its buffer (+64 MB slack). Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
STALL_S=${STALL_S:-30}
CREDIT_MB=32
PREFETCH_MB=64
BUFFER_MB=32

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 3, "epochs": 20},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 16}}
JSON
client() {  # client PORT: a stalled trainer (one batch, then 1 element per 1000 s)
  "$B/bin/spillctl" run --dispatcher "127.0.0.1:$1" --pipeline "$WORK/p.json" --local-cores 0 --quiet \
    --consume-rate 0.001 --prefetch-mb $PREFETCH_MB --credit-mb $CREDIT_MB > /dev/null 2>> "$WORK/c.err" &
}

# An idle client: the same job on a dispatcher with no workers.
"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 > "$WORK/d0.out" 2> "$WORK/d0.err" &
PIDS+=($!)
D0=$(wait_port "$WORK/d0.out") || exit 1
client "$D0"
C0=$!
PIDS+=("$C0")
sleep 3
IDLE=$(kb "$C0" VmHWM)

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
WS=()
for i in 1 2 3 4; do
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    --buffer-mb $BUFFER_MB > "$WORK/w$i.out" 2> "$WORK/w$i.err" &
  PIDS+=($!)
  WS+=($!)
  wait_port "$WORK/w$i.out" > /dev/null || exit 1
done
sleep 0.5
WIDLE=()
for w in "${WS[@]}"; do WIDLE+=("$(kb "$w" VmRSS)"); done
client "$DPORT"
C=$!
PIDS+=("$C")
sleep "$STALL_S"
check "the stalled client is still running" kill -0 "$C"
PEAK=$(kb "$C" VmHWM)
LIMIT=$((IDLE + (CREDIT_MB + PREFETCH_MB + 20) * 1024))
echo "     client peak RSS: ${PEAK} kB; idle client ${IDLE} kB; limit ${LIMIT} kB"
check "stalled client: peak RSS <= idle + credits + prefetch + 20 MB" test "$PEAK" -le "$LIMIT"
# The stall must have been a real load: the workers delivered more to the stalled client than its credits.
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job 1 --json > "$WORK/job.json"
delivered=$(/usr/bin/python3 -c "import json; j=json.load(open('$WORK/job.json'))
print(sum(p['bytes'] for p in j['producers'] if p['producer'].startswith('worker')) // 1024)")
echo "     delivered to the stalled client: ${delivered} kB; its RSS grew by $((PEAK - IDLE)) kB"
check "the stall filled the client (the workers delivered over $CREDIT_MB MB to it)" test "$delivered" -gt $((CREDIT_MB * 1024))
streams=$(grep -c 'serving job=' "$WORK"/w[1-4].err | awk -F: '$2 > 0' | wc -l)
check "all 4 workers served the job" test "$streams" -eq 4
for i in 0 1 2 3; do
  now=$(kb "${WS[$i]}" VmRSS)
  echo "     worker $((i + 1)) RSS: ${WIDLE[$i]} kB idle, ${now} kB with the client stalled"
  check "worker $((i + 1)) stays bounded (buffer $BUFFER_MB MB + 64 MB slack)" test "$now" -le $((WIDLE[i] + (BUFFER_MB + 64) * 1024))
done
check "the stalled client stays alive to the dispatcher (its job is not paused)" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT jobs --json | grep -q '\"paused\": false'"

finish
