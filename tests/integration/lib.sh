#!/usr/bin/env bash
# tests/integration/lib.sh - shared by the integration tests (source it): scripts/lib/harness.sh (ROOT, B,
# PIDS, wait_port, json_field, ...), result counters and check helpers, and a cleanup trap that kills every
# process recorded in PIDS (continuing stopped ones first) and removes WORK (kept when KEEP is set);
# start_service for a dispatcher and N workers on loopback; killed_run for a run that loses a worker; tar_shards,
# shards_job, same_keys and workers_read_remote for the tests of shards read from a server.
# shellcheck disable=SC2034  # PIDS, WORK, pass and fail are used by the sourcing script
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/harness.sh"   # ROOT, B (SPW_BUILD), PIDS, wait_port...
WORK=$(mktemp -d /tmp/spw-int-XXXXXX)
TEST_TOKENS=()
# These tests check what workers send and how faults are survived: jobs offload every fusion group unless a
# test says otherwise. Users' default (SPILLWAY_CUT unset: planned) is tested in default_plan.sh.
export SPILLWAY_CUT=all
pass=0
fail=0
CG_DIRS=()
cleanup() {
  stop_daemons
  local g
  for g in "${CG_DIRS[@]}"; do      # quota_group's, once their processes are gone
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$g" 2> /dev/null && break; sleep 0.2; done
  done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# within SECONDS CMD...: CMD succeeds within SECONDS (polled every 0.2 s), for what happens when it happens
within() { local until=$(( $(date +%s%N) + $1 * 1000000000 )); shift
  until "$@"; do [ "$(date +%s%N)" -lt "$until" ] || return 1; sleep 0.2; done; }
# image_job JSON SEED EPOCHS KEYS: a pipeline over the 160-image test set (made once) - decode, a 32x32 centre
# crop, batches of 16, shuffled with SEED - written to JSON, and its keys from a local run written to KEYS.
image_job() {
  bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || return 1
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "shuffle": true, "seed": $2, "epochs": $3},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
  "$B/bin/spillctl" run --local --pipeline "$1" --threads 2 --keys "$4" --quiet
}
# augment_job JSON SEED EPOCHS KEYS: a pipeline expensive per element (rand_augment at 160 px, so offloading
# to a worker pays) over the 160-image test set, batches of 32, written to JSON; a local run's keys to KEYS.
augment_job() {
  bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || return 1
  cat > "$1" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "shuffle": true, "seed": $2, "epochs": $3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [160, 160]},
         {"op": "rand_augment", "num_ops": 3, "magnitude": 12},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON
  "$B/bin/spillctl" run --local --pipeline "$1" --threads 2 --keys "$4" --quiet
}
# tar_shards DIR: the 160-image test set (made once) as four WebDataset shards DIR/shard-{0..3}.tar (jpg + cls,
# the images dealt round-robin; keys s0/NAME ... s3/NAME), for tests that serve shards from elsewhere.
tar_shards() {
  bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || return 1
  mkdir -p "$1" && "$PY" "$ROOT/tests/integration/checks.py" remote_shards_1 "$B/data/cli-test/train" "$1"
}
# shards_job FILE PATH EPOCHS [EXTRA SOURCE FIELDS]: a pipeline over the tar shards at PATH (a local pattern, a
# URL or an s3:// path) - decode, a 32x32 centre crop, batches of 16, shuffled with seed 4 - written to FILE.
shards_job() {
  cat > "$1" <<JSON
{"source": {"format": "tar_shards", "path": "$2", "shuffle": true, "seed": 4, "epochs": $3${4:+, $4}},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
}
# same_keys LOCAL KEYS FROM TO: the keys file KEYS (a run over shards named FROM...) holds the same keys as LOCAL
# (a run over the same shards in folder TO), once FROM is written TO: the same samples wherever they are read.
same_keys() { diff <(sort "$1") <(sed "s|$3|$4|" "$2" | sort) > /dev/null; }
# workers_read_remote JOB: spillctl job JOB (written to WORK/job.json) shows both workers' remote shard reads
# (their next heartbeat brings them: poll it with within).
workers_read_remote() {
  "$B/bin/spillctl" --dispatcher 127.0.0.1:"$DPORT" job "$1" --json > "$WORK/job.json" 2>&1 &&
    "$PY" "$ROOT/tests/integration/checks.py" remote_shards_2 "$WORK/job.json" 2> /dev/null
}
# dispatcher_on NAME [FLAGS...]: a dispatcher on 127.0.0.1:$DPORT (a free port when DPORT is unset or 0), so
# that a restart can take the same port; logs in WORK/NAME.out and .err; run with the VAR=value words in
# DISPATCHER_ENV. Sets D (its pid) and DPORT.
DISPATCHER_ENV=()
dispatcher_on() {
  local name=$1
  shift
  env "${DISPATCHER_ENV[@]}" "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port "${DPORT:-0}" "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" &
  D=$!
  PIDS+=("$D")
  DPORT=$(wait_port "$WORK/$name.out") || { bad "dispatcher $name starts"; return 1; }
}
# add_workers N: N one-thread workers of the dispatcher at $DPORT on 127.0.0.1 (logs WORK/wI.out and .err).
add_workers() {
  local j
  for j in $(seq 1 "$1"); do
    "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
      > "$WORK/w$j.out" 2> "$WORK/w$j.err" &
    PIDS+=($!)
    wait_port "$WORK/w$j.out" > /dev/null || { bad "worker $j starts"; return 1; }
  done
}
# start_service N [DISPATCHER FLAGS...]: a dispatcher on 127.0.0.1 and N one-thread workers (logs in WORK:
# d.out/d.err, wN.out/wN.err); sets DPORT. Returns non-zero (and says which) when one does not start.
start_service() {
  local n=$1
  shift
  DPORT=0
  dispatcher_on d "$@" && add_workers "$n" || return 1
  sleep 0.3
}
# same_batches A B: dump WORK/A holds the same files as dump WORK/B (every .npy and keys.txt), byte for byte.
same_batches() {
  [ "$(ls "$WORK/$1" | wc -l)" = "$(ls "$WORK/$2" | wc -l)" ] || return 1
  local f
  for f in "$WORK/$2"/*; do cmp -s "$f" "$WORK/$1/$(basename "$f")" || return 1; done
}
# lying_worker MODE SAMPLES SEED WHY: tests/tools/fakeworker in MODE (for a shuffled source of SAMPLES with
# SEED) beside the dispatcher's real workers, and an ordered run of WORK/p.json through it into WORK/MODE:
# checks that the run exits 0, streamed from the liar, dropped its stream saying WHY (a grep pattern), and
# that its batches are WORK/local's. Stops the liar.
lying_worker() {
  local mode=$1 fake=$B/tests/fakeworker f
  [ -x "$fake" ] || make -s -C "$ROOT" build/tests/fakeworker > /dev/null || return 1
  "$fake" "127.0.0.1:$DPORT" "$mode" "$2" "$3" > "$WORK/f-$mode.out" 2> "$WORK/f-$mode.err" &
  f=$!
  PIDS+=("$f")
  wait_port "$WORK/f-$mode.out" > /dev/null || return 1
  sleep 0.5                                  # registered and heartbeating: listed to clients
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --dump "$WORK/$mode" --quiet > /dev/null 2> "$WORK/c-$mode.err"
  check "$mode: the client exits 0" test $? -eq 0
  check "$mode: the hostile worker was streamed from" grep -q 'sending a bad message' "$WORK/f-$mode.err"
  check "$mode: the client says why it dropped the stream" grep -q "bad message from worker=.*$4" \
    "$WORK/c-$mode.err"
  check "$mode: batches byte-identical to run --local" same_batches "$mode" local
  kill -TERM "$f"; wait "$f" 2> /dev/null
  return 0
}
# killed_run SPEC DUMP [SPILLCTL FLAGS...]: an ordered run of SPEC through the dispatcher at $DPORT into WORK/DUMP
# (workers only; the flags set its pace, e.g. --consume-rate, so it is still going) with worker 1 (PIDS[1])
# killed -9 1.5 s in; checks that it was still going then and that it finishes.
killed_run() {
  local spec=$1 dump=$2
  shift 2
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$spec" --ordered --local-cores 0 \
    --dump "$WORK/$dump" --quiet "$@" 2> "$WORK/$dump.err" &
  local run=$!
  sleep 1.5
  check "the run was still going when a worker was killed" kill -0 "$run"
  kill -9 "${PIDS[1]}"
  wait "${PIDS[1]}" 2> /dev/null
  wait "$run"
  check "a worker killed -9 mid-run: the run finishes" test $? -eq 0
}
# finish: the closing line and the exit status; first, no file the test's processes wrote may hold one of the
# tokens it used (TEST_TOKENS: tokens appear in no log line, anywhere in the suite).
finish() {
  local t
  for t in "${TEST_TOKENS[@]}"; do
    check "no log line shows a token" bash -c "! grep -rqF --include='*.err' --include='*.out' -- '$t' '$WORK'"
  done
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
# alive_count: workers the dispatcher at DPORT lists as alive; alive_is N: that many.
alive_count() {
  "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json 2> /dev/null |
    "$PY" -c 'import json,sys; print(sum(w["alive"] for w in json.load(sys.stdin)["workers"]))'
}
alive_is() { [ "$(alive_count)" = "$1" ]; }
# metric NAME_AND_LABELS: its value from the dispatcher's /metrics on MPORT (read whole: grep -q under
# pipefail can cut curl off); metric_is NAME_AND_LABELS OP N: that value (an integer) compares so.
metric() { local body; body=$(curl -sf --max-time 10 "http://127.0.0.1:$MPORT/metrics") &&
  awk -v n="$1" '$1 == n { print $2 }' <<< "$body"; }
metric_is() { local v; v=$(metric "$1") && [ -n "$v" ] && test "$v" "$2" "$3"; }
# quota_group NAME CORES: a cgroup whose CPU quota is CORES CPUs (v1 cpu.cfs_quota_us or v2 cpu.max) into
# CG_DIR, removed when the test exits; in_group CMD... runs CMD in it; quota_lift lifts the quota. Without
# root or a cgroup cpu controller it says SKIP, what for and why, and returns 1.
quota_group() {
  CG_DIR=""
  if [ "$(id -u)" = 0 ] && { [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] ||
    grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2> /dev/null; }; then
    # shellcheck source=scripts/lib/cpu-quota.sh
    source "$ROOT/scripts/lib/cpu-quota.sh"
    if cpu_quota_cgroup "spwt$$-$1" "$2" 2> /dev/null; then
      CG_DIR=$CGDIR
      CG_DIRS+=("$CG_DIR")
      return 0
    fi
    [ -d "$CGDIR" ] && CG_DIRS+=("$CGDIR")
  fi
  echo "SKIP $(basename "$0" .sh) $1: needs root and a cgroup cpu controller to set a CPU quota"
  return 1
}
in_group() { bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$CG_DIR" "$@"; }
# quota_lift: no quota on CG_DIR from now on (its processes stay in it).
quota_lift() {
  if [ -f "$CG_DIR/cpu.max" ]; then echo "max 100000" > "$CG_DIR/cpu.max"; else echo -1 > "$CG_DIR/cpu.cfs_quota_us"; fi
}
# Network namespaces for tests that need links of their own (root, ip netns, tc). NS_P names them (short:
# link names have 15 characters), NS_NET is the /24 (the bridge is .1, worker J .1J).
NS_P=spwt$$
NS_NET=10.78.0
# netns_usable: whether this test may make namespaces (else it says SKIP and why, and exits 0).
netns_usable() {
  if [ "$(id -u)" != 0 ] || ! command -v tc > /dev/null || ! ip netns add "${NS_P}x" 2> /dev/null; then
    echo "SKIP $(basename "$0" .sh): needs root with ip netns and tc (network namespaces, a bandwidth cap)"
    exit 0
  fi
  ip netns del "${NS_P}x"
  trap 'cleanup; for j in 1 2 3 4; do ip netns del "${NS_P}w$j" 2> /dev/null; done; ip link del "${NS_P}b" 2> /dev/null; true' EXIT
  ip link add "${NS_P}b" type bridge
  ip addr add $NS_NET.1/24 dev "${NS_P}b"
  ip link set "${NS_P}b" up
}
# netns_worker J [WORKER FLAGS...]: worker J in namespace ${NS_P}wJ at $NS_NET.1J, of the dispatcher at
# $NS_NET.1:$DPORT (logs WORK/wJ.out and .err); --insecure: no token on a namespace's address.
netns_worker() {
  local j=$1
  shift
  ip netns add "${NS_P}w$j"
  ip link add "${NS_P}h$j" type veth peer name "${NS_P}v$j"
  ip link set "${NS_P}v$j" netns "${NS_P}w$j"
  ip link set "${NS_P}h$j" master "${NS_P}b" up
  ip netns exec "${NS_P}w$j" ip addr add $NS_NET.$((10 + j))/24 dev "${NS_P}v$j"
  ip netns exec "${NS_P}w$j" ip link set "${NS_P}v$j" up
  ip netns exec "${NS_P}w$j" "$B/bin/spillway-worker" --dispatcher $NS_NET.1:"$DPORT" --listen $NS_NET.$((10 + j)) \
    --insecure --port 0 --threads 1 "$@" > "$WORK/w$j.out" 2> "$WORK/w$j.err" &
  PIDS+=($!)
  wait_port "$WORK/w$j.out" > /dev/null || { bad "worker $j starts"; return 1; }
}
# netns_cap J RATE: cap worker J's egress (worker -> client) at RATE (tc tbf, e.g. 40mbit); RATE "off" lifts it.
netns_cap() {
  if [ "$2" = off ]; then
    ip netns exec "${NS_P}w$1" tc qdisc del dev "${NS_P}v$1" root
  else
    ip netns exec "${NS_P}w$1" tc qdisc add dev "${NS_P}v$1" root tbf rate "$2" burst 64kb latency 100ms
  fi
}
