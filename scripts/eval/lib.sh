#!/usr/bin/env bash
# scripts/eval/lib.sh - what the evaluations with real daemons share (sourced by eval/planner.sh and
# eval/workers.sh): the preflight, the dataset's copy in /dev/shm, the evaluated pipelines, cgroup CPU quotas, network namespaces with
# tc caps, starting the dispatcher and workers (scripts/lib/harness.sh's wait_port), json_eval, cleanup. The caller sets NAME (its name for
# messages), ROOT (cwd), B, OUT, PY, P (prefix of every namespace, link and cgroup), PERIOD, SUBNET, SRC_DATA
# and DATA before sourcing; setup() sets DPORT. Single-threaded shell; every process it starts is in PIDS.

# shellcheck source=scripts/lib/harness.sh
source "$ROOT/scripts/lib/harness.sh"      # wait_port, json_field, median
die() { echo "$NAME: $*" >&2; exit 1; }

# eval_preflight: root, iproute2, gnuplot, 2 CPUs, a build, a cgroup cpu controller (CG, CGROOT), namespaces;
# then the dataset (SRC_DATA, 20000 images) copied to DATA in memory, removed at exit.
eval_preflight() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, tc, cgroups)"
  command -v ip > /dev/null && command -v tc > /dev/null || die "needs ip and tc (Debian: iproute2)"
  command -v gnuplot > /dev/null || die "needs gnuplot (Debian: apt-get install gnuplot-nox)"
  [ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (client on CPU 0, workers on CPU 1)"
  need_built "$B/bin/spillctl" "$B/bin/spillway-worker" "$B/bin/spillway-dispatcher"
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then CG=v1; CGROOT=/sys/fs/cgroup/cpu
  elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then CG=v2; CGROOT=/sys/fs/cgroup
  else die "no cgroup cpu controller found (v1 /sys/fs/cgroup/cpu or v2 /sys/fs/cgroup)"; fi
  ip netns add ${P}-probe 2> /dev/null && ip netns del ${P}-probe || die "cannot create network namespaces"
  bash scripts/data/make-dataset.sh "$SRC_DATA" 20000 > /dev/null
  [ -d /dev/shm ] || die "needs /dev/shm (tmpfs) for the dataset's copy in memory"
  rm -rf "$DATA"
  cp -r "$SRC_DATA" "$DATA" || die "cannot copy the dataset to $DATA"
  trap 'cleanup; rm -rf "$DATA"' EXIT
  mkdir -p "$OUT"
}

# ---- pipelines (3 fusion groups each: cuts 0..3; `big` is cheap and ships 2.4 MB float tensors at cut 3) ----
pipeline() {    # pipeline NAME: $OUT/NAME.json
  local ops
  case $1 in
    train) ops='{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
       {"op": "random_horizontal_flip", "p": 0.5}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
       {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}' ;;
    randaug) ops='{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
       {"op": "rand_augment", "num_ops": 4, "magnitude": 15},
       {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
       {"op": "random_erasing", "p": 0.5}' ;;
    big) ops='{"op": "decode_jpeg"}, {"op": "resize", "size": [448, 448]}, {"op": "posterize", "bits": 4},
       {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}' ;;
  esac
  cat > "$OUT/$1.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 7, "epochs": 20},
 "ops": [$ops], "batch": {"size": 32}}
JSON
}

# ---- cleanup ----
PIDS=()
cleanup() {
  local g pid
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  for g in "$CGROOT"/${P}-*; do     # whatever runs in our cgroups
    [ -f "$g/cgroup.procs" ] && for pid in $(cat "$g/cgroup.procs"); do kill -TERM "$pid" 2> /dev/null || true; done
  done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
  PIDS=()
  sleep 0.3
  for ns in $(ip netns list | awk '{print $1}' | grep "^${P}-" || true); do ip netns del "$ns"; done
  ip link del ${P}br 2> /dev/null || true
  for g in "$CGROOT"/${P}-*; do [ -d "$g" ] && { rmdir "$g" 2> /dev/null || true; }; done
  return 0
}

