/* dispatcher/progress.c - per (job, producer) delivery counters and rates (see progress.h). A rate is the
 * count's change over at least RATE_WINDOW_MS between reports, so a 100 ms heartbeat does not make it
 * jumpy. Entries sit in a chained hash on (job, producer) and on their job's list (a second hash on job),
 * so a report is O(1) and a job's walk O(its entries). Pure functions over the table; the caller locks. */
#include "dispatcher/progress.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RATE_WINDOW_MS 1000
#define MIN_BUCKETS 64      /* a table never shrinks below this (power of 2) */

struct node {
    struct disp_progress_entry e;   /* first: an entry's address is its node's */
    struct node *chain;             /* the next in its bucket */
    struct node *prev, *next;       /* its job's list */
};

struct job_list {
    uint64_t job;
    struct node *first, *last;
    size_t n;
    struct job_list *chain;
};

struct disp_progress {
    struct node **buckets;          /* by (job, producer) */
    size_t n_buckets, n;
    struct job_list **jobs;         /* by job */
    size_t n_job_buckets, n_jobs;
    uint64_t dropped;
};

/* splitmix64's finalizer: worker ids are small consecutive numbers, client producers differ in high bits. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t slot(uint64_t job, uint64_t producer, size_t n_buckets)
{
    return (size_t)(mix(job * 0x9e3779b97f4a7c15ull ^ producer) & (n_buckets - 1));
}

static size_t job_slot(uint64_t job, size_t n_buckets)
{
    return (size_t)(mix(job) & (n_buckets - 1));
}

/* Rehash into n buckets (a power of 2); on no memory keep the old ones: longer chains, nothing lost. */
static void resize(struct disp_progress *p, size_t n)
{
    struct node **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < p->n_buckets; i++)
        for (struct node *x = p->buckets[i], *nx; x; x = nx) {
            nx = x->chain;
            const size_t k = slot(x->e.job, x->e.producer, n);
            x->chain = b[k];
            b[k] = x;
        }
    free(p->buckets);
    p->buckets = b;
    p->n_buckets = n;
}

static void resize_jobs(struct disp_progress *p, size_t n)
{
    struct job_list **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < p->n_job_buckets; i++)
        for (struct job_list *x = p->jobs[i], *nx; x; x = nx) {
            nx = x->chain;
            const size_t k = job_slot(x->job, n);
            x->chain = b[k];
            b[k] = x;
        }
    free(p->jobs);
    p->jobs = b;
    p->n_job_buckets = n;
}

int disp_progress_create(struct disp_progress **out)
{
    struct disp_progress *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->buckets = calloc(MIN_BUCKETS, sizeof *p->buckets);
    p->jobs = calloc(MIN_BUCKETS, sizeof *p->jobs);
    if (!p->buckets || !p->jobs) {
        disp_progress_destroy(p);
        return -ENOMEM;
    }
    p->n_buckets = p->n_job_buckets = MIN_BUCKETS;
    *out = p;
    return 0;
}

void disp_progress_destroy(struct disp_progress *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->jobs && i < p->n_job_buckets; i++)
        for (struct job_list *l = p->jobs[i], *nl; l; l = nl) {
            nl = l->chain;
            for (struct node *x = l->first, *nx; x; x = nx) {
                nx = x->next;
                free(x);
            }
            free(l);
        }
    free(p->buckets);
    free(p->jobs);
    free(p);
}

static struct job_list *find_job(const struct disp_progress *p, uint64_t job)
{
    struct job_list *l = p->jobs[job_slot(job, p->n_job_buckets)];
    while (l && l->job != job)
        l = l->chain;
    return l;
}

static struct node *find(const struct disp_progress *p, uint64_t job, uint64_t producer)
{
    struct node *x = p->buckets[slot(job, producer, p->n_buckets)];
    while (x && !(x->e.job == job && x->e.producer == producer))
        x = x->chain;
    return x;
}

/* After removals: halve each bucket array while a quarter of it would be used (never below MIN_BUCKETS). */
static void shrink(struct disp_progress *p)
{
    size_t n = p->n_buckets;
    while (n > MIN_BUCKETS && p->n < n / 4)
        n /= 2;
    if (n != p->n_buckets)
        resize(p, n);
    n = p->n_job_buckets;
    while (n > MIN_BUCKETS && p->n_jobs < n / 4)
        n /= 2;
    if (n != p->n_job_buckets)
        resize_jobs(p, n);
}

/* Unlink a job's (empty) list from its bucket and free it. */
static void drop_job_list(struct disp_progress *p, struct job_list *l)
{
    struct job_list **pp = &p->jobs[job_slot(l->job, p->n_job_buckets)];
    while (*pp != l)
        pp = &(*pp)->chain;
    *pp = l->chain;
    free(l);
    p->n_jobs--;
}

