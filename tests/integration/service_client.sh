#!/usr/bin/env bash
# tests/integration/service_client.sh - the client library end to end (spillctl run --dispatcher on
# libspillway) against a real dispatcher and worker processes on loopback: every sample key of a 2-epoch job
# exactly once with workers only and in hybrid mode (both producer classes >= 10%); with --ordered, batches
# byte-identical to `run --local` at every cut (the client runs the suffix groups; also a lone last normalize
# read from the received slices); two jobs at once; a worker
# killed with -9 mid-run and a worker stopped past its timeout (zombie), over seeded runs (SOAK_RUNS, default
# 2; `make soak` runs 20). Kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SOAK_RUNS=${SOAK_RUNS:-2}

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
pipeline() {  # pipeline FILE SEED EPOCHS: decode+crop+flip | rand_augment | normalize+erasing (3 groups)
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": $2, "epochs": $3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
         {"op": "random_erasing"}],
 "batch": {"size": 32, "layout": "CHW"}}
JSON
}
start_cluster() {   # a dispatcher and two workers; sets DPORT, W1, W2
  "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port 0 --heartbeat-ms 100 --worker-timeout-ms 800 \
    --speculate-after-ms 3000 > "$WORK/d.out" 2> "$WORK/d.err" &
  PIDS+=($!)
  DPORT=$(wait_port "$WORK/d.out") || return 1
  start_worker 1 && start_worker 2
  sleep 0.3
}
start_worker() {    # start_worker N: sets WN
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    > "$WORK/w$1.out" 2> "$WORK/w$1.err" &
  PIDS+=($!)
  eval "W$1=$!"
  wait_port "$WORK/w$1.out" > /dev/null
}
run_service() {     # run_service NAME PIPELINE [spillctl options...]: dump to $WORK/NAME, JSON to $WORK/NAME.json
  local name=$1 p=$2
  shift 2
  rm -rf "${WORK:?}/$name"
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$p" --dump "$WORK/$name" --json \
    --quiet "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
}
same_keys() { cmp -s <(sort "$WORK/$1/keys.txt") <(sort "$WORK/$2/keys.txt"); }

pipeline "$WORK/p.json" 7 2
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1
start_cluster || exit 1

# Worker.Profile: every cut of the 3-group pipeline measured on a worker, with the bytes each ships.
W1PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$WORK/w1.out")
"$B/bin/spillctl" profile --worker "127.0.0.1:$W1PORT" --pipeline "$WORK/p.json" --samples 16 --json \
  > "$WORK/profile.json" 2> "$WORK/profile.err"
check "profile: a cost and a size for cuts 0-3, the sizes of a 64x64 crop (uint8, then float32)" \
  "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
c = p['cuts']
assert [x['cut'] for x in c] == [0, 1, 2, 3], c
assert all(x['ns_per_element'] > 0 for x in c), c
assert c[0]['bytes_per_element'] > 1000, c            # the JPEGs as read
assert [x['bytes_per_element'] for x in c[1:]] == [12288, 12288, 49152], c
assert p['samples'] == 16 and p['skipped'] == 0, p
" "$WORK/profile.json"
sed 's|"path": "[^"]*"|"path": "/nonexistent/data"|' "$WORK/p.json" > "$WORK/elsewhere.json"
"$B/bin/spillctl" profile --worker "127.0.0.1:$W1PORT" --pipeline "$WORK/elsewhere.json" > /dev/null 2> "$WORK/profile-bad.err"
check "profile: a source the worker cannot list is refused, saying so" grep -q 'FAILED_PRECONDITION\|status 9.*cannot list the source' "$WORK/profile-bad.err"

# The planner on real measurements: this client's costs and both workers' profiles.
"$B/bin/spillctl" plan --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --samples 16 --json \
  > "$WORK/plan.json" 2> "$WORK/plan.err"
