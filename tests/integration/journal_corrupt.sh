#!/usr/bin/env bash
# tests/integration/journal_corrupt.sh - a dispatcher's journal damaged between a kill -9 and its restart,
# with a trainer running across it all. A byte flipped in the first record, then in a middle one: the
# dispatcher refuses to start, naming the file, the offset and the record, and changes nothing; with
# --journal-recover it keeps a copy of the whole file beside it and starts from exactly the records before the
# bad one (spillctl journal dump shows both). A torn last record is cut off as a crash's tail. The trainer's
# job ends with every key exactly once. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

augment_job "$WORK/p.json" 3 16 "$WORK/local.keys" || exit 1   # 2560 elements, made at the trainer's pace
WD=$WORK/wd
dispatcher() {   # dispatcher NAME [FLAGS...]: on the journal in $WD, on the same port each time; sets D, DPORT
  local name=$1
  shift
  dispatcher_on "$name" --work-dir "$WD" --heartbeat-ms 200 --worker-timeout-ms 2000 "$@"
}
dump() { "$B/bin/spillctl" journal dump "$WD"; }
running() {      # the dispatcher's one job is in its table, unfinished
  "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs | awk 'NR > 1 && $10 == "running" { n++ } END { exit n != 1 }'
}
# flip OFFSET: one byte of the journal changed (inverted) at OFFSET.
flip() {
  python3 -c 'import sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^0xff]))' \
    "$WD/journal" "$1"
}
dispatcher d0 || exit 1
add_workers 2 || exit 1
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 200 --prefetch-mb 32 --credit-mb 16 \
  --keys "$WORK/svc.keys" --json --quiet > "$WORK/c.json" 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")

n=0
for case in first middle; do
  n=$((n + 1))
  sleep 2
  check "$case record: the job is running when the dispatcher is killed" running
  kill -9 "$D"; wait "$D" 2>/dev/null
  records=$(dump | tail -1 | sed -n 's/^\([0-9]*\) records.*/\1/p')
  if [ "$case" = first ]; then k=0; else k=$((records / 2)); fi
  at=$(dump | awk -v k="$k" '$1 == k { sub("@", "", $2); print $2 }')
  flip $((at + 9))           # inside the record's bytes, past its 8-byte header
  cp "$WD/journal" "$WORK/bad$n"
  check "$case record: the dump names it corrupt (exit 1)" bash -c "! '$B/bin/spillctl' journal dump '$WD' > '$WORK/dump$n' && grep -q '^CORRUPT: record $k at offset $at ' '$WORK/dump$n'"
  timeout 20 "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port "$DPORT" --work-dir "$WD" > /dev/null \
    2> "$WORK/refused$n.err"
  check "$case record: the dispatcher refuses to start (exit 1)" test $? -eq 1
  check "$case record: ... naming the file, offset and record" \
    grep -q "journal $WD/journal is corrupt: record $k at offset $at fails its check" "$WORK/refused$n.err"
  check "$case record: ... and the journal is unchanged" cmp -s "$WD/journal" "$WORK/bad$n"
  dispatcher "r$n" --journal-recover || break
  copy=$(sed -n 's/.*recovered a corrupt journal .* copy=\([^ ]*\).*/\1/p' "$WORK/r$n.err")
  check "$case record: --journal-recover keeps a copy of the whole file" cmp -s "$copy" "$WORK/bad$n"
  check "$case record: ... says what it kept and dropped" \
    grep -q "recovered a corrupt journal .* at=$at record=$k .* kept_records=$k dropped_bytes=[1-9]" "$WORK/r$n.err"
  check "$case record: ... and starts from exactly the $k records before it" \
    bash -c "diff <(head -n $k '$WORK/dump$n') <('$B/bin/spillctl' journal dump '$WD' | head -n $k) > /dev/null && grep -q 'journal replayed dir=.* records=$k ' '$WORK/r$n.err'"
done

# A torn last record: a crash mid-append, cut off as before.
sleep 1.5
check "torn tail: the job is running when the dispatcher is killed" running
kill -9 "$D"; wait "$D" 2>/dev/null
printf '\x40\x00\x00\x00\x12\x34\x56' >> "$WD/journal"
check "a torn tail: the dump says so (exit 0)" bash -c "'$B/bin/spillctl' journal dump '$WD' | tail -1 | grep -q 'a torn tail of 7 bytes'"
dispatcher t || exit 1
check "a torn tail is cut off and logged" grep -q 'cut a bad tail off .*dropped_bytes=7 why="a torn record' "$WORK/t.err"

wait "$C"
check "the trainer across all of it exits 0" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
dump > "$WORK/dump.end"
check "the journal dumps clean at the end" bash -c "tail -1 '$WORK/dump.end' | grep -q ' bytes, clean$'"
check "the dump never prints a secret" bash -c "grep -q 'secret=set' '$WORK/dump.end' && ! grep -q 'secret=[0-9]' '$WORK/dump.end'"
finish
