/* dispatcher/progress.c - per (job, producer) delivery counters and rates (see progress.h). A rate is the
 * count's change over at least RATE_WINDOW_MS between reports, so a 100 ms heartbeat does not make it
 * jumpy. Pure functions over the table; the caller locks. */
#include "dispatcher/progress.h"

#include <string.h>

#define RATE_WINDOW_MS 1000

void disp_progress_report(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t elements, int64_t bytes,
                          int64_t cpu_ns, int64_t now_ms)
{
    struct disp_progress_entry *e = NULL;
    for (int i = 0; i < p->n && !e; i++)
        if (p->e[i].job == job && p->e[i].producer == producer)
            e = &p->e[i];
    if (!e) {
        if (p->n == DISP_PROGRESS_MAX) {        /* drop the entry reported longest ago */
            int old = 0;
            for (int i = 1; i < p->n; i++)
                if (p->e[i].last_ms < p->e[old].last_ms)
                    old = i;
            p->e[old] = p->e[--p->n];
        }
        e = &p->e[p->n++];
        memset(e, 0, sizeof *e);
        e->wait_fraction = -1;
        e->job = job;
        e->producer = producer;
        e->rate_ms = now_ms;            /* the first rate counts from this report, not from 0 */
        e->rate_elements = elements;
        e->rate_bytes = bytes;
        e->rate_cpu_ns = cpu_ns;
    }
    if (elements < e->rate_elements || bytes < e->rate_bytes) {   /* a restarted producer counts from 0 */
        e->rate_elements = elements;
        e->rate_bytes = bytes;
        e->rate_ms = now_ms;
    }
    if (cpu_ns < e->rate_cpu_ns || cpu_ns == 0) {   /* restarted, or not measured now (a worker of two jobs) */
        e->rate_cpu_ns = cpu_ns;
    } else if (e->rate_cpu_ns == 0) {               /* measured again: a new window for every count */
        e->rate_elements = elements;
        e->rate_bytes = bytes;
        e->rate_cpu_ns = cpu_ns;
        e->rate_ms = now_ms;
    }
    e->elements = elements;
    e->bytes = bytes;
    e->cpu_ns = cpu_ns;
    e->last_ms = now_ms;
    const int64_t dt = now_ms - e->rate_ms;
    if (dt >= RATE_WINDOW_MS) {
        const int64_t de = elements - e->rate_elements;
        e->elements_per_s = (double)de * 1e3 / (double)dt;
        e->bytes_per_s = (double)(bytes - e->rate_bytes) * 1e3 / (double)dt;
        if (de > 0 && e->rate_cpu_ns > 0 && cpu_ns > e->rate_cpu_ns)
            e->cpu_ns_per_element = (double)(cpu_ns - e->rate_cpu_ns) / (double)de;
        else if (cpu_ns == 0)
            e->cpu_ns_per_element = 0;
        e->rate_elements = elements;
        e->rate_bytes = bytes;
        e->rate_cpu_ns = cpu_ns;
        e->rate_ms = now_ms;
    }
}

int disp_progress_of_job(const struct disp_progress *p, uint64_t job, struct disp_progress_entry *out, int cap)
{
    int n = 0;
    for (int i = 0; i < p->n && n < cap; i++)
        if (p->e[i].job == job)
            out[n++] = p->e[i];
    return n;
}

void disp_progress_source(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t bytes,
                          int64_t requests, int64_t retries)
{
    for (int i = 0; i < p->n; i++)
        if (p->e[i].job == job && p->e[i].producer == producer) {
            p->e[i].source_bytes = bytes > 0 ? bytes : 0;
            p->e[i].source_requests = requests > 0 ? requests : 0;
            p->e[i].source_retries = retries > 0 ? retries : 0;
            return;
        }
}

void disp_progress_forget(struct disp_progress *p, uint64_t job)
{
    int kept = 0;
    for (int i = 0; i < p->n; i++)
        if (p->e[i].job != job)
            p->e[kept++] = p->e[i];
    p->n = kept;
}

void disp_progress_client(struct disp_progress *p, uint64_t job, uint64_t producer, double consumed_per_s,
                          double wait_fraction)
{
    for (int i = 0; i < p->n; i++)
        if (p->e[i].job == job && p->e[i].producer == producer) {
            p->e[i].consumed_per_s = consumed_per_s >= 0 ? consumed_per_s : 0;
            p->e[i].wait_fraction = wait_fraction >= 0 && wait_fraction <= 1 ? wait_fraction : -1;
        }
}
