/* ops/policy.c - RandAugment / AutoAugment / TrivialAugmentWide / ColorJitter as in torchvision 0.14
 * (transforms/autoaugment.py, transforms.ColorJitter), driven by a counter-based spw_rng.
 * Not AugMix (ops/augmix.c) and not the tensor path. No allocation, no globals beyond const tables; thread-safe.
 * Magnitude tables repeat torch 1.13's float32 linspace arithmetic (see spw_torch_linspace below). */
#include "ops/policy.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>

#include "ops/color.h"
#include "ops/geometry.h"

static const char *const op_names[SPW_AUG_OP_COUNT] = {
    "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert",
};

const char *spw_augment_op_name(int op)
{
    return op >= 0 && op < SPW_AUG_OP_COUNT ? op_names[op] : NULL;
}

/* Ops whose magnitude torchvision negates with probability 1/2. */
static int op_signed(int op)
{
    return op >= SPW_AUG_SHEAR_X && op <= SPW_AUG_SHARPNESS;
}

/* Ops with a magnitude table (the others have a 0-d tensor and never draw a bin). */
static int op_has_table(int op)
{
    return op >= SPW_AUG_SHEAR_X && op <= SPW_AUG_SOLARIZE;
}

/* One element of torch.linspace(start, end, steps) in float32 as torch 1.13's CPU kernel computes it on
 * an AVX2 host: the scalar formula (from the nearer end, FMA-contracted) for the tail, and for blocks of
 * 2 x 8 lanes a scalar base plus lane * step (not contracted). Checked against torch for 2..70 bins. */
float spw_torch_linspace(float start, float end, int steps, int idx)
{
    if (steps == 1)
        return start;
    const float step = (end - start) / (float)(steps - 1);
    const int vec = 8, vec_end = steps / (2 * vec) * (2 * vec);
    const int base_idx = idx < vec_end ? idx / vec * vec : idx;
    const float base = base_idx < steps / 2 ? fmaf(step, (float)base_idx, start)
                                            : fmaf(-step, (float)(steps - base_idx - 1), end);
    if (base_idx == idx)
        return base;
    const float lane = (float)(idx - base_idx) * step;
    return base + lane;
}

/* 8 - round(bin / ((num_bins - 1) / levels)) with torch's float32 division and half-to-even round. */
static int posterize_bits(int num_bins, int bin, double levels)
{
    const float q = (float)bin / (float)((num_bins - 1) / levels);
    return 8 - (int)nearbyintf(q);
}

double spw_augment_magnitude(int op, int num_bins, int bin, int wide, int w, int h)
{
    if (!op_has_table(op) || num_bins < 2 || bin < 0 || bin >= num_bins)
        return 0.0;
    float end;
    switch (op) {
    case SPW_AUG_SHEAR_X:
    case SPW_AUG_SHEAR_Y:
        end = wide ? 0.99f : 0.3f;
        break;
    case SPW_AUG_TRANSLATE_X:
        end = wide ? 32.0f : (float)(150.0 / 331.0 * w);
        break;
    case SPW_AUG_TRANSLATE_Y:
        end = wide ? 32.0f : (float)(150.0 / 331.0 * h);
        break;
    case SPW_AUG_ROTATE:
        end = wide ? 135.0f : 30.0f;
        break;
    case SPW_AUG_POSTERIZE:
        return posterize_bits(num_bins, bin, wide ? 6.0 : 4.0);
    case SPW_AUG_SOLARIZE:
        return spw_torch_linspace(255.0f, 0.0f, num_bins, bin);
    default:   /* Brightness, Color, Contrast, Sharpness */
        end = wide ? 0.99f : 0.9f;
        break;
    }
    return spw_torch_linspace(0.0f, end, num_bins, bin);
}

static void swap_images(struct spw_image *a, struct spw_image *b)
{
    struct spw_image t = *a;
    *a = *b;
    *b = t;
}

static int check_pair(const struct spw_image *img, const struct spw_image *tmp)
{
    if (!img || !tmp || !img->data || !tmp->data || img->data == tmp->data)
        return -EINVAL;
    if (img->c != 3 || tmp->c != 3 || img->w <= 0 || img->h <= 0 || img->w != tmp->w || img->h != tmp->h)
        return -EINVAL;
    return 0;
}

/* Degrees of the shear whose tangent is `magnitude`: math.degrees(math.atan(m)), CPython's constant. */
double spw_augment_shear_degrees(double magnitude)
{
    return atan(magnitude) * (180.0 / M_PI);
}

