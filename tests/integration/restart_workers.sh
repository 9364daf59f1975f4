#!/usr/bin/env bash
# tests/integration/restart_workers.sh - a restart keeps live workers: workers registered long before a
# dispatcher's kill -9 (8 s: four worker timeouts, as 30 s is three of the default 10 s) are not declared dead
# when their replayed registration is older than the timeout - the restarted dispatcher gives every replayed
# peer one timeout from its start. No lease is released or granted twice, and the running job finishes
# exactly once. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

augment_job "$WORK/p.json" 5 4 "$WORK/local.keys" || exit 1
WD=$WORK/wd
dispatcher() {
  dispatcher_on "$1" --work-dir "$WD" --heartbeat-ms 1000 --worker-timeout-ms 2000 --metrics-port -1
}
dispatcher d0 || exit 1
add_workers 2 || exit 1
sleep 8
"$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 --consume-rate 50 \
  --prefetch-mb 32 --credit-mb 16 --keys "$WORK/svc.keys" --json --quiet > "$WORK/c.json" 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
sleep 1.5
kill -9 "$D"; wait "$D" 2>/dev/null
dispatcher d1 || exit 1
MPORT=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d1.out")
sleep 4            # two worker timeouts after the restart
check "the workers are alive under their ids after two timeouts" bash -c \
  "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers | awk 'NR > 1 && \$4 == \"yes\" { n++ } END { exit n != 2 }'"
check "no worker was declared dead" bash -c "! grep -q 'worker dead' '$WORK/d1.err'"
check "no lease was released" bash -c \
  "curl -sf http://127.0.0.1:$MPORT/metrics | grep -q '^spillway_dispatcher_leases_expired_total 0$'"
wait "$C"
check "the job ends (exit 0)" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
curl -sf "http://127.0.0.1:$MPORT/metrics" > "$WORK/end.prom"
check "... with no split leased twice and no lease released, to its end" \
  bash -c "grep -q '^spillway_dispatcher_leases_regranted_total 0$' '$WORK/end.prom' &&
           grep -q '^spillway_dispatcher_leases_expired_total 0$' '$WORK/end.prom'"
finish
