/* pipeline/profile.h - measures what a pipeline costs on this machine, step by step: reading an element,
 * each fusion group, and copying a group's output once (as packing a message or filling a batch slot does),
 * with `threads` threads busy at once, on the first elements of epoch 0. The planner's inputs come from it:
 * a worker's W(k), the client's suffix and whole-pipeline costs. Not the planner itself.
 * Thread model: spw_profile_run starts and joins its own threads; the result is plain data. */
#ifndef SPW_PIPELINE_PROFILE_H
#define SPW_PIPELINE_PROFILE_H

#include "pipeline/source.h"
#include "pipeline/spec.h"

#define SPW_PROFILE_MAX_GROUPS 256

struct spw_profile {
    int groups, samples, skipped, threads;  /* samples: elements measured */
    double read_ns;                         /* per element per thread, every thread busy */
    double group_ns[SPW_PROFILE_MAX_GROUPS];/* group g */
    double copy_ns[SPW_PROFILE_MAX_GROUPS + 1];  /* one copy of the value at cut k (k = 0: the file) */
    double bytes[SPW_PROFILE_MAX_GROUPS + 1];    /* b_k: the value's bytes at cut k */
    /* Compression of the value at cut k (zstd level 1, one frame), on every SPW_PROFILE_ZSTD_EVERY-th element:
     * raw / compressed bytes (0 = none sampled), and CPU per raw byte to compress and to check + decompress. */
    double zstd_ratio[SPW_PROFILE_MAX_GROUPS + 1];
    double zstd_compress_ns[SPW_PROFILE_MAX_GROUPS + 1], zstd_decompress_ns[SPW_PROFILE_MAX_GROUPS + 1];
};

#define SPW_PROFILE_ZSTD_EVERY 8
#define SPW_PROFILE_BUDGET_MS 5000  /* what a worker's and a client's profile may take: a slow pipeline is measured
                                       on fewer elements rather than keep a plan (and a CreateJob) waiting */
#define SPW_PROFILE_MIN_SAMPLES 4   /* per thread, measured whatever the budget */

/* Measure `samples` elements (at most the source's) with `threads` threads; with budget_ms > 0, each thread
 * stops once that much wall time has passed and it has measured SPW_PROFILE_MIN_SAMPLES. Returns 0, or
 * SPW_ESOURCE when no sampled element could be read and run (message in err), or -ENOMEM / -EAGAIN. */
int spw_profile_run(const struct spw_pipeline_spec *spec, const struct spw_source *src, int samples, int threads,
                    int budget_ms, struct spw_profile *out, char *err, size_t errlen);
/* A producer's cost per element at cut k: read + groups [0, k) + one copy of its output. */
double spw_profile_prefix_ns(const struct spw_profile *p, int k);

#endif
