#!/usr/bin/env bash
# tests/integration/tls.sh - TLS on every connection, with gRPC's own SSL credentials: a dispatcher and a
# worker serving with certificates from scripts/dev/make-certs.sh, requiring client certificates (mutual TLS)
# and a token. Proves: a job through them delivers every key once from the worker (spillctl and the Python
# Loader); a plaintext caller, a caller without a certificate, one with a certificate of another CA, one that
# does not trust the server's CA, and one with a wrong token are each refused with a message that says which;
# a token without TLS is refused by spillctl, the Python Loader and the daemons unless --insecure; an expired
# or not-yet-valid certificate is refused at start; token files are trimmed, a token with inner whitespace
# refused; no log line of any process shows the token. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

C=$WORK/certs
bash "$ROOT/scripts/dev/make-certs.sh" "$C" > /dev/null || exit 1
TOKEN=tls-test-token-7f3a9c
TEST_TOKENS=("$TOKEN")
printf '%s\n' "$TOKEN" > "$WORK/token"
DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 8, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1
TLS=(--tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-ca "$C/ca.pem" --tls-client-ca "$C/ca.pem"
     --auth-token-file "$WORK/token")
"$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 "${TLS[@]}" > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || exit 1
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 "${TLS[@]}" \
  > "$WORK/w.out" 2> "$WORK/w.err" &
PIDS+=($!)
wait_port "$WORK/w.out" > /dev/null || exit 1
for _ in $(seq 1 50); do grep -q 'registered worker=' "$WORK/w.err" && break; sleep 0.1; done
check "the worker registers over mutual TLS" grep -q 'registered worker=' "$WORK/w.err"

ME=(--tls-ca "$C/ca.pem" --tls-cert "$C/client.pem" --tls-key "$C/client.key" --auth-token-file "$WORK/token")
timeout 60 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 "${ME[@]}" \
  --keys "$WORK/svc.keys" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err"
check "a job over TLS exits 0" test $? -eq 0
check "every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
check "the elements came from the worker (its stream is TLS too)" \
  python3 -c "import json,sys; sys.exit(json.load(open('$WORK/run.json'))['producers']['remote'] != 320)"
check "... its data port is TLS too, mutual as its gRPC port (tls_direct.sh streams on it)" bash -c \
  "grep -q '^data listening on' '$WORK/w.out' && grep -q 'data_tls=mutual' '$WORK/w.err'"
SPW_BUILD=$B PYTHONPATH=$ROOT/client/python SPILLWAY_LIB=$B/lib/libspillway.so SPILLWAY_AUTH_TOKEN_FILE=$WORK/token \
  /usr/bin/python3 "$ROOT/tests/integration/checks.py" tls_1 "$DATA/train" "127.0.0.1:$DPORT" "$C" > "$WORK/py.out" 2> "$WORK/py.err"
check "the Python Loader over mutual TLS gets every element" grep -qx 160 "$WORK/py.out"

refused() {   # refused NAME PATTERN ARGS...: spillctl workers with ARGS fails, its message matching PATTERN
  local name=$1 pat=$2
  shift 2
  timeout 20 "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" "$@" workers > /dev/null 2> "$WORK/$name.err"
  check "$name: refused (exit 1)" test $? -eq 1
  check "$name: the message says why" grep -q "$pat" "$WORK/$name.err"
}
refused plaintext 'if the server speaks TLS: give the CA' --insecure --auth-token-file "$WORK/token"
refused no-client-cert 'if the server requires client certificates' --tls-ca "$C/ca.pem" --auth-token-file "$WORK/token"
refused other-ca-cert 'if the server requires client certificates' --tls-ca "$C/ca.pem" \
  --tls-cert "$C/other-client.pem" --tls-key "$C/other-client.key" --auth-token-file "$WORK/token"
refused untrusted-server "certificate verify failed (the server's certificate is not signed by the CA given" \
  --tls-ca "$C/other-ca.pem" --tls-cert "$C/client.pem" --tls-key "$C/client.key" --auth-token-file "$WORK/token"
refused wrong-token 'status 16: missing or wrong authorization bearer token' \
  --tls-ca "$C/ca.pem" --tls-cert "$C/client.pem" --tls-key "$C/client.key" --auth-token wrong
timeout 20 "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" --auth-token-file "$WORK/token" workers \
  > /dev/null 2> "$WORK/clear.err"
check "a token without TLS or --insecure: spillctl refuses to send it (exit 2)" test $? -eq 2
check "... saying so" grep -q 'a token would travel in the clear: give --tls-ca' "$WORK/clear.err"
timeout 20 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --auth-token-file "$WORK/token" \
  > /dev/null 2> "$WORK/dclear.err"
check "a daemon with a token and no TLS (or --insecure) refuses to start (exit 2)" test $? -eq 2
check "... saying so" grep -q 'a token would travel in the clear (no TLS on this daemon' "$WORK/dclear.err"
timeout 20 "$B/bin/spillway-worker" --dispatcher 127.0.0.1:1 --listen 127.0.0.1 --port 0 --auth-token-file \
  "$WORK/token" --tls-cert "$C/server.pem" --tls-key "$C/server.key" > /dev/null 2> "$WORK/wclear.err"
