/* tools/spillctl/watch.h - spillctl watch: a live view of the dispatcher's jobs and workers (see watch.c).
 * Single-threaded. */
#ifndef SPW_SPILLCTL_WATCH_H
#define SPW_SPILLCTL_WATCH_H

#include <signal.h>

/* Show the view every interval_ms until *stop (or count views; 0 = no end): every unfinished job, or job_id
 * alone. Returns the exit status (0; 1 when the last view could not be fetched; 2 on usage). */
int spw_watch_run(const char *target, const char *token, const char *job_id, int interval_ms, int count,
                  int timeout_ms, const volatile sig_atomic_t *stop);

#endif
