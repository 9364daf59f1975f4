#!/usr/bin/env bash
# tests/integration/replan_bandwidth.sh - re-planning on measured bandwidth: two workers in network
# namespaces this test creates (veth into a bridge), a planned job (--cut auto) running through them, and a
# `tc qdisc tbf` cap put on the workers' egress (worker -> client) mid-epoch. The dispatcher re-plans once
# with the per-element CPU measured on the running path (shown by `spillctl job`), then sees the rate stay
# under its prediction, re-plans with the bytes/s the client received from each worker as their links, and
# moves the cut to smaller elements for new leases; every sample key of the job still arrives exactly once.
# Needs root (ip netns, tc): without it, it says SKIP and why. Kills and removes all it creates.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1
PY=/usr/bin/python3
netns_usable
NET=$NS_NET

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
# decode+crop+flip | rand_augment | normalize+3 erasings (3 groups); random noise erasing makes the tensor group
# cost the client (its own production off: --local-share off) more than receiving floats, so with free
# bandwidth the workers take all of it (cut 3). Floats are 4x the bytes of the uint8 images of cut 2: under
# a 40 Mbit/s cap cut 2 delivers ~4x the elements (measured: cut 3 ~90/s, cut 2 ~300/s here).
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 5, "epochs": 50},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [96, 96]}, {"op": "random_horizontal_flip"},
         {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
         {"op": "random_erasing", "p": 1, "scale": [0.3, 0.33], "value": "random"},
         {"op": "random_erasing", "p": 1, "scale": [0.3, 0.33], "value": "random"},
         {"op": "random_erasing", "p": 1, "scale": [0.3, 0.33], "value": "random"}],
 "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --keys "$WORK/local-keys.txt" --quiet || exit 1

# Re-plans on measurements from 6 s after planning (the cap comes at 2 s; the client's rates are over 2 s).
"$B/bin/spillway-dispatcher" --listen $NET.1 --port 0 --heartbeat-ms 200 --replan-after-ms 6000 \
  > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || { bad "dispatcher starts"; finish; exit; }
for j in 1 2; do netns_worker "$j"; done
sleep 0.6

"$B/bin/spillctl" run --dispatcher $NET.1:"$DPORT" --pipeline "$WORK/p.json" --cut auto --local-share off \
  --keys "$WORK/keys.txt" --json --quiet > "$WORK/run.json" 2> "$WORK/run.err" & C=$!
for _ in $(seq 1 100); do grep -q "job created" "$WORK/d.err" && break; sleep 0.1; done
sleep 2
FIRST=$(sed -n 's/.*job created .* cut=\([0-9]*\)\/.*/\1/p' "$WORK/d.err" | head -1)
echo "     planned cut $FIRST; capping both workers at 40 Mbit/s"
for j in 1 2; do netns_cap "$j" 40mbit; done
# Costs measured on the running path: each worker's CPU per element sent and the client's per element received.
JOB=$(sed -n 's/.*job created job=\([0-9]*\) .*/\1/p' "$WORK/d.err" | head -1)
sleep 2
"$B/bin/spillctl" --dispatcher $NET.1:"$DPORT" job "$JOB" --json > "$WORK/job.json" 2>&1
wait $C
check "the run exits 0" test $? -eq 0
grep "re-planned" "$WORK/d.err" | sed 's/^/     /'
check "the planner offloaded everything first (cut 3: floats on the wire)" test "$FIRST" = 3
check "every key of the job exactly once" cmp -s <(sort "$WORK/local-keys.txt") <(sort "$WORK/keys.txt")
check "spillctl job shows CPU per element measured on both workers and the client" "$PY" "$ROOT/tests/integration/checks.py" replan_bandwidth_1 "$WORK/job.json"
check "the dispatcher re-planned once with the costs measured in the run" \
  test "$(grep -c 'why="costs measured"' "$WORK/d.err")" = 1
"$B/bin/spillctl" --dispatcher $NET.1:"$DPORT" explain "$JOB" --json > "$WORK/explain.json" 2>&1
check "a re-plan on the measured rate moved the cut to smaller elements" "$PY" "$ROOT/tests/integration/checks.py" replan_bandwidth_2 "$WORK/d.err" "$WORK/explain.json"
finish
