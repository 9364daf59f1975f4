/* pipeline/gpu_ops.c - the registry's GPU runs (see gpu_ops.h). Host-side work is small: tables of 256
 * bytes, warp plans and per-axis source tables; everything per pixel is a kernel on the call's stream, in
 * order, so scratch is reused from one op to the next. Thread-safe: a call is one element's. */
#include "pipeline/gpu_ops.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/color.h"
#include "ops/color_px.h"
#include "ops/geometry.h"
#include "ops/policy.h"
#include "pipeline/augment.h"
#include "pipeline/combinators.h"
#include "pipeline/geometry.h"
#include "pipeline/image_ops.h"

#define ALIGN_UP(n) (((n) + 255) / 256 * 256)

#define LUT_BYTES ALIGN_UP(3 * 256)
#define STATS_BYTES ALIGN_UP(sizeof(uint64_t) * (3 * 256 + 1))

size_t spw_gpu_call_scratch_bytes(int w, int h)
{
    return LUT_BYTES + STATS_BYTES + ALIGN_UP(sizeof(int32_t) * ((size_t)w + (size_t)h));
}

void spw_gpu_call_scratch(struct spw_gpu_call *c, spw_dptr base)
{
    c->lut = base;
    c->stats = base + LUT_BYTES;
    c->tables = base + LUT_BYTES + STATS_BYTES;
}

static void swap(struct spw_gpu_call *c)
{
    const struct spw_gpu_image t = c->img;
    c->img = c->tmp;
    c->tmp = t;
}

/* ---- tables and blends ---- */

static int lut3(struct spw_gpu_call *c)
{
    const struct spw_gpu_color a = {.src = c->img, .dst = c->img, .op = SPW_GPU_LUT3, .lut = c->lut};
    return c->p->color(c->dev, &a);
}

/* The same table for every channel, made here. */
static int host_lut(struct spw_gpu_call *c, const uint8_t lut[256])
{
    uint8_t three[3 * 256];
    for (int k = 0; k < 3; k++)
        memcpy(three + 256 * k, lut, 256);
    int rc = c->p->upload(c->dev, c->lut, three, sizeof three);
    return rc ? rc : lut3(c);
}

/* A table made on the device from the image's histograms and mean luma. */
static int device_lut(struct spw_gpu_call *c, enum spw_gpu_lut_kind kind, float alpha)
{
    const spw_dptr hist = c->stats, sum = c->stats + sizeof(uint64_t) * 3 * 256;
    const struct spw_gpu_image_stats st = {.src = c->img, .hist = hist, .luma_sum = sum};
    const struct spw_gpu_make_lut ml = {.kind = kind, .alpha = alpha, .hist = hist, .luma_sum = sum,
                                        .n = (uint64_t)c->img.w * (uint64_t)c->img.h, .lut = c->lut};
    int rc = c->p->stats(c->dev, &st);
    if (rc == 0)
        rc = c->p->make_lut(c->dev, &ml);
    return rc ? rc : lut3(c);
}

/* A blend into the scratch, which becomes the image. */
static int blend(struct spw_gpu_call *c, enum spw_gpu_color_op op, float alpha)
{
    const struct spw_gpu_color a = {.src = c->img, .dst = c->tmp, .op = op, .alpha = alpha};
    int rc = c->p->color(c->dev, &a);
    if (rc == 0)
        swap(c);
    return rc;
}

static int brightness(struct spw_gpu_call *c, double factor)
{
    uint8_t lut[256];
    if (spw_px_bad_factor(factor))
        return -EINVAL;
    spw_px_blend_lut((float)factor, 0, lut);
    return host_lut(c, lut);
}

static int contrast(struct spw_gpu_call *c, double factor)
{
    return spw_px_bad_factor(factor) ? -EINVAL : device_lut(c, SPW_GPU_LUT_CONTRAST, (float)factor);
}

static int saturation(struct spw_gpu_call *c, double factor)
{
    return spw_px_bad_factor(factor) ? -EINVAL : blend(c, SPW_GPU_SATURATION, (float)factor);
}

