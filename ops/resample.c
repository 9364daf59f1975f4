/* ops/resample.c - Pillow's two-pass convolution resampler (Resample.c semantics), reimplemented:
 * coefficients from the filter at (x - center + 0.5)/filterscale, normalized, rounded to 22-bit integers;
 * each pass rounds and clips to uint8. Output rows go through a sink (flip, normalize). Thread-safe per plan. */
#include "ops/resample.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

static double filter_bilinear(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static int ksize_for(float in0, float in1, int out, double support, bool antialias)
{
    double scale = (double)(in1 - in0) / out;
    double fs = (scale < 1.0 || !antialias) ? 1.0 : scale;
    return (int)ceil(support * fs) * 2 + 1;
}

/* Pillow's precompute_coeffs, with taps clipped to [c0, c1) instead of [0, size). */
static void coeffs(float in0, float in1, int c0, int c1, int out, double support, double (*f)(double),
                   bool antialias, int ksize, int *bounds, int32_t *kk, double *tmp)
{
    /* Work relative to the clip origin, so crop-then-resize gives Pillow's bits on the cropped image. */
    in0 -= (float)c0;
    in1 -= (float)c0;
    c1 -= c0;
    double scale = (double)(in1 - in0) / out;
    double fs = (scale < 1.0 || !antialias) ? 1.0 : scale;
    double sup = support * fs, ss = 1.0 / fs;
    for (int xx = 0; xx < out; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0;
        int xmin = (int)(center - sup + 0.5);
        int xmax = (int)(center + sup + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > c1)
            xmax = c1;
        xmax -= xmin;
        if (xmax < 0)
            xmax = 0;
        for (int x = 0; x < xmax; x++) {
            double w = f((x + xmin - center + 0.5) * ss);
            tmp[x] = w;
            ww += w;
        }
        int32_t *k = kk + (size_t)xx * ksize;
        for (int x = 0; x < ksize; x++) {
            double w = x < xmax ? (ww != 0.0 ? tmp[x] / ww : tmp[x]) : 0.0;
            k[x] = w < 0 ? (int32_t)(-0.5 + w * (1 << PRECISION_BITS))
                         : (int32_t)(0.5 + w * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin + c0;
        bounds[2 * xx + 1] = xmax;
    }
}

static inline uint8_t clip8(int32_t v)
{
    if (v >= (255 << PRECISION_BITS))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

int spw_resample_plan_init(struct spw_resample_plan *p, const float box[4], const int clip[4], int full_w,
                           int full_h, const int win[4], int interp, bool antialias)
{
    memset(p, 0, sizeof *p);
    int wx = win ? win[0] : 0, wy = win ? win[1] : 0;
    int ow = win ? win[2] : full_w, oh = win ? win[3] : full_h;
    if (full_w <= 0 || full_h <= 0 || ow <= 0 || oh <= 0 || wx < 0 || wy < 0 || wx + ow > full_w ||
        wy + oh > full_h || !(box[2] > box[0]) || !(box[3] > box[1]) || clip[2] <= clip[0] || clip[3] <= clip[1])
        return -EINVAL;
    p->out_w = ow;
    p->out_h = oh;
    p->nearest = interp == 0;
    /* As Pillow: a pass is skipped when it would be the identity on the (cropped) source. */
    p->need_h = full_w != clip[2] - clip[0] || box[0] != (float)clip[0] || box[2] != (float)clip[2];
    p->need_v = full_h != clip[3] - clip[1] || box[1] != (float)clip[1] || box[3] != (float)clip[3];
    if (p->nearest) {
        /* Pillow's nearest resize samples the source at (int)(x0 + (xx + 0.5) * scale). */
        size_t bytes = sizeof(int) * ((size_t)ow + (size_t)oh) + (size_t)ow * 3;
        if (!(p->block = malloc(bytes)))
            return -ENOMEM;
        p->near_x = p->block;
        p->near_y = p->near_x + ow;
        p->row = (uint8_t *)(p->near_y + oh);
        double sx = (double)(box[2] - box[0]) / full_w, sy = (double)(box[3] - box[1]) / full_h;
        p->src_x0 = p->src_y0 = INT32_MAX;
        for (int x = 0; x < ow; x++) {
            int v = clip[0] + (int)((box[0] - (float)clip[0]) + (x + wx + 0.5) * sx);
            v = v < clip[0] ? clip[0] : v >= clip[2] ? clip[2] - 1 : v;
            p->near_x[x] = v;
            if (v < p->src_x0) p->src_x0 = v;
            if (v + 1 > p->src_x1) p->src_x1 = v + 1;
        }
        for (int y = 0; y < oh; y++) {
            int v = clip[1] + (int)((box[1] - (float)clip[1]) + (y + wy + 0.5) * sy);
            v = v < clip[1] ? clip[1] : v >= clip[3] ? clip[3] - 1 : v;
            p->near_y[y] = v;
            if (v < p->src_y0) p->src_y0 = v;
            if (v + 1 > p->src_y1) p->src_y1 = v + 1;
        }
        return 0;
    }
    double support = interp == 2 ? 2.0 : 1.0;
    double (*f)(double) = interp == 2 ? filter_bicubic : filter_bilinear;
    int kh = ksize_for(box[0], box[2], full_w, support, antialias);
    int kv = ksize_for(box[1], box[3], full_h, support, antialias);
    int kmax = kh > kv ? kh : kv;
    size_t n_ints = 2 * (size_t)full_w + 2 * (size_t)full_h;
    size_t n_kk = (size_t)full_w * kh + (size_t)full_h * kv;
    size_t bytes = sizeof(double) * (size_t)kmax + sizeof(int) * n_ints + sizeof(int32_t) * n_kk;
    if (!(p->block = malloc(bytes)))
        return -ENOMEM;
    double *tmp = p->block;
    int *bh = (int *)(tmp + kmax), *bv = bh + 2 * full_w;
    int32_t *kkh = (int32_t *)(bv + 2 * full_h), *kkv = kkh + (size_t)full_w * kh;
    coeffs(box[0], box[2], clip[0], clip[2], full_w, support, f, antialias, kh, bh, kkh, tmp);
    coeffs(box[1], box[3], clip[1], clip[3], full_h, support, f, antialias, kv, bv, kkv, tmp);
    p->bounds_h = bh + 2 * wx;
    p->bounds_v = bv + 2 * wy;
    p->kk_h = kkh + (size_t)wx * kh;
    p->kk_v = kkv + (size_t)wy * kv;
    p->ksize_h = kh;
    p->ksize_v = kv;
    if (p->need_h) {
        p->src_x0 = INT32_MAX;
        for (int x = 0; x < ow; x++) {
            if (p->bounds_h[2 * x] < p->src_x0) p->src_x0 = p->bounds_h[2 * x];
            if (p->bounds_h[2 * x] + p->bounds_h[2 * x + 1] > p->src_x1)
                p->src_x1 = p->bounds_h[2 * x] + p->bounds_h[2 * x + 1];
        }
    } else {
        p->src_x0 = clip[0] + wx;
        p->src_x1 = p->src_x0 + ow;
    }
    if (p->need_v) {
        p->src_y0 = p->bounds_v[0];
        p->src_y1 = p->bounds_v[2 * oh - 2] + p->bounds_v[2 * oh - 1];
    } else {
        p->src_y0 = clip[1] + wy;
        p->src_y1 = p->src_y0 + oh;
    }
    if (p->src_x1 <= p->src_x0) p->src_x1 = p->src_x0 + 1;
    if (p->src_y1 <= p->src_y0) p->src_y1 = p->src_y0 + 1;
    p->row_first = p->src_y0;
    p->row_count = p->src_y1 - p->src_y0;
    p->scratch = malloc((size_t)ow * 3 * ((size_t)p->row_count + 1));
    if (!p->scratch) {
        free(p->block);
        p->block = NULL;
        return -ENOMEM;
    }
    p->row = p->scratch + (size_t)ow * 3 * (size_t)p->row_count;
    return 0;
}

void spw_resample_plan_free(struct spw_resample_plan *p)
{
    if (!p)
        return;
    if (!p->nearest)
        free(p->scratch);
    free(p->block);
    p->block = NULL;
    p->scratch = NULL;
}

static void horizontal_row(const struct spw_resample_plan *p, const uint8_t *src, int in_x0, uint8_t *dst)
{
    const int kh = p->ksize_h;
    for (int xx = 0; xx < p->out_w; xx++) {
        const int xmin = p->bounds_h[2 * xx] - in_x0, n = p->bounds_h[2 * xx + 1];
        const int32_t *k = p->kk_h + (size_t)xx * kh;
        const uint8_t *s = src + 3 * (size_t)xmin;
        int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
        for (int x = 0; x < n; x++) {
            s0 += s[3 * x] * k[x];
            s1 += s[3 * x + 1] * k[x];
            s2 += s[3 * x + 2] * k[x];
        }
        dst[3 * xx] = clip8(s0);
        dst[3 * xx + 1] = clip8(s1);
        dst[3 * xx + 2] = clip8(s2);
    }
}

void spw_resample_run(const struct spw_resample_plan *p, const struct spw_image *in, int in_x0, int in_y0,
                      const struct spw_sink *out)
{
    if (p->nearest) {
        for (int y = 0; y < p->out_h; y++) {
            const uint8_t *src = in->data + (size_t)(p->near_y[y] - in_y0) * in->stride;
            for (int x = 0; x < p->out_w; x++)
                memcpy(p->row + 3 * x, src + 3 * (size_t)(p->near_x[x] - in_x0), 3);
            spw_sink_put_row(out, y, p->row);
        }
        return;
    }
    /* Pass 1: horizontal, on the source rows the vertical pass reads. Without it, read the source. */
    const uint8_t *rows;
    size_t rows_stride;
    if (p->need_h) {
        const size_t st = (size_t)p->out_w * 3;
        for (int r = 0; r < p->row_count; r++)
            horizontal_row(p, in->data + (size_t)(p->row_first + r - in_y0) * in->stride, in_x0,
                           p->scratch + st * r);
        rows = p->scratch;
        rows_stride = st;
    } else {
        rows = in->data + (size_t)(p->row_first - in_y0) * in->stride + 3 * (size_t)(p->src_x0 - in_x0);
        rows_stride = in->stride;
    }
    /* Pass 2: vertical, straight into the sink. */
    enum { CHUNK = 4096 * 3 };
    const int w3 = p->out_w * 3, kv = p->ksize_v;
    int32_t acc[CHUNK];
    for (int yy = 0; yy < p->out_h; yy++) {
        if (!p->need_v) {
            spw_sink_put_row(out, yy, rows + (size_t)yy * rows_stride);
            continue;
        }
        const int ymin = p->bounds_v[2 * yy] - p->row_first, n = p->bounds_v[2 * yy + 1];
        const int32_t *k = p->kk_v + (size_t)yy * kv;
        for (int x0 = 0; x0 < w3; x0 += CHUNK) {
            const int len = w3 - x0 < CHUNK ? w3 - x0 : CHUNK;
            for (int x = 0; x < len; x++)
                acc[x] = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < n; y++) {
                const uint8_t *s = rows + (size_t)(ymin + y) * rows_stride + x0;
                const int32_t ky = k[y];
                for (int x = 0; x < len; x++)
                    acc[x] += s[x] * ky;
            }
            for (int x = 0; x < len; x++)
                p->row[x0 + x] = clip8(acc[x]);
        }
        spw_sink_put_row(out, yy, p->row);
    }
}
