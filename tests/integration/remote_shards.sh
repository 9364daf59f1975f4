#!/usr/bin/env bash
# tests/integration/remote_shards.sh - tar shards over HTTPS: nginx on 127.0.0.1 with a certificate from a
# test CA serves four WebDataset shards (jpg + cls) and wants a bearer header; the pipeline names them by URL
# with a brace pattern, the CA file and the header file. A job through a dispatcher and two workers reads them
# with no shared folder (the shards exist only under nginx's root; the dispatcher lists them once and the
# client and workers take its manifest, reading no tar header), every key exactly once as a local run of
# the same shards; nginx is stopped and started again mid-epoch and the job goes on (spillctl job shows the
# retries); a wrong CA, no CA and no header are refused with messages that say why. Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "SKIP remote_shards: nginx is not installed (scripts/install-deps.sh installs it)"; exit 0; }
mkdir -p "$WORK/nginx/logs"
tar_shards "$WORK/www" || exit 1
bash "$ROOT/scripts/dev/make-certs.sh" "$WORK/certs" > /dev/null || exit 1
printf 'Authorization: Bearer s3cret-%s\n' "$$" > "$WORK/header"
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/nginx/nginx.conf" <<CONF
user root;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log;
events { worker_connections 256; }
http {
  access_log $WORK/nginx/logs/access.log;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  server {
    listen 127.0.0.1:$PORT ssl;
    ssl_certificate $WORK/certs/server.pem;
    ssl_certificate_key $WORK/certs/server.key;
    root $WORK/www;
    location / {
      if (\$http_authorization != "Bearer s3cret-$$") { return 403; }
    }
  }
}
CONF
nginx_start() {
  "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' 2>> "$WORK/nginx/logs/start.err" &
  NG=$!
  PIDS+=("$NG")
  for _ in $(seq 1 50); do curl -sk -o /dev/null "https://127.0.0.1:$PORT/" && return 0; sleep 0.1; done
  return 1
}
# nginx's master stops its workers on TERM (lib.sh's cleanup would kill -9 it and leave them behind).
trap 'kill -TERM "${NG:-0}" 2> /dev/null; wait "${NG:-0}" 2> /dev/null; cleanup' EXIT
check "nginx serves the shards over TLS" nginx_start
URL="https://127.0.0.1:$PORT/shard-{0..3}.tar"
AUTH="\"ca_file\": \"$WORK/certs/ca.pem\", \"header_file\": \"$WORK/header\""
shards_job "$WORK/local.json" "$WORK/www/shard-{0..3}.tar" 2
shards_job "$WORK/remote.json" "$URL" 2 "$AUTH"
"$B/bin/spillctl" run --local --pipeline "$WORK/local.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1
# The same samples whatever the shards' location: compare keys with the URL written as the local folder.
same_url_keys() { same_keys "$WORK/local.keys" "$1" "https://127.0.0.1:$PORT/" "$WORK/www/"; }
"$B/bin/spillctl" run --local --pipeline "$WORK/remote.json" --threads 2 --keys "$WORK/inproc.keys" --quiet \
  2> "$WORK/inproc.err"
check "in-process over HTTPS: every key as a local run" same_url_keys "$WORK/inproc.keys"

start_service 2 || { finish; exit; }
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/remote.json" --local-cores 0 \
  --keys "$WORK/svc.keys" --json --quiet > "$WORK/svc.json" 2> "$WORK/svc.err"
check "through a dispatcher and two workers: exits 0" test $? -eq 0
check "... every key exactly once" same_url_keys "$WORK/svc.keys"
JOB=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/svc.json")
check "spillctl job shows both workers' remote reads" within 6 workers_read_remote "$JOB"
# Listed once, by the dispatcher: the client and the workers rebuild the source from its manifest, so a worker's
# requests are its four shard opens and one range per sample it read, none for the tar headers.
check "the dispatcher listed the shards once" test "$(grep -c 'listed source path=' "$WORK/d.err")" -eq 1
check "the client took the dispatcher's listing" grep -q "source from the dispatcher's listing" "$WORK/svc.err"
check "both workers took it" bash -c "grep -q \"source from the dispatcher's listing job=$JOB\" '$WORK/w1.err' &&
  grep -q \"source from the dispatcher's listing job=$JOB\" '$WORK/w2.err'"
