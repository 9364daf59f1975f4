/* pipeline/element.c - the per-element runner: the fused decode group (header, crop geometry, ROI decode
 * at a DCT scale, one resample pass, flips and normalize on its output rows) and every other op one by one.
 * Geometry parameters are computed by one function per op whichever path runs it. Thread-safe: all state
 * is per call. */
#include "pipeline/element.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/rng.h"
#include "ops/jpeg.h"
#include "ops/resample.h"
#include "pipeline/audio.h"
#include "pipeline/augment.h"
#include "pipeline/geometry.h"

/* Rows and columns decoded around a region, so libjpeg's edge handling (fancy upsampling at a cropped
 * edge) falls outside what the resampler reads. */
#define ROI_MARGIN 2

void spw_value_free(struct spw_value *v)
{
    if (!v)
        return;
    if (!v->placed) {
        spw_image_free(&v->img);
        spw_tensor_free(&v->t);
    }
    memset(v, 0, sizeof *v);
}

size_t spw_value_bytes(const struct spw_value *v)
{
    return v->is_tensor ? v->t.nbytes : (size_t)v->img.w * (size_t)v->img.h * (size_t)v->img.c;
}

void spw_value_out_shape(const struct spw_value *v, enum spw_layout layout, enum spw_dtype *dt, int *ndim,
                         int64_t *shape)
{
    if (v->is_tensor) {
        *dt = v->t.dtype;
        *ndim = v->t.ndim;
        memcpy(shape, v->t.shape, sizeof(int64_t) * (size_t)v->t.ndim);
        return;
    }
    *dt = SPW_DTYPE_U8;
    *ndim = 3;
    if (layout == SPW_LAYOUT_CHW) {
        shape[0] = v->img.c; shape[1] = v->img.h; shape[2] = v->img.w;
    } else {
        shape[0] = v->img.h; shape[1] = v->img.w; shape[2] = v->img.c;
    }
}

void spw_value_copy_out(const struct spw_value *v, enum spw_layout layout, uint8_t *dst)
{
    if (v->is_tensor) {
        memcpy(dst, v->t.data, v->t.nbytes);
        return;
    }
    const struct spw_image *im = &v->img;
    const size_t row = (size_t)im->w * (size_t)im->c;
    if (layout == SPW_LAYOUT_CHW) {
        const size_t plane = (size_t)im->w * im->h;
        for (int y = 0; y < im->h; y++)
            for (int x = 0; x < im->w; x++)
                for (int c = 0; c < im->c; c++)
                    dst[c * plane + (size_t)y * im->w + x] = im->data[(size_t)y * im->stride + (size_t)x * im->c + c];
        return;
    }
    for (int y = 0; y < im->h; y++)
        memcpy(dst + (size_t)y * row, im->data + (size_t)y * im->stride, row);
}

int spw_element_ctx_init(struct spw_element_ctx *ctx, const struct spw_pipeline_spec *spec)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->spec = spec;
    if (spec->n_ops > 256)
        return -EINVAL;
    ctx->n_groups = spw_fusion_groups(spec, ctx->groups);
    ctx->luts = calloc(spec->n_ops ? (size_t)spec->n_ops : 1, sizeof *ctx->luts);
    ctx->mel_banks = calloc(spec->n_ops ? (size_t)spec->n_ops : 1, sizeof *ctx->mel_banks);
    if (!ctx->luts || !ctx->mel_banks || spw_audio_banks_init(spec, ctx->mel_banks) != 0) {
        spw_element_ctx_destroy(ctx);
        return -ENOMEM;
    }
    static const double zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    for (int i = 0; i < spec->n_ops; i++) {
        if (spec->ops[i].kind == SPW_OP_NORMALIZE)
            spw_normalize_lut_init(&ctx->luts[i], spec->ops[i].mean, spec->ops[i].std);
        else if (spec->ops[i].kind == SPW_OP_TO_TENSOR)
            spw_normalize_lut_init(&ctx->luts[i], zero, one);
    }
    return 0;
}