check "plan: a row per cut (0-3) and a choice among them, with a positive prediction" "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
assert [c['cut'] for c in p['candidates']] == [0, 1, 2, 3], p
assert p['workers'] == 2 and p['throughput'] > 0 and p['local_only'] > 0, p
assert (p['cut'] in (0, 1, 2, 3)) == p['offload'] or p['cut'] == -1, p
" "$WORK/plan.json"
"$B/bin/spillctl" plan --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --samples 16 --json --cut 2 \
  --local-share off > "$WORK/plan2.json" 2>> "$WORK/plan.err"
"$B/bin/spillctl" plan --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --samples 8 > "$WORK/plan.txt" 2>&1
check "plan: the links from both workers were probed (MB/s > 0 each, and all at once), for at most 0.6 s" "$PY" -c "
import re, sys
line = [l for l in open(sys.argv[1]) if 'links (MB/s):' in l][0]
rates = [float(x) for x in re.findall(r'127\.0\.0\.1:\d+ ([0-9.]+)', line)]
assert len(rates) == 2 and all(r > 0 for r in rates), line
assert float(re.search(r'all at once ([0-9.]+)', line).group(1)) > 0, line
assert 0.2 <= float(re.search(r'probed for ([0-9.]+) s', line).group(1)) <= 0.65, line
" "$WORK/plan.txt"
check "plan: overrides (--cut 2, --local-share off) are what it plans" "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
assert p['cut'] == 2 and p['local_share'] == 0 and 'override' in p['why'], p
assert p['candidates'][2]['local'] == 0, p
" "$WORK/plan2.json"

# --cut auto: the client measures itself, the dispatcher profiles the workers and plans; explain shows it.
run_service auto "$WORK/p.json" --cut auto
check "cut auto: every key exactly once" same_keys auto local
check "cut auto: the run reports a planned job and spillctl explain shows the same plan" "$PY" -c "
import json, subprocess, sys
run = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
plan = run['plan']
assert plan['planned'] is True and plan['why'], plan
if run['job']:
    ex = json.loads(subprocess.run([sys.argv[2], '--dispatcher', sys.argv[3], 'explain', str(run['job']), '--json'],
                                   check=True, capture_output=True, text=True).stdout)
    assert [c['cut'] for c in ex['candidates']] == [0, 1, 2, 3] and ex['workers'] == 2, ex
    assert ex['offload'] and ex['cut'] == plan['cut'] == run['cut'], (ex, plan)
else:
    assert not plan['offload'], plan
" "$WORK/auto.json" "$B/bin/spillctl" "127.0.0.1:$DPORT"
run_service autolocal "$WORK/p.json" --cut auto --consume-rate 200
check "cut auto, a trainer the client alone keeps up with: no offload, run here, every key once" "$PY" -c "
import json, sys
run = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert run['job'] == 0 and run['plan']['offload'] is False and run['plan']['workers'] == 0, run['plan']
assert 'no offload' in run['plan']['why'], run['plan']
" "$WORK/autolocal.json"
check "cut auto, run here: every key exactly once" same_keys autolocal local

run_service remote "$WORK/p.json" --local-cores 0
check "workers only: exits 0" test $? -eq 0
check "workers only: every key of 2 epochs exactly once" same_keys remote local
check "workers only: 320 elements, all from workers" test "$(json_field "$WORK/remote.json" "['producers']['remote']")" = 320

