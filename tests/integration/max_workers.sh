#!/usr/bin/env bash
# tests/integration/max_workers.sh - the dispatcher's worker cap (--max-workers): with a cap of 2 a third
# worker is refused with the cap named (and keeps retrying), takes the place of a worker killed -9 once that
# one is declared dead, and serves a job that then arrives exactly once; restarted on its journal with a cap
# below the workers it had, the dispatcher still starts and serves. A cap of 0 is refused at start.
# Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
image_job "$WORK/p.json" 3 2 "$WORK/local-keys.txt" || { bad "local run"; finish; exit; }
alive_workers() {   # alive_workers: the addresses of the alive workers, one per line
  "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json 2> /dev/null |
    "$PY" -c 'import json,sys; [print(w["address"]) for w in json.load(sys.stdin)["workers"] if w["alive"]]'
}
n_alive_is() { [ "$(alive_workers | wc -l)" -eq "$1" ]; }
wait_for() {        # wait_for SECONDS CMD...: until CMD succeeds
  local n=$(($1 * 10))
  shift
  for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --max-workers 0 > "$WORK/zero.out" 2> "$WORK/zero.err"
check "--max-workers 0 is refused at start" test $? -ne 0
check "... naming the option" grep -q "max-workers" "$WORK/zero.err"

mkdir -p "$WORK/state"
start_service 2 --max-workers 2 --heartbeat-ms 200 --worker-timeout-ms 1500 --work-dir "$WORK/state" ||
  { finish; exit; }
W1=${PIDS[1]}
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  > "$WORK/w3.out" 2> "$WORK/w3.err" &
W3=$!
PIDS+=("$W3")
W3_PORT=$(wait_port "$WORK/w3.out")
check "a third worker is refused, the cap named" \
  wait_for 5 grep -q 'register failed.*too many workers (cap 2, none of them dead)' "$WORK/w3.err"
check "two workers alive" n_alive_is 2
kill -9 "$W1"
wait "$W1" 2> /dev/null
check "once the killed worker is dead, the third registers in its place" \
  wait_for 15 grep -q "registered worker=" "$WORK/w3.err"
check "two workers alive" wait_for 5 n_alive_is 2
check "... the third among them" bash -c "grep -q ':$W3_PORT\$' <<< '$(alive_workers)'"
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --keys "$WORK/keys.txt" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err"
check "a job through the capped dispatcher exits 0" test $? -eq 0
check "every key exactly once" bash -c "diff <(sort '$WORK/local-keys.txt') <(sort '$WORK/keys.txt') > /dev/null"

# Restarted on its journal with a cap of 1: the journaled registrations do not stop it from starting.
kill -9 "$D"
wait "$D" 2> /dev/null
dispatcher_on d2 --max-workers 1 --heartbeat-ms 200 --worker-timeout-ms 1500 --work-dir "$WORK/state"
check "the restarted dispatcher with a smaller cap serves" wait_for 10 n_alive_is 1
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --keys "$WORK/keys2.txt" --json --quiet > "$WORK/run2.json" 2> "$WORK/run2.err"
check "a job after the restart: every key exactly once" \
  bash -c "diff <(sort '$WORK/local-keys.txt') <(sort '$WORK/keys2.txt') > /dev/null"
finish