/* Unlink x from its bucket and its job's list (l), free it; the list goes with its last entry. */
static void drop_node(struct disp_progress *p, struct job_list *l, struct node *x)
{
    struct node **pp = &p->buckets[slot(x->e.job, x->e.producer, p->n_buckets)];
    while (*pp != x)
        pp = &(*pp)->chain;
    *pp = x->chain;
    if (x->prev)
        x->prev->next = x->next;
    else
        l->first = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        l->last = x->prev;
    l->n--;
    free(x);
    p->n--;
}

/* A new entry for (job, producer) at the end of its job's list; NULL when out of memory (nothing changed). */
static struct node *insert(struct disp_progress *p, uint64_t job, uint64_t producer)
{
    struct job_list *l = find_job(p, job);
    if (!l) {
        if (!(l = calloc(1, sizeof *l)))
            return NULL;
        l->job = job;
        const size_t k = job_slot(job, p->n_job_buckets);
        l->chain = p->jobs[k];
        p->jobs[k] = l;
        p->n_jobs++;
    }
    struct node *x = calloc(1, sizeof *x);
    if (!x) {
        if (!l->n)
            drop_job_list(p, l);
        return NULL;
    }
    x->e.job = job;
    x->e.producer = producer;
    const size_t k = slot(job, producer, p->n_buckets);
    x->chain = p->buckets[k];
    p->buckets[k] = x;
    x->prev = l->last;
    if (l->last)
        l->last->next = x;
    else
        l->first = x;
    l->last = x;
    l->n++;
    p->n++;
    if (p->n > p->n_buckets)                /* load factor about 1 (a failed resize: longer chains) */
        resize(p, p->n_buckets * 2);
    if (p->n_jobs > p->n_job_buckets)
        resize_jobs(p, p->n_job_buckets * 2);
    return x;
}

int disp_progress_report(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t elements, int64_t bytes,
                         int64_t cpu_ns, int64_t now_ms)
{
    struct node *x = find(p, job, producer);
    const bool fresh = !x;
    if (fresh && !(x = insert(p, job, producer))) {
        p->dropped++;
        return -ENOMEM;
    }
    struct disp_progress_entry *e = &x->e;
    if (fresh) {
        e->wait_fraction = -1;
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
    return 0;
}

void disp_progress_source(struct disp_progress *p, uint64_t job, uint64_t producer, int64_t bytes,
                          int64_t requests, int64_t retries)
{
    struct node *x = find(p, job, producer);
    if (x) {
        x->e.source_bytes = bytes > 0 ? bytes : 0;
        x->e.source_requests = requests > 0 ? requests : 0;
        x->e.source_retries = retries > 0 ? retries : 0;
    }
}

void disp_progress_client(struct disp_progress *p, uint64_t job, uint64_t producer, const struct disp_client_view *v)
{
    struct node *x = find(p, job, producer);
    if (x) {
        x->e.consumed_per_s = v->consumed_per_s >= 0 ? v->consumed_per_s : 0;
        x->e.wait_fraction = v->wait_fraction >= 0 && v->wait_fraction <= 1 ? v->wait_fraction : -1;
        x->e.starved_fraction = v->starved_fraction >= 0 && v->starved_fraction <= 1 ? v->starved_fraction : 0;
        x->e.cpu_cores = v->cpu_cores >= 0 && v->cpu_cores < 1e6 ? v->cpu_cores : 0;
    }
}

void disp_progress_forget(struct disp_progress *p, uint64_t job)
{
    struct job_list *l = find_job(p, job);
    if (!l)
        return;
    while (l->first)
        drop_node(p, l, l->first);
    drop_job_list(p, l);
    shrink(p);
}

void disp_progress_forget_producer(struct disp_progress *p, uint64_t producer)
{
    for (size_t i = 0; i < p->n_job_buckets; i++)
        for (struct job_list *l = p->jobs[i], *nl; l; l = nl) {
            nl = l->chain;                      /* l may go with its last entry */
            struct node *x = find(p, l->job, producer);
            if (x)
                drop_node(p, l, x);
            if (x && !l->n)
                drop_job_list(p, l);
        }
    shrink(p);
}

const struct disp_progress_entry *disp_progress_find(const struct disp_progress *p, uint64_t job, uint64_t producer)
{
    const struct node *x = find(p, job, producer);
    return x ? &x->e : NULL;
}

const struct disp_progress_entry *disp_progress_first(const struct disp_progress *p, uint64_t job)
{
    const struct job_list *l = find_job(p, job);
    return l && l->first ? &l->first->e : NULL;
}

const struct disp_progress_entry *disp_progress_next(const struct disp_progress_entry *e)
{
    const struct node *x = ((const struct node *)(const void *)e)->next;
    return x ? &x->e : NULL;
}

size_t disp_progress_count(const struct disp_progress *p, uint64_t job)
{
    const struct job_list *l = find_job(p, job);
    return l ? l->n : 0;
}

void disp_progress_stats(const struct disp_progress *p, struct disp_progress_stats *out)
{
    out->entries = p->n;
    out->bytes = sizeof *p + p->n * sizeof(struct node) + p->n_buckets * sizeof *p->buckets +
                 p->n_jobs * sizeof(struct job_list) + p->n_job_buckets * sizeof *p->jobs;
    out->dropped = p->dropped;
}