int spw_augment_warp(int op, double magnitude, struct spw_aug_warp *w)
{
    *w = (struct spw_aug_warp){0};
    switch (op) {
    case SPW_AUG_SHEAR_X:
    case SPW_AUG_SHEAR_Y:
        /* torchvision shears about the top-left corner (center=[0, 0]). */
        w->shear[op == SPW_AUG_SHEAR_Y] = spw_augment_shear_degrees(magnitude);
        w->origin = 1;
        return 1;
    case SPW_AUG_TRANSLATE_X:
    case SPW_AUG_TRANSLATE_Y:
        if (fabs(magnitude) > 1e9)
            return -EINVAL;
        w->translate[op == SPW_AUG_TRANSLATE_Y] = (double)(long)magnitude;   /* int(magnitude) */
        return 1;
    case SPW_AUG_ROTATE:
        w->rotate = 1;
        w->angle = magnitude;
        return 1;
    default:
        return 0;
    }
}

int spw_augment_op_run(struct spw_image *img, struct spw_image *tmp, int op, double magnitude,
                       const double fill[3], int interp)
{
    int rc = check_pair(img, tmp);
    if (rc)
        return rc;
    if (!isfinite(magnitude) || (interp != SPW_INTERP_NEAREST && interp != SPW_INTERP_BILINEAR))
        return -EINVAL;
    static const double origin[2] = {0.0, 0.0};
    struct spw_aug_warp w;
    const int warp = spw_augment_warp(op, magnitude, &w);
    if (warp < 0)
        return warp;
    if (warp) {
        rc = w.rotate ? spw_rotate_run(img, w.angle, interp, fill, tmp)
                      : spw_affine_run(img, 0.0, w.translate, 1.0, w.shear, interp, fill, w.origin ? origin : NULL,
                                       tmp);
        if (rc == 0)
            swap_images(img, tmp);
        return rc;
    }
    switch (op) {
    case SPW_AUG_IDENTITY:
        break;
    case SPW_AUG_BRIGHTNESS:
        rc = spw_adjust_brightness_run(img, 1.0 + magnitude, img);
        break;
    case SPW_AUG_COLOR:
        rc = spw_adjust_saturation_run(img, 1.0 + magnitude, img);
        break;
    case SPW_AUG_CONTRAST:
        rc = spw_adjust_contrast_run(img, 1.0 + magnitude, img);
        break;
    case SPW_AUG_SHARPNESS:
        rc = spw_adjust_sharpness_run(img, 1.0 + magnitude, tmp);
        break;
    case SPW_AUG_POSTERIZE:
        rc = magnitude >= 0.0 && magnitude < 9.0 ? spw_posterize_run(img, (int)magnitude, img) : -EINVAL;
        break;
    case SPW_AUG_SOLARIZE:
        rc = spw_solarize_run(img, magnitude, img);
        break;
    case SPW_AUG_AUTOCONTRAST:
        rc = spw_autocontrast_run(img, img);
        break;
    case SPW_AUG_EQUALIZE:
        rc = spw_equalize_run(img, img);
        break;
    case SPW_AUG_INVERT:
        rc = spw_invert_run(img, img);
        break;
    default:
        return -EINVAL;
    }
    if (rc == 0 && op == SPW_AUG_SHARPNESS)
        swap_images(img, tmp);
    return rc;
}

/* A uniform sign draw as torchvision's `torch.randint(2, (1,))`: 1 means negate. */
static double maybe_negate(struct spw_rng *rng, double magnitude)
{
    return spw_rng_below(rng, 2) ? -magnitude : magnitude;
}

int spw_rand_augment_plan(struct spw_rng *rng, int num_ops, int magnitude, int num_bins, int w, int h,
                          struct spw_aug_step *steps)
{
    if (!rng || num_ops < 0 || num_bins < 2 || magnitude < 0 || magnitude >= num_bins)
        return -EINVAL;
    for (int i = 0; i < num_ops; i++) {
        const int op = (int)spw_rng_below(rng, SPW_RAND_AUGMENT_OPS);
        double m = spw_augment_magnitude(op, num_bins, magnitude, 0, w, h);
        steps[i].op = op;
        steps[i].magnitude = op_signed(op) ? maybe_negate(rng, m) : m;
    }
    return num_ops;
}