cgroup() {      # cgroup NAME CORES: a group limited to CORES of one core
  local g=$CGROOT/${P}-$1 quota
  quota=$("$PY" -c "print(int(float('$2') * $PERIOD))")
  mkdir -p "$g"
  if [ $CG = v1 ]; then echo "$PERIOD" > "$g/cpu.cfs_period_us"; echo "$quota" > "$g/cpu.cfs_quota_us"
  else echo +cpu > "$CGROOT/cgroup.subtree_control" 2> /dev/null || true; echo "$quota $PERIOD" > "$g/cpu.max"; fi
}
in_cg() {       # in_cg NAME CPU CMD...: run CMD in cgroup NAME pinned to CPU
  local g=$CGROOT/${P}-$1 cpu=$2
  shift 2
  bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$g" taskset -c "$cpu" "$@"
}
throttled() {   # throttled [BEFORE]: the client group's "periods throttled_ms" (cpu.stat), minus BEFORE's
  local f=$CGROOT/${P}-client/cpu.stat n t
  [ -f "$f" ] || { echo "- -"; return; }
  n=$(awk '$1 == "nr_throttled" {print $2}' "$f")
  if [ $CG = v1 ]; then t=$(awk '$1 == "throttled_time" {print int($2 / 1e6)}' "$f")
  else t=$(awk '$1 == "throttled_usec" {print int($2 / 1e3)}' "$f"); fi
  if [ $# -gt 0 ]; then set -- $1; echo "$((n - $1))	$((t - $2))"; else echo "$n $t"; fi
}

setup() {       # setup CAP CLIENT_CORES WORKERS WORKER_CORES: bridge, namespaces, caps, quotas, daemons
  local cap=$1 ccores=$2 nw=$3 wcores=$4 j ns
  ip link add ${P}br type bridge
  ip addr add $SUBNET.1/24 dev ${P}br
  ip link set ${P}br up
  cgroup client "$ccores"
  taskset -c 1 $B/bin/spillway-dispatcher --listen $SUBNET.1 --insecure --port 0 > "$OUT/d.out" 2> "$OUT/d.err" &
  PIDS+=($!)
  DPORT=$(wait_port "$OUT/d.out") || die "the dispatcher did not start: $(cat "$OUT/d.err")"
  for ((j = 1; j <= nw; j++)); do
    ns=${P}-w$j
    ip netns add "$ns"
    ip link add ${P}h$j type veth peer name ${P}w$j
    ip link set ${P}w$j netns "$ns"
    ip link set ${P}h$j master ${P}br up
    ip netns exec "$ns" ip addr add $SUBNET.$((10 + j))/24 dev ${P}w$j
    ip netns exec "$ns" ip link set ${P}w$j up
    ip netns exec "$ns" ip link set lo up
    if [ "$cap" != none ]; then     # worker -> client: the worker side's egress
      ip netns exec "$ns" tc qdisc add dev ${P}w$j root tbf rate "$cap" burst 1mb latency 100ms
    fi
    cgroup w$j "$wcores"
    # nsenter, not `ip netns exec`: that remounts /sys, and the worker would not see its cgroup's quota
    in_cg w$j 1 nsenter --net=/var/run/netns/"$ns" $B/bin/spillway-worker --dispatcher $SUBNET.1:"$DPORT" \
      --listen $SUBNET.$((10 + j)) --insecure --port 0 --threads 1 --drain-ms 0 > "$OUT/w$j.out" 2> "$OUT/w$j.err" &
    PIDS+=($!)
    wait_port "$OUT/w$j.out" > /dev/null || die "worker $j did not start: $(cat "$OUT/w$j.err")"
  done
  sleep 1.5     # registered and heartbeating
}

json_eval() {  # json_eval EXPR: a Python expression over d, the last JSON line on stdin
  "$PY" -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print($1)"; }
