#!/usr/bin/env bash
# tests/integration/membership.sh - real dispatcher and worker processes on loopback: workers register and
# show as alive; a worker killed with -9 is declared dead after the heartbeat timeout; a worker stopped past
# the timeout (SIGSTOP) is retired and, once continued, registers again under its id; after a dispatcher
# restart on the same port, workers register again; SIGTERM drains a worker cleanly. Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
DISP=$ROOT/build/bin/spillway-dispatcher
WRK=$ROOT/build/bin/spillway-worker
CTL=$ROOT/build/bin/spillctl
PY=/usr/bin/python3

# wait_port FILE: the port from a daemon's "listening on HOST:PORT" line.
start_dispatcher() {   # start_dispatcher NAME PORT
  "$DISP" --listen 127.0.0.1 --port "$2" --worker-timeout-ms 1000 --heartbeat-ms 100 \
    > "$WORK/$1.out" 2> "$WORK/$1.err" &
  DPID=$!
  PIDS+=("$DPID")
  DPORT=$(wait_port "$WORK/$1.out") || { cat "$WORK/$1.err" >&2; return 1; }
}
start_worker() {       # start_worker NAME
  "$WRK" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    > "$WORK/$1.out" 2> "$WORK/$1.err" &
  PIDS+=($!)
  LAST=$!
  wait_port "$WORK/$1.out" > /dev/null || { cat "$WORK/$1.err" >&2; return 1; }
}
# alive_count: workers the dispatcher lists as alive.
alive_count() {
  "$CTL" --dispatcher "127.0.0.1:$DPORT" workers --json 2>/dev/null |
    "$PY" -c 'import json,sys; print(sum(w["alive"] for w in json.load(sys.stdin)["workers"]))'
}
# wait_alive N SECONDS: until N workers are alive.
wait_alive() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -le $deadline ]; do
    [ "$(alive_count)" = "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

start_dispatcher d1 0 || exit 1
start_worker w1 || exit 1; W1=$LAST
start_worker w2 || exit 1; W2=$LAST
check "two workers register and are alive" wait_alive 2 5
check "workers log their registration" grep -q 'registered worker=' "$WORK/w1.err"
check "--json lists their advertised addresses" bash -c "'$CTL' --dispatcher 127.0.0.1:$DPORT workers --json | grep -q '127.0.0.1:'"

kill -9 "$W1"; wait "$W1" 2>/dev/null
check "kill -9: the worker is declared dead within the timeout" wait_alive 1 4
check "kill -9: the dispatcher logs the death" grep -q 'worker dead' "$WORK/d1.err"

kill -STOP "$W2"
check "SIGSTOP past the timeout: retired" wait_alive 0 4
kill -CONT "$W2"
check "SIGCONT: it registers again" wait_alive 1 4
check "SIGCONT: it says why" grep -q 'registering again' "$WORK/w2.err"

kill -TERM "$DPID"; wait "$DPID" 2>/dev/null
start_dispatcher d2 "$DPORT" || exit 1
check "dispatcher restart: the worker joins the new one" wait_alive 1 8

kill -TERM "$W2"
for _ in $(seq 1 100); do kill -0 "$W2" 2>/dev/null || break; sleep 0.05; done
check "SIGTERM: the worker exits" bash -c "! kill -0 $W2 2>/dev/null"
wait "$W2"
check "SIGTERM: exit status 0" test $? -eq 0
"$WRK" --port 1 > /dev/null 2> "$WORK/nodisp.err"
check "no --dispatcher: exit 2 with a message" bash -c "[ $? -eq 2 ] && grep -q 'dispatcher HOST:PORT is required' '$WORK/nodisp.err'"

finish
