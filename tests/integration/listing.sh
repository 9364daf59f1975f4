#!/usr/bin/env bash
# tests/integration/listing.sh - a job's dataset is listed once, by the dispatcher: the client takes the
# listing it fetched (GetManifest by pipeline) and its CreateJob reuses it; workers that join later take the
# job's listing (GetManifest by job) even though the folder changed meanwhile, so they serve the job's 160
# samples instead of refusing a listing of 161. A later job lists the folder as it is now. Real processes on
# loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
DATA=$WORK/data
mkdir -p "$DATA" && cp -r "$B/data/cli-test/train" "$DATA/" || exit 1    # a copy: this test changes it
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 4, "epochs": 1},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local.keys" --quiet || exit 1

dispatcher_on d || exit 1
CTL=("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT")
"${CTL[@]}" run --pipeline "$WORK/p.json" --cut all --local-cores 0 --keys "$WORK/svc.keys" --json \
  > "$WORK/svc.json" 2> "$WORK/svc.err" &
C=$!
PIDS+=("$C")
for _ in $(seq 1 100); do grep -q 'job created' "$WORK/d.err" && break; sleep 0.1; done
# The folder changes after the job was created, before any worker has listed it.
first=$(find "$DATA/train" -name '*.JPEG' | sort | head -1)
cp "$first" "$(dirname "$first")/zz-added.JPEG"
add_workers 2 || exit 1
wait "$C"
check "the job exits 0" test $? -eq 0
check "... every key of the listing it was created with, exactly once" \
  bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/svc.json")
check "the client took the dispatcher's listing" grep -q "source from the dispatcher's listing samples=160" \
  "$WORK/svc.err"
# Each worker that was given the job (one alone may have made all of it before the other's first heartbeat:
# workers make ahead of the client) took the job's listing.
check "the workers given the job took its listing, not the changed folder" bash -c \
  "grep -q \"source from the dispatcher's listing job=$JOB samples=160\" '$WORK/w1.err' '$WORK/w2.err' &&
   ! grep \"source .*job=$JOB \" '$WORK/w1.err' '$WORK/w2.err' | grep -qv \"listing job=$JOB samples=160\""
check "... and neither refused the job" bash -c "! grep -q 'cannot serve' '$WORK/w1.err' '$WORK/w2.err'"
check "the dispatcher listed the folder once for the client, its job and two workers" \
  test "$(grep -c 'listed source path=' "$WORK/d.err")" -eq 1

"${CTL[@]}" run --pipeline "$WORK/p.json" --cut all --local-cores 0 --keys "$WORK/second.keys" --quiet \
  2> "$WORK/second.err"
check "a later job lists the folder as it is now: 161 samples" test "$(wc -l < "$WORK/second.keys")" -eq 161
finish