void spw_element_ctx_destroy(struct spw_element_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->luts);
    ctx->luts = NULL;
    if (ctx->mel_banks)
        spw_audio_banks_free(ctx->spec, ctx->mel_banks);
    free(ctx->mel_banks);
    ctx->mel_banks = NULL;
}

static void op_rng(const struct spw_element_ctx *ctx, uint64_t epoch, int64_t sample, int op, struct spw_rng *r)
{
    spw_rng_init(r, ctx->spec->source.seed, epoch, (uint64_t)sample, (uint32_t)op);
}

/* ---- outputs ---- */

/* Output of a kernel: a new image / tensor, or (dest set: the run's final write) memory from dest. */
static int make_sink_inner(const struct spw_element_ctx *ctx, int norm_op, int w, int h, bool hflip, bool vflip,
                           const struct spw_element_dest *dest, struct spw_value *out, struct spw_sink *s)
{
    memset(out, 0, sizeof *out);
    memset(s, 0, sizeof *s);
    if ((int64_t)w * h > ctx->spec->max_pixels)
        return SPW_ETOOBIG;             /* an op's output obeys the same pixel cap as a decode */
    s->w = w;
    s->h = h;
    s->hflip = hflip;
    s->vflip = vflip;
    if (norm_op >= 0) {
        const struct spw_op_spec *op = &ctx->spec->ops[norm_op];
        int64_t shape[3] = {3, h, w};
        enum spw_dtype dt = op->dtype == SPW_DTYPE_F16 ? SPW_DTYPE_F16 : SPW_DTYPE_F32;
        void *mem = dest && dest->place ? dest->place(dest->opaque, dt, 3, shape) : NULL;
        if (mem) {
            out->placed = true;
            out->t.dtype = dt;
            out->t.ndim = 3;
            memcpy(out->t.shape, shape, sizeof shape);
            out->t.nbytes = (size_t)3 * w * h * spw_dtype_size(dt);
        } else {
            int rc = spw_tensor_alloc(&out->t, dt, 3, shape);
            if (rc)
                return rc;
            mem = out->t.data;
        }
        out->is_tensor = true;
        s->kind = dt == SPW_DTYPE_F16 ? SPW_SINK_F16_CHW : SPW_SINK_F32_CHW;
        s->data = mem;
        s->lut = &ctx->luts[norm_op];
        return 0;
    }
    if (dest && dest->place) {
        bool chw = dest->layout == SPW_LAYOUT_CHW;
        int64_t shape[3] = {chw ? 3 : h, chw ? h : w, chw ? w : 3};
        void *mem = dest->place(dest->opaque, SPW_DTYPE_U8, 3, shape);
        if (mem) {
            out->placed = true;
            out->img = (struct spw_image){.w = w, .h = h, .c = 3, .stride = (size_t)w * 3};
            s->kind = chw ? SPW_SINK_U8_CHW : SPW_SINK_U8_HWC;
            s->data = mem;
            s->stride = (size_t)w * 3;
            return 0;
        }
    }
    int rc = spw_image_alloc(&out->img, w, h, 3);
    if (rc)
        return rc;
    s->kind = SPW_SINK_U8_HWC;
    s->data = out->img.data;
    s->stride = out->img.stride;
    return 0;
}

/* make_sink_inner with the failure explained in err. */
static int make_sink(const struct spw_element_ctx *ctx, int norm_op, int w, int h, bool hflip, bool vflip,
                     const struct spw_element_dest *dest, struct spw_value *out, struct spw_sink *s, char *err,
                     size_t errlen)
{
    int rc = make_sink_inner(ctx, norm_op, w, h, hflip, vflip, dest, out, s);
    if (rc == SPW_ETOOBIG)
        snprintf(err, errlen, "a %dx%d output exceeds max_pixels %lld", w, h, (long long)ctx->spec->max_pixels);
    else if (rc)
        snprintf(err, errlen, "no memory for a %dx%d output: %s", w, h, spw_strerror(rc));
    return rc;
}

