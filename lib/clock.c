/* lib/clock.c - monotonic time and condition-variable deadlines and CPU time (see clock.h). Thread-safe. */
#include "lib/clock.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int64_t ns_of(clockid_t clock);

int64_t spw_now_ns(void)
{
    return ns_of(CLOCK_MONOTONIC);
}

int64_t spw_now_ms(void)
{
    return spw_now_ns() / 1000000;
}

struct timespec spw_deadline_in_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static int64_t ns_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static _Thread_local int64_t charged_ns;      /* spw_thread_cpu_charge's sum, this thread's */

int64_t spw_thread_cpu_ns(void)
{
    return ns_of(CLOCK_THREAD_CPUTIME_ID) + charged_ns;
}

void spw_thread_cpu_charge(int64_t ns)
{
    if (ns > 0)
        charged_ns += ns;
}

int64_t spw_process_cpu_ns(void)
{
    return ns_of(CLOCK_PROCESS_CPUTIME_ID);
}

/* A task's CPU time from /proc/self/task/TID: schedstat's first field (ns), else stat's utime + stime. */
static int64_t task_cpu_ns(const char *tid)
{
    char path[300];
    long long ns = -1, ut, st;
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lld", &ns) != 1)
            ns = -1;
        fclose(f);
    }
    if (ns >= 0)
        return ns;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    if (!(f = fopen(path, "r")))
        return 0;
    /* comm (field 2) may hold spaces: skip past its closing parenthesis, then fields 3..13 */
    const int ok = fscanf(f, "%*[^)]) %*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lld %lld", &ut, &st) == 2;
    fclose(f);
    return ok ? (int64_t)((ut + st) * (1000000000LL / sysconf(_SC_CLK_TCK))) : 0;
}

int64_t spw_threads_cpu_ns(const char *const *prefixes, int n)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    int64_t sum = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;       /* the thread exited meanwhile */
        const bool got = fgets(name, sizeof name, f) != NULL;
        fclose(f);
        for (int i = 0; got && i < n; i++)
            if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
                sum += task_cpu_ns(e->d_name);
                break;
            }
    }
    closedir(d);
    return sum;
}

bool spw_sleep_unless(int ms, const volatile int *stop)
{
    for (; ms > 0 && !(stop && *stop); ms -= 50) {
        const int step = ms < 50 ? ms : 50;
        struct timespec ts = {0, (long)step * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !(stop && *stop))
            ;
    }
    return stop && *stop;
}