check "... and read no tar header: 4 shard opens + one request per sample" "$PY" "$ROOT/tests/integration/checks.py" remote_shards_3 "$WORK/job.json"

# nginx stopped and started again mid-epoch: reads retry with backoff and the job finishes exactly once.
shards_job "$WORK/long.json" "$URL" 12 "$AUTH"
shards_job "$WORK/long-local.json" "$WORK/www/shard-{0..3}.tar" 12
"$B/bin/spillctl" run --local --pipeline "$WORK/long-local.json" --threads 2 --keys "$WORK/local.keys" --quiet
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/long.json" --local-cores 1 \
  --keys "$WORK/long.keys" --json --quiet > "$WORK/long.json.out" 2> "$WORK/long.err" & C=$!
sleep 1
kill -TERM "$NG"
wait "$NG" 2> /dev/null
sleep 1
check "nginx starts again" nginx_start
wait "$C"
check "nginx restarted mid-epoch: the job exits 0" test $? -eq 0
check "... every key exactly once" same_url_keys "$WORK/long.keys"
JOB=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["job"])' \
  "$WORK/long.json.out")
"$B/bin/spillctl" --dispatcher 127.0.0.1:"$DPORT" job "$JOB" > "$WORK/long-job.txt" 2>&1
sed -n '/remote shards/p' "$WORK/long-job.txt" | sed 's/^/     /'
check "spillctl job counts the retries" grep -Eq "remote shards in [0-9]+ requests, [1-9][0-9]* retried" \
  "$WORK/long-job.txt"

# Refusals, each with its reason, at the trainer's listing.
shards_job "$WORK/wrong-ca.json" "$URL" 1 "\"ca_file\": \"$WORK/certs/other-ca.pem\", \"header_file\": \"$WORK/header\""
"$B/bin/spillctl" run --local --pipeline "$WORK/wrong-ca.json" --quiet > /dev/null 2> "$WORK/wrong-ca.err"
check "a wrong CA: refused" test $? -ne 0
check "... saying the certificate is not signed by that CA" grep -q "TLS: .*not signed by $WORK/certs/other-ca.pem" \
  "$WORK/wrong-ca.err"
shards_job "$WORK/no-ca.json" "$URL" 1 "\"header_file\": \"$WORK/header\""
"$B/bin/spillctl" run --local --pipeline "$WORK/no-ca.json" --quiet > /dev/null 2> "$WORK/no-ca.err"
check "no CA file: refused, pointing at source.ca_file" grep -q "give source.ca_file" "$WORK/no-ca.err"
shards_job "$WORK/no-header.json" "$URL" 1 "\"ca_file\": \"$WORK/certs/ca.pem\""
"$B/bin/spillctl" run --local --pipeline "$WORK/no-header.json" --quiet > /dev/null 2> "$WORK/no-header.err"
check "no header: refused with the server's 403" grep -q "HTTP 403" "$WORK/no-header.err"
shards_job "$WORK/missing.json" "https://127.0.0.1:$PORT/shard-{0..4}.tar" 1 "$AUTH"
"$B/bin/spillctl" run --local --pipeline "$WORK/missing.json" --quiet > /dev/null 2> "$WORK/missing.err"
check "a missing shard: refused naming its URL" grep -q "shard-4.tar.*HTTP 404" "$WORK/missing.err"
check "no log line shows the bearer token" bash -c "! grep -rq 's3cret-$$' '$WORK'/*.err '$WORK'/w*.err '$WORK'/d.err"
finish
