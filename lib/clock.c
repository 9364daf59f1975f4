/* lib/clock.c - monotonic time and condition-variable deadlines and CPU time (see clock.h). Thread-safe. */
#include "lib/clock.h"

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

int64_t spw_thread_cpu_ns(void)
{
    return ns_of(CLOCK_THREAD_CPUTIME_ID);
}

int64_t spw_process_cpu_ns(void)
{
    return ns_of(CLOCK_PROCESS_CPUTIME_ID);
}
