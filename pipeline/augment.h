/* pipeline/augment.h - the registry's CPU runs for the ops between the decode group and normalize: the
 * colour ops, the warps and the policies, each an adapter from the op's fields to a kernel of ops/color,
 * ops/geometry or ops/policy. Thread-safe: state is per call. */
#ifndef SPW_PIPELINE_AUGMENT_H
#define SPW_PIPELINE_AUGMENT_H

#include "ops/augmix.h"
#include "pipeline/op_registry.h"
#include "pipeline/value.h"

/* Each replaces v's image (in place, or by a new allocation); see spw_op_run_fn. */
/* A color_jitter range as ops/policy.h takes it: NULL for the {0, 0} the spec stores when it is off. */
const double *spw_augment_jitter_range(const double r[2]);

int spw_augment_brightness(struct spw_op_call *c, struct spw_value *v);
int spw_augment_contrast(struct spw_op_call *c, struct spw_value *v);
int spw_augment_saturation(struct spw_op_call *c, struct spw_value *v);
int spw_augment_hue(struct spw_op_call *c, struct spw_value *v);
int spw_augment_sharpness(struct spw_op_call *c, struct spw_value *v);
int spw_augment_aug_mix(struct spw_op_call *c, struct spw_value *v);
int spw_augment_elastic(struct spw_op_call *c, struct spw_value *v);
/* aug_mix's fields as ops/augmix.h takes them. */
void spw_augment_augmix_params(const struct spw_op_spec *op, struct spw_augmix_params *p);
int spw_augment_posterize(struct spw_op_call *c, struct spw_value *v);
int spw_augment_solarize(struct spw_op_call *c, struct spw_value *v);
int spw_augment_equalize(struct spw_op_call *c, struct spw_value *v);
int spw_augment_autocontrast(struct spw_op_call *c, struct spw_value *v);
int spw_augment_invert(struct spw_op_call *c, struct spw_value *v);
int spw_augment_grayscale(struct spw_op_call *c, struct spw_value *v);
int spw_augment_gaussian_blur(struct spw_op_call *c, struct spw_value *v);
int spw_augment_pil_gaussian_blur(struct spw_op_call *c, struct spw_value *v);
int spw_augment_random_perspective(struct spw_op_call *c, struct spw_value *v);
/* gaussian_blur's sigma (pil_gaussian_blur's radius) for one element: uniform in the op's [min, max], as a
 * float32 (its first draw). */
double spw_augment_blur_sigma(const struct spw_op_spec *op, struct spw_rng *r);
/* The random_<op> rows (random_grayscale, random_posterize, ...): with probability p, their op; else v
 * unchanged. One draw from the op's stream either way. */
int spw_augment_random(struct spw_op_call *c, struct spw_value *v);
int spw_augment_color_jitter(struct spw_op_call *c, struct spw_value *v);
int spw_augment_rotate(struct spw_op_call *c, struct spw_value *v);
int spw_augment_affine(struct spw_op_call *c, struct spw_value *v);
int spw_augment_rand(struct spw_op_call *c, struct spw_value *v);
int spw_augment_auto(struct spw_op_call *c, struct spw_value *v);
int spw_augment_trivial(struct spw_op_call *c, struct spw_value *v);

#endif
