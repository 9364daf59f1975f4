/* pipeline/gpu_backend.h - the GPU row of the backend table. The CPU decodes (only the region the output
 * needs, as jpeg_group.c prepares it); the device does the rest through the CUDA plugin: the resample with
 * the plan's own fixed-point taps, the flips, the augment ops through their registry GPU runs
 * (pipeline/gpu_ops.h: colour ops, warps, ColorJitter, RandAugment, AutoAugment, TrivialAugmentWide) and
 * the closing normalize/to_tensor, so an element equals the CPU path's byte for byte. All device memory
 * comes from one arena reserved at open (gpu_mem_budget, never more than is free, never grown); an element
 * that does not fit, a crop that pads, an op instance without a kernel (Pillow's float warp) or a device error
 * sends that element to the CPU, so nothing is lost; after a device error (CUDA errors stick to a context)
 * it declines every micro-batch. Pipelines with an op that has no GPU run (random_erasing, random_crop,
 * audio) are declined: the next backend makes them. Outputs go to the backend's own memory and are
 * downloaded (micro-batch dest is not used), or with device_place straight into a device batch's block.
 * Thread-safe: one lock around the device, one around the arena. */
#ifndef SPW_PIPELINE_GPU_BACKEND_H
#define SPW_PIPELINE_GPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/backend.h"

#define SPW_GPU_DEFAULT_BUDGET "0.25"   /* of the memory free on the device when the backend opens */

struct spw_gpu_opts {
    int device;
    const char *mem_budget;     /* gpu_mem_budget (lib/arena.h's forms); NULL: SPW_GPU_DEFAULT_BUDGET */
};

struct spw_gpu_stats {
    size_t arena_bytes, arena_peak;     /* the reservation, and the most of it ever in use */
    size_t arena_used;                  /* in use now (device batches out included) */
    int64_t microbatches, elements;     /* made on the device */
    int64_t cpu_elements;               /* handed to the CPU: did not fit, a crop that pads, a device error */
    int64_t declined;                   /* micro-batches of pipelines it cannot make */
    int64_t device_errors;
    int64_t encoded_bytes;              /* of the elements made on the device (their files' sizes) */
};

/* Load the plugin, open the device and reserve the arena. Returns 0 with a backend for the table, or an
 * error with a one-line reason (no plugin, no device or driver, a bad budget, no memory for the arena):
 * the caller logs it and keeps the CPU. */
int spw_gpu_backend_open(const struct spw_gpu_opts *o, struct spw_backend **out, char *err, size_t errlen);
void spw_gpu_backend_close(struct spw_backend *b);
void spw_gpu_backend_stats(const struct spw_backend *b, struct spw_gpu_stats *st);
/* What it has done, for a log line: "N elements made on the device (B encoded bytes each on average), M
 * handed to the CPU (...); arena peak P of A bytes". */
void spw_gpu_backend_summary(const struct spw_backend *b, char *buf, size_t n);
/* The device's free and total memory now (cudaMemGetInfo). Returns 0 or the device's error. */
int spw_gpu_backend_mem_info(const struct spw_backend *b, size_t *free_bytes, size_t *total_bytes);
/* "device 0 (cuda runtime 13.0, PLUGIN PATH), arena 2048 MiB of 8192 MiB free" */
const char *spw_gpu_backend_describe(const struct spw_backend *b);
/* "device 0, arena 2048 MiB" (under 64 bytes: what a worker registers) */
const char *spw_gpu_backend_brief(const struct spw_backend *b);
/* Device batches (an in-process trainer's batches handed over on the device, DLPack): a block of the arena
 * for one batch, or -ENOSPC when it does not fit now; free it when the batch is released (any thread). */
int spw_gpu_backend_block_alloc(const struct spw_backend *b, size_t bytes, uint64_t *addr);
void spw_gpu_backend_block_free(const struct spw_backend *b, uint64_t addr);
/* Finish the device batch at dev (n_pos rows of row bytes): rows made on the host (ok[p] and !on_dev[p])
 * are uploaded from host + p * row, rows made on the device stay, skipped positions' gaps are closed
 * (ok rows first, in order); waits for the device. Returns 0, or -EIO / -ENODEV with a message when the
 * device failed (now or before): then the rows made on the device are lost and must be made again. */
int spw_gpu_backend_batch_finish(const struct spw_backend *b, uint64_t dev, const uint8_t *host, size_t row,
                                 int n_pos, const bool *ok, const bool *on_dev, char *err, size_t errlen);
/* The device's addresses as DLPack sees them: DLDeviceType (2, kDLCUDA; 1, kDLCPU for the host emulation)
 * and device id. */
void spw_gpu_backend_dlpack_device(const struct spw_backend *b, int *type, int *id);
/* The planner's facts of the GPU as a producer (planner.h's struct spw_plan_gpu): the whole pipeline on
 * samples [0, samples) of epoch 0 in micro-batches of 4 on this thread ([GPU, CPU]: what a GPU producer
 * makes), the first one a warm-up: elements/s, and this thread's CPU per element. Returns 0, -ENOTSUP (a
 * pipeline it cannot make) or -EIO (nothing made). */
int spw_gpu_backend_measure(const struct spw_backend *b, const struct spw_producer *p, int samples, double *rate,
                            double *cpu_ns, char *err, size_t errlen);
/* Whether the GPU backend makes groups [0, cut) of this pipeline; why not in why (may be NULL). */
bool spw_gpu_can_make(const struct spw_element_ctx *ctx, int cut, char *why, size_t whylen);

#endif
