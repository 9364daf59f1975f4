/* pipeline/backend.h - who makes a micro-batch of elements: a table of backends in the order they are tried
 * (CPU producers use [CPU]; a GPU producer [GPU, CPU], so what the GPU declines falls to the CPU; the GPU
 * backend comes from the CUDA plugin, pipeline/gpu_backend.h). A micro-batch is a few samples of one
 * epoch with callbacks: want(k) before element k (false: skip it; it may wait, e.g. for the prefetch
 * window), dest(k) for where its final write may go, done(k) with the element or its error. The CPU backend
 * makes elements one by one through spw_produce, asking dest right before an element's last groups and
 * calling done right after them, so an element placed through dest is complete when done sees it; a group
 * that batches (a Python op) runs on up to SPW_ELEMENT_MANY_MAX of them at once between those steps.
 * Thread-safe: a backend may serve many threads at once. */
#ifndef SPW_PIPELINE_BACKEND_H
#define SPW_PIPELINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/produce.h"

struct spw_microbatch {
    uint64_t epoch;
    int cut;                    /* run groups [0, cut) */
    int n;
    const int64_t *samples;     /* n sample numbers */
    void *opaque;               /* the callbacks' first argument */
    bool (*want)(void *opaque, int k);                                  /* NULL: every element */
    const struct spw_element_dest *(*dest)(void *opaque, int k);        /* NULL: the backend's own memory */
    /* A GPU backend's final write: a device address for element k's output of this dtype and shape (in the
     * spec's batch layout), or 0 for host memory. An element written there reaches done with v->placed and
     * is complete once the backend's run returns. NULL: host memory. */
    uint64_t (*device_place)(void *opaque, int k, enum spw_dtype dt, int ndim, const int64_t *shape);
    /* NULL, or where element k's per-op timing goes (spw_element_run's stats). */
    struct spw_element_stats *(*stats)(void *opaque, int k);
    /* Element k: rc 0 and *v (the callee frees it; v->borrowed: its data is reused after the micro-batch,
     * so spw_value_own what is kept), or rc and err. */
    void (*done)(void *opaque, int k, int rc, struct spw_value *v, const char *err);
};

struct spw_backend {
    const char *name;           /* "cpu", "gpu" */
    /* Make the micro-batch's elements; each one reaches done exactly once unless want skipped it. Returns
     * 0, or an error when the backend could not take the micro-batch at all (nothing reached done: give it
     * to the next backend). */
    int (*run)(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb);
    void *impl;
};

/* Elements the CPU backend holds between groups while a group batches, in bytes, before it runs the batch
 * on those it has (the rest go in the next): 64 MiB. */
#define SPW_BACKEND_MANY_BYTES ((size_t)64 << 20)

/* Makes elements on the calling thread. */
extern const struct spw_backend spw_backend_cpu;

/* Run mb on the first backend of table[0..n) that takes it (the CPU backend always does). */
int spw_backend_run(const struct spw_backend *const *table, int n, const struct spw_producer *p,
                    const struct spw_microbatch *mb);

/* n elements of one epoch made a micro-batch at a time: the worker's leased split, the client's own places.
 * The caller supplies only its sink. */
#define SPW_RUN_MB_MAX 64
struct spw_run {
    uint64_t epoch;
    int cut;                    /* run groups [0, cut) */
    int n;                      /* elements, run indexes 0 .. n-1 */
    int mb_max;                 /* elements per micro-batch, 1 .. SPW_RUN_MB_MAX */
    void *opaque;               /* every callback's first argument */
    int64_t (*sample_of)(void *opaque, int i);          /* run element i's sample */
    /* Micro-batch [k0, k0 + n) runs next, its samples[0 .. n); its callbacks' k are 0 .. n-1. NULL: none. */
    void (*begin)(void *opaque, int k0, int n, const int64_t *samples);
    bool (*stop)(void *opaque);                         /* NULL: never; true: the rest is not made */
    bool (*want)(void *opaque, int k);                  /* as struct spw_microbatch's */
    const struct spw_element_dest *(*dest)(void *opaque, int k);
    void (*done)(void *opaque, int k, int rc, struct spw_value *v, const char *err);
};
/* Make r's elements in micro-batches of r->mb_max, each on the first backend of table[0..n_table) that
 * takes it. Returns how many elements it went through (r->n unless stop ended it). */
int spw_backend_run_all(const struct spw_backend *const *table, int n_table, const struct spw_producer *p,
                        const struct spw_run *r);

#endif
