/* ops/augmix.c - AugMix as torchvision 0.14's autoaugment.AugMix.forward does it on an image (see augmix.h):
 * its op list, its magnitude tables (float32 torch.linspace; Posterize 4 - round(bin / 2.25)), the draws in
 * its order, each op on the tensor path, and mix = m0 * img + sum(dirichlet_i * m1 * chain_i) in float32,
 * truncated to uint8. Allocates scratch per call; no globals beyond const tables; thread-safe. */
#include "ops/augmix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/color.h"
#include "ops/geometry.h"
#include "ops/policy.h"
#include "ops/tensor_path.h"

/* AugMix's _augmentation_space order, as enum spw_aug_op values. */
static const int augmix_ops[SPW_AUGMIX_OPS] = {
    SPW_AUG_SHEAR_X,    SPW_AUG_SHEAR_Y,  SPW_AUG_TRANSLATE_X, SPW_AUG_TRANSLATE_Y, SPW_AUG_ROTATE,
    SPW_AUG_POSTERIZE,  SPW_AUG_SOLARIZE, SPW_AUG_AUTOCONTRAST, SPW_AUG_EQUALIZE,   SPW_AUG_BRIGHTNESS,
    SPW_AUG_COLOR,      SPW_AUG_CONTRAST, SPW_AUG_SHARPNESS,
};

const char *spw_augmix_op_name(int index)
{
    return index >= 0 && index < SPW_AUGMIX_OPS ? spw_augment_op_name(augmix_ops[index]) : NULL;
}

static bool has_table(int op)
{
    return op != SPW_AUG_AUTOCONTRAST && op != SPW_AUG_EQUALIZE;
}

static bool is_signed(int op)
{
    return has_table(op) && op != SPW_AUG_POSTERIZE && op != SPW_AUG_SOLARIZE;
}

int spw_augmix_check(const struct spw_augmix_params *p)
{
    if (!p || p->severity < 1 || p->severity > SPW_AUGMIX_MAX_SEVERITY || p->mixture_width < 1 ||
        p->mixture_width > SPW_AUGMIX_MAX_WIDTH || p->chain_depth > SPW_AUGMIX_MAX_DEPTH || !(p->alpha > 0) ||
        !isfinite(p->alpha) || (p->interp != SPW_INTERP_NEAREST && p->interp != SPW_INTERP_BILINEAR))
        return -EINVAL;
    return 0;
}

double spw_augmix_magnitude(int index, int bin, int w, int h)
{
    const int bins = SPW_AUGMIX_MAX_SEVERITY;   /* the tables have _PARAMETER_MAX entries */
    if (index < 0 || index >= SPW_AUGMIX_OPS || bin < 0 || bin >= bins)
        return 0.0;
    switch (augmix_ops[index]) {
    case SPW_AUG_SHEAR_X:
    case SPW_AUG_SHEAR_Y: return spw_torch_linspace(0.0f, 0.3f, bins, bin);
    case SPW_AUG_TRANSLATE_X: return spw_torch_linspace(0.0f, (float)(w / 3.0), bins, bin);
    case SPW_AUG_TRANSLATE_Y: return spw_torch_linspace(0.0f, (float)(h / 3.0), bins, bin);
    case SPW_AUG_ROTATE: return spw_torch_linspace(0.0f, 30.0f, bins, bin);
    case SPW_AUG_POSTERIZE:     /* 4 - (arange(bins) / ((bins - 1) / 4)).round().int() */
        return 4 - (int)nearbyintf((float)bin / (float)((bins - 1) / 4.0));
    case SPW_AUG_SOLARIZE: return spw_torch_linspace(255.0f, 0.0f, bins, bin);
    case SPW_AUG_AUTOCONTRAST:
    case SPW_AUG_EQUALIZE: return 0.0;
    default: return spw_torch_linspace(0.0f, 0.9f, bins, bin);    /* Brightness, Color, Contrast, Sharpness */
    }
}

/* torch._sample_dirichlet(alpha * ones(n)): normalized Gamma(alpha) draws, as float32. */
static void dirichlet(struct spw_rng *rng, double alpha, int n, float *out)
{
    double g[SPW_AUGMIX_MAX_WIDTH], sum = 0;
    for (int i = 0; i < n; i++)
        sum += g[i] = spw_rng_gamma(rng, alpha);
    for (int i = 0; i < n; i++)
        out[i] = sum > 0 ? (float)(g[i] / sum) : (float)(1.0 / n);
}

int spw_augmix_plan(struct spw_rng *rng, const struct spw_augmix_params *p, struct spw_augmix_plan *plan)
{
    if (spw_augmix_check(p))
        return -EINVAL;
    memset(plan, 0, sizeof *plan);
    const uint32_t n_ops = p->all_ops ? SPW_AUGMIX_OPS : 9;
    dirichlet(rng, p->alpha, 2, plan->m);
    dirichlet(rng, p->alpha, p->mixture_width, plan->dirichlet);
    plan->width = p->mixture_width;
    for (int i = 0; i < plan->width; i++) {
        /* torch.randint(low=1, high=4), torch.randint(len(op_meta)), randint(severity) when the op has a
         * table, randint(2) when it is signed */
        plan->depth[i] = p->chain_depth > 0 ? p->chain_depth : 1 + (int)spw_rng_below(rng, 3);
        for (int d = 0; d < plan->depth[i]; d++) {
            struct spw_augmix_step *s = &plan->step[i][d];
            s->index = (int)spw_rng_below(rng, n_ops);
            const int op = augmix_ops[s->index];
            s->bin = has_table(op) ? (int)spw_rng_below(rng, (uint32_t)p->severity) : -1;
            s->negate = is_signed(op) ? (int)spw_rng_below(rng, 2) : -1;
        }
    }
    return 0;
}

