/* ops/policy.h - torchvision 0.14 augmentation policies (RandAugment, AutoAugment, TrivialAugmentWide,
 * ColorJitter) over the PIL-exact kernels in ops/color.h and ops/geometry.h. Same op lists, magnitude
 * tables (float32 torch.linspace values), signs, probabilities, nearest interpolation and fill as
 * torchvision; randomness comes from a caller-owned struct spw_rng instead of torch's global generator,
 * drawn in torchvision's order. Not AugMix (ops/augmix.h). No allocation; thread-safe given distinct images and rngs. */
#ifndef SPW_OPS_POLICY_H
#define SPW_OPS_POLICY_H

#include "lib/rng.h"
#include "ops/image.h"

/* Images are RGB (c == 3). `img` and `tmp` are caller-allocated views of the same size; a policy may swap
 * the two structs' contents (so both stay owned by the caller and must both be freed), and the result is
 * always in *img on return. On error (-EINVAL) *img may already hold some applied ops, and RandAugment's
 * steps_out may be partly written; other outputs are written only on success. */

/* Augmentation ops, in torchvision's _augmentation_space order: RandAugment and TrivialAugmentWide pick
 * op index i uniformly from the first SPW_AUG_RAND_OPS values, so index == enum value. */
enum spw_aug_op {
    SPW_AUG_IDENTITY,
    SPW_AUG_SHEAR_X,
    SPW_AUG_SHEAR_Y,
    SPW_AUG_TRANSLATE_X,
    SPW_AUG_TRANSLATE_Y,
    SPW_AUG_ROTATE,
    SPW_AUG_BRIGHTNESS,
    SPW_AUG_COLOR,
    SPW_AUG_CONTRAST,
    SPW_AUG_SHARPNESS,
    SPW_AUG_POSTERIZE,
    SPW_AUG_SOLARIZE,
    SPW_AUG_AUTOCONTRAST,
    SPW_AUG_EQUALIZE,
    SPW_AUG_INVERT,        /* AutoAugment only */
    SPW_AUG_OP_COUNT
};
#define SPW_RAND_AUGMENT_OPS 14

enum spw_auto_augment_policy {
    SPW_AUTO_AUGMENT_IMAGENET,
    SPW_AUTO_AUGMENT_CIFAR10,
    SPW_AUTO_AUGMENT_SVHN,
};
#define SPW_AUTO_AUGMENT_SUBPOLICIES 25

/* One op as applied: `op` is an enum spw_aug_op (-1: AutoAugment drew it but its probability skipped
 * it) and `magnitude` the signed value handed to torchvision's _apply_op. */
struct spw_aug_step {
    int op;
    double magnitude;
};

/* The most steps a plan holds where the caller gives no array (rand_augment's num_ops cap). */
#define SPW_AUG_MAX_STEPS 32

/* torchvision's name for an op ("ShearX", "Color", ...); NULL when out of range. Static storage. */
const char *spw_augment_op_name(int op);

/* A warp step's parameters, as _apply_op hands them to F.affine / F.rotate (nearest, the step's fill). */
struct spw_aug_warp {
    int rotate;                 /* F.rotate(angle); else F.affine(0, translate, 1, shear) */
    double angle;
    double translate[2], shear[2];
    int origin;                 /* about the top-left corner (the shears), else the centre */
};
/* 1 with *w filled when op is a warp (shears, translations, rotate), 0 when it is not, -EINVAL for a
 * translation beyond 1e9 pixels. One definition for the CPU's _run and the GPU's steps. */
int spw_augment_warp(int op, double magnitude, struct spw_aug_warp *w);

/* One element of torch.linspace(start, end, steps) in float32, as torch 1.13's CPU kernel computes it. */
float spw_torch_linspace(float start, float end, int steps, int idx);

/* Degrees of the shear whose tangent is magnitude (ShearX/ShearY), as torchvision computes them. */
double spw_augment_shear_degrees(double magnitude);

/* torchvision autoaugment._apply_op(img, op, magnitude, interpolation, fill): fill NULL = black; interp
 * SPW_INTERP_NEAREST or SPW_INTERP_BILINEAR, for the warps. Returns 0 or -EINVAL (bad op, views, magnitude
 * or interpolation). */