run_service hybrid "$WORK/p.json" --local-cores 1
check "hybrid: every key exactly once" same_keys hybrid local
check "hybrid: the JSON reports the plan it ran with (cut 3, a local share in (0, 1), 2 workers)" "$PY" -c "
import json, sys
p = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['plan']
assert p['cut'] == 3 and 0 < p['local_share'] < 1 and p['workers'] == 2, p
" "$WORK/hybrid.json"
check "hybrid: workers delivered >= 10%" test "$(json_field "$WORK/hybrid.json" "['producers']['remote']")" -ge 32
check "hybrid: the client's own threads delivered >= 10%" test "$(json_field "$WORK/hybrid.json" "['producers']['local']")" -ge 32
sleep 0.5     # the final counts arrive with the next heartbeats
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$(json_field "$WORK/hybrid.json" "['job']")" --json > "$WORK/hybrid-job.json"
# Producers report what they made: the 320 delivered plus the copies the client dropped (an idle client
# thread computes a stalled head batch's missing elements; the worker's later copies are duplicates).
check "hybrid: spillctl job's per-producer counts add up to the 320 elements and the duplicates dropped" \
  test "$("$PY" -c "import json,sys; print(sum(p['elements'] for p in json.load(open(sys.argv[1]))['producers']))" "$WORK/hybrid-job.json")" \
  = $((320 + $(json_field "$WORK/hybrid.json" "['duplicates_dropped']")))
check "hybrid: spillctl job lists the client and both workers as producers" \
  test "$("$PY" -c "import json,sys; print(sorted(p['producer'].split(':')[0] for p in json.load(open(sys.argv[1]))['producers']))" "$WORK/hybrid-job.json")" = "['client', 'worker', 'worker']"

# --workers 1: the job uses the first alive worker only; the other one serves nothing of it.
run_service oneworker "$WORK/p.json" --local-cores 0 --workers 1
check "--workers 1: every key exactly once" same_keys oneworker local
sleep 0.5
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$(json_field "$WORK/oneworker.json" "['job']")" --json > "$WORK/oneworker-job.json"
check "--workers 1: one worker produced all 320 elements, the other none" "$PY" -c "
import json, sys
ps = [p for p in json.load(open(sys.argv[1]))['producers'] if p['elements'] > 0]
assert len(ps) == 1 and ps[0]['producer'].startswith('worker') and ps[0]['elements'] == 320, ps
" "$WORK/oneworker-job.json"

for cut in 0 1 2 3; do
  run_service "ordered$cut" "$WORK/p.json" --ordered --cut "$cut"
  check "ordered, cut $cut: batches byte-identical to run --local" same_batches "ordered$cut" local
  check "ordered, cut $cut: the job ran at that cut" test "$(json_field "$WORK/ordered$cut.json" "['cut']")" = "$cut"
done

# The last group a lone normalize (no erasing after it): at cut 2 the client normalizes each received element
# from the rows where they arrived in gRPC's slices (no gather); the bytes must not change.
sed -z 's/,[[:space:]]*{"op": "random_erasing"}//' "$WORK/p.json" > "$WORK/pn.json"
"$B/bin/spillctl" run --local --pipeline "$WORK/pn.json" --threads 2 --dump "$WORK/localn" --quiet || exit 1
run_service orderedn "$WORK/pn.json" --ordered --cut 2
check "ordered, cut 2 before a lone normalize: batches byte-identical to run --local" same_batches orderedn localn
check "ordered, cut 2 before a lone normalize: the workers made elements" \
  test "$(json_field "$WORK/orderedn.json" "['producers']['remote']")" -gt 0

pipeline "$WORK/q.json" 8 2
"$B/bin/spillctl" run --local --pipeline "$WORK/q.json" --threads 2 --dump "$WORK/localq" --quiet || exit 1
run_service two1 "$WORK/p.json" & A=$!
run_service two2 "$WORK/q.json" & C=$!
wait "$A"; wait "$C"
check "two jobs at once: each has every key exactly once" bash -c "$(declare -f same_keys); WORK=$WORK; same_keys two1 local && same_keys two2 localq"

