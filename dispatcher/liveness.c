/* dispatcher/liveness.c - the lag-aware liveness rule (see liveness.h): a peer is dead only when silent past
 * its timeout plus the dispatcher's recent lag, and never in a tick that found the dispatcher itself late.
 * Pure: no clock, no I/O, no allocation. Not thread-safe: one owner per tracker. */
#include "dispatcher/liveness.h"

void disp_lag_init(struct disp_lag *l, int64_t window_ms)
{
    *l = (struct disp_lag){.window_ms = window_ms > 0 ? window_ms : 1};
}

void disp_lag_note(struct disp_lag *l, int64_t now_ms, int64_t lag_ms)
{
    if (lag_ms < 0)
        lag_ms = 0;
    if (l->bucket_start_ms == 0 || now_ms - l->bucket_start_ms >= 2 * l->window_ms) {
        l->prev_max_ms = 0;     /* nothing noted for two windows: both buckets are stale */
        l->cur_max_ms = 0;
        l->bucket_start_ms = now_ms;
    } else if (now_ms - l->bucket_start_ms >= l->window_ms) {
        l->prev_max_ms = l->cur_max_ms;
        l->cur_max_ms = 0;
        l->bucket_start_ms += l->window_ms;
    }
    if (lag_ms > l->cur_max_ms)
        l->cur_max_ms = lag_ms;
}

int64_t disp_lag_recent(const struct disp_lag *l, int64_t now_ms)
{
    if (l->bucket_start_ms == 0)
        return 0;
    const int64_t age = now_ms - l->bucket_start_ms;
    if (age >= 2 * l->window_ms)
        return 0;
    if (age >= l->window_ms)
        return l->cur_max_ms;  /* the current bucket is the previous one now */
    return l->cur_max_ms > l->prev_max_ms ? l->cur_max_ms : l->prev_max_ms;
}

int64_t disp_liveness_deadline_ms(int64_t timeout_ms, int64_t recent_lag_ms, int64_t tick_lag_ms)
{
    if (tick_lag_ms > timeout_ms / DISP_LAG_DEFER_DIVISOR)
        return INT64_MAX;
    if (recent_lag_ms < 0)
        recent_lag_ms = 0;
    return recent_lag_ms > INT64_MAX - timeout_ms ? INT64_MAX : timeout_ms + recent_lag_ms;
}

bool disp_liveness_dead(int64_t silent_ms, int64_t timeout_ms, int64_t recent_lag_ms, int64_t tick_lag_ms)
{
    const int64_t deadline = disp_liveness_deadline_ms(timeout_ms, recent_lag_ms, tick_lag_ms);
    return deadline != INT64_MAX && silent_ms > deadline;
}

bool disp_liveness_overloaded(int64_t recent_lag_ms, int64_t timeout_ms)
{
    return recent_lag_ms > timeout_ms / DISP_LAG_DEFER_DIVISOR;
}