check "... as does one whose own calls would be plaintext (no --tls-ca)" \
  grep -q 'a token would travel in the clear (no TLS on its calls)' "$WORK/wclear.err"
SPW_BUILD=$B PYTHONPATH=$ROOT/client/python SPILLWAY_LIB=$B/lib/libspillway.so SPILLWAY_AUTH_TOKEN_FILE=$WORK/token \
  /usr/bin/python3 "$ROOT/tests/integration/checks.py" tls_2 "$DATA/train" "127.0.0.1:$DPORT" > "$WORK/pyclear.out" 2>&1
check "the Python Loader with a token and no tls_ca refuses, naming insecure" \
  grep -q 'a token would travel in the clear: give tls_ca (SPILLWAY_TLS_CA), or insecure' "$WORK/pyclear.out"
check "a token from a file draws no warning" bash -c "! grep -q 'token was given on the command line' '$WORK/d.err'"
"$B/bin/spillway-worker" --dispatcher 127.0.0.1:1 --listen 127.0.0.1 --port 0 --auth-token "$TOKEN" \
  --insecure > "$WORK/w2.out" 2> "$WORK/w2.err" &
W2=$!
PIDS+=("$W2")
wait_port "$WORK/w2.out" > /dev/null
kill "$W2"
check "a token on the command line is warned about (ps shows it)" \
  grep -q 'the token was given on the command line, where ps shows it' "$WORK/w2.err"

# Certificates that are not valid now are refused at start, with their dates (not met later as a failed
# handshake the peer blames on its CA): one expired in 2021, one valid only from 2040.
mkdir -p "$WORK/ca-db"
: > "$WORK/ca-db/index.txt"
echo 01 > "$WORK/ca-db/serial"
cat > "$WORK/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $WORK/ca-db/index.txt
unique_subject = no
new_certs_dir = $WORK/ca-db
serial = $WORK/ca-db/serial
default_md = sha256
policy = p
[p]
commonName = supplied
CNF
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=dates test CA" \
  -keyout "$WORK/dates-ca.key" -out "$WORK/dates-ca.pem" 2> /dev/null
for span in "old 20200101000000Z 20210101000000Z" "future 20400101000000Z 20410101000000Z"; do
  read -r name from to <<< "$span"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" -keyout "$WORK/$name.key" \
    -out "$WORK/$name.csr" 2> /dev/null
  openssl ca -batch -config "$WORK/ca.cnf" -cert "$WORK/dates-ca.pem" -keyfile "$WORK/dates-ca.key" -startdate "$from" \
    -enddate "$to" \
    -notext -in "$WORK/$name.csr" -out "$WORK/$name.pem" 2> /dev/null
  timeout 20 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --tls-cert "$WORK/$name.pem" \
    --tls-key "$WORK/$name.key" --tls-ca "$C/ca.pem" > /dev/null 2> "$WORK/cert-$name.err"
  echo $? > "$WORK/cert-$name.rc"
done
check "an expired certificate: the dispatcher refuses to start (exit 2), saying when it expired" \
  bash -c "test \$(cat '$WORK/cert-old.rc') -eq 2 && grep -q 'TLS certificate $WORK/old.pem expired on Jan  1 00:00:00 2021 GMT' '$WORK/cert-old.err'"
check "a certificate valid only later: refused, saying from when" \
  bash -c "test \$(cat '$WORK/cert-future.rc') -eq 2 && grep -q 'is not valid before Jan  1 00:00:00 2040 GMT' '$WORK/cert-future.err'"
timeout 20 "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" --tls-ca "$C/ca.pem" --tls-cert "$WORK/old.pem" \
  --tls-key "$WORK/old.key" --auth-token-file "$WORK/token" workers > /dev/null 2> "$WORK/ctl-old.err"
check "... and spillctl with an expired client certificate (exit 2)" \
  bash -c "test $? -eq 2 && grep -q 'expired on' '$WORK/ctl-old.err'"

# Token files are trimmed at both ends (a pasted space, an editor's newline); whitespace inside is refused.
printf '  \t%s  \n\n' "$TOKEN" > "$WORK/token-spaced"
timeout 20 "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" "${ME[@]:0:6}" --auth-token-file "$WORK/token-spaced" \
  workers > /dev/null 2> "$WORK/spaced.err"
check "a token file with spaces around the token authenticates" test $? -eq 0
printf 'tls-test token\n' > "$WORK/token-inner"
timeout 20 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --auth-token-file "$WORK/token-inner" --insecure \
  > /dev/null 2> "$WORK/inner.err"
check "a token with whitespace inside: refused at start (exit 2), naming the byte" \
  bash -c "test $? -eq 2 && grep -q 'the token holds whitespace or a control character at byte 8' '$WORK/inner.err'"

finish
