/* lib/parallel.c - spw_parallel_for (see parallel.h): short-lived pthreads sharing one atomic index. */
#include "lib/parallel.h"

#include <pthread.h>
#include <stdatomic.h>

struct round {
    int n;
    _Atomic int next;
    void (*fn)(void *ctx, int i);
    void *ctx;
};

static void *taker(void *arg)
{
    struct round *r = arg;
    for (int i; (i = atomic_fetch_add(&r->next, 1)) < r->n;)
        r->fn(r->ctx, i);
    return NULL;
}

void spw_parallel_for(int n, int max_threads, void (*fn)(void *ctx, int i), void *ctx)
{
    struct round r = {.n = n, .fn = fn, .ctx = ctx};
    if (max_threads > SPW_PARALLEL_MAX_THREADS)
        max_threads = SPW_PARALLEL_MAX_THREADS;
    if (max_threads > n)
        max_threads = n;
    pthread_t th[SPW_PARALLEL_MAX_THREADS];
    int started = 0;
    while (started < max_threads - 1 && pthread_create(&th[started], NULL, taker, &r) == 0)
        started++;
    taker(&r);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
}
