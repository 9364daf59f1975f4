/* lib/cpulimit.c - CPUs this process may use (see cpulimit.h). */
#include "lib/cpulimit.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Read up to two numbers from a small file ("max" reads as -1). Returns how many were read. */
static int read_numbers(const char *path, double *a, double *b)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char w1[64] = "", w2[64] = "";
    const int n = fscanf(f, "%63s %63s", w1, w2);
    fclose(f);
    if (n >= 1)
        *a = !strcmp(w1, "max") ? -1 : strtod(w1, NULL);
    if (n >= 2)
        *b = strtod(w2, NULL);
    return n < 0 ? 0 : n;
}

/* The smallest quota along dir and its ancestors up to root (dir starts with root). */
static double walk(const char *root, const char *path, int v2)
{
    char dir[4096], file[4200];
    snprintf(dir, sizeof dir, "%s%s", root, path);
    double best = 0;
    for (;;) {
        double q = -1, p = 0;
        if (v2) {
            snprintf(file, sizeof file, "%s/cpu.max", dir);
            if (read_numbers(file, &q, &p) == 2 && q > 0 && p > 0 && (!best || q / p < best))
                best = q / p;
        } else {
            snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
            double unused;
            if (read_numbers(file, &q, &unused) >= 1 && q > 0) {
                snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
                if (read_numbers(file, &p, &unused) >= 1 && p > 0 && (!best || q / p < best))
                    best = q / p;
            }
        }
        if (strlen(dir) <= strlen(root))
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || slash < dir + strlen(root))
            break;
        *slash = '\0';
    }
    return best;
}

double spw_cgroup_quota(const char *proc_self_cgroup, const char *mount_root)
{
    char root[1024];
    const char *line = proc_self_cgroup;
    double v2_quota = 0;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
        char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2) {
            *c2 = '\0';
            const char *controllers = c1 + 1, *path = c2 + 1;
            if (!*controllers) {            /* v2: "0::/path" */
                v2_quota = walk(mount_root, !strcmp(path, "/") ? "" : path, 1);
            } else {
                char list[256];
                snprintf(list, sizeof list, ",%s,", controllers);
                if (strstr(list, ",cpu,")) {    /* v1: the cpu controller's hierarchy */
                    static const char *const names[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu"};
                    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                        snprintf(root, sizeof root, "%s/%s", mount_root, names[i]);
                        if (access(root, R_OK) == 0)
                            return walk(root, !strcmp(path, "/") ? "" : path, 0);
                    }
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return v2_quota;
}

double spw_cpu_quota(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char text[8192];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return spw_cgroup_quota(text, "/sys/fs/cgroup");
}

static double affinity_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (double)sysconf(_SC_NPROCESSORS_ONLN);
}

bool spw_cpu_quota_binds(void)
{
    const double q = spw_cpu_quota();
    return q > 0 && q < affinity_cpus();
}

double spw_cpu_limit(void)
{
    double cpus = affinity_cpus();
    const double q = spw_cpu_quota();
    if (q > 0 && q < cpus)
        cpus = q;
    return cpus < 0.01 ? 0.01 : cpus;
}
