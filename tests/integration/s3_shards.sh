#!/usr/bin/env bash
# tests/integration/s3_shards.sh - tar shards in S3: s3rver 3.7.1 (a real S3-compatible server, pinned by
# tests/integration/s3/package-lock.json, installed with npm ci under build/) on 127.0.0.1 holds four WebDataset
# shards put there with curl's SigV4; pipelines name them s3://BUCKET/train/shard-{0..3}.tar (a brace pattern)
# with AWS_ENDPOINT_URL and a key pair in the environment. In process, and through a dispatcher and two workers
# that take the same environment, every key is read exactly once as a local run of the same shards; without
# credentials the reads go unsigned (s3rver lets anonymous reads through). An unknown key id is refused naming
# HTTP 403 and InvalidAccessKeyId, half a key pair naming the missing variable, a missing object naming its key
# and NoSuchKey, gs:// with the way to GCS's S3 API; the secret appears in no log. s3rver checks key ids but NOT
# V4 signatures, so a stand-in in checks.py (s3_shards_1) does: a shard read with the right secret, region and
# session token (and a key that needs percent-encoding); a wrong secret refused with SignatureDoesNotMatch.
# Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
command -v node > /dev/null && command -v npm > /dev/null ||
  { echo "SKIP s3_shards: node and npm are not installed (scripts/install-deps.sh installs them)"; exit 0; }
# s3rver from the committed lock file into the build folder (the tree stays clean); again when the lock changes.
S3RVER_DIR=$B/s3rver
LOCK=$ROOT/tests/integration/s3/package-lock.json
if ! cmp -s "$LOCK" "$S3RVER_DIR/package-lock.json" || [ ! -x "$S3RVER_DIR/node_modules/.bin/s3rver" ]; then
  rm -rf "$S3RVER_DIR"
  mkdir -p "$S3RVER_DIR"
  cp "$ROOT/tests/integration/s3/package.json" "$LOCK" "$S3RVER_DIR/"
  npm ci --prefix "$S3RVER_DIR" --no-audit --no-fund > "$WORK/npm.log" 2>&1 ||
    { echo "SKIP s3_shards: npm ci of s3rver failed (is the npm registry reachable?)"; tail -3 "$WORK/npm.log"; exit 0; }
fi
# The process's own AWS_* must not leak in: each run below sets what it tests.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL
SECRET="spw-s3-secret-$$-$RANDOM$RANDOM"
TOKEN="spw-s3-session-token-$$-$RANDOM$RANDOM"
TEST_TOKENS+=("$SECRET" "$TOKEN")
BUCKET=spw-shards
tar_shards "$WORK/www" || exit 1

mkdir -p "$WORK/s3data"
"$S3RVER_DIR/node_modules/.bin/s3rver" -d "$WORK/s3data" -a 127.0.0.1 -p 0 --configure-bucket "$BUCKET" \
  > "$WORK/s3rver.out" 2> "$WORK/s3rver.err" &