static int sharpness(struct spw_gpu_call *c, double factor)
{
    return spw_px_bad_factor(factor) ? -EINVAL : blend(c, SPW_GPU_SHARPNESS, (float)factor);
}

static int hue(struct spw_gpu_call *c, double factor)
{
    if (!(factor >= -0.5 && factor <= 0.5))
        return -EINVAL;
    const struct spw_gpu_color a = {.src = c->img, .dst = c->tmp, .op = SPW_GPU_HUE,
                                    .hue_shift = spw_px_hue_shift(factor)};
    int rc = c->p->color(c->dev, &a);
    if (rc == 0)
        swap(c);
    return rc;
}

static int posterize(struct spw_gpu_call *c, int bits)
{
    uint8_t lut[256];
    if (bits < 0 || bits > 8)
        return -EINVAL;
    spw_px_posterize_lut(bits, lut);
    return host_lut(c, lut);
}

static int solarize(struct spw_gpu_call *c, double threshold)
{
    uint8_t lut[256];
    if (isnan(threshold))
        return -EINVAL;
    spw_px_solarize_lut(spw_solarize_first(threshold), lut);
    return host_lut(c, lut);
}

static int invert(struct spw_gpu_call *c)
{
    uint8_t lut[256];
    spw_px_solarize_lut(0, lut);
    return host_lut(c, lut);
}

/* ---- warps ---- */

static int warp(struct spw_gpu_call *c, const struct spw_warp_plan *plan)
{
    struct spw_gpu_warp a = {.src = c->img, .dst = c->tmp, .transpose = plan->transpose};
    memcpy(a.ink, plan->ink, 3);
    const int w = c->img.w, h = c->img.h;
    switch (plan->kind) {
    case SPW_WARP_TRANSPOSE:
        if (plan->transpose == 0)
            return 0;
        a.kind = SPW_GPU_WARP_TRANSPOSE;
        break;
    case SPW_WARP_FIXED:
        a.kind = SPW_GPU_WARP_FIXED;
        memcpy(a.fx, plan->fx, sizeof a.fx);
        break;
    case SPW_WARP_SCALE: {
        int32_t *t = malloc(sizeof(int32_t) * ((size_t)w + h));
        if (!t)
            return -ENOMEM;
        spw_warp_scale_tables(plan, w, h, w, h, t, t + w);
        a.kind = SPW_GPU_WARP_SCALE;
        a.xi = c->tables;
        a.yi = c->tables + sizeof(int32_t) * (size_t)w;
        int rc = c->p->upload(c->dev, c->tables, t, sizeof(int32_t) * ((size_t)w + h));
        free(t);
        if (rc)
            return rc;
        break;
    }
    case SPW_WARP_BILINEAR:
        a.kind = SPW_GPU_WARP_BILINEAR;
        memcpy(a.m, plan->m, sizeof a.m);
        break;
    case SPW_WARP_FLOAT:
        return -ENOTSUP;        /* Pillow's accumulated-double fallback: the CPU makes this element */
    }
    int rc = c->p->warp(c->dev, &a);
    if (rc == 0)
        swap(c);
    return rc;
}

/* A crop of the image to rect r (fill outside it), as the CPU's crop_value: a warp by whole pixels into an
 * image of r's size. */
static int crop(struct spw_gpu_call *c, struct spw_rect r, const uint8_t fill[3])
{
    const struct spw_gpu_image out = {.data = c->tmp.data, .stride = 3 * (size_t)r.w, .w = r.w, .h = r.h};
    struct spw_gpu_warp a = {.src = c->img, .dst = out, .kind = SPW_GPU_WARP_FIXED};
    a.fx[0] = a.fx[4] = INT64_C(1) << 16;       /* X = r.x + x, Y = r.y + y */
    a.fx[2] = (int64_t)r.x * 65536;
    a.fx[5] = (int64_t)r.y * 65536;
    memcpy(a.ink, fill, 3);
    int rc = c->p->warp(c->dev, &a);
    if (rc == 0) {
        c->tmp = (struct spw_gpu_image){.data = c->img.data, .stride = out.stride, .w = r.w, .h = r.h};
        c->img = out;
    }
    return rc;
}

