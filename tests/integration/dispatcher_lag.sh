#!/usr/bin/env bash
# tests/integration/dispatcher_lag.sh - issue 42: a dispatcher that falls behind (here stopped with SIGSTOP
# for 3 s, three times --worker-timeout-ms and twice --client-timeout-ms) declares none of its live workers
# dead and expires no client rank, and a running job ends with every key exactly once; a worker killed -9
# during the same stop is still declared dead soon after the resume (timeout + the lag + a margin); a new job
# sent just after the resume is refused (RESOURCE_EXHAUSTED) until the lag passes, then runs. Not a CPU-quota
# test (lib/cpulimit.c only reads quotas). Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

image_job "$WORK/p.json" 7 1 "$WORK/local.keys" || exit 1
image_job "$WORK/p2.json" 8 1 "$WORK/local2.keys" || exit 1
start_service 3 --heartbeat-ms 200 --worker-timeout-ms 1000 --client-timeout-ms 1500 --metrics-port -1 ||
  { finish; exit 1; }
MPORT=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")
W3=${PIDS[3]}
check "three workers alive" within 10 alive_is 3

# 160 elements at 20/s: the job is still running across the stop and after it.
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --consume-rate 20 --keys "$WORK/svc.keys" --quiet > "$WORK/c.out" 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
sleep 2
check "the job is running before the stop" kill -0 "$C"
kill -STOP "$D"
sleep 0.5
kill -9 "$W3"; wait "$W3" 2> /dev/null         # really dead, while the dispatcher cannot see anything
sleep 2.5
kill -CONT "$D"
# A new job just after the resume: refused while the dispatcher is overloaded (its lag 3 s, past a quarter of
# the worker timeout, for 2 to 4 s), retried by its client, and served then.
sleep 0.3
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p2.json" --local-cores 0 \
  --keys "$WORK/svc2.keys" --quiet > "$WORK/c2.out" 2> "$WORK/c2.err" &
C2=$!
PIDS+=("$C2")
# The killed worker's silence began about 0.5 s into the stop: dead once silent past 1 s + the 3 s lag, i.e.
# about 1 s after the resume. 8 s: generous for a loaded 2-core machine, still far below the default 10 s.
check "the worker killed during the stop is declared dead after the resume" within 8 alive_is 2
sleep 2            # two more worker timeouts after the resume
ID3=$(sed -n 's/.*registered worker=\([0-9]*\) .*/\1/p' "$WORK/w3.err" | head -1)
check "the live workers are alive, two timeouts after the resume" alive_is 2
check "... never declared dead: one death logged, the killed worker's" bash -c \
  "[ \"\$(grep 'worker dead' '$WORK/d.err' | sed 's/.* worker=\([0-9]*\) .*/\1/')\" = '$ID3' ]"
check "... never registered again" bash -c "[ \$(grep -c 'worker registered' '$WORK/d.err') = 3 ]"
check "... the dispatcher logged that it spared them" grep -q 'dispatcher lagging: workers' "$WORK/d.err"
check "no client rank expired" bash -c "! grep -q 'client expired' '$WORK/d.err'"
check "the spared workers are counted (deaths deferred)" \
  metric_is 'spillway_dispatcher_deaths_deferred_total{peer="worker"}' -ge 2
check "/metrics: one worker declared dead" metric_is spillway_dispatcher_workers_declared_dead_total -eq 1
check "/metrics: no client rank expired" metric_is spillway_dispatcher_clients_expired_total -eq 0
check "/metrics: the dispatcher's lag" bash -c "curl -sf http://127.0.0.1:$MPORT/metrics > '$WORK/m.prom' &&
  grep -q '^spillway_dispatcher_lag_seconds{window=\"recent\"} [0-9.e-]*$' '$WORK/m.prom'"
wait "$C"
check "the job ends (exit 0)" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
wait "$C2"
check "the new job ends (exit 0)" test $? -eq 0
check "... refused first: the dispatcher was overloaded" grep -q 'RESOURCE_EXHAUSTED: the dispatcher is overloaded' \
  "$WORK/c2.err"
check "... counted" metric_is spillway_dispatcher_new_work_refused_total -ge 1
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local2.keys') <(sort '$WORK/svc2.keys') > /dev/null"
finish
