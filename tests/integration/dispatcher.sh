#!/usr/bin/env bash
# tests/integration/dispatcher.sh - a real spillway-dispatcher process on loopback: --help, config errors,
# listening on port 0, spillctl workers/jobs/job against it (tables and --json), a bad job id answered with a
# clear status while the daemon keeps serving, authentication by bearer token, and a clean SIGTERM drain.
# Always kills what it started. Prints one line per check and "N passed, M failed".
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
TEST_TOKENS=(s3cret)
DISP=$ROOT/build/bin/spillway-dispatcher
CTL=$ROOT/build/bin/spillctl

# start_dispatcher NAME [ARGS...]: starts it on port 0, sets PORT from its "listening on" line.
start_dispatcher() {
  local name=$1; shift
  "$DISP" --listen 127.0.0.1 --port 0 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PIDS+=($!)
  PID=$!
  for _ in $(seq 1 100); do
    PORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/$name.out")
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  echo "dispatcher did not start; stderr:" >&2
  cat "$WORK/$name.err" >&2
  return 1
}

check "--help prints the config table" bash -c "'$DISP' --help | grep -q -- '--worker-timeout-ms'"
"$DISP" --port 70000 > /dev/null 2> "$WORK/badport.err"
check "a bad flag exits 2" test $? -eq 2
check "a bad flag names the flag" grep -q -- '--port: 70000 is outside' "$WORK/badport.err"

start_dispatcher d1 || { echo "0 passed, 1 failed"; exit 1; }
check "listens on a free port" test "$PORT" -gt 0
check "logs its effective config" grep -q 'config port=0' "$WORK/d1.err"
check "warns that it runs unauthenticated" grep -q 'no auth token' "$WORK/d1.err"
check "workers (empty) as JSON" bash -c "[ \"\$('$CTL' --dispatcher 127.0.0.1:$PORT workers --json)\" = '{\"workers\": []}' ]"
check "jobs (empty) as a table" bash -c "'$CTL' --dispatcher 127.0.0.1:$PORT jobs | grep -q '^JOB'"
"$CTL" --dispatcher "127.0.0.1:$PORT" job 42 > /dev/null 2> "$WORK/nojob.err"
check "an unknown job: exit 1" test $? -eq 1
check "an unknown job: the status says so" grep -q 'unknown job 42' "$WORK/nojob.err"
check "still serving after an error" bash -c "'$CTL' --dispatcher 127.0.0.1:$PORT workers --json > /dev/null"
"$CTL" --dispatcher "127.0.0.1:1" workers --timeout-ms 2000 > /dev/null 2> "$WORK/dead.err"
check "a dead address fails within the deadline" test $? -eq 1
kill -TERM "$PID"
for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
check "SIGTERM: exits within the drain deadline" bash -c "! kill -0 $PID 2>/dev/null"
wait "$PID"
check "SIGTERM: exit status 0" test $? -eq 0
check "SIGTERM: logs the drain" grep -q 'draining' "$WORK/d1.err"

start_dispatcher d2 --auth-token s3cret --insecure || exit 1
"$CTL" --dispatcher "127.0.0.1:$PORT" workers > /dev/null 2> "$WORK/noauth.err"
check "no token: refused" test $? -eq 1
check "no token: UNAUTHENTICATED" grep -q 'status 16' "$WORK/noauth.err"
check "right token: served" bash -c "'$CTL' --dispatcher 127.0.0.1:$PORT --auth-token s3cret --insecure workers > /dev/null"
check "the token is not logged" bash -c "! grep -q s3cret '$WORK/d2.err'"
kill -TERM "$PID"; wait "$PID"

finish