PIDS+=($!)
s3rver_port() { sed -n 's/^S3rver listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/s3rver.out" | grep .; }
s3rver_up() { s3rver_port > /dev/null; }
check "s3rver listens on 127.0.0.1" within 20 s3rver_up
S3PORT=$(s3rver_port) || { finish; exit; }
# s3rver's default account is S3RVER; it takes any secret (it does not check V4 signatures).
put() {
  curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "S3RVER:$SECRET" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$1" "http://127.0.0.1:$S3PORT/$BUCKET/$2"
}
put_shards() { for i in 0 1 2 3; do put "$WORK/www/shard-$i.tar" "train/shard-$i.tar" || return 1; done; }
check "the shards are put in the bucket" put_shards
export AWS_ENDPOINT_URL="http://127.0.0.1:$S3PORT" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY="$SECRET"
export AWS_REGION=us-east-1

S3="s3://$BUCKET/train/shard-{0..3}.tar"
shards_job "$WORK/local.json" "$WORK/www/shard-{0..3}.tar" 2
shards_job "$WORK/s3.json" "$S3" 2
"$B/bin/spillctl" run --local --pipeline "$WORK/local.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1
s3_keys() { same_keys "$WORK/local.keys" "$1" "s3://$BUCKET/train/" "$WORK/www/"; }
"$B/bin/spillctl" run --local --pipeline "$WORK/s3.json" --threads 2 --keys "$WORK/inproc.keys" --quiet \
  2> "$WORK/inproc.err"
check "in process from s3://: every key as a local run" s3_keys "$WORK/inproc.keys"
check "... signed with SigV4 for the region" grep -q "s3 shards signed=aws:amz:us-east-1:s3 session_token=no" \
  "$WORK/inproc.err"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$B/bin/spillctl" run --local --pipeline "$WORK/s3.json" \
  --threads 2 --keys "$WORK/anon.keys" --quiet 2> "$WORK/anon.err"
check "no credentials: unsigned reads, every key" s3_keys "$WORK/anon.keys"
check "... and said so" grep -q "s3 shards signed=no" "$WORK/anon.err"

start_service 2 || { finish; exit; }
"$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "$WORK/s3.json" --local-cores 0 \
  --keys "$WORK/svc.keys" --json --quiet > "$WORK/svc.json" 2> "$WORK/svc.err"
check "through a dispatcher and two workers: exits 0" test $? -eq 0
check "... every key exactly once" s3_keys "$WORK/svc.keys"
JOB=$(json_field "$WORK/svc.json" '["job"]')
check "spillctl job shows both workers' reads from S3" within 6 workers_read_remote "$JOB"
check "the workers signed with the environment they were started with" bash -c \
  "grep -q 'signed=aws:amz:us-east-1:s3' '$WORK/w1.err' && grep -q 'signed=aws:amz:us-east-1:s3' '$WORK/w2.err'"
check "the dispatcher listed the shards once" test "$(grep -c 'listed source path=' "$WORK/d.err")" -eq 1

# Refusals, each with its reason, at the trainer's listing.
refused() {    # refused NAME SPEC GREP [VAR=VALUE...|-u VAR...]: a local run of SPEC fails; its error matches GREP
  local name=$1 spec=$2 want=$3
  shift 3
  env "$@" "$B/bin/spillctl" run --local --pipeline "$spec" --quiet > /dev/null 2> "$WORK/$name.err"
  check "$name: refused" test $? -ne 0
  check "... saying $want" grep -Eq -- "$want" "$WORK/$name.err"
}
refused unknown-key "$WORK/s3.json" "HTTP 403 .*InvalidAccessKeyId" AWS_ACCESS_KEY_ID=AKIANOSUCHKEY
refused id-alone "$WORK/s3.json" "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not" -u AWS_SECRET_ACCESS_KEY
refused secret-alone "$WORK/s3.json" "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not" -u AWS_ACCESS_KEY_ID
shards_job "$WORK/missing.json" "s3://$BUCKET/train/shard-{0..4}.tar" 1
refused missing "$WORK/missing.json" "shard-4.tar.*HTTP 404 .*NoSuchKey"
shards_job "$WORK/gs.json" "gs://$BUCKET/train/shard-{0..3}.tar" 1
refused gs "$WORK/gs.json" "gs:// is not read directly.*AWS_ENDPOINT_URL=https://storage.googleapis.com"

# The signature itself, which s3rver does not check: a stand-in that does serves shard 0 under any key.
"$PY" "$ROOT/tests/integration/checks.py" s3_shards_1 "$WORK/www/shard-0.tar" "$SECRET" eu-west-1 "$TOKEN" \
  "$WORK/sigv4.port" 2> "$WORK/sigv4.err" &
PIDS+=($!)
check "the SigV4-checking stand-in starts" within 10 test -s "$WORK/sigv4.port"
SIGV4=(AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$WORK/sigv4.port")" AWS_REGION=eu-west-1 AWS_SESSION_TOKEN="$TOKEN")
shards_job "$WORK/sig.json" "s3://sig-bucket/a key+(1)/shard-0.tar" 1
shards_job "$WORK/sig-local.json" "$WORK/www/shard-0.tar" 1
"$B/bin/spillctl" run --local --pipeline "$WORK/sig-local.json" --keys "$WORK/sig-local.keys" --quiet || exit 1
env "${SIGV4[@]}" "$B/bin/spillctl" run --local --pipeline "$WORK/sig.json" --keys "$WORK/sig.keys" --quiet \
  2> "$WORK/sig.err"
check "signed with the secret, region and session token: the stand-in serves every key" \
  same_keys "$WORK/sig-local.keys" "$WORK/sig.keys" "s3://sig-bucket/a key+(1)/" "$WORK/www/"
refused wrong-secret "$WORK/sig.json" "HTTP 403 .*SignatureDoesNotMatch" "${SIGV4[@]}" \
  AWS_SECRET_ACCESS_KEY="not-$SECRET"
check "no file the test wrote holds the secret" bash -c "! grep -rqF -- '$SECRET' '$WORK'"
finish
