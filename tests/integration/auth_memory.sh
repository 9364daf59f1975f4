#!/usr/bin/env bash
# tests/integration/auth_memory.sh - an unauthenticated peer cannot make the dispatcher hold memory: 8
# concurrent 60 MiB unary calls without a token (tests/tools/bigcall) all get UNAUTHENTICATED and leave the
# dispatcher's RSS (VmRSS) within 20 MB of where it started, and its peak (VmHWM) below one message above it,
# because the token is checked from the call's metadata before its body is read (before that fix: +155..260 MB
# after, +350..380 MB peak). Then an authorized 60 MiB call is still read and answered OK. Real dispatcher on
# loopback; kills what it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
TOKEN=s3cret-auth-memory
TEST_TOKENS=("$TOKEN")
METHOD=/spillway.v1.Dispatcher/ListWorkers   # ignores its request body: an authorized call answers OK

"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --auth-token "$TOKEN" --insecure > "$WORK/d.out" 2> "$WORK/d.err" &
D=$!
PIDS+=("$D")
DPORT=$(wait_port "$WORK/d.out") || { bad "dispatcher starts"; finish; exit 1; }
# one small authorized call first, so gRPC's own lazily made state is in the baseline
"$B/tests/bigcall" "127.0.0.1:$DPORT" "$METHOD" 1 1 "$TOKEN" > /dev/null
sleep 0.5
START=$(kb "$D" VmRSS)

"$B/tests/bigcall" "127.0.0.1:$DPORT" "$METHOD" 60 8 > "$WORK/anon.out" 2> "$WORK/anon.err"
check "bigcall without a token ran" test $? -eq 0
n=$(grep -c '^status=UNAUTHENTICATED ' "$WORK/anon.out")
check "8 calls of 60 MiB without a token: all UNAUTHENTICATED (got $n)" test "$n" -eq 8
sleep 1
NOW=$(kb "$D" VmRSS)
PEAK=$(kb "$D" VmHWM)
echo "     dispatcher RSS: ${START} kB before, ${NOW} kB after 8 unauthenticated 60 MiB calls (peak ${PEAK} kB)"
check "dispatcher RSS stays within 20 MB of where it started" test "$NOW" -le $((START + 20 * 1024))
check "dispatcher peak RSS stays under one 60 MiB message above the start" test "$PEAK" -le $((START + 60 * 1024))

"$B/tests/bigcall" "127.0.0.1:$DPORT" "$METHOD" 60 1 "$TOKEN" > "$WORK/auth.out" 2> "$WORK/auth.err"
check "an authorized 60 MiB call is read and answered OK" grep -q '^status=OK ' "$WORK/auth.out"
check "the dispatcher is still running" kill -0 "$D"

finish
