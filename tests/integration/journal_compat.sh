#!/usr/bin/env bash
# tests/integration/journal_compat.sh - a work dir written by an earlier release replays: the journal in
# tests/data/fixtures/journal-flat (the flat JournalUpdate records of 2026-12-05; make.sh there says how it
# was written) under today's dispatcher gives back its jobs as they stood - one finished, one ended (its
# summary), one mid-epoch with 3 of 10 splits acked, waiting for its trainer - its worker, and its id floor
# (a new job gets a higher id); the journal still dumps clean afterwards, its old records in the flat form,
# the new ones as one message per kind. Real processes on loopback; kills
# all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/wd"
cp "$ROOT/tests/data/fixtures/journal-flat/journal" "$WORK/wd/journal"
dispatcher_on d --work-dir "$WORK/wd" || exit 1
check "the earlier release's journal replays: 10 records, 2 running jobs, 1 worker" \
  grep -q 'journal replayed dir=.* records=10 bytes=532 dropped_bytes=0 jobs=2 workers=1' "$WORK/d.err"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json > "$WORK/jobs.json"
job() {   # job ID PYTHON-CONDITION-ON-j
  /usr/bin/python3 -c "import json,sys; j=[x for x in json.load(open('$WORK/jobs.json'))['jobs'] if x['job']==$1]
sys.exit(not (j and ($2)))" 2> /dev/null
}
check "job 1: finished its one epoch" job 1 "j[0]['finished'] and j[0]['epoch'] == 1"
check "job 2: ended (its trainer closed), its summary kept" job 2 "j[0]['ended'] and j[0]['closed'] and j[0]['pending'] == 10"
check "job 3: in epoch 0 with 3 of its 10 splits acked, not ended" job 3 \
  "not j[0]['ended'] and not j[0]['finished'] and j[0]['epoch'] == 0 and j[0]['acked'] == 3 and j[0]['splits_per_epoch'] == 10"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json > "$WORK/workers.json"
check "its worker is known under its id (1)" \
  /usr/bin/python3 -c "import json,sys; sys.exit([w['worker_id'] for w in json.load(open('$WORK/workers.json'))['workers']] != [1])"
image_job "$WORK/p.json" 1 1 "$WORK/local.keys" || exit 1
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --max-batches 1 \
  --json --quiet > "$WORK/new.json" 2> "$WORK/new.err"
check "a new job runs (exit 0)" test $? -eq 0
check "... with an id above the journal's floor (4)" \
  /usr/bin/python3 -c "import json,sys; sys.exit(json.load(open('$WORK/new.json'))['job'] < 4)"
kill -9 "$D"; wait "$D" 2> /dev/null
"$B/bin/spillctl" journal dump "$WORK/wd" > "$WORK/dump.txt" 2>&1
check "the journal dumps clean after the new records" bash -c "tail -1 '$WORK/dump.txt' | grep -q ', clean'"
"$B/bin/spillctl" journal dump "$WORK/wd" --json > "$WORK/dump.json" 2>&1
check "its 10 old records read as the flat form, the new ones (a job's create, heartbeat, removal) as typed records" \
  /usr/bin/python3 -c "import json,sys
r=[json.loads(l) for l in open('$WORK/dump.json') if '\"record\"' in l]
old, new = r[:10], r[10:]
sys.exit(not (all(x['form'] == 'flat' for x in old) and len(new) >= 3 and all(x['form'] == 'typed' for x in new)
  and {'CREATE_JOB', 'CLIENT_HEARTBEAT', 'REMOVE_JOB'} <= {x['kind'] for x in new}))"

# A record this release does not know (a later release's kind): the start is refused, naming the record, and
# the journal is left as it was, so the release that wrote it can still replay it.
mkdir -p "$WORK/later"
cp "$ROOT/tests/data/fixtures/journal-flat/journal" "$WORK/later/journal"
/usr/bin/python3 "$ROOT/tests/integration/checks.py" journal_compat_later_kind "$WORK/later/journal"
cp "$WORK/later/journal" "$WORK/later.copy"
timeout 20 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --work-dir "$WORK/later" \
  > "$WORK/later.out" 2> "$WORK/later.err"
rc=$?
check "a journal with a later release's record: the dispatcher refuses to start (exit $rc, not a timeout)" \
  test "$rc" -ne 0 -a "$rc" -ne 124
check "... naming the record it cannot read, and why" \
  grep -q 'record 10 refused: an update kind this release does not know (written by a later release' "$WORK/later.err"
check "... and leaves the journal as it was" cmp -s "$WORK/later/journal" "$WORK/later.copy"
finish
