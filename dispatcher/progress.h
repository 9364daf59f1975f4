/* dispatcher/progress.h - what each producer has delivered per job, from the cumulative counts in worker
 * and client heartbeats, with recent rates for `spillctl job`. Soft state: not journaled, rebuilt by the
 * next heartbeats after a restart; a bounded table (the oldest entry goes first).
 * Thread model: none of its own; the service calls it under its mutex. */
#ifndef SPW_DISPATCHER_PROGRESS_H
#define SPW_DISPATCHER_PROGRESS_H

#include <stdint.h>

#define DISP_PROGRESS_MAX 1024

struct disp_progress_entry {
    uint64_t job, producer;
    int64_t elements, bytes, cpu_ns;    /* cumulative, as last reported (cpu_ns 0: not measured) */
    double elements_per_s, bytes_per_s;
    double cpu_ns_per_element;      /* CPU per element over the last rate interval (0: unknown) */
    int64_t last_ms, rate_ms;       /* last report; start of the current rate interval */
    int64_t rate_elements, rate_bytes, rate_cpu_ns;
    double consumed_per_s, wait_fraction;   /* a rank-0 client's: its trainer's rate (times the ranks) and the
                                               fraction of time it waited for data (-1: not reported) */
    int64_t source_bytes, source_requests, source_retries;  /* its remote shard reads, as last reported */
};

struct disp_progress {
    struct disp_progress_entry e[DISP_PROGRESS_MAX];
    int n;
};

/* Record a producer's cumulative counts (and the CPU it spent; 0 = not measured) for a job at now_ms. */
void disp_progress_report(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t elements, int64_t bytes,
                          int64_t cpu_ns, int64_t now_ms);
/* A rank-0 client's view of its job (disp_progress_entry.consumed_per_s, wait_fraction), kept on its own
 * producer's entry when there is one. */
void disp_progress_client(struct disp_progress *p, uint64_t job, uint64_t producer, double consumed_per_s,
                          double wait_fraction);
/* A producer's remote shard reads for a job (cumulative), kept on its entry when there is one. */
void disp_progress_source(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t bytes,
                          int64_t requests, int64_t retries);
/* Drop every entry of a job (it left the dispatcher's table). */
void disp_progress_forget(struct disp_progress *p, uint64_t job);
/* Entries of one job into out (at most cap); returns the count. */
int disp_progress_of_job(const struct disp_progress *p, uint64_t job, struct disp_progress_entry *out, int cap);

#endif