static void swap_images(struct spw_image *a, struct spw_image *b)
{
    struct spw_image t = *a;
    *a = *b;
    *b = t;
}

/* _apply_op(img, op, magnitude) on the tensor path; the result in *img (tmp may be swapped in). */
static int apply_step(struct spw_image *img, struct spw_image *tmp, const struct spw_augmix_params *p,
                      const struct spw_augmix_step *s)
{
    const int op = augmix_ops[s->index];
    double mag = spw_augmix_magnitude(s->index, s->bin, img->w, img->h);
    if (s->negate == 1)
        mag = -mag;
    struct spw_aug_warp warp;
    int rc = spw_augment_warp(op, mag, &warp);
    if (rc < 0)
        return rc;
    if (rc) {
        /* F.affine / F.rotate on a tensor: the centre is the image's centre ({0, 0}) unless given; the
         * shears pass center=[0, 0], i.e. (-w / 2, -h / 2) from the centre; rotate negates the angle */
        const double zero[2] = {0, 0}, corner[2] = {-(img->w * 0.5), -(img->h * 0.5)};
        double m[6];
        if (warp.rotate)
            spw_affine_inverse_matrix(img->w, img->h, -warp.angle, zero, 1.0, zero, zero, m);
        else
            spw_affine_inverse_matrix(img->w, img->h, 0.0, warp.translate, 1.0, warp.shear,
                                      warp.origin ? corner : zero, m);
        rc = spw_tensor_affine_run(img, m, p->interp, p->fill, tmp);
        if (rc == 0)
            swap_images(img, tmp);
        return rc;
    }
    switch (op) {
    case SPW_AUG_POSTERIZE: return spw_posterize_run(img, (int)mag, img);
    case SPW_AUG_SOLARIZE: return spw_solarize_run(img, mag, img);
    case SPW_AUG_AUTOCONTRAST: return spw_tensor_autocontrast_run(img, img);
    case SPW_AUG_EQUALIZE: return spw_equalize_run(img, img);   /* the tensor path's LUT is Pillow's */
    case SPW_AUG_BRIGHTNESS: return spw_tensor_brightness_run(img, 1.0 + mag, img);
    case SPW_AUG_COLOR: return spw_tensor_saturation_run(img, 1.0 + mag, img);
    case SPW_AUG_CONTRAST: return spw_tensor_contrast_run(img, 1.0 + mag, img);
    case SPW_AUG_SHARPNESS:
        if ((rc = spw_tensor_sharpness_run(img, 1.0 + mag, tmp)) == 0)
            swap_images(img, tmp);
        return rc;
    default: return -EINVAL;
    }
}

static void copy_pixels(const struct spw_image *in, struct spw_image *out)
{
    for (int y = 0; y < in->h; y++)
        memcpy(out->data + (size_t)y * out->stride, in->data + (size_t)y * in->stride, (size_t)in->w * 3);
}

int spw_augmix_apply(struct spw_image *img, const struct spw_augmix_params *p, const struct spw_augmix_plan *plan)
{
    if (!img || !img->data || img->c != 3 || img->w <= 0 || img->h <= 0 || spw_augmix_check(p) ||
        plan->width < 1 || plan->width > SPW_AUGMIX_MAX_WIDTH)
        return -EINVAL;
    const int w = img->w, h = img->h;
    const size_t row = (size_t)w * 3, n = row * (size_t)h;
    struct spw_image aug = {0}, tmp = {0};
    float *mix = malloc(n * sizeof *mix);
    int rc = mix ? 0 : -ENOMEM;
    if (rc == 0)
        rc = spw_image_alloc(&aug, w, h, 3);
    if (rc == 0)
        rc = spw_image_alloc(&tmp, w, h, 3);
    for (int y = 0; rc == 0 && y < h; y++) {
        const uint8_t *s = img->data + (size_t)y * img->stride;
        for (size_t i = 0; i < row; i++)
            mix[(size_t)y * row + i] = plan->m[0] * (float)s[i];
    }
    for (int c = 0; rc == 0 && c < plan->width; c++) {
        copy_pixels(img, &aug);
        for (int d = 0; rc == 0 && d < plan->depth[c] && d < SPW_AUGMIX_MAX_DEPTH; d++)
            if (plan->step[c][d].index < 0 || plan->step[c][d].index >= SPW_AUGMIX_OPS)
                rc = -EINVAL;
            else
                rc = apply_step(&aug, &tmp, p, &plan->step[c][d]);
        const float weight = plan->dirichlet[c] * plan->m[1];
        for (int y = 0; rc == 0 && y < h; y++) {
            const uint8_t *s = aug.data + (size_t)y * aug.stride;
            float *m = mix + (size_t)y * row;
            for (size_t i = 0; i < row; i++)
                m[i] = m[i] + weight * (float)s[i];
        }
    }
    for (int y = 0; rc == 0 && y < h; y++) {
        uint8_t *d = img->data + (size_t)y * img->stride;
        const float *m = mix + (size_t)y * row;
        for (size_t i = 0; i < row; i++)    /* .to(uint8): truncation; the weights sum to 1 */
            d[i] = m[i] >= 255.0f ? 255 : (uint8_t)m[i];
    }
    spw_image_free(&aug);
    spw_image_free(&tmp);
    free(mix);
    return rc;
}
