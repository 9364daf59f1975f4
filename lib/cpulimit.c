/* lib/cpulimit.c - CPUs this process may use (see cpulimit.h). */
#include "lib/cpulimit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
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

int64_t spw_schedstat_run_delay(const char *text)
{
    char *end;
    errno = 0;
    strtoull(text, &end, 10);                   /* the time on a CPU */
    if (end == text || errno)
        return -1;
    const char *p = end;
    const unsigned long long delay = strtoull(p, &end, 10);
    if (end == p || errno || delay > INT64_MAX)
        return -1;
    return (int64_t)delay;
}

/* Each thread's open schedstat file, stored as fd + 1 (NULL: not opened yet; (void *)-1: the kernel has none). */
static pthread_key_t schedstat_key;
static pthread_once_t schedstat_once = PTHREAD_ONCE_INIT;

static void close_schedstat(void *v)
{
    const intptr_t fd = (intptr_t)v - 1;
    if (fd >= 0)
        close((int)fd);
}

/* In a forked child the descriptor still reads the parent's thread (procfs binds it at open): drop it. */
static void forget_schedstat(void)
{
    close_schedstat(pthread_getspecific(schedstat_key));
    pthread_setspecific(schedstat_key, NULL);
}

static void make_schedstat_key(void)
{
    if (pthread_key_create(&schedstat_key, close_schedstat) != 0)
        schedstat_key = (pthread_key_t)-1;
    else
        pthread_atfork(NULL, NULL, forget_schedstat);
}

int64_t spw_thread_run_delay_ns(void)
{
    pthread_once(&schedstat_once, make_schedstat_key);
    if (schedstat_key == (pthread_key_t)-1)
        return -1;
    intptr_t fd = (intptr_t)pthread_getspecific(schedstat_key) - 1;
    if (fd == -2)
        return -1;
    if (fd < 0) {
        fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (pthread_setspecific(schedstat_key, (void *)(fd >= 0 ? fd + 1 : -1)) != 0) {
            if (fd >= 0)
                close((int)fd);
            return -1;
        }
        if (fd < 0)
            return -1;
    }
    char text[128];
    const ssize_t n = pread((int)fd, text, sizeof text - 1, 0);     /* seq_file: offset 0 reads it anew */
    if (n <= 0)
        return -1;
    text[n] = '\0';
    return spw_schedstat_run_delay(text);
}