int spw_trivial_augment_plan(struct spw_rng *rng, int num_bins, int w, int h, struct spw_aug_step *step)
{
    if (!rng || num_bins < 2)
        return -EINVAL;
    const int op = (int)spw_rng_below(rng, SPW_RAND_AUGMENT_OPS);
    double m = 0.0;
    if (op_has_table(op))
        m = spw_augment_magnitude(op, num_bins, (int)spw_rng_below(rng, (uint32_t)num_bins), 1, w, h);
    step->op = op;
    step->magnitude = op_signed(op) ? maybe_negate(rng, m) : m;
    return 1;
}

/* Apply n planned steps (op -1: skipped). */
static int apply_steps(struct spw_image *img, struct spw_image *tmp, const struct spw_aug_step *steps, int n,
                       const double fill[3], int interp)
{
    for (int i = 0; i < n; i++) {
        int rc = steps[i].op < 0 ? 0 : spw_augment_op_run(img, tmp, steps[i].op, steps[i].magnitude, fill, interp);
        if (rc)
            return rc;
    }
    return 0;
}

int spw_rand_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int num_ops,
                         int magnitude, int num_bins, const double fill[3], int interp,
                         struct spw_aug_step *steps_out)
{
    int rc = check_pair(img, tmp);
    if (rc)
        return rc;
    struct spw_aug_step local[SPW_AUG_MAX_STEPS];
    struct spw_aug_step *steps = steps_out ? steps_out : local;
    if (!steps_out && num_ops > SPW_AUG_MAX_STEPS)
        return -EINVAL;
    const int n = spw_rand_augment_plan(rng, num_ops, magnitude, num_bins, img->w, img->h, steps);
    return n < 0 ? n : apply_steps(img, tmp, steps, n, fill, interp);
}

int spw_trivial_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int num_bins,
                            const double fill[3], int interp, struct spw_aug_step *step_out)
{
    int rc = check_pair(img, tmp);
    if (rc)
        return rc;
    struct spw_aug_step step;
    if ((rc = spw_trivial_augment_plan(rng, num_bins, img->w, img->h, &step)) < 0)
        return rc;
    rc = apply_steps(img, tmp, &step, 1, fill, interp);
    if (rc == 0 && step_out)
        *step_out = step;
    return rc;
}

struct sub_op {
    int op;
    double p;          /* probability of applying */
    int bin;           /* magnitude bin of the 10-bin table, -1 = none */
};