/* Copy rect c of img (zero/fill outside it) through the sink. */
static void crop_rows(const struct spw_image *img, int in_x0, int in_y0, struct spw_rect c, const uint8_t fill[3],
                      uint8_t *row, const struct spw_sink *s)
{
    for (int y = 0; y < c.h; y++) {
        int sy = c.y + y - in_y0;
        for (int x = 0; x < c.w; x++) {
            int sx = c.x + x - in_x0;
            if (sy >= 0 && sy < img->h && sx >= 0 && sx < img->w)
                memcpy(row + 3 * x, spw_image_at(img, sx, sy), 3);
            else
                memcpy(row + 3 * x, fill, 3);
        }
        spw_sink_put_row(s, y, row);
    }
}

static int crop_value(const struct spw_element_ctx *ctx, struct spw_value *v, struct spw_rect c, const uint8_t fill[3],
                      const struct spw_element_dest *dest, char *err, size_t errlen)
{
    struct spw_value out;
    struct spw_sink s;
    int rc = make_sink(ctx, -1, c.w, c.h, false, false, dest, &out, &s, err, errlen);
    if (rc)
        return rc;
    uint8_t *row = malloc((size_t)c.w * 3);
    if (!row) {
        spw_value_free(&out);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    crop_rows(&v->img, 0, 0, c, fill, row, &s);
    free(row);
    spw_value_free(v);
    *v = out;
    return 0;
}

static int resample_value(const struct spw_element_ctx *ctx, struct spw_value *v, struct spw_rect c, int ow, int oh,
                          int interp, bool antialias, const struct spw_element_dest *dest, char *err, size_t errlen)
{
    struct spw_resample_plan plan;
    float box[4] = {(float)c.x, (float)c.y, (float)(c.x + c.w), (float)(c.y + c.h)};
    int clip[4] = {c.x, c.y, c.x + c.w, c.y + c.h};
    int rc = spw_resample_plan_init(&plan, box, clip, ow, oh, NULL, interp, antialias);
    if (rc) {
        snprintf(err, errlen, "resample %dx%d -> %dx%d: %s", c.w, c.h, ow, oh, spw_strerror(rc));
        return rc;
    }
    struct spw_value out;
    struct spw_sink s;
    rc = make_sink(ctx, -1, plan.out_w, plan.out_h, false, false, dest, &out, &s, err, errlen);
    if (rc == 0) {
        spw_resample_run(&plan, &v->img, 0, 0, &s);
        spw_value_free(v);
        *v = out;
    }
    spw_resample_plan_free(&plan);
    return rc;
}

/* Pass the image's rows through a sink: mirrored (flips) and/or into a normalized tensor (norm_op >= 0). */
static int rewrite_value(const struct spw_element_ctx *ctx, struct spw_value *v, int norm_op, bool h, bool vert,
                         const struct spw_element_dest *dest, char *err, size_t errlen)
{
    struct spw_value out;
    struct spw_sink s;
    int rc = make_sink(ctx, norm_op, v->img.w, v->img.h, h, vert, dest, &out, &s, err, errlen);
    if (rc)
        return rc;
    for (int y = 0; y < v->img.h; y++)
        spw_sink_put_row(&s, y, v->img.data + (size_t)y * v->img.stride);
    spw_value_free(v);
    *v = out;
    return 0;
}

/* torchvision RandomErasing on a CHW tensor: area/aspect trials; value constant or normal noise. */
static void random_erasing(const struct spw_op_spec *op, struct spw_rng *r, struct spw_tensor *t)
{
    if (!(spw_rng_uniform(r) < op->p))
        return;
    const int C = (int)t->shape[0], H = (int)t->shape[1], W = (int)t->shape[2];
    const double area = (double)H * W, lr0 = log(op->ratio[0]), lr1 = log(op->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double ea = area * spw_rng_range(r, op->scale[0], op->scale[1]);
        double ar = exp(spw_rng_range(r, lr0, lr1));
        int h = (int)nearbyint(sqrt(ea * ar)), w = (int)nearbyint(sqrt(ea / ar));
        if (!(h < H && w < W))
            continue;
        int i = (int)spw_rng_below(r, (uint32_t)(H - h + 1));
        int j = (int)spw_rng_below(r, (uint32_t)(W - w + 1));
        for (int c = 0; c < C; c++)
            for (int y = i; y < i + h; y++)
                for (int x = j; x < j + w; x++) {
                    float val = op->erase_random_value ? (float)spw_rng_normal(r) : (float)op->erase_value[c];
                    size_t idx = ((size_t)c * H + y) * W + x;
                    if (t->dtype == SPW_DTYPE_F16)
                        ((uint16_t *)t->data)[idx] = spw_f32_to_f16(val);
                    else
                        ((float *)t->data)[idx] = val;
                }
        return;
    }
}

/* ---- the fused decode group ---- */

static int is_flip(enum spw_op_kind k)
{
    return k == SPW_OP_HORIZONTAL_FLIP || k == SPW_OP_VERTICAL_FLIP || k == SPW_OP_RANDOM_HORIZONTAL_FLIP ||
           k == SPW_OP_RANDOM_VERTICAL_FLIP;
}

/* Whether flip op i flips, and which way. */
static void flip_decision(const struct spw_element_ctx *ctx, uint64_t epoch, int64_t sample, int i, bool *h,
                          bool *v)
{
    struct spw_rng r;
    op_rng(ctx, epoch, sample, i, &r);
    spw_flip_decision(&ctx->spec->ops[i], &r, h, v);
}

static int run_op(const struct spw_element_ctx *ctx, int i, uint64_t epoch, int64_t sample, struct spw_value *v,
                  const struct spw_element_dest *dest, char *err, size_t errlen);

/* decode_jpeg [+ crop/resize] [+ flips] [+ normalize]: decode only what the output needs. */
static int run_decode_group(const struct spw_element_ctx *ctx, const struct spw_group *g, uint64_t epoch,
                            int64_t sample, const uint8_t *buf, size_t len, struct spw_value *v,
                            const struct spw_element_dest *dest, char *err, size_t errlen)
{
    const struct spw_pipeline_spec *spec = ctx->spec;
    const struct spw_op_spec *ops = spec->ops;
    const int end = g->first + g->count;
    int k = g->first + 1, geo = -1, geo2 = -1, norm = -1;
    if (k < end && !is_flip(ops[k].kind) && ops[k].kind != SPW_OP_NORMALIZE && ops[k].kind != SPW_OP_TO_TENSOR) {
        geo = k++;
        if (ops[geo].kind == SPW_OP_RESIZE && k < end && ops[k].kind == SPW_OP_CENTER_CROP)
            geo2 = k++;
    }
    bool hflip = false, vflip = false;
    for (; k < end && is_flip(ops[k].kind); k++)
        flip_decision(ctx, epoch, sample, k, &hflip, &vflip);
    if (k < end)
        norm = k;

    struct spw_jpeg_info info;
    int rc = spw_jpeg_header(buf, len, spec->max_pixels, &info, err, errlen);
    if (rc)
        return rc;
    const int W = info.w, H = info.h;

    /* The geometry: a crop rectangle c of the full image, then either a plain copy or a resample. */
    struct spw_rect c = {0, 0, W, H};
    int ow = W, oh = H, interp = 1, denom = 1;
    bool resample = false, antialias = true;
    int win[4], *winp = NULL;
    struct spw_rng r;
    if (geo >= 0) {
        const struct spw_op_spec *op = &ops[geo];
        switch (op->kind) {
        case SPW_OP_RANDOM_RESIZED_CROP:
            op_rng(ctx, epoch, sample, geo, &r);
            c = spw_rrc_params(op, &r, W, H);
            ow = spw_crop_w(op);
            oh = spw_crop_h(op);
            resample = true;
            denom = spw_jpeg_pick_denom(c.w, c.h, ow, oh);
            break;
        case SPW_OP_RESIZE:
            spw_resize_size(op, W, H, &ow, &oh);
            resample = true;
            denom = spw_jpeg_pick_denom(W, H, ow, oh);
            if (geo2 >= 0) {
                struct spw_rect cc = spw_center_crop_rect(&ops[geo2], ow, oh);
                if (!spw_rect_inside(cc, ow, oh))
                    goto separate;
                win[0] = cc.x; win[1] = cc.y; win[2] = cc.w; win[3] = cc.h;
                winp = win;
            }
            break;
        case SPW_OP_CENTER_CROP:
            c = spw_center_crop_rect(op, W, H);
            if (!spw_rect_inside(c, W, H))
                goto separate;
            ow = c.w;
            oh = c.h;
            break;
        case SPW_OP_CROP:
            c = (struct spw_rect){op->left, op->top, op->width, op->height};
            if (!spw_rect_inside(c, W, H))
                goto separate;
            ow = c.w;
            oh = c.h;
            break;
        default:
            goto separate;
        }
        if (resample) {
            interp = (int)op->interpolation;
            antialias = op->antialias;
        }
    }

    struct spw_jpeg_region reg = {0};
    struct spw_sink s;
    if (!resample) {
        int mx0 = c.x - ROI_MARGIN < 0 ? 0 : c.x - ROI_MARGIN, my0 = c.y - ROI_MARGIN < 0 ? 0 : c.y - ROI_MARGIN;
        int mx1 = c.x + c.w + ROI_MARGIN > W ? W : c.x + c.w + ROI_MARGIN;
        int my1 = c.y + c.h + ROI_MARGIN > H ? H : c.y + c.h + ROI_MARGIN;
        bool whole = c.x == 0 && c.y == 0 && c.w == W && c.h == H;
        rc = spw_jpeg_decode_region(buf, len, spec->max_pixels, whole ? 0 : mx0, whole ? 0 : my0,
                                    whole ? 0 : mx1 - mx0, whole ? 0 : my1 - my0, 1, &reg, err, errlen);
        if (rc)
            return rc;
        if (whole && !hflip && !vflip && norm < 0 && !dest) {
            memset(v, 0, sizeof *v);            /* the decoded image is the output: no copy */
            v->img = reg.img;
            return 0;
        }
        rc = make_sink(ctx, norm, c.w, c.h, hflip, vflip, dest, v, &s, err, errlen);
        if (rc == 0) {
            static const uint8_t zero[3] = {0, 0, 0};
            uint8_t *row = malloc((size_t)c.w * 3);
            if (!row)
                rc = -ENOMEM;
            else
                crop_rows(&reg.img, reg.x0, reg.y0, c, zero, row, &s);
            free(row);
        }
        spw_image_free(&reg.img);
        return rc;
    }

    /* Resample path: plan in the coordinates of the 1/denom-scaled image, decode the rectangle it reads. */
    const int sw = (W + denom - 1) / denom, sh = (H + denom - 1) / denom;
    float box[4] = {(float)c.x / denom, (float)c.y / denom, (float)(c.x + c.w) / denom,
                    (float)(c.y + c.h) / denom};
    int clip[4] = {c.x / denom, c.y / denom, (c.x + c.w + denom - 1) / denom, (c.y + c.h + denom - 1) / denom};
    if (clip[2] > sw) clip[2] = sw;
    if (clip[3] > sh) clip[3] = sh;
    struct spw_resample_plan plan;
    rc = spw_resample_plan_init(&plan, box, clip, ow, oh, winp, interp, antialias);
    if (rc) {
        snprintf(err, errlen, "resample %dx%d -> %dx%d: %s", c.w, c.h, ow, oh, spw_strerror(rc));
        return rc;
    }
    int rx0 = plan.src_x0 - ROI_MARGIN, ry0 = plan.src_y0 - ROI_MARGIN;
    int rx1 = plan.src_x1 + ROI_MARGIN, ry1 = plan.src_y1 + ROI_MARGIN;
    if (rx0 < 0) rx0 = 0;
    if (ry0 < 0) ry0 = 0;
    if (rx1 > sw) rx1 = sw;
    if (ry1 > sh) ry1 = sh;
    rc = spw_jpeg_decode_region(buf, len, spec->max_pixels, rx0 * denom, ry0 * denom, (rx1 - rx0) * denom,
                                (ry1 - ry0) * denom, denom, &reg, err, errlen);
    if (rc == 0) {
        rc = make_sink(ctx, norm, plan.out_w, plan.out_h, hflip, vflip, dest, v, &s, err, errlen);
        if (rc == 0)
            spw_resample_run(&plan, &reg.img, reg.x0, reg.y0, &s);
    }
    spw_image_free(&reg.img);
    spw_resample_plan_free(&plan);
    return rc;

separate:
    /* Padding crops: decode everything, then run the group's ops one by one (same op definitions). */
    rc = spw_jpeg_decode_region(buf, len, spec->max_pixels, 0, 0, 0, 0, 1, &reg, err, errlen);
    if (rc)
        return rc;
    v->is_tensor = false;
    v->img = reg.img;
    for (int i = g->first + 1; i < end && rc == 0; i++)
        rc = run_op(ctx, i, epoch, sample, v, i == end - 1 ? dest : NULL, err, errlen);
    return rc;
}

/* ---- ops one by one ---- */

static int run_op(const struct spw_element_ctx *ctx, int i, uint64_t epoch, int64_t sample, struct spw_value *v,
                  const struct spw_element_dest *dest, char *err, size_t errlen)
{
    const struct spw_op_spec *op = &ctx->spec->ops[i];
    struct spw_rng r;
    op_rng(ctx, epoch, sample, i, &r);
    static const uint8_t zero[3] = {0, 0, 0};
    if (spw_audio_op(op->kind))
        return spw_audio_run_op(ctx->spec, ctx->mel_banks, i, &r, v, err, errlen);
    bool needs_image = op->kind != SPW_OP_RANDOM_ERASING;
    if (needs_image && v->is_tensor) {
        snprintf(err, errlen, "ops[%d] %s needs an image but got a tensor", i, spw_op_name(op->kind));
        return SPW_EUNSUPPORTED;
    }
    switch (op->kind) {
    case SPW_OP_DECODE_JPEG:
        snprintf(err, errlen, "ops[%d] decode_jpeg can only be the first op", i);
        return SPW_EUNSUPPORTED;
    case SPW_OP_RANDOM_RESIZED_CROP: {
        struct spw_rect c = spw_rrc_params(op, &r, v->img.w, v->img.h);
        return resample_value(ctx, v, c, spw_crop_w(op), spw_crop_h(op), (int)op->interpolation, op->antialias,
                              dest, err, errlen);
    }
    case SPW_OP_RESIZE: {
        int ow, oh;
        spw_resize_size(op, v->img.w, v->img.h, &ow, &oh);
        struct spw_rect c = {0, 0, v->img.w, v->img.h};
        return resample_value(ctx, v, c, ow, oh, (int)op->interpolation, op->antialias, dest, err, errlen);
    }
    case SPW_OP_CENTER_CROP:
        return crop_value(ctx, v, spw_center_crop_rect(op, v->img.w, v->img.h), zero, dest, err, errlen);
    case SPW_OP_CROP:
        return crop_value(ctx, v, (struct spw_rect){op->left, op->top, op->width, op->height}, zero, dest, err,
                          errlen);
    case SPW_OP_RANDOM_CROP: {
        uint8_t fill[3];
        for (int c = 0; c < 3; c++)
            fill[c] = (uint8_t)(op->fill[c] < 0 ? 0 : op->fill[c] > 255 ? 255 : op->fill[c]);
        return crop_value(ctx, v, spw_random_crop_rect(op, &r, v->img.w, v->img.h), fill, dest, err, errlen);
    }
    case SPW_OP_HORIZONTAL_FLIP:
    case SPW_OP_VERTICAL_FLIP:
    case SPW_OP_RANDOM_HORIZONTAL_FLIP:
    case SPW_OP_RANDOM_VERTICAL_FLIP: {
        bool h = false, vert = false;
        flip_decision(ctx, epoch, sample, i, &h, &vert);
        return (h || vert) ? rewrite_value(ctx, v, -1, h, vert, dest, err, errlen) : 0;
    }
    case SPW_OP_NORMALIZE:
    case SPW_OP_TO_TENSOR:
        return rewrite_value(ctx, v, i, false, false, dest, err, errlen);
    case SPW_OP_RANDOM_ERASING:
        if (!v->is_tensor) {
            snprintf(err, errlen, "ops[%d] random_erasing needs a tensor (put it after normalize)", i);
            return SPW_EUNSUPPORTED;
        }
        random_erasing(op, &r, &v->t);
        return 0;
    default:
        return spw_augment_run(op, i, &r, &v->img, err, errlen);
    }
}

int spw_element_run(const struct spw_element_ctx *ctx, int g_from, int g_to, uint64_t epoch, int64_t sample,
                    const uint8_t *buf, size_t len, struct spw_value *v, struct spw_element_stats *stats,
                    const struct spw_element_dest *dest, char *err, size_t errlen)
{
    if (g_to != ctx->n_groups)
        dest = NULL;                    /* only the pipeline's last write can go to the destination */
    const int last_op = ctx->spec->n_ops - 1;
    int rc = 0;
    for (int gi = g_from; gi < g_to && rc == 0; gi++) {
        const struct spw_group *g = &ctx->groups[gi];
        if (g->kind == SPW_GROUP_DECODE) {
            int64_t t0 = stats ? spw_now_ns() : 0;
            if (ctx->spec->ops[g->first].kind == SPW_OP_DECODE_WAV) {
                rc = spw_audio_decode(ctx->spec, buf, len, v, err, errlen);
                for (int i = g->first + 1; i < g->first + g->count && rc == 0; i++)
                    if ((rc = run_op(ctx, i, epoch, sample, v, NULL, err, errlen)) == SPW_AUDIO_RAN_NEXT)
                        rc = 0, i++;
            } else {
                rc = run_decode_group(ctx, g, epoch, sample, buf, len, v, gi == ctx->n_groups - 1 ? dest : NULL,
                                      err, errlen);
            }
            if (stats && rc == 0) {
                stats->ns[g->first] += spw_now_ns() - t0;
                stats->out_bytes[g->first] += (int64_t)spw_value_bytes(v);
                stats->ran[g->first] = true;
            }
            continue;
        }
        for (int i = g->first; i < g->first + g->count && rc == 0; i++) {
            int64_t t0 = stats ? spw_now_ns() : 0;
            rc = run_op(ctx, i, epoch, sample, v, i == last_op ? dest : NULL, err, errlen);
            const bool ran_next = rc == SPW_AUDIO_RAN_NEXT;   /* stft+mel as one: reported on the stft */
            rc = ran_next ? 0 : rc;
            if (stats && rc == 0) {
                stats->ns[i] += spw_now_ns() - t0;
                stats->out_bytes[i] += (int64_t)spw_value_bytes(v);
                stats->ran[i] = true;
            }
            i += ran_next;
        }
    }
    if (rc)
        spw_value_free(v);
    return rc;
}
