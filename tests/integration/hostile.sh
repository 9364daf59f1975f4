#!/usr/bin/env bash
# tests/integration/hostile.sh - peers that lie, speaking the raw RPCs (tests/tools/oldpeer): a process that
# registers as worker 1 without worker 1's secret (to redirect its clients to itself) is refused, worker 1
# keeps its address and its job finishes exactly once; addresses with a quote, a newline, a space or a bad
# port are refused at registration (they would break logs, JSON or a client's dial); a peer that knows the
# victim job's id but not its secret (tests/tools/hostilepeer) cannot fence its client with a forged
# heartbeat, lease its splits, join it by id or open its stream on the worker: each is refused, and the job
# finishes with every key exactly once. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 6, "epochs": 3},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1
start_service 1 --heartbeat-ms 100 || exit 1
addr1=$("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["workers"][0]["address"])')
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 100 \
  --keys "$WORK/svc.keys" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err" &
C=$!
PIDS+=("$C")
sleep 1
"$B/tests/oldpeer" "127.0.0.1:$DPORT" register-as 1 > "$WORK/hijack.out"
check "registering as worker 1 without its secret is refused" \
  grep -q '^status=PERMISSION_DENIED msg=worker id 1 belongs to another registration' "$WORK/hijack.out"
check "the dispatcher logs the attempt" grep -q 'refused a registration as worker=1 from address=127.0.0.1:1: wrong secret' \
  "$WORK/d.err"
check "worker 1 keeps its address" bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json | grep -q '\"$addr1\"'"
for addr in '10.0.0.1":1' $'10.0.0.1\n:1' 'evil host:1' '10.0.0.1:99999999'; do
  "$B/tests/oldpeer" "127.0.0.1:$DPORT" register-as 0 "$addr" > "$WORK/addr.out"
  check "an address with a quote, newline, space or bad port is refused: $(printf '%q' "$addr")" \
    grep -q '^status=INVALID_ARGUMENT msg=address must be host:port' "$WORK/addr.out"
done
read -r job manifest < <("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["jobs"][-1]; print(j["job"], j["manifest_hash"])')
"$B/tests/hostilepeer" "127.0.0.1:$DPORT" heartbeat "$job" > "$WORK/forge.out"
check "a forged heartbeat (huge incarnation, an ack, no job secret) is refused" \
  grep -q "^status=PERMISSION_DENIED msg=job $job: wrong job secret" "$WORK/forge.out"
"$B/tests/hostilepeer" "127.0.0.1:$DPORT" lease "$job" "$manifest" > "$WORK/lease.out"
check "leasing the job's splits without its secret is refused" \
  grep -q "^status=PERMISSION_DENIED msg=job $job: wrong job secret" "$WORK/lease.out"
"$B/tests/hostilepeer" "127.0.0.1:$DPORT" join "$job" "$WORK/p.json" > "$WORK/join.out"
check "joining the job by id without its secret is refused" \
  grep -q "^status=PERMISSION_DENIED msg=job $job: wrong job secret" "$WORK/join.out"
"$B/tests/hostilepeer" "$addr1" stream "$job" > "$WORK/stream.out"
check "opening the job's stream on the worker without its secret is refused, nothing sent" \
  grep -q "^status=PERMISSION_DENIED msg=job $job: wrong job secret .* messages=0$" "$WORK/stream.out"
check "the dispatcher and the worker log the refusals with the peer" \
  bash -c "grep -q 'refused a call for job=$job from peer=ipv4:127.0.0.1:[0-9]*: wrong job secret' '$WORK/d.err' &&
           grep -q 'refused a stream for job=$job rank=0 from peer=ipv4:127.0.0.1:[0-9]*: wrong job secret' '$WORK'/w*.err"
check "spillctl workers --json still parses, one worker" \
  bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json | python3 -c 'import json,sys; sys.exit(len(json.load(sys.stdin)[\"workers\"]) != 1)'"
wait "$C"
check "the victim job exits 0" test $? -eq 0
check "every key exactly once, all from the real worker" \
  bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null && python3 -c \"import json,sys; sys.exit(json.load(open('$WORK/run.json'))['producers']['remote'] != 480)\""

finish
