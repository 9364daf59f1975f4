/* pipeline/element.h - runs fusion groups of a pipeline over one element. An element's value is a uint8
 * HWC RGB image until normalize/to_tensor, then a CHW float tensor; audio is a float32 tensor throughout
 * (see pipeline/audio.h). Every random choice draws from the
 * counter-based RNG keyed by (seed, epoch, sample, op index), so the output is the same on any thread,
 * process or cut. A context is immutable after init and shared by all threads. */
#ifndef SPW_PIPELINE_ELEMENT_H
#define SPW_PIPELINE_ELEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lib/rng.h"
#include "lib/tensor.h"
#include "ops/image.h"
#include "ops/sink.h"
#include "pipeline/fusion.h"
#include "pipeline/spec.h"
#include "pipeline/value.h"

struct spw_element_ctx {
    const struct spw_pipeline_spec *spec;
    struct spw_group groups[256];
    int n_groups;
    struct spw_normalize_lut *luts;     /* one per op (used by normalize / to_tensor) */
    struct spw_mel_bank *mel_banks;     /* one per op (made for mel ops) */
    struct spw_element_ctx *views;      /* one per view of the spec (spec->n_views): its ops' context */
    int out_channels;                   /* of the image output and of normalize's tensor: 1 after a one-channel
                                           grayscale (pipeline/channels.h; image ops precede normalize), else 3 */
};

/* Per-op timing of one element: ns[i] and out_bytes[i] for op i; a fused group reports on its first op. */
struct spw_element_stats {
    int64_t ns[256];
    int64_t out_bytes[256];
    bool ran[256];
};

/* Where the run's final write may go (e.g. straight into a batch slot). place returns memory for a tensor
 * of that dtype/shape, or NULL to let the runner allocate. uint8 images are placed HWC or, with
 * layout CHW, channel-planar. */
struct spw_element_dest {
    void *(*place)(void *opaque, enum spw_dtype dtype, int ndim, const int64_t *shape);
    void *opaque;
    enum spw_layout layout;
};

/* The RNG of op `op` for a sample: every random choice of that op draws from it. */
void spw_element_rng(const struct spw_element_ctx *ctx, uint64_t epoch, int64_t sample, uint32_t op,
                     struct spw_rng *r);

int spw_element_ctx_init(struct spw_element_ctx *ctx, const struct spw_pipeline_spec *spec);
void spw_element_ctx_destroy(struct spw_element_ctx *ctx);

/* Run groups [g_from, g_to) on one element. With g_from == 0, (buf, len) are the encoded bytes and *v is
 * empty; otherwise *v holds the previous groups' output and is replaced. stats and dest may be NULL; with
 * dest, the run's last op writes its output through dest when it can (v->placed: not owned; an HWC image's or
 * a tensor's data points there).
 * Returns 0, or SPW_EDECODE / SPW_ETOOBIG / SPW_EUNSUPPORTED / -ENOMEM with a message in err; on error
 * *v is left empty. */
int spw_element_run(const struct spw_element_ctx *ctx, int g_from, int g_to, uint64_t epoch, int64_t sample,
                    const uint8_t *buf, size_t len, struct spw_value *v, struct spw_element_stats *stats,
                    const struct spw_element_dest *dest, char *err, size_t errlen);

/* All groups of ctx (a view's: its first op is not a decode) on *v, which they replace, op i drawing from the
 * stream keyed key | i (pipeline/views.h spw_views_key). Returns as spw_element_run. */
int spw_element_run_keyed(const struct spw_element_ctx *ctx, uint32_t key, uint64_t epoch, int64_t sample,
                          struct spw_value *v, char *err, size_t errlen);

/* The most elements spw_element_run_many takes. */
#define SPW_ELEMENT_MANY_MAX 32

/* Whether group g has an op that runs many elements in one call (a Python op): spw_element_run_many then
 * costs less per element than spw_element_run on each. */
bool spw_element_group_batches(const struct spw_element_ctx *ctx, int g);

/* Group g on n (<= SPW_ELEMENT_MANY_MAX) elements: those with rcs[k] == 0 hold *vs[k] (the previous groups'
 * output, replaced) and get their result in rcs[k], their message at errs + k * errlen; on error *vs[k] is
 * left empty. stats[k] as spw_element_run's (stats or its entries may be NULL; a shared op's time is split
 * evenly). The same elements as spw_element_run on each in turn, none of them placed (no dest). */
void spw_element_run_many(const struct spw_element_ctx *ctx, int g, uint64_t epoch, const int64_t *samples, int n,
                          struct spw_value *const *vs, int *rcs, struct spw_element_stats *const *stats, char *errs,
                          size_t errlen);

/* Whether group g is the pipeline's last and is one normalize / to_tensor op, which only passes an image's rows
 * through a sink: spw_element_run_rows can then read the rows where they lie. */
bool spw_element_rows_group(const struct spw_element_ctx *ctx, int g);

/* Group g (spw_element_rows_group) on a uint8 HWC image of w x h whose bytes lie in parts from byte offset off
 * on (a received message's slices rather than one block): each row is read in place, a row split between two
 * parts through a row-sized buffer. The same bytes as gathering the image and running the group; *out is
 * written like spw_element_run's *v. Returns 0, -EINVAL (the parts end before the image does), SPW_ETOOBIG or
 * -ENOMEM with a message in err. */
int spw_element_run_rows(const struct spw_element_ctx *ctx, int g, int w, int h, const struct iovec *parts, int n,
                         size_t off, struct spw_value *out, const struct spw_element_dest *dest, char *err,
                         size_t errlen);

#endif
