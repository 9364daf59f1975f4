#!/usr/bin/env bash
# deploy/scripts/pods.sh - Spillway's image run as pods on this machine: four network namespaces on a bridge
# (in a namespace of its own: nothing reaches any other address), one per pod, each with its own address;
# the dispatcher and two workers run from the image built by deploy/scripts/image.sh with the arguments and
# environment of the rendered dev overlay (build/deploy-check/dev.yaml, read by deploy/check/podspec.mjs),
# except that the workers get no SPILLWAY_ADVERTISE: started with default listen flags, they must be reached
# at the address the dispatcher saw them call from. A trainer (spillctl run, from the image) in the fourth
# namespace reaches the dispatcher by its Service name. Proves: the pods serve Prometheus metrics on the
# manifests' port, every key exactly once, both workers produce
# elements, a worker killed and restarted in its namespace rejoins and the next job uses it, and a trainer
# runs through the dispatcher pod killed and started again on its volume (its journal). Removes
# everything it made at exit. Root; run after `deploy/scripts/check.sh manifests` and `image`.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
IMAGE=${SPW_IMAGE:-localhost/spillway:dev}
DEP=$ROOT/build/deploy
CHK=$ROOT/build/deploy-check
export CONTAINERS_CONF=$ROOT/deploy/containers.conf
NET=10.77.0          # the bridge's /24, inside the namespaces this script creates
PODS=(disp w1 w2 train)
declare -A IP=([disp]=$NET.2 [w1]=$NET.3 [w2]=$NET.4 [train]=$NET.5)
WORK=$(mktemp -d /tmp/spw-pods-XXXXXX)
pass=0
fail=0
P() { podman --root "$DEP/store" --runroot "$DEP/run" "$@"; }
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
die() { echo "deploy-pods: $*" >&2; exit 1; }
cleanup() {
  for p in "${PODS[@]}"; do P rm -f -t 0 "spw-$p" > /dev/null 2>&1; ip netns del "spw-$p" 2> /dev/null; done
  ip netns del spw-br 2> /dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, podman)"
P image exists "$IMAGE" || die "no image $IMAGE: run deploy/scripts/check.sh image first"
[ -f "$CHK/dev.yaml" ] || die "no rendered manifests: run deploy/scripts/check.sh manifests first"
cleanup
trap cleanup EXIT

# The network: a bridge in spw-br, a veth from it into each pod's namespace; no route out.
ip netns add spw-br && ip -n spw-br link add br0 type bridge && ip -n spw-br link set br0 up || die "cannot make netns"
for p in "${PODS[@]}"; do
  ip netns add "spw-$p"
  ip link add "v-$p" type veth peer name eth0 netns "spw-$p"
  ip link set "v-$p" netns spw-br
  ip -n spw-br link set "v-$p" master br0 up
  ip -n "spw-$p" addr add "${IP[$p]}/24" dev eth0
  ip -n "spw-$p" link set eth0 up
  ip -n "spw-$p" link set lo up
done

# What the pods mount: the dataset at /data (one copy, read-only, the same path everywhere), the token Secret
# as /var/run/spillway/token, the dispatcher's work dir; the trainer's spec and output.
DATA=$ROOT/build/data/cli-test
bash scripts/data/make-dataset.sh "$DATA" 160 > /dev/null || die "cannot make the dataset"
mkdir -p "$WORK/secret" "$WORK/work" "$WORK/trainer"
(cd "$CHK" && node podspec.mjs dev.yaml secret spillway-token token) > "$WORK/secret/token" || die "no token"
chmod 755 "$WORK" "$WORK/secret" && chmod 644 "$WORK/secret/token"
chmod 777 "$WORK/work" "$WORK/trainer"
cat > "$WORK/trainer/p.json" <<JSON
{"source": {"format": "image_folder", "path": "/data/train", "shuffle": true, "seed": 11, "epochs": 3},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]}, {"op": "random_horizontal_flip"}],
 "batch": {"size": 16}}
JSON
# The first job's: 12 epochs, 36 splits. With 3 epochs (9 splits) a worker of many threads (all the host's
# cores) can lease them all, two per thread, before the other one's first lease: "both workers produced
# elements" failed once in CI that way ([480, 0]) though both were alive and reached.
sed 's/"epochs": 3/"epochs": 12/' "$WORK/trainer/p.json" > "$WORK/trainer/p12.json"

# run_pod POD KIND NAME: the container the rendered manifest describes, in the pod's namespace.
run_pod() {
  local p=$1 kind=$2 name=$3 args=() line
  while IFS= read -r line; do
    case "$line" in
      "env SPILLWAY_ADVERTISE="*) ;;    # left out on purpose: the default address path is what is tested
      env\ *) args+=(-e "${line#env }") ;;
      arg\ *) ;;
    esac
  done < <(cd "$CHK" && node podspec.mjs dev.yaml pod "$kind" "$name" "${IP[$p]}")
  local role
  role=$(cd "$CHK" && node podspec.mjs dev.yaml pod "$kind" "$name" "${IP[$p]}" | sed -n 's/^arg //p' | tr '\n' ' ')
  # shellcheck disable=SC2086  # role: the manifest's args, one word each
  P run -d --name "spw-$p" --network "ns:/run/netns/spw-$p" --add-host "spillway-dispatcher:${IP[disp]}" \
    --read-only -v "$DATA:/data:ro" -v "$WORK/secret:/var/run/spillway:ro" -v "$WORK/work:/var/lib/spillway" \
    "${args[@]}" "$IMAGE" $role > /dev/null || die "cannot start pod $p"
}
in_trainer() {   # in_trainer ARGS...: spillctl from the image, in the trainer's namespace
  P run --rm --network ns:/run/netns/spw-train --add-host "spillway-dispatcher:${IP[disp]}" --read-only \
    -v "$DATA:/data:ro" -v "$WORK/secret:/var/run/spillway:ro" -v "$WORK/trainer:/trainer" \
    -e SPILLWAY_AUTH_TOKEN_FILE=/var/run/spillway/token -e SPILLWAY_INSECURE=1 "$IMAGE" spillctl "$@"
}
logs_have() { P logs "spw-$1" 2>&1 | grep -q "$2"; }
wait_log() {     # wait_log POD PATTERN [SECONDS]
  for _ in $(seq 1 $((${3:-20} * 10))); do logs_have "$1" "$2" && return 0; sleep 0.1; done
  return 1
}

