/* pipeline/executor.h - runs a pipeline in-process: a thread pool claims elements in delivery order, runs
 * their fusion groups, copies each result into its batch slot, and batches come out in order from a
 * bounded window. Output is identical for any thread count. Per-op stats for the planner.
 * Thread model: N worker threads; spw_executor_next/stats/destroy from one consumer thread. */
#ifndef SPW_PIPELINE_EXECUTOR_H
#define SPW_PIPELINE_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"
#include "pipeline/source.h"
#include "pipeline/backend.h"
#include "pipeline/batch.h"
#include "pipeline/spec.h"

struct spw_executor;

struct spw_executor_opts {
    int threads;                /* >= 1 */
    int window_batches;         /* batches in flight; default 2 * threads + 2 */
    int64_t max_batches;        /* stop after this many; 0 = until the source's epochs end */
    int rank, world_size;       /* data-parallel: this rank's share of every epoch (pipeline/order.h); world
                                   0 or 1 = all of it. Pads short shares, or drops with batch.drop_remainder */
    int split_size;             /* the shares' unit; 0 = SPW_DEFAULT_SPLIT (as the dispatcher's default) */
    int64_t first_batch;        /* resume: start at this batch of the whole run (epoch first_batch / batches
                                   per epoch); the ones before were delivered. max_batches counts from here */
    const struct spw_backend *gpu;  /* a GPU backend (pipeline/gpu_backend.h): one more thread makes
                                   micro-batches of 4 on it beside the threads; NULL = none */
    bool device_batches;        /* with gpu: each batch's data is handed over in a block of its arena (made
                                   there, host-made rows uploaded), as long as one fits; else in host memory */
};

struct spw_op_stat {
    char name[160];             /* op name, or "a+b+c" for a fused group */
    int first_op, n_ops;
    int64_t elements;
    int64_t ns_total;
    int64_t out_bytes_total;
};

struct spw_exec_stats {
    int64_t elements, batches, skipped;
    int64_t device_batches;     /* of the batches, handed over on the device */
    int n_steps;
    struct spw_op_stat steps[256];
};

/* Create and start. The spec and the source must outlive the executor. Returns 0, SPW_ESPEC with a
 * message in err (e.g. a dataset smaller than one batch with drop_remainder) or -ENOMEM. */
int spw_executor_create(const struct spw_pipeline_spec *spec, const struct spw_source *src,
                        const struct spw_executor_opts *opts, struct spw_executor **out, char *err, size_t errlen);
/* Next batch in order (caller owns it: spw_batch_free). Returns 0, SPW_ECLOSED at the end, or the
 * error that stopped the run under on_error: fail (message from spw_executor_errmsg). */
int spw_executor_next(struct spw_executor *ex, struct spw_batch **out);
const char *spw_executor_errmsg(const struct spw_executor *ex);
void spw_executor_stats(struct spw_executor *ex, struct spw_exec_stats *out);
/* Stop the workers and free everything; accepts NULL. */
void spw_executor_destroy(struct spw_executor *ex);
/* Free a batch from ex, keeping its buffer for the next batches (no page faults on fresh memory). */
void spw_executor_release(struct spw_executor *ex, struct spw_batch *b);

#endif