/* torchvision AutoAugment._get_policies, generated from the installed autoaugment.py. */
static const struct sub_op policies[3][SPW_AUTO_AUGMENT_SUBPOLICIES][2] = {
    [SPW_AUTO_AUGMENT_IMAGENET] = {
        {{SPW_AUG_POSTERIZE, 0.4, 8}, {SPW_AUG_ROTATE, 0.6, 9}},
        {{SPW_AUG_SOLARIZE, 0.6, 5}, {SPW_AUG_AUTOCONTRAST, 0.6, -1}},
        {{SPW_AUG_EQUALIZE, 0.8, -1}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_POSTERIZE, 0.6, 7}, {SPW_AUG_POSTERIZE, 0.6, 6}},
        {{SPW_AUG_EQUALIZE, 0.4, -1}, {SPW_AUG_SOLARIZE, 0.2, 4}},
        {{SPW_AUG_EQUALIZE, 0.4, -1}, {SPW_AUG_ROTATE, 0.8, 8}},
        {{SPW_AUG_SOLARIZE, 0.6, 3}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_POSTERIZE, 0.8, 5}, {SPW_AUG_EQUALIZE, 1.0, -1}},
        {{SPW_AUG_ROTATE, 0.2, 3}, {SPW_AUG_SOLARIZE, 0.6, 8}},
        {{SPW_AUG_EQUALIZE, 0.6, -1}, {SPW_AUG_POSTERIZE, 0.4, 6}},
        {{SPW_AUG_ROTATE, 0.8, 8}, {SPW_AUG_COLOR, 0.4, 0}},
        {{SPW_AUG_ROTATE, 0.4, 9}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_EQUALIZE, 0.0, -1}, {SPW_AUG_EQUALIZE, 0.8, -1}},
        {{SPW_AUG_INVERT, 0.6, -1}, {SPW_AUG_EQUALIZE, 1.0, -1}},
        {{SPW_AUG_COLOR, 0.6, 4}, {SPW_AUG_CONTRAST, 1.0, 8}},
        {{SPW_AUG_ROTATE, 0.8, 8}, {SPW_AUG_COLOR, 1.0, 2}},
        {{SPW_AUG_COLOR, 0.8, 8}, {SPW_AUG_SOLARIZE, 0.8, 7}},
        {{SPW_AUG_SHARPNESS, 0.4, 7}, {SPW_AUG_INVERT, 0.6, -1}},
        {{SPW_AUG_SHEAR_X, 0.6, 5}, {SPW_AUG_EQUALIZE, 1.0, -1}},
        {{SPW_AUG_COLOR, 0.4, 0}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_EQUALIZE, 0.4, -1}, {SPW_AUG_SOLARIZE, 0.2, 4}},
        {{SPW_AUG_SOLARIZE, 0.6, 5}, {SPW_AUG_AUTOCONTRAST, 0.6, -1}},
        {{SPW_AUG_INVERT, 0.6, -1}, {SPW_AUG_EQUALIZE, 1.0, -1}},
        {{SPW_AUG_COLOR, 0.6, 4}, {SPW_AUG_CONTRAST, 1.0, 8}},
        {{SPW_AUG_EQUALIZE, 0.8, -1}, {SPW_AUG_EQUALIZE, 0.6, -1}},
    },
    [SPW_AUTO_AUGMENT_CIFAR10] = {
        {{SPW_AUG_INVERT, 0.1, -1}, {SPW_AUG_CONTRAST, 0.2, 6}},
        {{SPW_AUG_ROTATE, 0.7, 2}, {SPW_AUG_TRANSLATE_X, 0.3, 9}},
        {{SPW_AUG_SHARPNESS, 0.8, 1}, {SPW_AUG_SHARPNESS, 0.9, 3}},
        {{SPW_AUG_SHEAR_Y, 0.5, 8}, {SPW_AUG_TRANSLATE_Y, 0.7, 9}},
        {{SPW_AUG_AUTOCONTRAST, 0.5, -1}, {SPW_AUG_EQUALIZE, 0.9, -1}},
        {{SPW_AUG_SHEAR_Y, 0.2, 7}, {SPW_AUG_POSTERIZE, 0.3, 7}},
        {{SPW_AUG_COLOR, 0.4, 3}, {SPW_AUG_BRIGHTNESS, 0.6, 7}},
        {{SPW_AUG_SHARPNESS, 0.3, 9}, {SPW_AUG_BRIGHTNESS, 0.7, 9}},
        {{SPW_AUG_EQUALIZE, 0.6, -1}, {SPW_AUG_EQUALIZE, 0.5, -1}},
        {{SPW_AUG_CONTRAST, 0.6, 7}, {SPW_AUG_SHARPNESS, 0.6, 5}},
        {{SPW_AUG_COLOR, 0.7, 7}, {SPW_AUG_TRANSLATE_X, 0.5, 8}},
        {{SPW_AUG_EQUALIZE, 0.3, -1}, {SPW_AUG_AUTOCONTRAST, 0.4, -1}},
        {{SPW_AUG_TRANSLATE_Y, 0.4, 3}, {SPW_AUG_SHARPNESS, 0.2, 6}},
        {{SPW_AUG_BRIGHTNESS, 0.9, 6}, {SPW_AUG_COLOR, 0.2, 8}},
        {{SPW_AUG_SOLARIZE, 0.5, 2}, {SPW_AUG_INVERT, 0.0, -1}},
        {{SPW_AUG_EQUALIZE, 0.2, -1}, {SPW_AUG_AUTOCONTRAST, 0.6, -1}},
        {{SPW_AUG_EQUALIZE, 0.2, -1}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_COLOR, 0.9, 9}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_AUTOCONTRAST, 0.8, -1}, {SPW_AUG_SOLARIZE, 0.2, 8}},
        {{SPW_AUG_BRIGHTNESS, 0.1, 3}, {SPW_AUG_COLOR, 0.7, 0}},
        {{SPW_AUG_SOLARIZE, 0.4, 5}, {SPW_AUG_AUTOCONTRAST, 0.9, -1}},
        {{SPW_AUG_TRANSLATE_Y, 0.9, 9}, {SPW_AUG_TRANSLATE_Y, 0.7, 9}},
        {{SPW_AUG_AUTOCONTRAST, 0.9, -1}, {SPW_AUG_SOLARIZE, 0.8, 3}},
        {{SPW_AUG_EQUALIZE, 0.8, -1}, {SPW_AUG_INVERT, 0.1, -1}},
        {{SPW_AUG_TRANSLATE_Y, 0.7, 9}, {SPW_AUG_AUTOCONTRAST, 0.9, -1}},
    },
    [SPW_AUTO_AUGMENT_SVHN] = {
        {{SPW_AUG_SHEAR_X, 0.9, 4}, {SPW_AUG_INVERT, 0.2, -1}},
        {{SPW_AUG_SHEAR_Y, 0.9, 8}, {SPW_AUG_INVERT, 0.7, -1}},
        {{SPW_AUG_EQUALIZE, 0.6, -1}, {SPW_AUG_SOLARIZE, 0.6, 6}},
        {{SPW_AUG_INVERT, 0.9, -1}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_EQUALIZE, 0.6, -1}, {SPW_AUG_ROTATE, 0.9, 3}},
        {{SPW_AUG_SHEAR_X, 0.9, 4}, {SPW_AUG_AUTOCONTRAST, 0.8, -1}},
        {{SPW_AUG_SHEAR_Y, 0.9, 8}, {SPW_AUG_INVERT, 0.4, -1}},
        {{SPW_AUG_SHEAR_Y, 0.9, 5}, {SPW_AUG_SOLARIZE, 0.2, 6}},
        {{SPW_AUG_INVERT, 0.9, -1}, {SPW_AUG_AUTOCONTRAST, 0.8, -1}},
        {{SPW_AUG_EQUALIZE, 0.6, -1}, {SPW_AUG_ROTATE, 0.9, 3}},
        {{SPW_AUG_SHEAR_X, 0.9, 4}, {SPW_AUG_SOLARIZE, 0.3, 3}},
        {{SPW_AUG_SHEAR_Y, 0.8, 8}, {SPW_AUG_INVERT, 0.7, -1}},
        {{SPW_AUG_EQUALIZE, 0.9, -1}, {SPW_AUG_TRANSLATE_Y, 0.6, 6}},
        {{SPW_AUG_INVERT, 0.9, -1}, {SPW_AUG_EQUALIZE, 0.6, -1}},
        {{SPW_AUG_CONTRAST, 0.3, 3}, {SPW_AUG_ROTATE, 0.8, 4}},
        {{SPW_AUG_INVERT, 0.8, -1}, {SPW_AUG_TRANSLATE_Y, 0.0, 2}},
        {{SPW_AUG_SHEAR_Y, 0.7, 6}, {SPW_AUG_SOLARIZE, 0.4, 8}},
        {{SPW_AUG_INVERT, 0.6, -1}, {SPW_AUG_ROTATE, 0.8, 4}},
        {{SPW_AUG_SHEAR_Y, 0.3, 7}, {SPW_AUG_TRANSLATE_X, 0.9, 3}},
        {{SPW_AUG_SHEAR_X, 0.1, 6}, {SPW_AUG_INVERT, 0.6, -1}},
        {{SPW_AUG_SOLARIZE, 0.7, 2}, {SPW_AUG_TRANSLATE_Y, 0.6, 7}},
        {{SPW_AUG_SHEAR_Y, 0.8, 4}, {SPW_AUG_INVERT, 0.8, -1}},
        {{SPW_AUG_SHEAR_X, 0.7, 9}, {SPW_AUG_TRANSLATE_Y, 0.8, 3}},
        {{SPW_AUG_SHEAR_Y, 0.8, 5}, {SPW_AUG_AUTOCONTRAST, 0.7, -1}},
        {{SPW_AUG_SHEAR_X, 0.7, 2}, {SPW_AUG_INVERT, 0.1, -1}},
    },
};