void spw_gpu_op_size(const struct spw_op_spec *op, int *w, int *h)
{
    if (spw_op_def(op->kind)->size == SPW_SIZE_SIZE_FIELD) {
        *w = spw_crop_w(op);
        *h = spw_crop_h(op);
    } else if (spw_op_def(op->kind)->size == SPW_SIZE_BOX) {
        *w = op->width;
        *h = op->height;
    }
}

/* ---- the registry's runs ---- */

static const uint8_t zero_fill[3];

int spw_gpu_op_crop(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    return crop(c, (struct spw_rect){op->left, op->top, op->width, op->height}, zero_fill);
}

int spw_gpu_op_center_crop(struct spw_gpu_call *c)
{
    return crop(c, spw_center_crop_rect(c->op->op, c->img.w, c->img.h), zero_fill);
}

int spw_gpu_op_random_crop(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    if (op->padding_mode != SPW_PAD_CONSTANT)   /* the mirrored pads: the CPU's */
        return -ENOTSUP;
    uint8_t fill[3];
    for (int k = 0; k < 3; k++)
        fill[k] = (uint8_t)(op->fill[k] < 0 ? 0 : op->fill[k] > 255 ? 255 : op->fill[k]);
    return crop(c, spw_random_crop_rect(op, &c->op->rng, c->img.w, c->img.h), fill);
}

int spw_gpu_op_flip(struct spw_gpu_call *c)
{
    bool hf = false, vf = false;
    spw_flip_decision(c->op->op, &c->op->rng, &hf, &vf);
    if (!hf && !vf)
        return 0;
    /* a flip is an axis-aligned warp: source column w - 1 - x, row h - 1 - y */
    const int w = c->img.w, h = c->img.h;
    struct spw_warp_plan plan = {.kind = SPW_WARP_SCALE};
    plan.m[0] = hf ? -1.0 : 1.0;
    plan.m[2] = hf ? (double)w : 0.0;
    plan.m[4] = vf ? -1.0 : 1.0;
    plan.m[5] = vf ? (double)h : 0.0;
    return warp(c, &plan);
}

int spw_gpu_op_rotate(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    struct spw_warp_plan plan;
    if (op->interpolation != SPW_INTERP_NEAREST && op->interpolation != SPW_INTERP_BILINEAR)
        return -ENOTSUP;
    int rc = spw_rotate_warp_plan(c->img.w, c->img.h, op->angle, op->fill, &plan);
    if (rc == 0 && op->interpolation == SPW_INTERP_BILINEAR)
        spw_warp_plan_bilinear(&plan);
    return rc ? rc : warp(c, &plan);
}

int spw_gpu_op_affine(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    struct spw_warp_plan plan;
    if (op->interpolation != SPW_INTERP_NEAREST && op->interpolation != SPW_INTERP_BILINEAR)
        return -ENOTSUP;
    int rc = spw_affine_warp_plan(c->img.w, c->img.h, op->angle, op->translate, op->affine_scale, op->shear, NULL,
                                  op->fill, &plan);
    if (rc == 0 && op->interpolation == SPW_INTERP_BILINEAR)
        spw_warp_plan_bilinear(&plan);
    return rc ? rc : warp(c, &plan);
}

