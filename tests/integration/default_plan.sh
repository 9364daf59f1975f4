#!/usr/bin/env bash
# tests/integration/default_plan.sh - a trainer that names a dispatcher and nothing else gets a planned job:
# spillctl run with no --cut and SPILLWAY_CUT unset measures itself and the dispatcher plans (cut, local share,
# or no offload); every key arrives exactly once and `spillctl explain` shows the plan. SPILLWAY_CUT=all or K
# sets the default, an explicit --cut overrides it, a bad value of either is refused naming it; with no worker
# alive the planned job is made on the dispatcher, its client makes it, it asks for workers and a worker that
# joins takes part; a planned trainer started before its dispatcher waits for it. Kills all it starts.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
unset SPILLWAY_CUT          # lib.sh pins "all" for the other tests; this one is about the default
PY=/usr/bin/python3
augment_job "$WORK/p.json" 5 3 "$WORK/local-keys.txt" || exit 1
same_keys() { diff <(sort "$WORK/local-keys.txt") <(sort "$1") > /dev/null; }
# plan_is FILE EXPR: EXPR (Python, over p = the run's JSON plan and r = the whole JSON) holds.
plan_is() {
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r["plan"]; sys.exit(0 if eval(sys.argv[2]) else 1)' \
    "$1" "$2" || { echo "     plan: $(tr -d '\n' < "$1" | sed 's/.*"plan"/"plan"/' | cut -c1-300)"; return 1; }
}
svc_run() {    # svc_run NAME [ARGS...]: spillctl run (PIPE, else WORK/p.json) through the dispatcher at $DPORT, JSON
               # to WORK/NAME.json
  local name=$1
  shift
  "$B/bin/spillctl" run --dispatcher 127.0.0.1:"$DPORT" --pipeline "${PIPE:-$WORK/p.json}" --local-cores 1 \
    --keys "$WORK/$name.keys" --json --quiet "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}

start_service 1 || { finish; exit; }
svc_run default
check "default: the run exits 0" test $? -eq 0
check "default: the job was planned" plan_is "$WORK/default.json" 'p["planned"]'
check "default: every key exactly once" same_keys "$WORK/default.keys"
JOB=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/default.json" 2> /dev/null)
if plan_is "$WORK/default.json" 'p["offload"]'; then
  "$B/bin/spillctl" --dispatcher 127.0.0.1:"$DPORT" explain "$JOB" > "$WORK/explain.txt" 2>&1
  check "default: spillctl explain shows the plan" grep -q "cut" "$WORK/explain.txt"
  check "default: the dispatcher logged the planned job" grep -q "planned offload=1 cut=" "$WORK/d.err"
else
  check "default: the plan says why it runs alone" plan_is "$WORK/default.json" 'len(p["why"]) > 0'
fi

SPILLWAY_CUT=all svc_run env_all
check "SPILLWAY_CUT=all: exits 0, not planned, every group on the worker" \
  plan_is "$WORK/env_all.json" 'not p["planned"] and r["cut"] == len(r["groups"]) and r["producers"]["remote"] > 0'
check "SPILLWAY_CUT=all: every key exactly once" same_keys "$WORK/env_all.keys"
SPILLWAY_CUT=1 svc_run env_1
check "SPILLWAY_CUT=1: cut 1" plan_is "$WORK/env_1.json" 'not p["planned"] and r["cut"] == 1'
SPILLWAY_CUT=auto svc_run flag_all --cut all
check "--cut all overrides SPILLWAY_CUT=auto" plan_is "$WORK/flag_all.json" 'not p["planned"]'
SPILLWAY_CUT=all svc_run flag_auto --cut auto
check "--cut auto overrides SPILLWAY_CUT=all" plan_is "$WORK/flag_auto.json" 'p["planned"]'
check "--cut auto: every key exactly once" same_keys "$WORK/flag_auto.keys"

SPILLWAY_CUT=sideways svc_run env_bad
rc=$?
check "SPILLWAY_CUT=sideways: the run fails" test "$rc" -ne 0
check "SPILLWAY_CUT=sideways: the message names it" grep -q 'SPILLWAY_CUT="sideways" is not auto, all' "$WORK/env_bad.err"
svc_run flag_bad --cut 300
check "--cut 300: refused as a usage error (2)" test $? -eq 2
check "--cut 300: the message names the flag" grep -q -- '--cut: "300" is not auto, all or a group' "$WORK/flag_bad.err"

# No worker alive (scale from zero): the planned job is made on the dispatcher all the same, its client makes
# every element, the trainer's measured demand asks for workers (workers_needed on /metrics), and a worker
# started during the run joins it (the re-planner plans the job again when workers change).
kill -9 "${PIDS[1]}"
wait "${PIDS[1]}" 2> /dev/null
DPORT=0
dispatcher_on d2 --heartbeat-ms 200 --metrics-port -1 --worker-millicores 1000
DM=$(sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$WORK/d2.out")
augment_job "$WORK/long.json" 6 30 "$WORK/long-local.keys" || exit 1
wants_workers() {
  curl -sf "http://127.0.0.1:$DM/metrics" | awk '/^spillway_job_workers_needed\{/ { if ($2 >= 1) found = 1 }
    END { exit !found }'
}
PIPE=$WORK/long.json svc_run alone &
RUN=$!
PIDS+=("$RUN")
check "no worker: the planned job is on the dispatcher and asks for workers (workers_needed >= 1)" \
  within 30 wants_workers
add_workers 1
wait "$RUN"
check "no worker at first: the run exits 0" test $? -eq 0
check "no worker at first: planned, no offload at the start, a job on the dispatcher" \
  plan_is "$WORK/alone.json" 'p["planned"] and not p["offload"] and r["job"] > 0'
check "... the worker started during the run made part of it" plan_is "$WORK/alone.json" 'r["producers"]["remote"] > 0'
check "... the dispatcher re-planned it when the worker joined" grep -q "workers changed" "$WORK/d2.err"
check "no worker at first: every key exactly once" diff <(sort "$WORK/long-local.keys") <(sort "$WORK/alone.keys")

# A planned trainer started before its dispatcher (pods start in any order): its link probe, the first thing
# a planned job asks the dispatcher for, waits for it as CreateJob would; then the job runs.
kill -9 "$D"
wait "$D" 2> /dev/null
svc_run early &
C=$!
PIDS+=("$C")
sleep 2
dispatcher_on d3 || exit 1
wait "$C"
check "a planned trainer started before its dispatcher waits for it and runs (exit 0)" test $? -eq 0
check "... planned" plan_is "$WORK/early.json" 'p["planned"]'
check "... every key exactly once" same_keys "$WORK/early.keys"
check "... having said once that it waits" test "$(grep -c 'does not answer yet' "$WORK/early.err")" -eq 1
finish
