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

#define SPW_BATCH_MAX_TENSORS (SPW_VIEWS_MAX_INSTANCES + 2)

struct spw_sample_key {
    int64_t epoch, sample;      /* sample = index in the source's manifest */
    const char *path;           /* owned by the source */
};

struct spw_batch {
    int64_t epoch, index;       /* index of the batch within its epoch */
    int n;                      /* elements in it (positions minus skipped samples) */
    int skipped;
    int n_tensors;
    /* [n, ...] data, [n] int64 labels; padded batches: [n] int64 lengths after them; with views, one
     * [n, ...] tensor per view instance (n_views of them) in place of the data */
    struct spw_tensor tensors[SPW_BATCH_MAX_TENSORS];
    int n_views;
    struct spw_sample_key *keys;    /* n, in delivery order */
    size_t data_capacity;           /* bytes allocated for tensors[0] (for recycling) */
    int device_type, device_id;     /* where tensors[0].data is, as a DLPack DLDevice: 1 (kDLCPU), host memory,
                                       or a device batch's (spw_executor_opts.device_batches) */
    uint64_t device_block;          /* a device batch's block (0: host memory); freed by the release */
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
/* A batch being filled. Fixed shapes: one [n, ...] buffer from the first element on (data, elem_bytes).
 * Padded (pad, the spec's batch.pad: audio, whose last dimension varies): each element in its own buffer
 * (rows, lens) until spw_batch_build pads them to the longest; data holds the common shape meanwhile. */
struct spw_batch_fill {
    struct spw_tensor data;
    size_t elem_bytes;              /* fixed: bytes per element; padded: the first element's */
    bool pad;
    int n_rows;
    uint8_t **rows;                 /* padded: [n_rows] element buffers */
    int64_t *lens;                  /* padded: [n] last-dimension lengths */
};

/* Build a batch from an assembled slot: n_pos positions with their manifest samples, ok[p] false for a
 * skipped one; takes the fill's data (reset on return) and closes the gaps of skipped positions; a padded
 * fill becomes [n, ..., longest] zero-padded data plus an int64 lengths tensor. Labels and keys come from
 * src; with the spec's batch.mix, the batch is mixed and its labels are float32 [n, num_classes]
 * (pipeline/mix.h); with views, the packed elements become one tensor per view instance (pipeline/views.h).
 * Returns 0, -EINVAL (a batch mix cannot take, or elements views cannot split) or -ENOMEM. */
int spw_batch_build(const struct spw_pipeline_spec *spec, const struct spw_source *src, int64_t epoch, int64_t index,
                    int n_pos, const int64_t *samples, const bool *ok, struct spw_batch_fill *f,
                    struct spw_batch **out);
/* Where element idx of an n-element batch goes, given its dtype and shape: the first call allocates the
 * fill's data (spw_batch_buffer_size(n * element bytes) from take(ctx, bytes)), or for a padded fill the
 * row arrays; later calls check the element has the same dtype and shape (padded: all but the last
 * dimension). Returns the address, or NULL with a message in err (out of memory, or elements of one batch
 * differing in shape). Not thread-safe on one fill. */
uint8_t *spw_batch_element_place(struct spw_batch_fill *f, int n, int idx, enum spw_dtype dt, int ndim,
                                 const int64_t *shape, void *(*take)(void *ctx, size_t bytes), void *ctx, char *err,
                                 size_t errlen);
/* Whether the fill has its first element, and about how many bytes the whole batch takes. */
bool spw_batch_fill_started(const struct spw_batch_fill *f);
size_t spw_batch_fill_bytes(const struct spw_batch_fill *f, int n);
/* Free what a fill holds (its buffer back to the cache) and reset it, keeping pad. */
void spw_batch_fill_clear(struct spw_batch_fill *f);
/* Batch buffers: huge-page backed, reused through a small process-wide cache (first touches of fresh memory
 * are slow). take returns spw_batch_buffer_size(bytes) bytes or NULL; put hands one back (or frees it). */
void *spw_batch_buffer_take(size_t bytes);
void spw_batch_buffer_put(void *p, size_t cap);
size_t spw_batch_buffer_size(size_t bytes);
/* Free a batch (a device batch's block only through its executor's release). */
void spw_batch_free(struct spw_batch *b);
/* Free a batch from ex, keeping its buffer for the next batches (no page faults on fresh memory). */
void spw_executor_release(struct spw_executor *ex, struct spw_batch *b);

#endif
