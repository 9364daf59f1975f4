/* lib/cpulimit.h - how many CPUs this process may really use: the CPUs in its affinity mask, capped by the
 * CPU quota of its cgroup and every ancestor (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us),
 * as a container's CPU limit sets it. The planner multiplies per-element CPU costs by this.
 * Thread model: reads /proc and /sys on each call; safe from any thread. */
#ifndef SPW_LIB_CPULIMIT_H
#define SPW_LIB_CPULIMIT_H

#include <stdbool.h>

/* CPUs this process may use (fractional under a quota); at least 0.01. */
double spw_cpu_limit(void);
/* This process's cgroup CPU quota in CPUs, 0 when none is set. Under a quota, low-priority threads do not
 * yield to busier ones: what they use is taken from the same budget. */
double spw_cpu_quota(void);
/* Whether that quota is below the CPUs of the affinity mask (so it, not the CPU count, is the limit). */
bool spw_cpu_quota_binds(void);

/* The quota part alone, from a /proc/self/cgroup text and a cgroup mount root (for tests): the smallest
 * quota/period along the path, or 0 when none is set. */
double spw_cgroup_quota(const char *proc_self_cgroup, const char *mount_root);

#endif