int spw_auto_augment_plan(struct spw_rng *rng, int policy, int w, int h, struct spw_aug_step steps[2],
                          int *subpolicy)
{
    if (!rng || policy < SPW_AUTO_AUGMENT_IMAGENET || policy > SPW_AUTO_AUGMENT_SVHN)
        return -EINVAL;
    /* get_params draws everything up front: sub-policy, two probabilities, two signs. */
    const int id = (int)spw_rng_below(rng, SPW_AUTO_AUGMENT_SUBPOLICIES);
    const double prob[2] = {spw_rng_uniform(rng), spw_rng_uniform(rng)};
    const uint32_t sign[2] = {spw_rng_below(rng, 2), spw_rng_below(rng, 2)};
    for (int i = 0; i < 2; i++) {
        const struct sub_op *s = &policies[policy][id][i];
        steps[i].op = -1;
        steps[i].magnitude = 0.0;
        if (!(prob[i] <= s->p))
            continue;
        double m = s->bin >= 0 ? spw_augment_magnitude(s->op, 10, s->bin, 0, w, h) : 0.0;
        steps[i].op = s->op;
        steps[i].magnitude = op_signed(s->op) && sign[i] == 0 ? -m : m;
    }
    if (subpolicy)
        *subpolicy = id;
    return 2;
}

