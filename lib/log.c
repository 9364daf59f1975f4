/* lib/log.c - the line logger (see log.h). Thread-safe: level and format are atomics, set once from the
 * environment (pthread_once) unless a program set them first; each line is one write(2). */
#include "lib/log.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/err.h"

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static _Atomic int g_level = SPW_LOG_INFO;
static _Atomic int g_json;
static _Atomic int g_set;               /* a program chose: the environment is not read */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static int parse(const char *level, const char *format, int *lv, int *json, char *err, size_t errlen)
{
    *lv = -1;
    for (int i = 0; level && *level && i < 4; i++)
        if (!strcmp(level, level_names[i]))
            *lv = i;
    if (level && *level && *lv < 0)
        return spw_fail(err, errlen, -EINVAL, "log level \"%s\": one of debug, info, warn, error", level);
    *json = -1;
    if (format && *format) {
        if (strcmp(format, "text") && strcmp(format, "json"))
            return spw_fail(err, errlen, -EINVAL, "log format \"%s\": text or json", format);
        *json = !strcmp(format, "json");
    }
    return 0;
}

static void from_env(void)
{
    int lv = -1, json = -1;
    if (g_set || parse(getenv("SPILLWAY_LOG_LEVEL"), getenv("SPILLWAY_LOG_FORMAT"), &lv, &json, NULL, 0) != 0)
        return;                 /* a bad value in the environment of a library user: the defaults */
    if (lv >= 0)
        g_level = lv;
    if (json >= 0)
        g_json = json;
}

void spw_log_set_level(enum spw_log_level level)
{
    g_set = 1;
    g_level = (int)level;
}

int spw_log_configure(const char *level, const char *format, char *err, size_t errlen)
{
    int lv = -1, json = -1;
    int rc = parse(level, format, &lv, &json, err, errlen);
    if (rc)
        return rc;
    g_set = 1;
    if (lv >= 0)
        g_level = lv;
    if (json >= 0)
        g_json = json;
    return 0;
}

void spw_log(enum spw_log_level level, const char *component, const char *fmt, ...)
{
    pthread_once(&g_env_once, from_env);
    if ((int)level < g_level)
        return;
    char line[2048], msg[1800], ts_text[64];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(ts_text, sizeof ts_text, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    const char *name = level_names[level < 0 || level > 3 ? 1 : level];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n;
    if (g_json) {               /* one JSON object per line: ts, level, component, msg */
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts_text, "level", name, "component", component, "msg",
                              msg);
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(o);
        n = text ? snprintf(line, sizeof line, "%s", text) : snprintf(line, sizeof line, "{\"level\":\"%s\"}", name);
        free(text);
    } else {
        n = snprintf(line, sizeof line, "%s %s %s %s", ts_text, name, component, msg);
    }
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
