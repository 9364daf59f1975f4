/* lib/metrics.h - Prometheus's text exposition format 0.0.4, written into a growing buffer at scrape time
 * (families with HELP and TYPE, samples with escaped label values, histograms), and the latency histogram
 * daemons keep between scrapes. Names follow Prometheus's conventions: a spillway_ prefix, base units
 * (_seconds, _bytes), _total for counters, few label values. Thread model: a struct spw_prom belongs to
 * the scraping thread; spw_hist_observe is lock-free and may run on any thread while another writes it. */
#ifndef SPW_LIB_METRICS_H
#define SPW_LIB_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spw_prom {
    char *buf;
    size_t len, cap;
    bool oom;                   /* an allocation failed: the body is incomplete (the scrape answers 500) */
};

struct spw_label {
    const char *name, *value;
};

void spw_prom_init(struct spw_prom *p);
void spw_prom_free(struct spw_prom *p);
/* A family's header: "# HELP name help" and "# TYPE name type" (counter, gauge or histogram). Write it
 * once, before its samples. */
void spw_prom_family(struct spw_prom *p, const char *name, const char *type, const char *help);
/* One sample, name{l[0].name="l[0].value",...} value (n labels; NaN and infinities as Prometheus spells
 * them). */
void spw_prom_sample(struct spw_prom *p, const char *name, const struct spw_label *l, int n, double value);
/* A family and its one unlabelled sample. */
void spw_prom_gauge(struct spw_prom *p, const char *name, const char *help, double value);
void spw_prom_counter(struct spw_prom *p, const char *name, const char *help, double value);

/* spillway_build_info{component, version} 1 and the process_* series Prometheus's client libraries export
 * (CPU seconds, resident and virtual bytes, open file descriptors, start time), from /proc/self. */
void spw_prom_process(struct spw_prom *p, const char *component);

/* A latency histogram in nanoseconds, exported in seconds: cumulative buckets at SPW_HIST_BOUNDS. */
#define SPW_HIST_BUCKETS 12
extern const double spw_hist_bounds_s[SPW_HIST_BUCKETS];      /* 100 us .. 10 s */
struct spw_hist {
    uint64_t bucket[SPW_HIST_BUCKETS + 1];  /* per bucket (not cumulative); the last one is +Inf */
    uint64_t sum_ns;
};
void spw_hist_observe(struct spw_hist *h, int64_t ns);
/* Its samples: name_bucket{l..., le="..."}, name_sum{l...}, name_count{l...} (after the family header). */
void spw_prom_hist(struct spw_prom *p, const char *name, const struct spw_label *l, int n, const struct spw_hist *h);

#endif
