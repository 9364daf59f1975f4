/* dispatcher/liveness.h - when a silent worker or client rank is dead, given the dispatcher's own lag: a peer
 * is not declared dead because the dispatcher fell behind (starved of CPU, stopped, swapping), as ZooKeeper
 * and Kafka extend sessions after a server stall. Pure: no clock, no I/O; times are passed in. Not thread-safe
 * (the service's timer owns its trackers). */
#ifndef SPW_DISPATCHER_LIVENESS_H
#define SPW_DISPATCHER_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

/* The dispatcher's recent lag: the largest noted over the last window to two windows (two buckets, so a
 * lag is kept at least one whole window after it was noted). */
struct disp_lag {
    int64_t window_ms;
    int64_t bucket_start_ms;    /* the current bucket's start; 0: nothing noted yet */
    int64_t cur_max_ms, prev_max_ms;
};

/* A tracker whose window is window_ms (at least 1). */
void disp_lag_init(struct disp_lag *l, int64_t window_ms);
/* Note a lag (ms, negative counts as 0) observed at now_ms (non-decreasing across calls). */
void disp_lag_note(struct disp_lag *l, int64_t now_ms, int64_t lag_ms);
/* The largest lag noted in the last one to two windows before now_ms (0 if none). */
int64_t disp_lag_recent(const struct disp_lag *l, int64_t now_ms);

/* A timer tick that woke this late, as a fraction of a timeout, declares nobody dead under that timeout: the
 * whole process stalled, and its view of who spoke is that stale (heartbeats sent meanwhile still queue). */
#define DISP_LAG_DEFER_DIVISOR 4

/* The silence after which a peer is dead: timeout_ms + recent_lag_ms, or INT64_MAX (nobody dead this tick)
 * when the tick's own lateness (tick_lag_ms: how late it woke; not calls' waits, which under steady overload
 * would then defer deaths for ever) exceeds timeout_ms / DISP_LAG_DEFER_DIVISOR. Lags below 0 count as 0. */
int64_t disp_liveness_deadline_ms(int64_t timeout_ms, int64_t recent_lag_ms, int64_t tick_lag_ms);
/* Whether the dispatcher is overloaded, so that new work (a new job, profiles asked ahead) is refused before
 * heartbeats and leases suffer: its recent lag is past timeout_ms / DISP_LAG_DEFER_DIVISOR. */
bool disp_liveness_overloaded(int64_t recent_lag_ms, int64_t timeout_ms);
/* The window over which that recent lag is kept: short, so new work is taken again soon after. */
#define DISP_OVERLOAD_WINDOW_MS 2000
/* Whether a peer silent silent_ms is dead under that rule (silence strictly past the deadline). */
bool disp_liveness_dead(int64_t silent_ms, int64_t timeout_ms, int64_t recent_lag_ms, int64_t tick_lag_ms);

#endif
