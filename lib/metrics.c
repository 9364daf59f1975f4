/* lib/metrics.c - the text exposition writer and latency histograms (see metrics.h). Thread model: as the
 * header; histograms use relaxed atomics (a scrape may see a bucket before its count: Prometheus tolerates
 * that, and the next scrape is consistent). */
#include "lib/metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/version.h"

const double spw_hist_bounds_s[SPW_HIST_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                    0.01,   0.025,   0.05,   0.1,   1.0,    10.0};

void spw_prom_init(struct spw_prom *p)
{
    memset(p, 0, sizeof *p);
}

void spw_prom_free(struct spw_prom *p)
{
    free(p->buf);
    memset(p, 0, sizeof *p);
}

static void put(struct spw_prom *p, const char *s, size_t n)
{
    if (p->oom)
        return;
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n + 1)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) {
            p->oom = true;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = 0;
}

static void puts_(struct spw_prom *p, const char *s)
{
    put(p, s, strlen(s));
}

static void printf_(struct spw_prom *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(struct spw_prom *p, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(p, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* HELP text escapes backslash and newline; label values also the double quote. */
static void escaped(struct spw_prom *p, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(p, "\\\\");
        else if (*s == '\n')
            puts_(p, "\\n");
        else if (quote && *s == '"')
            puts_(p, "\\\"");
        else
            put(p, s, 1);
    }
}

void spw_prom_family(struct spw_prom *p, const char *name, const char *type, const char *help)
{
    puts_(p, "# HELP ");
    puts_(p, name);
    puts_(p, " ");
    escaped(p, help, false);
    puts_(p, "\n# TYPE ");
    puts_(p, name);
    puts_(p, " ");
    puts_(p, type);
    puts_(p, "\n");
}

static void value(struct spw_prom *p, double v)
{
    if (isnan(v))
        puts_(p, "NaN");
    else if (isinf(v))
        puts_(p, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(int64_t)v && fabs(v) < 1e15)
        printf_(p, "%lld", (long long)v);
    else
        printf_(p, "%.15g", v);
}

static void labels(struct spw_prom *p, const struct spw_label *l, int n, const char *le)
{
    if (n == 0 && !le)
        return;
    puts_(p, "{");
    for (int i = 0; i < n; i++) {
        if (i)
            puts_(p, ",");
        puts_(p, l[i].name);
        puts_(p, "=\"");
        escaped(p, l[i].value ? l[i].value : "", true);
        puts_(p, "\"");
    }
    if (le) {
        puts_(p, n ? ",le=\"" : "le=\"");
        puts_(p, le);
        puts_(p, "\"");
    }
    puts_(p, "}");
}

void spw_prom_sample(struct spw_prom *p, const char *name, const struct spw_label *l, int n, double v)
{
    puts_(p, name);
    labels(p, l, n, NULL);
    puts_(p, " ");
    value(p, v);
    puts_(p, "\n");
}

void spw_prom_gauge(struct spw_prom *p, const char *name, const char *help, double v)
{
    spw_prom_family(p, name, "gauge", help);
    spw_prom_sample(p, name, NULL, 0, v);
}

void spw_prom_counter(struct spw_prom *p, const char *name, const char *help, double v)
{
    spw_prom_family(p, name, "counter", help);
    spw_prom_sample(p, name, NULL, 0, v);
}

void spw_prom_process(struct spw_prom *p, const char *component)
{
    spw_prom_family(p, "spillway_build_info", "gauge", "the build (git describe) of this component; always 1");
    const struct spw_label l[] = {{"component", component}, {"version", spw_build_version()}};
    spw_prom_sample(p, "spillway_build_info", l, 2, 1);
    /* /proc/self/stat: utime, stime (fields 14, 15), starttime (22), vsize (23), rss pages (24) */
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    const size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    const char *r = strrchr(buf, ')');
    unsigned long long ut, st, start, vsize;
    long long rss;
    const double hz = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    if (r && sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu "
                    "%lld", &ut, &st, &start, &vsize, &rss) == 5 && hz > 0) {
        spw_prom_counter(p, "process_cpu_seconds_total", "user and system CPU time spent, in seconds",
                         (double)(ut + st) / hz);
        spw_prom_gauge(p, "process_resident_memory_bytes", "resident memory size, in bytes", (double)rss * page);
        spw_prom_gauge(p, "process_virtual_memory_bytes", "virtual memory size, in bytes", (double)vsize);
        /* the process's start: boot time (btime of /proc/stat) + starttime ticks */
        FILE *ps = fopen("/proc/stat", "r");
        long long btime = -1;
        char line[256];
        while (ps && fgets(line, sizeof line, ps))
            if (sscanf(line, "btime %lld", &btime) == 1)
                break;
        if (ps)
            fclose(ps);
        if (btime > 0)
            spw_prom_gauge(p, "process_start_time_seconds", "start time of the process since the epoch, in seconds",
                           (double)btime + (double)start / hz);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int fds = -1;           /* the directory's own descriptor */
        while (readdir(d))
            fds++;
        closedir(d);
        spw_prom_gauge(p, "process_open_fds", "open file descriptors", fds - 2);    /* less . and .. */
    }
}

void spw_hist_observe(struct spw_hist *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    const double s = (double)ns / 1e9;
    int b = 0;
    while (b < SPW_HIST_BUCKETS && s > spw_hist_bounds_s[b])
        b++;
    __atomic_fetch_add(&h->bucket[b], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->sum_ns, (uint64_t)ns, __ATOMIC_RELAXED);
}

void spw_prom_hist(struct spw_prom *p, const char *name, const struct spw_label *l, int n, const struct spw_hist *h)
{
    char bucket[160], le[32];
    snprintf(bucket, sizeof bucket, "%s_bucket", name);
    uint64_t cum = 0;
    for (int b = 0; b <= SPW_HIST_BUCKETS; b++) {
        cum += __atomic_load_n(&h->bucket[b], __ATOMIC_RELAXED);
        if (b < SPW_HIST_BUCKETS)
            snprintf(le, sizeof le, "%g", spw_hist_bounds_s[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        puts_(p, bucket);
        labels(p, l, n, le);
        puts_(p, " ");
        value(p, (double)cum);
        puts_(p, "\n");
    }
    char sum[160], count[160];
    snprintf(sum, sizeof sum, "%s_sum", name);
    snprintf(count, sizeof count, "%s_count", name);
    spw_prom_sample(p, sum, l, n, (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
    spw_prom_sample(p, count, l, n, (double)cum);     /* the buckets' total: _count equals the +Inf bucket */
}