# A trainer that stops early (fewer batches than the job has) frees the workers at once, not after its timeout.
pipeline "$WORK/early-p.json" 9 30
run_service early "$WORK/early-p.json" --max-batches 3
check "early stop: 3 batches, exit 0" test "$(json_field "$WORK/early.json" "['batches']")" = 3
EARLY_JOB=$(json_field "$WORK/early.json" "['job']")
check "early stop: the dispatcher releases the client at once" grep -q "client closed job=$EARLY_JOB " "$WORK/d.err"
check "early stop: the workers stop the job within a second" \
  bash -c "sleep 1; grep -q 'stopping job=$EARLY_JOB ' '$WORK/w1.err' && grep -q 'stopping job=$EARLY_JOB ' '$WORK/w2.err'"

# Faults over seeded runs: a worker killed mid-run (also mid-message: the kill lands at a random moment while
# it streams), and a worker stopped past its timeout then continued.
for run in $(seq 1 "$SOAK_RUNS"); do
  seed=$((100 + run))
  pipeline "$WORK/long.json" "$seed" 30
  rm -rf "$WORK/long-local"
  "$B/bin/spillctl" run --local --pipeline "$WORK/long.json" --threads 2 --dump "$WORK/long-local" --quiet || exit 1
  run_service "kill$run" "$WORK/long.json" --ordered & C=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 "$W1"; wait "$W1" 2>/dev/null
  wait "$C"
  check "run $run: worker killed (-9) mid-run: exits 0" test $? -eq 0
  check "run $run: worker killed mid-run: batches identical to a local run (every key once)" same_batches "kill$run" long-local
  start_worker 1
  sleep 0.3
  run_service "zombie$run" "$WORK/long.json" --ordered & C=$!
  sleep "0.$((RANDOM % 5 + 1))"
  kill -STOP "$W2"; sleep 1.5; kill -CONT "$W2"
  wait "$C"
  check "run $run: zombie worker: exits 0" test $? -eq 0
  check "run $run: zombie worker: batches identical to a local run (every key once)" same_batches "zombie$run" long-local
done

# Re-planning: a planned job sees a worker join mid-run; the dispatcher profiles again and keeps or moves
# the cut for new leases (hysteresis); every batch still equals the local run's.
kill -TERM "$W2"; wait "$W2" 2>/dev/null
sleep 1.2                                        # W2 is gone from the alive list
pipeline "$WORK/replan-p.json" 21 30
"$B/bin/spillctl" run --local --pipeline "$WORK/replan-p.json" --threads 2 --dump "$WORK/replan-local" --quiet || exit 1
run_service replan "$WORK/replan-p.json" --cut auto --ordered & C=$!
sleep 1.5
start_worker 2
wait "$C"
check "re-plan: the run exits 0" test $? -eq 0
RJOB=$(json_field "$WORK/replan.json" "['job']")
check "re-plan: the dispatcher re-planned the job when the second worker joined" \
  grep -q "re-planned job=$RJOB why=\"workers changed\" workers=2/2" "$WORK/d.err"
check "re-plan: batches identical to a local run (every key once, whatever the cuts)" same_batches replan replan-local
check "re-plan: spillctl job shows the plan's prediction next to the measured rate" "$PY" -c "
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], '--dispatcher', sys.argv[2], 'job', sys.argv[3], '--json'], check=True,
                              capture_output=True, text=True).stdout)
assert d['predicted_elements_per_s'] > 0 and 'measured_elements_per_s' in d and d['plan_cut'] >= 0, d
" "$B/bin/spillctl" "127.0.0.1:$DPORT" "$RJOB"

# More workers, more of the data from workers: the client's own threads take only what is left.
remote_share() { "$PY" -c "
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(d['producers']['remote'] / d['elements'])" "$1"; }
run_service two "$WORK/replan-p.json" --cut 3
kill -TERM "$W2"; wait "$W2" 2>/dev/null
sleep 1.2
run_service one "$WORK/replan-p.json" --cut 3
echo "     remote share: $(remote_share "$WORK/one.json") with one worker, $(remote_share "$WORK/two.json") with two"
check "adding a worker raises the remote share" "$PY" -c "import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)" \
  "$(remote_share "$WORK/one.json")" "$(remote_share "$WORK/two.json")"

finish
