/* ops/augmix.h - torchvision 0.14's AugMix(severity, mixture_width, chain_depth, alpha, all_ops,
 * interpolation, fill) on an RGB image: Dirichlet weights, mixture_width chains of 1-3 (or chain_depth) ops
 * from its own op list and magnitude tables, each op on torchvision's tensor path (ops/tensor_path.h), mixed
 * in float32 and truncated as forward() does. Randomness from a caller-owned spw_rng, drawn in forward()'s
 * order; the plan never depends on pixels, so another device can apply it. Thread-safe. */
#ifndef SPW_OPS_AUGMIX_H
#define SPW_OPS_AUGMIX_H

#include <stdbool.h>

#include "lib/rng.h"
#include "ops/image.h"

#define SPW_AUGMIX_OPS 13           /* all_ops; the first 9 otherwise */
#define SPW_AUGMIX_MAX_WIDTH 16     /* mixture_width cap */
#define SPW_AUGMIX_MAX_DEPTH 16     /* chain_depth cap */
#define SPW_AUGMIX_MAX_SEVERITY 10  /* torchvision's _PARAMETER_MAX */

struct spw_augmix_params {
    int severity;               /* 1..10: magnitude bins drawn from [0, severity) */
    int mixture_width;          /* 1..SPW_AUGMIX_MAX_WIDTH chains */
    int chain_depth;            /* > 0: ops per chain; <= 0: 1 to 3, drawn per chain */
    double alpha;               /* > 0: the Dirichlet concentration */
    bool all_ops;               /* add Brightness, Color, Contrast, Sharpness */
    int interp;                 /* SPW_INTERP_NEAREST or SPW_INTERP_BILINEAR, for the warps */
    const double *fill;         /* NULL: torchvision's fill=None; else 3 values */
};

struct spw_augmix_step {
    int index;                  /* in AugMix's op list: ShearX ... Equalize, Brightness ... Sharpness */
    int bin;                    /* magnitude bin, -1 for the ops without a table (AutoContrast, Equalize) */
    int negate;                 /* 1: the signed magnitude was negated, -1: the op is unsigned */
};

struct spw_augmix_plan {
    float m[2];                             /* Dirichlet([alpha, alpha]): the image's weight, the chains' */
    float dirichlet[SPW_AUGMIX_MAX_WIDTH];  /* Dirichlet([alpha] * width), before scaling by m[1] */
    int width;
    int depth[SPW_AUGMIX_MAX_WIDTH];
    struct spw_augmix_step step[SPW_AUGMIX_MAX_WIDTH][SPW_AUGMIX_MAX_DEPTH];
};

/* The params' range check: 0 or -EINVAL. */
int spw_augmix_check(const struct spw_augmix_params *p);

/* AugMix's draws for one image. Returns 0 or -EINVAL. */
int spw_augmix_plan(struct spw_rng *rng, const struct spw_augmix_params *p, struct spw_augmix_plan *plan);

/* torchvision's name for op list entry `index` ("ShearX", ...); NULL out of range. */
const char *spw_augmix_op_name(int index);

/* The unsigned magnitude of `index` at `bin` for an image of w x h (float32 as torch.linspace makes it;
 * Posterize: the bits). 0 for ops without a table. */
double spw_augmix_magnitude(int index, int bin, int w, int h);

/* Apply a plan: *img becomes the mix. Allocates its scratch (two images and a float32 image). Returns 0,
 * -ENOMEM or -EINVAL (non-RGB image, bad params). */
int spw_augmix_apply(struct spw_image *img, const struct spw_augmix_params *p, const struct spw_augmix_plan *plan);

#endif