int spw_augment_op_run(struct spw_image *img, struct spw_image *tmp, int op, double magnitude,
                       const double fill[3], int interp);

/* Magnitude table entry `bin` of `op` for an h x w image, as torchvision builds it: `wide` selects
 * TrivialAugmentWide's table, else RandAugment/AutoAugment's. Ops without a table give 0. Unsigned. */
double spw_augment_magnitude(int op, int num_bins, int bin, int wide, int w, int h);

/* RandAugment(num_ops, magnitude, num_magnitude_bins, interp, fill): each of num_ops ops is uniform
 * over SPW_RAND_AUGMENT_OPS, signed ops negated with probability 1/2. steps_out (may be NULL) gets
 * num_ops entries. Returns 0, or -EINVAL (bad views, num_ops < 0, num_bins < 2,
 * magnitude outside [0, num_bins)). */
int spw_rand_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int num_ops,
                         int magnitude, int num_bins, const double fill[3], int interp,
                         struct spw_aug_step *steps_out);

/* AutoAugment(policy, interp, fill): one of the 25 sub-policies uniformly, each of its two ops applied
 * with its probability. subpolicy_out and steps_out (2 entries) may be NULL. Returns 0 or -EINVAL. */
int spw_auto_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int policy,
                         const double fill[3], int interp, int *subpolicy_out, struct spw_aug_step *steps_out);

/* The steps a policy applies to a w x h image, drawn from rng exactly as its _run draws them (the draws never
 * depend on pixels), so that another device can apply them: _run is plan, then spw_augment_op_run per step.
 * Return the number of steps written (RandAugment num_ops, TrivialAugmentWide 1, AutoAugment 2, where op -1
 * is a step its probability skipped) or -EINVAL. */
int spw_rand_augment_plan(struct spw_rng *rng, int num_ops, int magnitude, int num_bins, int w, int h,
                          struct spw_aug_step *steps);
int spw_trivial_augment_plan(struct spw_rng *rng, int num_bins, int w, int h, struct spw_aug_step *step);
int spw_auto_augment_plan(struct spw_rng *rng, int policy, int w, int h, struct spw_aug_step steps[2],
                          int *subpolicy);

/* TrivialAugmentWide(num_magnitude_bins, interp, fill): one op uniformly, a uniform magnitude bin,
 * signed ops negated with probability 1/2. step_out may be NULL. Returns 0 or -EINVAL. */
int spw_trivial_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int num_bins,
                            const double fill[3], int interp, struct spw_aug_step *step_out);

/* What ColorJitter drew: the order the four adjustments were visited (0 brightness, 1 contrast,
 * 2 saturation, 3 hue) and, for the enabled ones, the factor applied. */
struct spw_color_jitter_draw {
    int order[4];
    int enabled[4];
    double factor[4];
};

/* torchvision ColorJitter's scalar argument as a range: {max(0, 1 - v), 1 + v}, or {-v, v} for hue. */
void spw_color_jitter_range(double v, int is_hue, double range[2]);
/* ColorJitter's draws alone (the order and the factors; they never depend on pixels), as _run draws them.
 * Returns 0 or -EINVAL (a bad range). */
int spw_color_jitter_plan(struct spw_rng *rng, const double brightness[2], const double contrast[2],
                          const double saturation[2], const double hue[2], struct spw_color_jitter_draw *out);

/* ColorJitter with [lo, hi] ranges (NULL, or lo == hi == 1 (0 for hue), disables one): a random
 * permutation of the four, then each enabled factor uniform in its range, applied in permuted order.
 * Works in place (no tmp). draw_out may be NULL. Returns 0, or -EINVAL for bad views or ranges
 * (negative or reversed; hue outside [-0.5, 0.5]). */
int spw_color_jitter_run(struct spw_image *img, struct spw_rng *rng, const double brightness[2],
                         const double contrast[2], const double saturation[2], const double hue[2],
                         struct spw_color_jitter_draw *draw_out);

#endif
