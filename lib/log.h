/* lib/log.h - one line per event on stderr: `ts level component msg key=val ...` (UTC, milliseconds), or with
 * the json format one object per line, {"ts", "level", "component", "msg"}. Lines are written whole with one
 * write(2), so threads do not interleave them; or, where a host set a sink (a trainer's logging), each line's
 * parts go to it instead. Level and format come from --log-level / --log-format where a program has them,
 * else from SPILLWAY_LOG_LEVEL / SPILLWAY_LOG_FORMAT (a trainer using libspillway). Not a log store: no files,
 * no rotation. Thread-safe: any thread logs; the sink is called from the logging thread. */
#ifndef SPW_LIB_LOG_H
#define SPW_LIB_LOG_H

#include <stddef.h>

/* Also in spillway/client.h (the callback's levels), hence the guard. */
#ifndef SPW_LOG_LEVELS_DEFINED
#define SPW_LOG_LEVELS_DEFINED
enum spw_log_level { SPW_LOG_DEBUG = 0, SPW_LOG_INFO = 1, SPW_LOG_WARN = 2, SPW_LOG_ERROR = 3 };
#endif

/* Where lines go instead of stderr: fn gets each line that passes the level, whole (level 0..3, component,
 * the message without timestamp or newline; both strings valid during the call only), on the thread that
 * logs it, possibly on several threads at once. A line logged from inside fn goes to stderr. */
typedef void spw_log_sink_fn(int level, const char *component, const char *msg, void *user);

/* Lines below this level are dropped (default info). */
void spw_log_set_level(enum spw_log_level level);
/* Level ("debug", "info", "warn", "error") and format ("text", "json"); NULL or "" leaves one as it is.
 * Returns 0, or -EINVAL with the accepted values in err. */
int spw_log_configure(const char *level, const char *format, char *err, size_t errlen);
/* Send lines to fn(..., user), or with fn NULL to stderr again. When it returns no thread is inside the
 * previous sink any more (its user data may go). Returns 0, or -EDEADLK when called from inside a sink. */
int spw_log_set_sink(spw_log_sink_fn *fn, void *user);
/* Log msg (printf format) for component. */
void spw_log(enum spw_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
