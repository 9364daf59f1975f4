/* lib/log.h - one line per event on stderr: `ts level component msg key=val ...` (UTC, milliseconds), or with
 * the json format one object per line, {"ts", "level", "component", "msg"}. Lines are written whole with one
 * write(2), so threads do not interleave them. Level and format come from --log-level / --log-format where a
 * program has them, else from SPILLWAY_LOG_LEVEL / SPILLWAY_LOG_FORMAT (a trainer using libspillway).
 * Thread-safe. */
#ifndef SPW_LIB_LOG_H
#define SPW_LIB_LOG_H

#include <stddef.h>

enum spw_log_level { SPW_LOG_DEBUG = 0, SPW_LOG_INFO = 1, SPW_LOG_WARN = 2, SPW_LOG_ERROR = 3 };

/* Lines below this level are dropped (default info). */
void spw_log_set_level(enum spw_log_level level);
/* Level ("debug", "info", "warn", "error") and format ("text", "json"); NULL or "" leaves one as it is.
 * Returns 0, or -EINVAL with the accepted values in err. */
int spw_log_configure(const char *level, const char *format, char *err, size_t errlen);
/* Log msg (printf format) for component. */
void spw_log(enum spw_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
