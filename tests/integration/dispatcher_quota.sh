#!/usr/bin/env bash
# tests/integration/dispatcher_quota.sh - issue 42: a dispatcher held to 0.05 of a core (a cgroup CPU quota)
# under tests/tools/disp_load's 1000 simulated workers x 100 jobs, beside two real workers and a real job,
# degrades without deaths: no worker (simulated or real) is declared dead and no client rank expires, a call
# that fails says why (DEADLINE_EXCEEDED: shed; RESOURCE_EXHAUSTED: refused), and once the quota is lifted
# the real job and one created under the quota end with every key exactly once. The simulated workers refuse
# the real jobs (as a worker that cannot serve a job does). Needs root and a cgroup CPU controller (else
# SKIP). Real processes on loopback.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

quota_group disp 0.05 || { finish; exit 0; }
image_job "$WORK/p.json" 7 1 "$WORK/local.keys" || exit 1
image_job "$WORK/p2.json" 8 1 "$WORK/local2.keys" || exit 1
# Every simulated client is this host: the per-host job cap (64 by default) would refuse the 65th job.
start_service 2 --max-jobs-per-client 1000 --metrics-port -1 || { finish; exit 1; }
MPORT=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d.out")
registered() { [ "$(grep -c 'worker registered' "$WORK/d.err")" -ge "$1" ]; }

# The load: 100 jobs of 2048 empty files (the dispatcher lists them, nobody decodes), 1000 workers leasing at
# a one-core worker's pace (~15 splits/s over its jobs), heartbeats every second, clients every 200 ms.
mkdir -p "$WORK/load/a" && (cd "$WORK/load/a" && seq 1 2048 | sed 's/$/.jpg/' | xargs touch)
"$B/tests/disp_load" --dispatcher "127.0.0.1:$DPORT" --data "$WORK/load" --workers 1000 --jobs 100 \
  --split-size 64 --seconds 15 --threads 8 --hb-threads 32 --split-ms 6667 --pid "$D" \
  > "$WORK/load.json" 2> "$WORK/load.err" &
L=$!
PIDS+=("$L")
check "the simulated workers register" within 60 registered 1002
# The real job: 160 elements at 8/s, running before, during and after the quota.
timeout 180 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 0 \
  --consume-rate 8 --keys "$WORK/svc.keys" --quiet > "$WORK/c.out" 2> "$WORK/c.err" &
C=$!
PIDS+=("$C")
sleep 2
echo "$D" > "$CG_DIR/cgroup.procs"              # 0.05 of a core from here
sleep 4
# A new job under the quota: slow to be made (or refused while the dispatcher lags, and retried), served
# once the quota is lifted.
timeout 180 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p2.json" --local-cores 0 \
  --keys "$WORK/svc2.keys" --quiet > "$WORK/c2.out" 2> "$WORK/c2.err" &
C2=$!
PIDS+=("$C2")
sleep 4
throttled=$(awk '$1 == "nr_throttled" { print $2 }' "$CG_DIR/cpu.stat" 2> /dev/null)
quota_lift
check "the quota held the dispatcher back (throttled ${throttled:-?} times)" test "${throttled:-0}" -gt 10
check "the real job is still running when the quota is lifted" kill -0 "$C"
wait "$L"
check "the load generator ran to its end" test $? -eq 0
check "every worker alive at the end (the simulated ones and the real two)" \
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["alive_at_end"] != 1002)' "$WORK/load.json"
# Its calls: any that failed did so with a clear status (shed: DEADLINE_EXCEEDED; refused: RESOURCE_EXHAUSTED).
check "calls that failed under the quota said why" "$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))["methods"]
for k, v in m.items():
    print("  %s: %.0f/s, p99 %.0f ms, %d failed (%d DEADLINE_EXCEEDED, %d RESOURCE_EXHAUSTED)" % (
        k, v["per_s"], v["p99_ms"], v["errors"], v["deadline_exceeded"], v["resource_exhausted"]))
sys.exit(any(v["errors"] != v["deadline_exceeded"] + v["resource_exhausted"] for v in m.values()))' "$WORK/load.json"
check "... and after the load" test "$(alive_count)" = 1002
check "no worker declared dead" test "$(metric spillway_dispatcher_workers_declared_dead_total)" = 0
check "... none logged dead" bash -c "! grep -q 'worker dead' '$WORK/d.err'"
check "no client rank expired" test "$(metric spillway_dispatcher_clients_expired_total)" = 0
wait "$C"
check "the job ends (exit 0)" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys') > /dev/null"
wait "$C2"
check "the new job ends (exit 0)" test $? -eq 0
check "... with every key exactly once" bash -c "diff <(sort '$WORK/local2.keys') <(sort '$WORK/svc2.keys') > /dev/null"
echo "  new jobs refused while overloaded: $(metric spillway_dispatcher_new_work_refused_total);" \
  "calls shed: $(metric spillway_dispatcher_calls_shed_total); deaths deferred:" \
  "$(metric 'spillway_dispatcher_deaths_deferred_total{peer="worker"}')"
finish
