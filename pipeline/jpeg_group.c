/* pipeline/jpeg_group.c - decode_jpeg's and decode_image's run: the whole fusion group at once. For a JPEG
 * the header gives the size, the crop or resize after it gives the rectangle the output needs; only that
 * region is decoded (at a DCT scale when it will be shrunk), resampled in one pass, and its rows go through
 * one sink that applies the flips and normalize. PNG and WebP (decode_image), and a JPEG that exif_transpose
 * turns, are decoded whole first and then go through the same geometry, resample and sink. A crop that pads
 * decodes everything and leaves the rest of the group to the op-by-op path. Thread-safe: all state is per
 * call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "ops/image_decode.h"
#include "ops/jpeg.h"
#include "ops/resample.h"
#include "pipeline/image_ops.h"

/* Rows and columns decoded around a region, so libjpeg's edge handling (fancy upsampling at a cropped
 * edge) falls outside what the resampler reads. */
#define ROI_MARGIN 2

static unsigned fuse(const struct spw_op_spec *ops, int k)
{
    return spw_op_def(ops[k].kind)->fuse;
}

/* The rectangle (x, y, w, h) of the full image at 1/denom into w->reg (w = 0: all of it), unless the whole
 * image is in w->reg already (decoded). */
static int decode_rect(struct spw_jpeg_work *w, bool decoded, const uint8_t *buf, size_t len, int64_t max_pixels,
                       int x, int y, int rw, int rh, int denom, char *err, size_t errlen)
{
    if (decoded)
        return 0;
    return spw_jpeg_decode_region(buf, len, max_pixels, x, y, rw, rh, denom, &w->reg, err, errlen);
}

/* decode_jpeg | decode_image [+ crop/resize] [+ flips] [+ normalize]: decode only what the output needs. */
int spw_jpeg_group_prepare(struct spw_op_call *call, const struct spw_group *g, const uint8_t *buf, size_t len,
                           struct spw_jpeg_work *w)
{
    const struct spw_element_ctx *ctx = call->ctx;
    char *err = call->err;
    const size_t errlen = call->errlen;
    const struct spw_pipeline_spec *spec = ctx->spec;
    const struct spw_op_spec *ops = spec->ops;
    const int end = g->first + g->count;
    int k = g->first + 1, geo = -1, geo2 = -1;
    memset(w, 0, sizeof *w);
    w->norm = -1;
    if (k < end && (fuse(ops, k) & (SPW_FUSE_CROP | SPW_FUSE_RESIZE))) {
        geo = k++;
        if ((fuse(ops, geo) & SPW_FUSE_RESIZE) && k < end && (fuse(ops, k) & SPW_FUSE_WINDOW))
            geo2 = k++;
    }
    struct spw_rng r;
    for (; k < end && (fuse(ops, k) & SPW_FUSE_FLIP); k++) {
        spw_element_rng(ctx, call->epoch, call->sample, k, &r);
        spw_flip_decision(&ops[k], &r, &w->hflip, &w->vflip);
    }
    if (k < end)
        w->norm = k;

    /* A JPEG that stays as stored keeps the region-of-interest path; anything else is decoded whole (and
     * turned) here, and the region below is all of it at scale 1. */
    const struct spw_op_spec *dop = &ops[g->first];
    const enum spw_image_format fmt = dop->kind == SPW_OP_DECODE_IMAGE ? spw_image_sniff(buf, len) : SPW_IMAGE_JPEG;
    const bool roi = fmt == SPW_IMAGE_JPEG && (!dop->exif_transpose || spw_exif_orientation(buf, len, fmt) == 1);
    int rc, W, H;
    if (roi) {
        struct spw_jpeg_info info;
        if ((rc = spw_jpeg_header(buf, len, spec->max_pixels, &info, err, errlen)))
            return rc;
        W = info.w;
        H = info.h;
    } else {
        if ((rc = spw_image_decode(buf, len, spec->max_pixels, dop->exif_transpose, &w->reg.img, err, errlen)))
            return rc;
        w->reg.denom = 1;
        W = w->reg.img.w;
        H = w->reg.img.h;
    }
    const bool decoded = !roi;

