#!/usr/bin/env bash
# tests/integration/journal_full.sh - the dispatcher's journal on a small tmpfs that fills while a job runs:
# readiness turns NOT_SERVING within 2 s (the timer sees the full disk; it does not wait for a write to
# fail), spillway_dispatcher_journal_writable says 0, the error is logged once (not per refused write) and
# trainers are told why (UNAVAILABLE naming the journal and "No space left on device"); once space is freed
# it is SERVING again by itself, the running job ends with every key exactly once and a new job succeeds.
# Root (mount); real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

WD=$WORK/wd
mkdir -p "$WD"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=512k tmpfs "$WD" 2> /dev/null; then
  echo "SKIP journal_full: needs root to mount a small tmpfs"
  exit 0
fi
trap 'cleanup_mount' EXIT
cleanup_mount() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  umount "$WD" 2> /dev/null
  cleanup
}
HC=$B/tests/healthcheck
serving() {     # serving WANT: polls readiness for up to 2 s
  for _ in $(seq 1 20); do
    "$HC" "127.0.0.1:$DPORT" 2>/dev/null | grep -q "serving=$1" && return 0
    sleep 0.1
  done
  return 1
}
metric() { curl -sf "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

augment_job "$WORK/p.json" 4 8 "$WORK/local.keys" || exit 1   # 1280 elements, made at the trainer's pace
# Splits of one sample: an ack record per element, so the journal needs a new page of the full disk soon
# (appends into the journal's last page still succeed on a full tmpfs, as they should).
dispatcher_on d --work-dir "$WD" --heartbeat-ms 200 --split-size 1 --metrics-port -1 || exit 1
MPORT=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")
add_workers 2 || exit 1
check "ready at start" serving SERVING
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 100 \
  --prefetch-mb 32 --credit-mb 16 --keys "$WORK/svc.keys" --quiet > /dev/null 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
sleep 1
dd if=/dev/zero of="$WD/filler" bs=4k 2> /dev/null     # every block left, until ENOSPC
check "the disk full: NOT_SERVING within 2 s" serving NOT_SERVING
check "... spillway_dispatcher_journal_writable 0" test "$(metric spillway_dispatcher_journal_writable)" = 0
# Appends into the journal's last page still succeed: how soon one needs a new page depends on how full
# that page was, so the refusals are awaited (the job's acks go on for about 10 s more). After a refused
# record a smaller one may still fit that page: one refusal or many.
refused() { [ "$(metric spillway_dispatcher_journal_write_failures_total)" -ge 1 ] 2>/dev/null; }
check "... the refusals counted" within 10 refused
check "... the trainer is told why" within 5 grep -q \
  "UNAVAILABLE: the dispatcher's journal in $WD cannot be written (No space left on device)" "$WORK/c.err"
check "... logged once, not per refused write" test "$(grep -c 'journal cannot be written' "$WORK/d.err")" -eq 1
rm -f "$WD/filler"
check "space freed: SERVING again by itself" serving SERVING
check "... spillway_dispatcher_journal_writable 1" test "$(metric spillway_dispatcher_journal_writable)" = 1
check "... logged once" test "$(grep -c 'journal writable again' "$WORK/d.err")" -eq 1
wait "$C"
check "the running job ends (exit 0)" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 --max-batches 2 \
  --quiet > /dev/null 2> "$WORK/new.err"
check "a new job succeeds" test $? -eq 0
finish
