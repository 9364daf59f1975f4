/* lib/clock.h - the two clocks the code needs: monotonic time for measuring and timeouts, and absolute
 * CLOCK_REALTIME deadlines for pthread_cond_timedwait. Pure; thread-safe. */
#ifndef SPW_LIB_CLOCK_H
#define SPW_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds / nanoseconds (arbitrary origin). */
int64_t spw_now_ms(void);
int64_t spw_now_ns(void);
/* The CLOCK_REALTIME instant ms milliseconds from now, for pthread_cond_timedwait. */
struct timespec spw_deadline_in_ms(int64_t ms);

#endif
