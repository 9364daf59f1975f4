#!/usr/bin/env bash
# tests/integration/tls_direct.sh - data connections under TLS (lib/direct.h, issue 40): a dispatcher and two
# workers with certificates from scripts/dev/make-certs.sh, mutual TLS and a token. Proves: each worker opens
# a TLS data port with the gRPC port's certificate and clients' CA; a job streams its elements on TLS data
# connections (client and workers log the TLS version of each), every key exactly once; a client that does not
# trust the CA fails naming the certificate, within seconds; on the data port, a TLS client without a
# certificate, one with a certificate and a guessed ticket, and a plaintext one are each refused and closed at
# once, counted and logged with the reason, and the worker goes on serving a second job on TLS data
# connections. Not the plaintext data port (direct.sh). Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

C=$WORK/certs
bash "$ROOT/scripts/dev/make-certs.sh" "$C" > /dev/null || exit 1
TOKEN=tls-direct-token-51c0
TEST_TOKENS=("$TOKEN")
printf '%s\n' "$TOKEN" > "$WORK/token"
image_job "$WORK/p.json" 8 2 "$WORK/local.keys" || exit 1
TLS=(--tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-ca "$C/ca.pem" --tls-client-ca "$C/ca.pem"
     --auth-token-file "$WORK/token")
dispatcher_on d "${TLS[@]}" || { finish; exit 1; }
for i in 1 2; do
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 --log-level debug \
    --metrics-port -1 "${TLS[@]}" > "$WORK/w$i.out" 2> "$WORK/w$i.err" &
  PIDS+=($!)
  wait_port "$WORK/w$i.out" > /dev/null || bad "worker $i starts"
done
W1=${PIDS[-2]}
within 10 bash -c "grep -q 'registered worker=' '$WORK/w1.err' && grep -q 'registered worker=' '$WORK/w2.err'"
check "both workers register over mutual TLS" test $? -eq 0
check "each opens a TLS data port, mutual like its gRPC port" bash -c \
  "grep -q '^data listening on 127.0.0.1:' '$WORK/w1.out' && grep -q '^data listening on 127.0.0.1:' '$WORK/w2.out' &&
   grep -q 'data_tls=mutual' '$WORK/w1.err' && grep -q 'data_tls=mutual' '$WORK/w2.err'"

ME=(--tls-ca "$C/ca.pem" --tls-cert "$C/client.pem" --tls-key "$C/client.key" --auth-token-file "$WORK/token")
# job NAME: the job through the service, every element from the workers; keys, JSON stats and debug log in WORK.
job() {
  SPILLWAY_LOG_LEVEL=debug timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
    --local-cores 0 "${ME[@]}" --keys "$WORK/$1.keys" --json --quiet > "$WORK/$1.json" 2> "$WORK/$1.err"
}
job run1
check "a job over TLS exits 0" test $? -eq 0
check "every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/run1.keys') > /dev/null"
check "... all of them from the workers" \
  python3 -c "import json,sys; sys.exit(json.load(open('$WORK/run1.json'))['producers']['remote'] != 320)"
check "the client took a TLS data connection to each worker (and none fell back to gRPC)" bash -c \
  "[ \$(grep -c 'elements on a data connection to port [0-9]* (TLSv1.3 ' '$WORK/run1.err') -eq 2 ] &&
   ! grep -q 'come on the gRPC stream instead' '$WORK/run1.err'"
check "... and each worker sent on it" bash -c \
  "grep -q 'elements on a data connection (TLSv1.3 ' '$WORK/w1.err' &&
   grep -q 'elements on a data connection (TLSv1.3 ' '$WORK/w2.err'"
grep -ho 'data connection to port [0-9]* (.*)' "$WORK/run1.err" | sed 's/^/     /'   # the kTLS state, for the record

T0=$(date +%s)
timeout 30 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --dispatcher-wait-ms 3000 --tls-ca "$C/other-ca.pem" --tls-cert "$C/client.pem" --tls-key "$C/client.key" \
  --auth-token-file "$WORK/token" \
  --quiet > /dev/null 2> "$WORK/wrong-ca.err"
RC=$?
check "a client with the wrong CA fails (exit $RC) in seconds ($(( $(date +%s) - T0 )) s), no hang" \
  test $RC -ne 0 -a $RC -ne 124 -a $(( $(date +%s) - T0 )) -lt 15
check "... naming the certificate" grep -q 'certificate verify failed' "$WORK/wrong-ca.err"

DP=$(sed -n 's/^data listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/w1.out")
MP=$(sed -n 's/^metrics listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/w1.out")
refused_line() {   # refused_line PATTERN: worker 1 logged a refusal matching PATTERN
  within 5 grep -q "refused a data connection: $1" "$WORK/w1.err"
}
timeout 10 openssl s_client -connect "127.0.0.1:$DP" -CAfile "$C/ca.pem" -verify_return_error < /dev/null \
  > "$WORK/nocert.out" 2>&1
check "data port, mutual TLS: a client without a certificate is closed at once" test $? -ne 124
check "... refused, the worker says why" refused_line 'TLS handshake failed: peer did not return a certificate'
sleep 1.1                                       # refusals are logged once a second at most
{ printf 'SPWD'; head -c 16 /dev/urandom; sleep 1; } | timeout 10 openssl s_client -connect "127.0.0.1:$DP" \
  -CAfile "$C/ca.pem" -cert "$C/client.pem" -key "$C/client.key" -quiet > "$WORK/guess.out" 2>&1
check "a client with a certificate and a guessed ticket: closed" test $? -ne 124
check "... refused for its ticket (checked inside TLS)" refused_line 'no such ticket'
sleep 1.1
exec 3<> "/dev/tcp/127.0.0.1/$DP"
{ printf 'SPWD'; head -c 16 /dev/urandom; } >&3
timeout 4 cat <&3 > /dev/null 2>&1
check "a plaintext client on the TLS data port: closed at once" test $? -ne 124
exec 3>&-
check "... refused as not TLS" refused_line 'TLS handshake failed: wrong version number'
REFUSED=$(curl -s "http://127.0.0.1:$MP/metrics" |
  sed -n 's/^spillway_worker_data_connections_refused_total \([0-9]*\)$/\1/p')
check "the worker counted the 3 refusals (its metric: $REFUSED)" test "${REFUSED:-0}" -eq 3
check "... and is alive" kill -0 "$W1"

job run2
check "a second job afterwards: exit 0, every key once" bash -c \
  "diff <(sort '$WORK/local.keys') <(sort '$WORK/run2.keys')> /dev/null"
check "... on TLS data connections again" bash -c \
  "[ \$(grep -c 'elements on a data connection to port [0-9]* (TLSv1.3 ' '$WORK/run2.err') -eq 2 ]"
finish