run_pod disp StatefulSet spillway-dispatcher
wait_log disp "listening address=" || die "the dispatcher did not start: $(P logs spw-disp 2>&1 | tail -3)"
run_pod w1 Deployment spillway-worker
run_pod w2 Deployment spillway-worker
check "worker 1 registered under its pod address ${IP[w1]}" wait_log w1 "registered worker=.* address=${IP[w1]}:5051"
check "worker 2 registered under its pod address ${IP[w2]}" wait_log w2 "registered worker=.* address=${IP[w2]}:5051"
# The manifests' metrics port (SPILLWAY_METRICS_PORT, the prometheus.io/port annotation), from the trainer's pod.
metrics_of() { ip netns exec spw-train curl -s --max-time 5 "http://${IP[$1]}:5070/metrics"; }
disp_sees_two() { metrics_of disp | grep -q '^spillway_dispatcher_workers{state="alive"} 2$'; }
worker_serves() { metrics_of w1 | grep -q '^spillway_build_info{component="worker"'; }
check "the dispatcher pod serves /metrics on 5070: both workers alive" disp_sees_two
check "a worker pod serves /metrics on 5070" worker_serves

in_trainer run --local --pipeline /trainer/p.json --threads 2 --keys /trainer/local.keys --quiet ||
  die "the local run failed"
in_trainer run --local --pipeline /trainer/p12.json --threads 2 --keys /trainer/local12.keys --quiet ||
  die "the local run failed"
in_trainer run --dispatcher spillway-dispatcher:5050 --pipeline /trainer/p12.json --local-cores 0 --cut all \
  --keys /trainer/svc.keys --json --quiet > "$WORK/run.json" 2> "$WORK/run.err"
check "the trainer's job exits 0" test $? -eq 0
check "every key exactly once" bash -c "diff <(sort '$WORK/trainer/local12.keys') <(sort '$WORK/trainer/svc.keys') > /dev/null"
check "no stream failed" bash -c "! grep -q 'cannot reach\|ended status=' '$WORK/run.err'"
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$WORK/run.json" 2>/dev/null)
# Workers report what they sent on their next heartbeat: a run shorter than one period ends before the first report.
both_made() {
  for _ in $(seq 1 10); do
    in_trainer --dispatcher spillway-dispatcher:5050 job "${job:-0}" --json > "$WORK/job.json" 2>&1
    python3 "$ROOT/deploy/scripts/pods_job_done.py" "$WORK/job.json" && return 0
    sleep 1
  done
  return 1
}
check "both workers produced elements" both_made

# A worker killed and started again in its namespace rejoins; the next job streams from it.
P rm -f -t 0 spw-w1 > /dev/null
run_pod w1 Deployment spillway-worker
check "the restarted worker registers again at its address" wait_log w1 "registered worker=.* address=${IP[w1]}:5051"
sleep 11                                    # the old registration is declared dead (SPILLWAY_WORKER_TIMEOUT_MS)
in_trainer --dispatcher spillway-dispatcher:5050 workers --json > "$WORK/workers.json" 2>&1
check "two workers alive, one of them the restarted one" python3 "$ROOT/deploy/scripts/pods_two_workers.py" "$WORK/workers.json" "${IP[w1]}"
in_trainer run --dispatcher spillway-dispatcher:5050 --pipeline /trainer/p.json --local-cores 0 --cut all \
  --keys /trainer/svc2.keys --json --quiet > "$WORK/run2.json" 2> "$WORK/run2.err"
check "a job after the restart: every key exactly once" \
  bash -c "diff <(sort '$WORK/trainer/local.keys') <(sort '$WORK/trainer/svc2.keys') > /dev/null"
check "the restarted worker served it" logs_have w1 "serving job="

# The dispatcher pod killed mid-job and started again (a rescheduled StatefulSet pod on its volume): it
# replays its journal and the running trainer goes on, never seeing an error. The trainer takes 50 elements/s
# (~10 s for the job): the restarted pod answers while the job still runs.
in_trainer run --dispatcher spillway-dispatcher:5050 --pipeline /trainer/p.json --local-cores 0 --consume-rate 50 \
  --keys /trainer/svc3.keys --json --quiet > "$WORK/run3.json" 2> "$WORK/run3.err" &
T=$!
sleep 2
P rm -f -t 0 spw-disp > /dev/null
run_pod disp StatefulSet spillway-dispatcher
check "the restarted dispatcher replays its journal" wait_log disp "journal replayed .* jobs=[1-9]"
wait "$T"
check "the trainer across the dispatcher's restart exits 0" test $? -eq 0
check "... every key exactly once" \
  bash -c "diff <(sort '$WORK/trainer/local.keys') <(sort '$WORK/trainer/svc3.keys') > /dev/null"
check "... having waited for the dispatcher and found it again" \
  bash -c "grep -q 'does not answer' '$WORK/run3.err' && grep -q 'the dispatcher answers again' '$WORK/run3.err'"

echo "deploy-pods: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
