/* pipeline/views.h - the spec's multi-crop views (spec.h): the views op runs each view's ops on its own copy
 * of the prefix's output, once per repeat, through the view's element context with streams keyed by (view,
 * repeat, op), and packs the instances into one element (a header, then each instance's bytes in the batch's
 * layout), which travels and is batched like any element; spw_views_unpack splits a batch of them into one
 * tensor per instance. Thread-safe: the contexts are read-only, all other state is per call. */
#ifndef SPW_PIPELINE_VIEWS_H
#define SPW_PIPELINE_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"
#include "pipeline/op_registry.h"
#include "pipeline/spec.h"
#include "pipeline/value.h"

/* The rng key base of view v's repeat r: its op i draws from key | i. Bit 30 set, bit 31 clear: distinct from
 * the spec's op indices (< 256) and from combinators' keys (bit 31 set), which nest under it. */
static inline uint32_t spw_views_key(int v, int r)
{
    return 0x40000000u | (uint32_t)v << 16 | (uint32_t)r << 8;
}

/* View instances per sample (repeats summed). */
int spw_views_instances(const struct spw_pipeline_spec *spec);
/* The views op's CPU run (spw_op_run_fn): *v (the prefix's output) becomes a uint8 [bytes] packed element. */
int spw_views_run(struct spw_op_call *c, struct spw_value *v);
/* Split data, a batch of n packed elements (uint8 [n, bytes]), into out[0 .. instances): [n, ...] tensors of
 * each instance's dtype and shape (made here; the caller frees them). n == 0 gives empty uint8 tensors.
 * Returns 0, -EINVAL (not packed elements, or elements whose instances differ in shape, named in err) or
 * -ENOMEM; on error nothing is left allocated. */
int spw_views_unpack(const struct spw_pipeline_spec *spec, const struct spw_tensor *data, int n,
                     struct spw_tensor *out, char *err, size_t errlen);

#endif