int spw_gpu_op_brightness(struct spw_gpu_call *c) { return brightness(c, c->op->op->factor); }
int spw_gpu_op_contrast(struct spw_gpu_call *c) { return contrast(c, c->op->op->factor); }
int spw_gpu_op_saturation(struct spw_gpu_call *c) { return saturation(c, c->op->op->factor); }
int spw_gpu_op_sharpness(struct spw_gpu_call *c) { return sharpness(c, c->op->op->factor); }
int spw_gpu_op_hue(struct spw_gpu_call *c) { return hue(c, c->op->op->factor); }
int spw_gpu_op_posterize(struct spw_gpu_call *c) { return posterize(c, c->op->op->bits); }
int spw_gpu_op_solarize(struct spw_gpu_call *c) { return solarize(c, c->op->op->threshold); }
int spw_gpu_op_equalize(struct spw_gpu_call *c) { return device_lut(c, SPW_GPU_LUT_EQUALIZE, 0); }
int spw_gpu_op_autocontrast(struct spw_gpu_call *c) { return device_lut(c, SPW_GPU_LUT_AUTOCONTRAST, 0); }
int spw_gpu_op_invert(struct spw_gpu_call *c) { return invert(c); }

int spw_gpu_op_grayscale(struct spw_gpu_call *c)
{
    return saturation(c, 0.0);      /* the blend with convert('L') at factor 0 is that grey, exactly */
}

int spw_gpu_op_random(struct spw_gpu_call *c)
{
    if (!(spw_rng_uniform(&c->op->rng) < c->op->op->p))    /* the CPU's draw (spw_augment_random) */
        return 0;
    const struct spw_op_def *gated = spw_op_def(spw_op_def(c->op->op->kind)->gated);
    return gated->gpu ? gated->gpu(c) : -ENOTSUP;
}

bool spw_gpu_op_has_kernel(const struct spw_op_spec *op)
{
    const struct spw_op_def *d = spw_op_def(op->kind);
    if (op->kind == SPW_OP_RANDOM_CROP && op->padding_mode != SPW_PAD_CONSTANT)
        return false;                           /* a crop of a mirrored pad: the CPU's */
    for (int k = 0; d->gpu && k < op->n_ops; k++)
        if (!spw_gpu_op_has_kernel(&op->ops[k]))
            return false;
    return d->gpu != NULL;
}

int spw_gpu_op_combinator(struct spw_gpu_call *c)
{
    int order[SPW_OP_MAX_NESTED];
    const struct spw_op_call *oc = c->op;
    const int n = spw_combinator_plan(oc->op, &c->op->rng, order);     /* the CPU's plan, the same draws */
    int rc = n < 0 ? -ENOTSUP : 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct spw_op_call sub;
        spw_combinator_sub(oc, order[i], &sub);
        const struct spw_op_def *d = spw_op_def(sub.op->kind);
        struct spw_gpu_call gc = *c;
        gc.op = &sub;
        rc = d->gpu ? d->gpu(&gc) : -ENOTSUP;
        c->img = gc.img;
        c->tmp = gc.tmp;
    }
    return rc;
}

int spw_gpu_op_color_jitter(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    struct spw_color_jitter_draw d;
    int rc = spw_color_jitter_plan(&c->op->rng, spw_augment_jitter_range(op->brightness),
                                   spw_augment_jitter_range(op->contrast), spw_augment_jitter_range(op->saturation),
                                   spw_augment_jitter_range(op->hue), &d);
    for (int i = 0; i < 4 && rc == 0; i++) {
        const int k = d.order[i];
        if (!d.enabled[k])
            continue;
        rc = k == 0 ? brightness(c, d.factor[0]) : k == 1 ? contrast(c, d.factor[1])
           : k == 2 ? saturation(c, d.factor[2]) : hue(c, d.factor[3]);
    }
    return rc;
}

