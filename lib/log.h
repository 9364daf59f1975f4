/* lib/log.h - one line per event on stderr: `ts level component msg key=val ...` (UTC, milliseconds).
 * Lines are written whole with one write(2), so threads do not interleave them. Thread-safe. */
#ifndef SPW_LIB_LOG_H
#define SPW_LIB_LOG_H

enum spw_log_level { SPW_LOG_DEBUG = 0, SPW_LOG_INFO = 1, SPW_LOG_WARN = 2, SPW_LOG_ERROR = 3 };

/* Lines below this level are dropped (default info). */
void spw_log_set_level(enum spw_log_level level);
/* Log msg (printf format) for component. */
void spw_log(enum spw_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
