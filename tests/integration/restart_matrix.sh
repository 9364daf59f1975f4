#!/usr/bin/env bash
# tests/integration/restart_matrix.sh - the dispatcher (--work-dir, a journal compacted every few KB) killed
# -9 and restarted at five seeded points of a job; killed by a test-only failpoint between a journal write and
# its fsync, with the unsynced records kept (a process crash) and cut off (a power loss); an fsync that fails
# (EIO); killed under a two-rank data-parallel job; and under a client resumed from a checkpoint. Each time the
# jobs complete, every key exactly once, and no trainer is restarted. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DATA=$B/data/cli-test
image_job "$WORK/p.json" 9 3 "$WORK/local.keys" || exit 1
python3 -c 'print("\n".join("%d %d" % (e, s) for e in range(3) for s in range(160)))' | sort > "$WORK/all.keys"
export PYTHONPATH=$ROOT/client/python SPILLWAY_LIB=$B/lib/libspillway.so

WD=$WORK/wd
dispatcher() {   # dispatcher NAME [ENV...]: on the journal in $WD, compacted every KiB; sets D, DPORT
  local name=$1
  shift
  DISPATCHER_ENV=("$@")
  dispatcher_on "$name" --work-dir "$WD" --heartbeat-ms 200 --worker-timeout-ms 2000 --journal-compact-kb 1
}
restart() {      # restart NAME [ENV...]: kill -9 the dispatcher and start it again on the same journal and port
  kill -9 "$D" 2>/dev/null; wait "$D" 2>/dev/null
  sleep 0.3
  dispatcher "$@"
}
dispatcher d0 || exit 1
add_workers 2 || exit 1
sleep 0.5
run() {          # run N: a trainer (480 elements at 150/s) in the background; sets C
  "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 150 \
    --keys "$WORK/k$1.keys" --quiet > /dev/null 2> "$WORK/c$1.err" &
  C=$!
  PIDS+=("$C")
}
finished() {     # finished N WHAT: the trainer's checks
  wait "$C"
  check "$2: the trainer exits 0" test $? -eq 0
  check "$2: every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/k$1.keys') > /dev/null"
  check "$2: the trainer logged no failure" bash -c "! grep -q ' error \\|run failed' '$WORK/c$1.err'"
}

RANDOM=1717         # the seeds: kill times in [0.3, 3.3) s of a 3.2 s job
for n in 1 2 3 4 5; do
  t=$((3 + RANDOM % 30))
  at=$(awk -v t="$t" 'BEGIN { printf "%.1f", t / 10 }')
  run "$n"
  sleep "$at"
  restart "s$n" || continue
  finished "$n" "seed $n (killed at ${at}s)"
done
check "the journal was compacted while jobs ran, and replayed after it" \
  bash -c "cat '$WORK'/d0.err '$WORK'/s*.err | grep -q 'journal compacted records=' &&
           grep -q 'journal replayed dir=.* jobs=[1-9]' '$WORK/s5.err'"
check "the journal stays small (under 64 KiB after 5 jobs)" test "$(stat -c %s "$WD/journal")" -lt 65536

for mode in crash lose; do
  n=$((n + 1))
  restart "f$mode" || continue
  restart "fp$mode" SPILLWAY_FAILPOINT="journal-sync:4:$mode" || continue
  run "$n"
  for _ in $(seq 1 100); do kill -0 "$D" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$D" 2>/dev/null; wait "$D" 2>/dev/null
  check "failpoint $mode: the dispatcher died between a journal write and its fsync" \
    grep -q 'failpoint journal-sync: killing this process before an fsync' "$WORK/fp$mode.err"
  dispatcher "after$mode" || continue
  finished "$n" "failpoint $mode"
done

# A failing fsync (a full disk): that heartbeat's acks are cut off the journal and refused; the client sends
# them again and the job completes.
n=$((n + 1))
restart feio SPILLWAY_FAILPOINT="journal-sync:4:eio" || exit 1
run "$n"
finished "$n" "a failed fsync"
check "a failed fsync: logged once, writable again, and the dispatcher went on" \
  bash -c "test \$(grep -c 'journal cannot be written' '$WORK/feio.err') -eq 1 &&
           grep -q 'journal writable again' '$WORK/feio.err' && kill -0 $D"

# Two ranks of one data-parallel job (80 samples each per epoch, 60/s), the dispatcher killed under them.
for r in 0 1; do
  /usr/bin/python3 "$ROOT/tests/integration/rank_run.py" "$DATA/train" "127.0.0.1:$DPORT" ddp "$r" 2 60 "$WORK/ddp$r.keys" \
    > "$WORK/ddp$r.out" 2> "$WORK/ddp$r.err" &
  R[r]=$!
  PIDS+=("${R[r]}")
done
sleep 1.5
restart ddp
wait "${R[0]}"; r0=$?
wait "${R[1]}"; r1=$?
check "two ranks: both exit 0" test "$r0$r1" = 00
check "two ranks: together every key exactly once" \
  bash -c "diff '$WORK/all.keys' <(sort '$WORK/ddp0.keys' '$WORK/ddp1.keys') > /dev/null"
check "two ranks: one job" bash -c "test \"\$(cat '$WORK/ddp0.out')\" = \"\$(cat '$WORK/ddp1.out')\""

# A trainer that checkpoints after 8 batches and stops (40 epochs: the job is far from finished, more than its
# credit holds); the dispatcher restarts; the resumed trainer rejoins the job (by its id and secret) and the
# dispatcher is killed under it once more.
/usr/bin/python3 "$ROOT/tests/integration/rank_run.py" "$DATA/train" "127.0.0.1:$DPORT" "" 0 1 150 "$WORK/first.keys" \
  --epochs 40 --stop-after 8 --state "$WORK/state.json" > "$WORK/first.out" 2> "$WORK/first.err"
check "resumed: the first trainer stops after its checkpoint" test $? -eq 0
restart resume1
/usr/bin/python3 "$ROOT/tests/integration/rank_run.py" "$DATA/train" "127.0.0.1:$DPORT" "" 0 1 3000 "$WORK/second.keys" \
  --epochs 40 --resume "$WORK/state.json" > "$WORK/second.out" 2> "$WORK/second.err" &
C=$!
PIDS+=("$C")
sleep 0.7
restart resume2
wait "$C"
check "resumed: the second trainer exits 0" test $? -eq 0
check "resumed: the two trainers together delivered every key exactly once" \
  bash -c "diff <(python3 -c 'print(\"\\n\".join(\"%d %d\" % (e, s) for e in range(40) for s in range(160)))' | sort) \
               <(sort '$WORK/first.keys' '$WORK/second.keys') > /dev/null"
check "resumed: it went on in the same job" bash -c "test \"\$(cat '$WORK/first.out')\" = \"\$(cat '$WORK/second.out')\""

finish
