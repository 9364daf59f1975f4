/* lib/cpulimit.h - how many CPUs this process may really use: the CPUs in its affinity mask, capped by the
 * CPU quota of its cgroup and every ancestor (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us),
 * as a container's CPU limit sets it. The planner multiplies per-element CPU costs by this. And how long the
 * calling thread waited for a CPU (its run delay), which a quota's throttling adds to whatever the thread does.
 * Thread model: reads /proc and /sys on each call; safe from any thread (the run delay keeps one descriptor per
 * calling thread, closed when the thread exits). */
#ifndef SPW_LIB_CPULIMIT_H
#define SPW_LIB_CPULIMIT_H

#include <stdbool.h>
#include <stdint.h>

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

/* The calling thread's run delay so far: the ns it was ready to run but had no CPU (its cgroup's quota spent
 * and throttled, or every allowed core busy), from /proc/thread-self/schedstat; -1 where the kernel does not
 * say (no schedstat). Cheap enough per call (one pread on a descriptor kept per thread). */
int64_t spw_thread_run_delay_ns(void);
/* The run delay field of a schedstat text ("cpu_ns run_delay_ns timeslices"), -1 when malformed (for tests). */
int64_t spw_schedstat_run_delay(const char *text);

#endif
