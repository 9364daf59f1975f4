/* pipeline/mb_queue.h - FusionFlow's split of work between CPU and GPU producers: micro-batches waiting to
 * be made, kept sorted by their encoded bytes (a cheap proxy for their cost). The GPU producer takes the
 * largest, CPU producers the smallest, each when its own queue runs low, so both sides drain at their own
 * pace and heavy images go to the GPU. Bounded: a full queue refuses more. Thread-safe (its own mutex). */
#ifndef SPW_PIPELINE_MB_QUEUE_H
#define SPW_PIPELINE_MB_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

struct spw_mb_entry {
    uint64_t epoch;
    int64_t first;              /* the micro-batch's first position in its epoch */
    int n;                      /* positions first .. first + n - 1 */
    int64_t bytes;              /* encoded bytes of its samples */
    void *tag;                  /* the caller's (e.g. its split) */
};

enum spw_mb_end { SPW_MB_SMALLEST = 0, SPW_MB_LARGEST = 1 };

struct spw_mb_queue;

/* A queue of at most capacity micro-batches. Returns 0, -EINVAL (capacity < 1) or -ENOMEM. */
int spw_mb_queue_create(int capacity, struct spw_mb_queue **out);
void spw_mb_queue_destroy(struct spw_mb_queue *q);
/* Add e in size order (after entries of the same size). Returns 0 or -ENOSPC when full. */
int spw_mb_queue_put(struct spw_mb_queue *q, const struct spw_mb_entry *e);
/* Take the smallest or the largest entry into *out; false when the queue is empty. */
bool spw_mb_queue_take(struct spw_mb_queue *q, enum spw_mb_end end, struct spw_mb_entry *out);
int spw_mb_queue_len(struct spw_mb_queue *q);

#endif
