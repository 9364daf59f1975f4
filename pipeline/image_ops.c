/* pipeline/image_ops.c - the image geometry ops, normalize / to_tensor and random_erasing on element values
 * (see image_ops.h), and the sinks every image output goes through. Thread-safe: all state is per call. */
#include "pipeline/image_ops.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "ops/pad.h"
#include "ops/resample.h"

/* ---- outputs ---- */

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
        const int channels = ctx->out_channels == 1 ? 1 : 3;
        int64_t shape[3] = {channels, h, w};
        enum spw_dtype dt = op->dtype == SPW_DTYPE_F16 ? SPW_DTYPE_F16 : SPW_DTYPE_F32;
        void *mem = dest && dest->place ? dest->place(dest->opaque, dt, 3, shape) : NULL;
        s->grey = channels == 1;
        if (mem) {
            out->placed = true;
            out->t.data = mem;          /* not owned: spw_value_free leaves it */
            out->t.dtype = dt;
            out->t.ndim = 3;
            memcpy(out->t.shape, shape, sizeof shape);
            out->t.nbytes = (size_t)channels * w * h * spw_dtype_size(dt);
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
    if (dest && dest->place) {         /* the element's output, into its batch */
        const bool chw = dest->layout == SPW_LAYOUT_CHW;
        const int ch = ctx->out_channels == 1 ? 1 : 3;
        int64_t shape[3] = {chw ? ch : h, chw ? h : w, chw ? w : ch};
        void *mem = dest->place(dest->opaque, SPW_DTYPE_U8, 3, shape);
        if (mem) {
            out->placed = true;
            out->img = (struct spw_image){.w = w, .h = h, .c = ch, .stride = (size_t)w * ch,
                                          .data = chw ? NULL : mem};    /* an HWC view; not owned */
            s->kind = chw ? SPW_SINK_U8_CHW : SPW_SINK_U8_HWC;
            s->data = mem;
            s->stride = (size_t)w * ch;
            s->grey = ch == 1;
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

int spw_image_sink(const struct spw_element_ctx *ctx, int norm_op, int w, int h, bool hflip, bool vflip,
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

static void fill_pixels(uint8_t *dst, int n, const uint8_t fill[3])
{
    for (int x = 0; x < n; x++)
        memcpy(dst + 3 * x, fill, 3);
}

void spw_image_crop_rows(const struct spw_image *img, int in_x0, int in_y0, struct spw_rect c, const uint8_t fill[3],
                      uint8_t *row, const struct spw_sink *s)
{
    /* the columns of the crop inside the image: [x0, x1) of the row, the rest fill */
    const int sx0 = c.x - in_x0;
    const int x0 = sx0 < 0 ? (-sx0 < c.w ? -sx0 : c.w) : 0;
    int x1 = img->w - sx0;
    x1 = x1 < x0 ? x0 : x1 > c.w ? c.w : x1;
    for (int y = 0; y < c.h; y++) {
        const int sy = c.y + y - in_y0;
        if (sy < 0 || sy >= img->h) {
            fill_pixels(row, c.w, fill);
        } else {
            fill_pixels(row, x0, fill);
            if (x1 > x0)
                memcpy(row + 3 * (size_t)x0, spw_image_at(img, sx0 + x0, sy), 3 * (size_t)(x1 - x0));
            fill_pixels(row + 3 * (size_t)x1, c.w - x1, fill);
        }
        spw_sink_put_row(s, y, row);
    }
}

static int crop_value(const struct spw_element_ctx *ctx, struct spw_value *v, struct spw_rect c, const uint8_t fill[3],
                      const struct spw_element_dest *dest, char *err, size_t errlen)
{
    struct spw_value out;
    struct spw_sink s;
    int rc = spw_image_sink(ctx, -1, c.w, c.h, false, false, dest, &out, &s, err, errlen);
    if (rc)
        return rc;
    uint8_t *row = malloc((size_t)c.w * 3);
    if (!row) {
        spw_value_free(&out);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    spw_image_crop_rows(&v->img, 0, 0, c, fill, row, &s);
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
    rc = spw_image_sink(ctx, -1, plan.out_w, plan.out_h, false, false, dest, &out, &s, err, errlen);
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
    int rc = spw_image_sink(ctx, norm_op, v->img.w, v->img.h, h, vert, dest, &out, &s, err, errlen);
    if (rc)
        return rc;
    for (int y = 0; y < v->img.h; y++)
        spw_sink_put_row(&s, y, v->img.data + (size_t)y * v->img.stride);
    spw_value_free(v);
    *v = out;
    return 0;
}

bool spw_erasing_rect(const struct spw_op_spec *op, struct spw_rng *r, int H, int W, struct spw_rect *rect)
{
    if (!(spw_rng_uniform(r) < op->p))
        return false;
    const double area = (double)H * W, lr0 = log(op->ratio[0]), lr1 = log(op->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double ea = area * spw_rng_range(r, op->scale[0], op->scale[1]);
        double ar = exp(spw_rng_range(r, lr0, lr1));
        int h = (int)nearbyint(sqrt(ea * ar)), w = (int)nearbyint(sqrt(ea / ar));
        if (!(h < H && w < W))
            continue;
        rect->y = (int)spw_rng_below(r, (uint32_t)(H - h + 1));
        rect->x = (int)spw_rng_below(r, (uint32_t)(W - w + 1));
        rect->w = w;
        rect->h = h;
        return true;
    }
    return false;
}

void spw_erasing_values(const struct spw_op_spec *op, struct spw_rng *r, int C, struct spw_rect rect,
                        enum spw_dtype dt, uint8_t *dst, size_t row_pitch, size_t plane_pitch)
{
    for (int c = 0; c < C; c++)
        for (int y = 0; y < rect.h; y++) {
            uint8_t *row = dst + (size_t)c * plane_pitch + (size_t)y * row_pitch;
            for (int x = 0; x < rect.w; x++) {
                float val = op->erase_random_value ? (float)spw_rng_normal(r) : (float)op->erase_value[c];
                if (dt == SPW_DTYPE_F16)
                    ((uint16_t *)(void *)row)[x] = spw_f32_to_f16(val);
                else
                    ((float *)(void *)row)[x] = val;
            }
        }
}

/* torchvision RandomErasing on a CHW tensor: area/aspect trials; value constant or normal noise. */
static void random_erasing(const struct spw_op_spec *op, struct spw_rng *r, struct spw_tensor *t)
{
    const int C = (int)t->shape[0], H = (int)t->shape[1], W = (int)t->shape[2];
    struct spw_rect e;
    if (!spw_erasing_rect(op, r, H, W, &e))
        return;
    const size_t es = spw_dtype_size(t->dtype);
    spw_erasing_values(op, r, C, e, t->dtype, (uint8_t *)t->data + ((size_t)e.y * W + e.x) * es, (size_t)W * es,
                       (size_t)H * W * es);
}

/* ---- the registry's runs ---- */

static const uint8_t zero_fill[3] = {0, 0, 0};

int spw_image_op_random_resized_crop(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    struct spw_rect r = spw_rrc_params(op, &c->rng, v->img.w, v->img.h);
    return resample_value(c->ctx, v, r, spw_crop_w(op), spw_crop_h(op), (int)op->interpolation, op->antialias,
                          c->dest, c->err, c->errlen);
}

int spw_image_op_resize(struct spw_op_call *c, struct spw_value *v)
{
    int ow, oh;
    spw_resize_size(c->op, v->img.w, v->img.h, &ow, &oh);
    struct spw_rect r = {0, 0, v->img.w, v->img.h};
    return resample_value(c->ctx, v, r, ow, oh, (int)c->op->interpolation, c->op->antialias, c->dest, c->err,
                          c->errlen);
}

int spw_image_op_random_resize(struct spw_op_call *c, struct spw_value *v)
{
    int ow, oh;
    spw_random_resize_size(c->op, spw_random_resize_draw(c->op, &c->rng), v->img.w, v->img.h, &ow, &oh);
    struct spw_rect r = {0, 0, v->img.w, v->img.h};
    return resample_value(c->ctx, v, r, ow, oh, (int)c->op->interpolation, c->op->antialias, c->dest, c->err,
                          c->errlen);
}

int spw_image_op_center_crop(struct spw_op_call *c, struct spw_value *v)
{
    return crop_value(c->ctx, v, spw_center_crop_rect(c->op, v->img.w, v->img.h), zero_fill, c->dest, c->err,
                      c->errlen);
}

int spw_image_op_crop(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    return crop_value(c->ctx, v, (struct spw_rect){op->left, op->top, op->width, op->height}, zero_fill, c->dest,
                      c->err, c->errlen);
}

static void op_fill(const struct spw_op_spec *op, uint8_t fill[3])
{
    for (int k = 0; k < 3; k++)
        fill[k] = (uint8_t)(op->fill[k] < 0 ? 0 : op->fill[k] > 255 ? 255 : op->fill[k]);
}

/* v's image padded by pad (left, top, right, bottom) under mode: a new image (F.pad). */
static int pad_value(struct spw_value *v, const int pad[4], enum spw_pad_mode mode, const uint8_t fill[3],
                     char *err, size_t errlen)
{
    if (!pad[0] && !pad[1] && !pad[2] && !pad[3])
        return 0;
    const int64_t w = (int64_t)v->img.w + pad[0] + pad[2], h = (int64_t)v->img.h + pad[1] + pad[3];
    struct spw_image out = {0};
    int rc = w > 65535 || h > 65535 ? SPW_ETOOBIG : spw_image_alloc(&out, (int)w, (int)h, 3);
    if (rc == 0)
        rc = spw_pad_run(&v->img, pad, mode, fill, &out);
    if (rc) {
        snprintf(err, errlen, "pad %dx%d by [%d, %d, %d, %d]: %s", v->img.w, v->img.h, pad[0], pad[1], pad[2],
                 pad[3], spw_strerror(rc));
        spw_image_free(&out);
        return rc;
    }
    spw_value_free(v);
    v->img = out;
    return 0;
}

int spw_image_op_pad(struct spw_op_call *c, struct spw_value *v)
{
    uint8_t fill[3];
    op_fill(c->op, fill);
    return pad_value(v, c->op->padding, c->op->padding_mode, fill, c->err, c->errlen);
}

int spw_image_op_pad_if_smaller(struct spw_op_call *c, struct spw_value *v)
{
    uint8_t fill[3];
    int ow, oh;
    op_fill(c->op, fill);
    spw_pad_if_smaller_size(c->op, v->img.w, v->img.h, &ow, &oh);
    const int pad[4] = {0, 0, ow - v->img.w, oh - v->img.h};
    return pad_value(v, pad, SPW_PAD_CONSTANT, fill, c->err, c->errlen);
}

int spw_resize_crop_span(const struct spw_pipeline_spec *spec, int i, int end)
{
    const struct spw_op_spec *ops = spec->ops;
    if (ops[i].kind != SPW_OP_RANDOM_RESIZE && ops[i].kind != SPW_OP_RANDOM_SHORTEST_SIZE)
        return 0;
    int k = i + 1;
    if (k < end && (ops[k].kind == SPW_OP_RANDOM_HORIZONTAL_FLIP || ops[k].kind == SPW_OP_HORIZONTAL_FLIP ||
                    ops[k].kind == SPW_OP_RANDOM_VERTICAL_FLIP || ops[k].kind == SPW_OP_VERTICAL_FLIP))
        k++;
    if (k < end && ops[k].kind == SPW_OP_PAD_IF_SMALLER)
        k++;
    const struct spw_op_spec *c = k < end ? &ops[k] : NULL;
    if (c && c->kind == SPW_OP_RANDOM_CROP && !c->pad_if_needed && c->padding_mode == SPW_PAD_CONSTANT &&
        !c->padding[0] && !c->padding[1] && !c->padding[2] && !c->padding[3])
        return k - i;
    return k - 1 - i;           /* without a crop: the flip and the padding, if any */
}

int spw_image_resize_crop(const struct spw_element_ctx *ctx, struct spw_value *v, const struct spw_resize_crop *f,
                          const struct spw_element_dest *dest, char *err, size_t errlen)
{
    const int W = v->img.w, H = v->img.h;
    const struct spw_rect c = f->crop;
    if ((int64_t)f->ow * f->oh > ctx->spec->max_pixels)     /* as the resize alone: its output obeys the cap */
        return spw_fail(err, errlen, SPW_ETOOBIG, "a %dx%d output exceeds max_pixels %lld", f->ow, f->oh,
                        (long long)ctx->spec->max_pixels);
    /* the crop's part inside the resized image (the rest is padding): vw x vh at its top-left */
    int vw = f->ow - c.x, vh = f->oh - c.y;
    vw = vw < 0 ? 0 : vw > c.w ? c.w : vw;
    vh = vh < 0 ? 0 : vh > c.h ? c.h : vh;
    const bool padded = vw < c.w || vh < c.h;
    struct spw_value out = {0};
    struct spw_sink s;
    int rc;
    if (!padded) {          /* the resample writes the output itself: the image, or the tensor into dest */
        rc = spw_image_sink(ctx, f->tensor_op, c.w, c.h, f->hflip, f->vflip,
                            f->tensor_op >= 0 ? dest : NULL, &out, &s, err, errlen);
    } else {                /* the image with its padding, then the tensor (if any) from it */
        rc = spw_image_alloc(&out.img, c.w, c.h, 3) ? spw_fail(err, errlen, -ENOMEM, "no memory for a %dx%d output",
                                                              c.w, c.h) : 0;
        for (int y = 0; rc == 0 && y < c.h; y++)
            fill_pixels(spw_image_at(&out.img, 0, y), c.w, f->fill);
        s = (struct spw_sink){.kind = SPW_SINK_U8_HWC, .w = vw, .h = vh, .data = out.img.data,
                              .stride = out.img.stride, .hflip = f->hflip, .vflip = f->vflip};
    }
    if (rc)
        return rc;
    if (vw > 0 && vh > 0) {
        /* the window of the resized image the crop shows, mirrored back where a flip turned it */
        const int win[4] = {f->hflip ? f->ow - c.x - vw : c.x, f->vflip ? f->oh - c.y - vh : c.y, vw, vh};
        const float box[4] = {0, 0, (float)W, (float)H};
        const int clip[4] = {0, 0, W, H};
        struct spw_resample_plan plan;
        if ((rc = spw_resample_plan_init(&plan, box, clip, f->ow, f->oh, win, f->interp, f->antialias))) {
            spw_value_free(&out);
            return spw_fail(err, errlen, rc, "resample %dx%d -> %dx%d: %s", W, H, f->ow, f->oh, spw_strerror(rc));
        }
        spw_resample_run(&plan, &v->img, 0, 0, &s);
        spw_resample_plan_free(&plan);
    }
    spw_value_free(v);
    *v = out;
    return padded && f->tensor_op >= 0 ? rewrite_value(ctx, v, f->tensor_op, false, false, dest, err, errlen) : 0;
}

int spw_image_op_random_crop(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    uint8_t fill[3];
    op_fill(op, fill);
    struct spw_rect r = spw_random_crop_rect(op, &c->rng, v->img.w, v->img.h);
    if (op->padding_mode == SPW_PAD_CONSTANT)     /* the fill where the crop leaves the image: no copy */
        return crop_value(c->ctx, v, r, fill, c->dest, c->err, c->errlen);
    /* RandomCrop.forward's pads, one F.pad each (a mirror of a mirror is not one mirror): padding, then
     * pad_if_needed's [tw - w, 0] and [0, th - h]; then the crop, at r moved into the padded image */
    const int tw = spw_crop_w(op), th = spw_crop_h(op);
    int rc = pad_value(v, op->padding, op->padding_mode, fill, c->err, c->errlen);
    r.x += op->padding[0], r.y += op->padding[1];
    if (rc == 0 && op->pad_if_needed && v->img.w < tw) {
        const int dx = tw - v->img.w, p[4] = {dx, 0, dx, 0};
        rc = pad_value(v, p, op->padding_mode, fill, c->err, c->errlen);
        r.x += dx;
    }
    if (rc == 0 && op->pad_if_needed && v->img.h < th) {
        const int dy = th - v->img.h, p[4] = {0, dy, 0, dy};
        rc = pad_value(v, p, op->padding_mode, fill, c->err, c->errlen);
        r.y += dy;
    }
    return rc ? rc : crop_value(c->ctx, v, r, fill, c->dest, c->err, c->errlen);
}

int spw_image_op_flip(struct spw_op_call *c, struct spw_value *v)
{
    bool h = false, vert = false;
    spw_flip_decision(c->op, &c->rng, &h, &vert);
    return (h || vert) ? rewrite_value(c->ctx, v, -1, h, vert, c->dest, c->err, c->errlen) : 0;
}

int spw_image_op_to_tensor(struct spw_op_call *c, struct spw_value *v)
{
    return rewrite_value(c->ctx, v, c->index, false, false, c->dest, c->err, c->errlen);
}

int spw_image_op_random_erasing(struct spw_op_call *c, struct spw_value *v)
{
    random_erasing(c->op, &c->rng, &v->t);
    return 0;
}
