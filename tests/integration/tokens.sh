#!/usr/bin/env bash
# tests/integration/tokens.sh - separate tokens for workers and clients (--worker-token-file): a job runs
# through the service with each side holding only its own token (the dispatcher profiles the workers with
# the workers' token); a worker holding the clients' token cannot register; a holder of the workers' token
# cannot list, create jobs or lease as a client; each gets only its own side's dataset listings (GetManifest);
# the daemons refuse a worker token without a clients' token or equal to it. Plaintext with --insecure (tls.sh covers TLS). Real processes on loopback; kills all it
# starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 4, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
printf 'clients-%s\n' "$RANDOM$RANDOM" > "$WORK/client.tok"
printf 'workers-%s\n' "$RANDOM$RANDOM" > "$WORK/worker.tok"
TEST_TOKENS=("$(cat "$WORK/client.tok")" "$(cat "$WORK/worker.tok")")
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1

export SPILLWAY_INSECURE=1 SPILLWAY_AUTH_TOKEN_FILE=$WORK/client.tok SPILLWAY_WORKER_TOKEN_FILE=$WORK/worker.tok
start_service 1 --heartbeat-ms 100 || exit 1
CTL=("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT")
unset SPILLWAY_WORKER_TOKEN_FILE                  # clients hold only theirs

"${CTL[@]}" run --pipeline "$WORK/p.json" --local-cores 0 --keys "$WORK/svc.keys" --json --quiet > "$WORK/run.json"
check "a job runs with each side holding its own token, every key once" \
  bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
check "... all from the worker (streams take the clients' token)" \
  python3 -c "import json,sys; sys.exit(json.load(open('$WORK/run.json'))['producers']['remote'] != 160)"
"${CTL[@]}" run --pipeline "$WORK/p.json" --local-cores 1 --cut auto --keys "$WORK/auto.keys" --quiet
check "a planned job (the dispatcher profiles workers with the workers' token) runs" test $? -eq 0
check "... with the worker's profile, and no call was refused for its token" \
  bash -c "grep -q 'planned offload=1 .* workers=1/1' '$WORK/d.err' && ! grep -q UNAUTHENTICATED '$WORK/d.err' '$WORK/w1.err'"

"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w2.out" 2> "$WORK/w2.err" &
PIDS+=($!)
wait_port "$WORK/w2.out" > /dev/null
sleep 1
check "a worker holding the clients' token cannot register" \
  grep -q 'register failed .*UNAUTHENTICATED.*missing or wrong authorization bearer token' "$WORK/w2.err"
check "... and is not listed" \
  bash -c "'${CTL[0]}' --dispatcher 127.0.0.1:$DPORT workers --json | python3 -c 'import json,sys; sys.exit(len(json.load(sys.stdin)[\"workers\"]) != 1)'"

SPILLWAY_AUTH_TOKEN_FILE=$WORK/worker.tok "${CTL[@]}" workers > /dev/null 2> "$WORK/ls.err"
check "the workers' token cannot list workers" grep -q 'missing or wrong authorization bearer token' "$WORK/ls.err"
SPILLWAY_AUTH_TOKEN_FILE=$WORK/worker.tok "${CTL[@]}" run --pipeline "$WORK/p.json" --local-cores 0 --quiet \
  2> "$WORK/create.err"
check "... nor create a job" grep -q 'CreateJob at the dispatcher .*: UNAUTHENTICATED' "$WORK/create.err"
read -r job manifest < <("${CTL[@]}" jobs --json | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["jobs"][-1]; print(j["job"], j["manifest_hash"])')
HOSTILEPEER_TOKEN=$(cat "$WORK/worker.tok") "$B/tests/hostilepeer" "127.0.0.1:$DPORT" lease "$job" "$manifest" \
  > "$WORK/lease.out"
check "... nor lease a job's splits as its client" \
  grep -q "^status=PERMISSION_DENIED msg=a client's lease needs the clients' token" "$WORK/lease.out"
# The dispatcher's listings (GetManifest): a job's to the workers, a pipeline's to the clients, nobody else's.
answers() {     # answers TOKEN(client|worker|none) PATTERN JOB [PIPELINE]
  HOSTILEPEER_TOKEN=$([ "$1" = none ] || cat "$WORK/$1.tok") "$B/tests/hostilepeer" "127.0.0.1:$DPORT" manifest \
    "${@:3}" | grep -q "^status=$2"
}
LISTED='OK msg= total=[1-9][0-9]* samples=160$'
check "the workers' token gets a job's listing" answers worker "$LISTED" "$job"
check "... the clients' token does not" answers client 'PERMISSION_DENIED msg=GetManifest by job is for workers' "$job"
check "the clients' token gets a pipeline's listing" answers client "$LISTED" 0 "$WORK/p.json"
check "... the workers' token does not" answers worker 'PERMISSION_DENIED msg=GetManifest by pipeline is for clients' \
  0 "$WORK/p.json"
check "... nor does no token" answers none UNAUTHENTICATED 0 "$WORK/p.json"

SPILLWAY_AUTH_TOKEN_FILE='' SPILLWAY_WORKER_TOKEN_FILE=$WORK/worker.tok timeout 10 "$B/bin/spillway-dispatcher" \
  --listen 127.0.0.1 --port 0 > /dev/null 2> "$WORK/only.err"
check "a workers' token without a clients' token is refused at start" \
  grep -q 'worker-token-file needs the clients. token too' "$WORK/only.err"
SPILLWAY_WORKER_TOKEN_FILE=$WORK/client.tok timeout 10 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 \
  > /dev/null 2> "$WORK/same.err"
check "... and so is the clients' token given as the workers'" \
  grep -q 'worker-token-file holds the clients. token' "$WORK/same.err"

finish
