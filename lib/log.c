/* lib/log.c - the line logger (see log.h). Thread-safe: level and format are atomics, set once from the
 * environment (pthread_once) unless a program set them first; each line is one write(2), or one call of the
 * sink under a read lock (so setting a sink waits out the calls of the one before). */
#include "lib/log.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* The sink: readers are the threads inside it, the writer is spw_log_set_sink. */
static pthread_rwlock_t g_sink_lock = PTHREAD_RWLOCK_INITIALIZER;
static spw_log_sink_fn *g_sink;         /* under g_sink_lock */
static void *g_sink_user;
static _Atomic int g_has_sink;          /* a hint read without the lock: no lock at all while there is none */
static _Thread_local int t_in_sink;     /* this thread is inside the sink: its lines go to stderr */
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

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

/* A forked child has only the forking thread: read locks held by the parent's other threads, which the child
 * lacks, would block its spw_log_set_sink (a Python child unhooking at exit) for ever. */
static void sink_lock_after_fork(void)
{
    static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    g_sink_lock = fresh;
}

static void register_fork_handler(void)
{
    (void)pthread_atfork(NULL, NULL, sink_lock_after_fork);    /* ENOMEM: a child that forks mid-log may hang */
}

int spw_log_set_sink(spw_log_sink_fn *fn, void *user)
{
    if (t_in_sink)
        return -EDEADLK;        /* the write lock would wait for this very thread's read lock */
    pthread_once(&g_fork_once, register_fork_handler);
    pthread_rwlock_wrlock(&g_sink_lock);
    g_sink = fn;
    g_sink_user = user;
    g_has_sink = fn != NULL;
    pthread_rwlock_unlock(&g_sink_lock);
    return 0;
}

/* Hand the line to the sink; false when there is none (or this thread is in it), for stderr to take it. */
static bool to_sink(int level, const char *component, const char *msg)
{
    if (!g_has_sink || t_in_sink)
        return false;
    bool sent = false;
    pthread_rwlock_rdlock(&g_sink_lock);
    if (g_sink) {
        t_in_sink = 1;
        g_sink(level, component ? component : "", msg, g_sink_user);
        t_in_sink = 0;
        sent = true;
    }
    pthread_rwlock_unlock(&g_sink_lock);
    return sent;
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
    const int lv = (int)level < 0 || (int)level > 3 ? SPW_LOG_INFO : (int)level;
    const char *name = level_names[lv];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (to_sink(lv, component, msg))
        return;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(ts_text, sizeof ts_text, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
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
