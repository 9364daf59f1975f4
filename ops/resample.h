/* ops/resample.h - Pillow-exact separable resampling (Image.resize with a box): nearest, bilinear
 * (triangle) and bicubic (a = -0.5) filters, antialiased by widening the support on downscale, 22-bit
 * fixed-point coefficients, horizontal pass first over the needed rows only. A plan holds coefficients
 * and scratch (allocated once per shape); running it allocates nothing. A plan is used by one thread. */
#ifndef SPW_OPS_RESAMPLE_H
#define SPW_OPS_RESAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/image.h"
#include "ops/sink.h"

struct spw_resample_plan {
    int out_w, out_h;
    bool need_h, need_v, nearest;
    int ksize_h, ksize_v;
    int *bounds_h, *bounds_v;        /* (first, count) per output column / row, in source indices */
    int32_t *kk_h, *kk_v;            /* out * ksize fixed-point weights */
    int row_first, row_count;        /* source rows the horizontal pass produces */
    uint8_t *scratch;                /* the allocation holding the four buffers below */
    uint8_t *cols, *hcols, *hrows;   /* transposed source, transposed pass-1 result, pass-1 result */
    uint8_t *row;                    /* one output row */
    const uint8_t **tap_rows;        /* row pointers for one output of a pass */
    int *near_x, *near_y;            /* nearest: source column / row per output */
    int src_x0, src_y0, src_x1, src_y1;   /* the source rectangle the output reads */
    void *block;                     /* everything above lives in this allocation */
};

/* Plan resampling the source box [x0, x1) x [y0, y1) (floats, source pixel units) to full_w x full_h,
 * producing only the output window win = (x, y, w, h) of that result (NULL = all of it: resize then crop
 * in one pass). Filter taps are clipped to clip = [cx0, cy0, cx1, cy1) (the image bounds for Pillow's
 * resize(box=...); the crop's bounds for crop-then-resize). interp: 0 nearest, 1 bilinear, 2 bicubic.
 * antialias=false keeps the filter unscaled on downscale. Returns 0, -EINVAL or -ENOMEM. */
int spw_resample_plan_init(struct spw_resample_plan *p, const float box[4], const int clip[4], int full_w,
                           int full_h, const int win[4], int interp, bool antialias);
void spw_resample_plan_free(struct spw_resample_plan *p);
/* Resample into the sink (of out_w x out_h). `in` holds at least the plan's source rectangle; its first
 * pixel is source pixel (in_x0, in_y0). */
void spw_resample_run(const struct spw_resample_plan *p, const struct spw_image *in, int in_x0, int in_y0,
                      const struct spw_sink *out);

#endif