/* One policy step, as spw_augment_op_run applies it (its warps nearest or bilinear, as the policy's). */
static int aug_step(struct spw_gpu_call *c, int op, double m, const double fill[3], int interp)
{
    static const double origin[2] = {0.0, 0.0};
    struct spw_warp_plan plan;
    struct spw_aug_warp w;
    if (!isfinite(m))
        return -EINVAL;
    int rc = spw_augment_warp(op, m, &w);
    if (rc > 0) {
        rc = w.rotate ? spw_rotate_warp_plan(c->img.w, c->img.h, w.angle, fill, &plan)
                      : spw_affine_warp_plan(c->img.w, c->img.h, 0.0, w.translate, 1.0, w.shear,
                                             w.origin ? origin : NULL, fill, &plan);
        if (rc == 0 && interp == SPW_INTERP_BILINEAR)
            spw_warp_plan_bilinear(&plan);
        return rc ? rc : interp != SPW_INTERP_NEAREST && interp != SPW_INTERP_BILINEAR ? -ENOTSUP : warp(c, &plan);
    }
    if (rc < 0)
        return rc;
    switch (op) {
    case -1:
    case SPW_AUG_IDENTITY:
        return 0;
    case SPW_AUG_BRIGHTNESS: return brightness(c, 1.0 + m);
    case SPW_AUG_COLOR: return saturation(c, 1.0 + m);
    case SPW_AUG_CONTRAST: return contrast(c, 1.0 + m);
    case SPW_AUG_SHARPNESS: return sharpness(c, 1.0 + m);
    case SPW_AUG_POSTERIZE: return m >= 0.0 && m < 9.0 ? posterize(c, (int)m) : -EINVAL;
    case SPW_AUG_SOLARIZE: return solarize(c, m);
    case SPW_AUG_AUTOCONTRAST: return device_lut(c, SPW_GPU_LUT_AUTOCONTRAST, 0);
    case SPW_AUG_EQUALIZE: return device_lut(c, SPW_GPU_LUT_EQUALIZE, 0);
    case SPW_AUG_INVERT: return invert(c);
    }
    return -EINVAL;
}

static int aug_steps(struct spw_gpu_call *c, const struct spw_aug_step *steps, int n)
{
    int rc = n < 0 ? n : 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = aug_step(c, steps[i].op, steps[i].magnitude, c->op->op->fill, (int)c->op->op->interpolation);
    return rc;
}

int spw_gpu_op_rand_augment(struct spw_gpu_call *c)
{
    const struct spw_op_spec *op = c->op->op;
    struct spw_aug_step steps[SPW_AUG_MAX_STEPS];
    if (op->num_ops > SPW_AUG_MAX_STEPS)
        return -EINVAL;
    return aug_steps(c, steps, spw_rand_augment_plan(&c->op->rng, op->num_ops, op->magnitude,
                                                     op->num_magnitude_bins, c->img.w, c->img.h, steps));
}

int spw_gpu_op_auto_augment(struct spw_gpu_call *c)
{
    struct spw_aug_step steps[2];
    return aug_steps(c, steps, spw_auto_augment_plan(&c->op->rng, SPW_AUTO_AUGMENT_IMAGENET, c->img.w, c->img.h,
                                                     steps, NULL));
}

int spw_gpu_op_trivial_augment(struct spw_gpu_call *c)
{
    struct spw_aug_step step;
    return aug_steps(c, &step, spw_trivial_augment_plan(&c->op->rng, c->op->op->num_magnitude_bins, c->img.w,
                                                        c->img.h, &step));
}

int spw_gpu_op_random_erasing(struct spw_gpu_call *c)
{
    const int C = c->out.c, H = c->out.h, W = c->out.w;
    struct spw_rect e;
    if (!spw_erasing_rect(c->op->op, &c->op->rng, H, W, &e))
        return 0;
    if (c->hold) {              /* an earlier erasing's values: wait until the device has them */
        int rc = c->p->sync(c->dev);
        if (rc)
            return rc;
        free(c->hold);
        c->hold = NULL;
    }
    const size_t es = spw_dtype_size(c->out.dtype), row = (size_t)e.w * es, plane = row * (size_t)e.h;
    uint8_t *v = malloc(plane * (size_t)C);
    if (!v)
        return -ENOMEM;
    spw_erasing_values(c->op->op, &c->op->rng, C, e, c->out.dtype, v, row, plane);
    c->hold = v;
    int rc = 0;
    for (int ch = 0; ch < C && rc == 0; ch++)
        rc = c->p->upload2d(c->dev, c->out.data + (((size_t)ch * H + (size_t)e.y) * W + (size_t)e.x) * es,
                            (size_t)W * es, v + (size_t)ch * plane, row, row, (size_t)e.h);
    return rc;
}
