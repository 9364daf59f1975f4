/* dispatcher/progress.h - what each producer has delivered per job, from the cumulative counts in worker
 * and client heartbeats, with recent rates for `spillctl job`, /metrics and re-planning. Soft state: not
 * journaled, rebuilt by the next heartbeats after a restart. Hashed by (job, producer), each job's entries
 * chained, no cap of its own: callers admit only producers the state knows (bounded by its workers x jobs).
 * Workers report a job's counts when they change and every 30 s (proto WorkerHeartbeatRequest.jobs): a rate
 * spans the reports' interval, so a producer that stalls keeps its last rate for up to 30 s.
 * Thread model: none of its own; the service calls it under its mutex (disp_service.mu). */
#ifndef SPW_DISPATCHER_PROGRESS_H
#define SPW_DISPATCHER_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct disp_progress_entry {
    uint64_t job, producer;
    int64_t elements, bytes, cpu_ns;    /* cumulative, as last reported (cpu_ns 0: not measured) */
    double elements_per_s, bytes_per_s;
    double cpu_ns_per_element;      /* CPU per element over the last rate interval (0: unknown) */
    int64_t last_ms, rate_ms;       /* last report; start of the current rate interval */
    int64_t rate_elements, rate_bytes, rate_cpu_ns;
    double consumed_per_s, wait_fraction;   /* a rank-0 client's: its trainer's rate (times the ranks) and the
                                               fraction of time it waited for data (-1: not reported) */
    double starved_fraction, cpu_cores;     /* and its thread's CPU starvation between next() calls (0..1), its
                                               process's CPU in cores */
    int64_t source_bytes, source_requests, source_retries;  /* its remote shard reads, as last reported */
};

struct disp_progress;

struct disp_progress_stats {
    size_t entries;             /* (job, producer) entries now */
    size_t bytes;               /* the table's heap: entries, job lists, buckets */
    uint64_t dropped;           /* reports dropped because an entry could not be allocated */
};

/* An empty table into *out. Returns 0 or -ENOMEM. */
int disp_progress_create(struct disp_progress **out);
/* Free the table and its entries; NULL is fine. */
void disp_progress_destroy(struct disp_progress *p);

/* Record a producer's cumulative counts (and the CPU it spent; 0 = not measured) for a job at now_ms.
 * Returns 0, or -ENOMEM when a new entry could not be allocated: the report is dropped and counted. */
int disp_progress_report(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t elements, int64_t bytes,
                         int64_t cpu_ns, int64_t now_ms);
/* A rank-0 client's view of its job (disp_progress_entry.consumed_per_s, wait_fraction, starved_fraction,
 * cpu_cores), kept on its own producer's entry when there is one; fractions outside 0..1 are not kept. */
struct disp_client_view {
    double consumed_per_s, wait_fraction, starved_fraction, cpu_cores;
};
void disp_progress_client(struct disp_progress *p, uint64_t job, uint64_t producer, const struct disp_client_view *v);
/* A producer's remote shard reads for a job (cumulative), kept on its entry when there is one. */
void disp_progress_source(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t bytes,
                          int64_t requests, int64_t retries);
/* Drop every entry of a job (it left the dispatcher's table): O(its entries). */
void disp_progress_forget(struct disp_progress *p, uint64_t job);
/* Drop a producer's entries in every job (a worker left the state's table): O(jobs). */
void disp_progress_forget_producer(struct disp_progress *p, uint64_t producer);

/* The entry of (job, producer), NULL if none; valid until the table next changes. */
const struct disp_progress_entry *disp_progress_find(const struct disp_progress *p, uint64_t job,
                                                     uint64_t producer);
/* A job's entries, oldest first: for (e = disp_progress_first(p, job); e; e = disp_progress_next(e)).
 * Valid until the table next changes. */
const struct disp_progress_entry *disp_progress_first(const struct disp_progress *p, uint64_t job);
const struct disp_progress_entry *disp_progress_next(const struct disp_progress_entry *e);
/* How many entries a job has. */
size_t disp_progress_count(const struct disp_progress *p, uint64_t job);
/* Its size, memory and dropped reports. */
void disp_progress_stats(const struct disp_progress *p, struct disp_progress_stats *out);

#endif
