/* pipeline/mb_queue.c - a sorted array with insertion by binary search (see mb_queue.h); queues hold a
 * few dozen micro-batches, so a memmove per put is cheap. Thread-safe: every call holds the mutex. */
#include "pipeline/mb_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct spw_mb_queue {
    pthread_mutex_t mu;
    struct spw_mb_entry *e;     /* ascending by bytes */
    int n, cap;
};

int spw_mb_queue_create(int capacity, struct spw_mb_queue **out)
{
    if (capacity < 1)
        return -EINVAL;
    struct spw_mb_queue *q = calloc(1, sizeof *q);
    if (!q || !(q->e = calloc((size_t)capacity, sizeof *q->e))) {
        free(q);
        return -ENOMEM;
    }
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    *out = q;
    return 0;
}

void spw_mb_queue_destroy(struct spw_mb_queue *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    free(q->e);
    free(q);
}

int spw_mb_queue_put(struct spw_mb_queue *q, const struct spw_mb_entry *e)
{
    pthread_mutex_lock(&q->mu);
    int rc = -ENOSPC;
    if (q->n < q->cap) {
        int lo = 0, hi = q->n;              /* the first entry bigger than e */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (q->e[mid].bytes <= e->bytes)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&q->e[lo + 1], &q->e[lo], sizeof *q->e * (size_t)(q->n - lo));
        q->e[lo] = *e;
        q->n++;
        rc = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

bool spw_mb_queue_take(struct spw_mb_queue *q, enum spw_mb_end end, struct spw_mb_entry *out)
{
    pthread_mutex_lock(&q->mu);
    const bool got = q->n > 0;
    if (got && end == SPW_MB_LARGEST) {
        *out = q->e[--q->n];
    } else if (got) {
        *out = q->e[0];
        memmove(&q->e[0], &q->e[1], sizeof *q->e * (size_t)--q->n);
    }
    pthread_mutex_unlock(&q->mu);
    return got;
}

int spw_mb_queue_len(struct spw_mb_queue *q)
{
    pthread_mutex_lock(&q->mu);
    const int n = q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}
