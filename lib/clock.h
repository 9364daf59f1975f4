/* lib/clock.h - the clocks the code needs: monotonic time for measuring and timeouts, absolute
 * CLOCK_REALTIME deadlines for pthread_cond_timedwait, and CPU time (a thread's, the process's) for costs
 * measured on the running path (whole threads or named groups of them). Thread-safe. */
#ifndef SPW_LIB_CLOCK_H
#define SPW_LIB_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Sleep ms milliseconds, or less once *stop (may be NULL) turns non-zero (looked at every 50 ms; a signal
 * handler may set it). Returns whether *stop is set. */
bool spw_sleep_unless(int ms, const volatile int *stop);
/* Monotonic milliseconds / nanoseconds (arbitrary origin). */
int64_t spw_now_ms(void);
int64_t spw_now_ns(void);
/* The CLOCK_REALTIME instant ms milliseconds from now, for pthread_cond_timedwait. */
struct timespec spw_deadline_in_ms(int64_t ms);
/* CPU nanoseconds the calling thread has used so far, plus what other processes spent on its behalf
 * (spw_thread_cpu_charge: a Python op's helper), so an op costs the same wherever its work ran; and the CPU
 * nanoseconds the whole process has used. */
int64_t spw_thread_cpu_ns(void);
int64_t spw_process_cpu_ns(void);
/* Add ns that another process spent on this thread's work (a helper it waited on) to spw_thread_cpu_ns. */
void spw_thread_cpu_charge(int64_t ns);
/* CPU nanoseconds used so far by this process's threads whose names (pthread_setname_np, /proc/self/task/
 * TID/comm) start with one of the n prefixes - e.g. a library's own threads; 0 if /proc is not mounted. */
int64_t spw_threads_cpu_ns(const char *const *prefixes, int n);

#endif