int spw_auto_augment_run(struct spw_image *img, struct spw_image *tmp, struct spw_rng *rng, int policy,
                         const double fill[3], int interp, int *subpolicy_out, struct spw_aug_step *steps_out)
{
    int rc = check_pair(img, tmp);
    if (rc)
        return rc;
    struct spw_aug_step steps[2];
    int id;
    if ((rc = spw_auto_augment_plan(rng, policy, img->w, img->h, steps, &id)) < 0)
        return rc;
    if ((rc = apply_steps(img, tmp, steps, 2, fill, interp)) != 0)
        return rc;
    if (subpolicy_out)
        *subpolicy_out = id;
    if (steps_out) {
        steps_out[0] = steps[0];
        steps_out[1] = steps[1];
    }
    return 0;
}

void spw_color_jitter_range(double v, int is_hue, double range[2])
{
    if (is_hue) {
        range[0] = -v;
        range[1] = v;
    } else {
        range[0] = 1.0 - v > 0.0 ? 1.0 - v : 0.0;
        range[1] = 1.0 + v;
    }
}

int spw_color_jitter_plan(struct spw_rng *rng, const double brightness[2], const double contrast[2],
                          const double saturation[2], const double hue[2], struct spw_color_jitter_draw *out)
{
    const double *range[4] = {brightness, contrast, saturation, hue};
    struct spw_color_jitter_draw draw = {{0, 1, 2, 3}, {0, 0, 0, 0}, {0.0, 0.0, 0.0, 0.0}};
    if (!rng)
        return -EINVAL;
    for (int k = 0; k < 4; k++) {
        const double *r = range[k];
        if (!r)
            continue;
        const double lo_bound = k == 3 ? -0.5 : 0.0, hi_bound = k == 3 ? 0.5 : INFINITY;
        const double center = k == 3 ? 0.0 : 1.0;
        if (!(lo_bound <= r[0] && r[0] <= r[1] && r[1] <= hi_bound) || isinf(r[1]))
            return -EINVAL;
        /* _check_input: a range collapsed onto the identity value turns the adjustment off. */
        draw.enabled[k] = !(r[0] == center && r[1] == center);
    }
    /* get_params: torch.randperm(4) first, then one uniform per enabled adjustment in fixed order. */
    for (int i = 3; i > 0; i--) {
        const int j = (int)spw_rng_below(rng, (uint32_t)i + 1);
        const int t = draw.order[i];
        draw.order[i] = draw.order[j];
        draw.order[j] = t;
    }
    for (int k = 0; k < 4; k++)
        if (draw.enabled[k])
            draw.factor[k] = spw_rng_range(rng, range[k][0], range[k][1]);
    *out = draw;
    return 0;
}

int spw_color_jitter_run(struct spw_image *img, struct spw_rng *rng, const double brightness[2],
                         const double contrast[2], const double saturation[2], const double hue[2],
                         struct spw_color_jitter_draw *draw_out)
{
    struct spw_color_jitter_draw draw;
    if (!img || !img->data || img->c != 3 || img->w <= 0 || img->h <= 0)
        return -EINVAL;
    int rc = spw_color_jitter_plan(rng, brightness, contrast, saturation, hue, &draw);
    if (rc)
        return rc;
    for (int i = 0; i < 4; i++) {
        const int k = draw.order[i];
        if (!draw.enabled[k])
            continue;
        switch (k) {
        case 0: rc = spw_adjust_brightness_run(img, draw.factor[0], img); break;
        case 1: rc = spw_adjust_contrast_run(img, draw.factor[1], img); break;
        case 2: rc = spw_adjust_saturation_run(img, draw.factor[2], img); break;
        default: rc = spw_adjust_hue_run(img, draw.factor[3], img); break;
        }
        if (rc)
            return rc;
    }
    if (draw_out)
        *draw_out = draw;
    return 0;
}
