# shellcheck shell=bash
# scripts/lib/cpu-quota.sh - sourced by the benchmarks that cap a process's CPU (bench/dispatcher.sh,
# bench/offload.sh, bench/python-heap.sh) and tests/integration/lib.sh's quota_group: cpu_quota_cgroup NAME CORES makes the cgroup NAME (v1 cpu
# controller or v2), or finds it, with a quota of CORES cores per 100 ms period and sets CGDIR to it; the
# caller moves pids into "$CGDIR/cgroup.procs" and removes the directory at exit. Needs root.
# Single-threaded shell use.
cpu_quota_cgroup() {
  local q
  q=$(/usr/bin/python3 -c "print(int(float('$2') * 100000))")
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CGDIR=/sys/fs/cgroup/cpu/$1
    mkdir -p "$CGDIR"
    echo 100000 > "$CGDIR/cpu.cfs_period_us"
    echo "$q" > "$CGDIR/cpu.cfs_quota_us"
  else
    echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2> /dev/null || true
    CGDIR=/sys/fs/cgroup/$1
    mkdir -p "$CGDIR"
    echo "$q 100000" > "$CGDIR/cpu.max"
  fi
}
