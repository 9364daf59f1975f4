/* ops/warp_px.h - Pillow's bilinear affine sample of one output pixel (ImagingGenericTransform with
 * bilinear_filter32RGB), written once for ops/geometry.c and the CUDA plugin's warp kernel (SPW_PX: the same
 * double arithmetic, no contraction, on both sides), and Pillow's COORD / FLOOR. Pure; thread-safe. */
#ifndef SPW_OPS_WARP_PX_H
#define SPW_OPS_WARP_PX_H

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/px.h"

/* Pillow COORD(): negative maps to -1, else truncation (clamped so huge values stay out of range). */
SPW_PX int spw_px_coord(double v)
{
    if (v < 0.0)
        return -1;
    return v >= (double)INT_MAX ? INT_MAX : (int)v;
}

/* Pillow FLOOR(). */
SPW_PX int spw_px_floor(double v)
{
    if (v < (double)INT_MIN)
        return INT_MIN;
    return v < 0.0 ? (int)floor(v) : spw_px_coord(v);
}

/* Pillow's bilinear_filter32RGB at input point (xin, yin) into d (3 bytes): ink for points outside
 * [0, w) x [0, h), the 2x2 taps clamped to the w x h RGB image src (rows stride bytes apart), interpolated in
 * double and truncated. */
SPW_PX void spw_px_bilinear_at(const uint8_t *src, size_t stride, int w, int h, double xin, double yin,
                               const uint8_t ink[3], uint8_t *d)
{
    if (!(xin >= 0.0 && xin < w && yin >= 0.0 && yin < h)) {
        d[0] = ink[0];
        d[1] = ink[1];
        d[2] = ink[2];
        return;
    }
    xin -= 0.5;
    yin -= 0.5;
    const int xf = spw_px_floor(xin), yf = spw_px_floor(yin);
    const double dx = xin - xf, dy = yin - yf;
    const int x0 = xf < 0 ? 0 : xf, x1 = xf + 1 < w ? xf + 1 : w - 1;
    const int r0 = yf < 0 ? 0 : yf;
    const int has_r1 = yf + 1 >= 0 && yf + 1 < h;
    const uint8_t *s0 = src + (size_t)r0 * stride;
    const uint8_t *s1 = has_r1 ? src + (size_t)(yf + 1) * stride : s0;
    for (int c = 0; c < 3; c++) {
        const int p00 = s0[x0 * 3 + c], p01 = s0[x1 * 3 + c];
        double v1 = p00 + (p01 - p00) * dx;
        double v2 = v1;
        if (has_r1) {
            const int p10 = s1[x0 * 3 + c], p11 = s1[x1 * 3 + c];
            v2 = p10 + (p11 - p10) * dx;
        }
        v1 = v1 + (v2 - v1) * dy;
        d[c] = v1 <= 0.0 ? 0 : v1 >= 255.0 ? 255 : (uint8_t)v1;
    }
}

/* Output pixel (x, y) of the inverse affine map a into d: spw_px_bilinear_at the mapped pixel centre. */
SPW_PX void spw_px_bilinear(const uint8_t *src, size_t stride, int w, int h, const double a[6],
                            const uint8_t ink[3], int x, int y, uint8_t *d)
{
    const double xc = x + 0.5, yc = y + 0.5;
    spw_px_bilinear_at(src, stride, w, h, a[0] * xc + a[1] * yc + a[2], a[3] * xc + a[4] * yc + a[5], ink, d);
}

#endif