    /* The geometry: a crop rectangle c of the full image, then either a plain copy or a resample. */
    struct spw_rect c = {0, 0, W, H};
    int ow = W, oh = H, interp = 1, denom = 1;
    bool resample = false, antialias = true;
    int win[4], *winp = NULL;
    if (geo >= 0) {
        const struct spw_op_spec *op = &ops[geo];
        switch (op->kind) {
        case SPW_OP_RANDOM_RESIZED_CROP:
            spw_element_rng(ctx, call->epoch, call->sample, geo, &r);
            c = spw_rrc_params(op, &r, W, H);
            ow = spw_crop_w(op);
            oh = spw_crop_h(op);
            resample = true;
            denom = decoded ? 1 : spw_jpeg_pick_denom(c.w, c.h, ow, oh);
            break;
        case SPW_OP_RESIZE:
            spw_resize_size(op, W, H, &ow, &oh);
            resample = true;
            denom = decoded ? 1 : spw_jpeg_pick_denom(W, H, ow, oh);
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

    if (!resample) {
        int mx0 = c.x - ROI_MARGIN < 0 ? 0 : c.x - ROI_MARGIN, my0 = c.y - ROI_MARGIN < 0 ? 0 : c.y - ROI_MARGIN;
        int mx1 = c.x + c.w + ROI_MARGIN > W ? W : c.x + c.w + ROI_MARGIN;
        int my1 = c.y + c.h + ROI_MARGIN > H ? H : c.y + c.h + ROI_MARGIN;
        bool whole = c.x == 0 && c.y == 0 && c.w == W && c.h == H;
        w->how = SPW_JPEG_CROP;
        w->crop = c;
        w->out_w = c.w;
        w->out_h = c.h;
        return decode_rect(w, decoded, buf, len, spec->max_pixels, whole ? 0 : mx0, whole ? 0 : my0,
                           whole ? 0 : mx1 - mx0, whole ? 0 : my1 - my0, 1, err, errlen);
    }

    /* Resample path: plan in the coordinates of the 1/denom-scaled image, decode the rectangle it reads. */
    const int sw = (W + denom - 1) / denom, sh = (H + denom - 1) / denom;
    float box[4] = {(float)c.x / denom, (float)c.y / denom, (float)(c.x + c.w) / denom,
                    (float)(c.y + c.h) / denom};
    int clip[4] = {c.x / denom, c.y / denom, (c.x + c.w + denom - 1) / denom, (c.y + c.h + denom - 1) / denom};
    if (clip[2] > sw) clip[2] = sw;
    if (clip[3] > sh) clip[3] = sh;
    rc = spw_resample_plan_init(&w->plan, box, clip, ow, oh, winp, interp, antialias);
    if (rc) {
        snprintf(err, errlen, "resample %dx%d -> %dx%d: %s", c.w, c.h, ow, oh, spw_strerror(rc));
        return rc;
    }
    w->how = SPW_JPEG_RESAMPLE;
    w->out_w = w->plan.out_w;
    w->out_h = w->plan.out_h;
    int rx0 = w->plan.src_x0 - ROI_MARGIN, ry0 = w->plan.src_y0 - ROI_MARGIN;
    int rx1 = w->plan.src_x1 + ROI_MARGIN, ry1 = w->plan.src_y1 + ROI_MARGIN;
    if (rx0 < 0) rx0 = 0;
    if (ry0 < 0) ry0 = 0;
    if (rx1 > sw) rx1 = sw;
    if (ry1 > sh) ry1 = sh;
    return decode_rect(w, decoded, buf, len, spec->max_pixels, rx0 * denom, ry0 * denom, (rx1 - rx0) * denom,
                       (ry1 - ry0) * denom, denom, err, errlen);

separate:
    /* A crop that pads: decode everything; the group's other ops run one by one (same op definitions). */
    w->how = SPW_JPEG_SEPARATE;
    return decode_rect(w, decoded, buf, len, spec->max_pixels, 0, 0, 0, 0, 1, err, errlen);
}

int spw_jpeg_group_finish(struct spw_op_call *call, const struct spw_group *g, struct spw_jpeg_work *w,
                          struct spw_value *v, int *consumed)
{
    const struct spw_element_ctx *ctx = call->ctx;
    const struct spw_element_dest *dest = call->dest;
    struct spw_sink s;
    int rc = 0;
    *consumed = g->count;
    memset(v, 0, sizeof *v);
    switch (w->how) {
    case SPW_JPEG_SEPARATE:
        *consumed = 1;
        v->img = w->reg.img;                    /* the image moves into the value */
        w->reg.img = (struct spw_image){0};
        return 0;
    case SPW_JPEG_CROP: {
        const struct spw_rect c = w->crop;
        const bool whole = c.x == 0 && c.y == 0 && c.w == w->reg.img.w && c.h == w->reg.img.h;
        if (whole && !w->hflip && !w->vflip && w->norm < 0 && !dest) {
            v->img = w->reg.img;                /* the decoded image is the output: no copy */
            w->reg.img = (struct spw_image){0};
            return 0;
        }
        rc = spw_image_sink(ctx, w->norm, c.w, c.h, w->hflip, w->vflip, dest, v, &s, call->err, call->errlen);
        if (rc == 0) {
            static const uint8_t zero[3] = {0, 0, 0};
            uint8_t *row = malloc((size_t)c.w * 3);
            if (!row)
                rc = -ENOMEM;
            else
                spw_image_crop_rows(&w->reg.img, w->reg.x0, w->reg.y0, c, zero, row, &s);
            free(row);
        }
        return rc;
    }
    case SPW_JPEG_RESAMPLE:
        rc = spw_image_sink(ctx, w->norm, w->plan.out_w, w->plan.out_h, w->hflip, w->vflip, dest, v, &s, call->err,
                            call->errlen);
        if (rc == 0)
            spw_resample_run(&w->plan, &w->reg.img, w->reg.x0, w->reg.y0, &s);
        return rc;
    }
    return SPW_EINTERNAL;
}

void spw_jpeg_work_free(struct spw_jpeg_work *w)
{
    spw_image_free(&w->reg.img);
    if (w->how == SPW_JPEG_RESAMPLE)
        spw_resample_plan_free(&w->plan);
    memset(w, 0, sizeof *w);
}

int spw_jpeg_group_decode(struct spw_op_call *call, const struct spw_group *g, const uint8_t *buf, size_t len,
                          struct spw_value *v, int *consumed)
{
    struct spw_jpeg_work w;
    int rc = spw_jpeg_group_prepare(call, g, buf, len, &w);
    if (rc == 0)
        rc = spw_jpeg_group_finish(call, g, &w, v, consumed);
    spw_jpeg_work_free(&w);
    return rc;
}
