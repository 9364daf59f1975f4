#!/usr/bin/env bash
# tests/integration/closed_default.sh - closed by default: a dispatcher or worker asked to listen on every
# address (0.0.0.0, ::) or any non-loopback one with no token refuses to start (exit 2, naming --insecure), and
# starts with --insecure or on loopback. With a token, a real trainer is served while a worker takes 3 x 200
# idle unauthenticated StreamElements (each refused at once), 8 unauthenticated 60 MiB calls and 40
# authenticated streams that never show a job secret (each closed within about 1 s, or refused at the
# per-host stream cap), and the worker's RSS ends within 30 MB of where it was before. Real processes on
# loopback; kills what it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
TOKEN=s3cret-closed-default
TEST_TOKENS=("$TOKEN")

refuses() {   # refuses NAME BINARY ARGS...: exits 2 within 10 s, saying what to do
  local name=$1
  shift
  timeout 10 "$@" --port 0 > "$WORK/$name.out" 2> "$WORK/$name.err"
  local rc=$?
  check "$name: refuses to start (exit 2, got $rc)" test "$rc" -eq 2
  check "$name: says to give a token, listen on 127.0.0.1 or pass --insecure" \
    grep -q 'with no token: anyone who reaches this port could run jobs.*127.0.0.1.*--insecure' "$WORK/$name.err"
}
refuses "dispatcher on 0.0.0.0 (the default)" env -u SPILLWAY_INSECURE -u SPILLWAY_LISTEN "$B/bin/spillway-dispatcher"
refuses "dispatcher on ::" env -u SPILLWAY_INSECURE "$B/bin/spillway-dispatcher" --listen ::
refuses "worker on 0.0.0.0 (the default)" env -u SPILLWAY_INSECURE -u SPILLWAY_LISTEN "$B/bin/spillway-worker" \
  --dispatcher 127.0.0.1:1
starts() {   # starts NAME BINARY ARGS...: prints its "listening on" line (then is stopped)
  local name=$1
  shift
  "$@" --port 0 > "$WORK/$name.out" 2> "$WORK/$name.err" &
  local p=$!
  PIDS+=("$p")
  check "$name: starts" bash -c "source '$ROOT/tests/integration/lib.sh'; wait_port '$WORK/$name.out' > /dev/null"
  kill "$p" 2> /dev/null
}
starts "dispatcher on 0.0.0.0 with --insecure" "$B/bin/spillway-dispatcher" --insecure
starts "dispatcher on ::1 without a token" "$B/bin/spillway-dispatcher" --listen ::1
starts "dispatcher on 127.0.0.1 without a token" "$B/bin/spillway-dispatcher" --listen 127.0.0.1
check "--help says what --insecure allows" bash -c "'$B/bin/spillway-worker' --help | grep -q 'no token on a non-loopback --listen'"

# With a token: a trainer served beside a flood of unauthenticated and secretless streams and big calls.
augment_job "$WORK/p.json" 7 3 "$WORK/local.keys" || { bad "local reference run"; finish; exit 1; }
start_service 0 --auth-token "$TOKEN" --insecure || { finish; exit 1; }
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  --auth-token "$TOKEN" --insecure > "$WORK/w.out" 2> "$WORK/w.err" &
W=$!
PIDS+=("$W")
WPORT=$(wait_port "$WORK/w.out") || { bad "worker starts"; finish; exit 1; }
SPILLWAY_AUTH_TOKEN=$TOKEN "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --insecure --pipeline "$WORK/p.json" \
  --local-cores 0 --consume-rate 40 --keys "$WORK/remote.keys" --quiet > "$WORK/run.out" 2> "$WORK/run.err" &
RUN=$!
PIDS+=("$RUN")
for _ in $(seq 1 100); do grep -q 'job=' "$WORK/w.err" && [ "$(kb "$W" VmRSS)" -gt 0 ] && break; sleep 0.1; done
sleep 2            # the job's queues are made and streaming: the baseline includes them
START=$(kb "$W" VmRSS)

for round in 1 2 3; do
  "$B/tests/hostilepeer" "127.0.0.1:$WPORT" idle 200 > "$WORK/anon$round.out" 2>&1
done
check "3 x 200 idle streams without a token: every one UNAUTHENTICATED" \
  bash -c "for r in 1 2 3; do grep -qx 'status=UNAUTHENTICATED n=200' '$WORK/anon'\$r.out || exit 1; done"
"$B/tests/bigcall" "127.0.0.1:$WPORT" /spillway.v1.Worker/Profile 60 8 > "$WORK/big.out" 2>&1
n=$(grep -c '^status=UNAUTHENTICATED' "$WORK/big.out")
check "8 unauthenticated 60 MiB calls: all UNAUTHENTICATED (got $n)" test "$n" -eq 8
HOSTILEPEER_TOKEN=$TOKEN "$B/tests/hostilepeer" "127.0.0.1:$WPORT" idle 40 > "$WORK/secretless.out" 2>&1
held=$(sed -n 's/^held_ms_max=//p' "$WORK/secretless.out")
denied=$(sed -n 's/^status=PERMISSION_DENIED n=//p' "$WORK/secretless.out")
echo "     40 authenticated secretless streams: $(tr '\n' ' ' < "$WORK/secretless.out")"
check "authenticated streams that show no job secret are closed PERMISSION_DENIED (got ${denied:-0})" \
  test "${denied:-0}" -gt 0
check "... each within 2 s of opening (longest ${held:-?} ms)" test "${held:-99999}" -le 2000
check "... none is served" bash -c "! grep -q '^status=OK' '$WORK/secretless.out'"
sleep 1
NOW=$(kb "$W" VmRSS)
echo "     worker RSS: ${START} kB before the flood, ${NOW} kB after"
check "the worker's RSS stays within 30 MB of where it was" test "$NOW" -le $((START + 30 * 1024))

wait "$RUN"
rc=$?
check "the trainer's run succeeds beside the flood (exit $rc)" test "$rc" -eq 0
check "... and gets exactly the local run's elements" cmp -s <(sort "$WORK/local.keys") <(sort "$WORK/remote.keys")
check "the worker is still running" kill -0 "$W"
grep -q 'wrong job secret\|refused a stream' "$WORK/run.err" && bad "the trainer saw its streams refused"
finish
