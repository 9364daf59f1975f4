/* ops/cuda/pixel.h - the per-pixel arithmetic of the GPU kernels, written once for nvcc and for a C
 * compiler: the CUDA plugin runs it in kernels, the host emulation plugin (tests/tools/gpuemu.c) in loops,
 * so the tests without a device check the very arithmetic the device runs. It matches ops/resample.c
 * (22-bit fixed-point taps, round half up, clip) and ops/sink.c (flips, per-channel tables) bit for bit.
 * Pure functions. */
#ifndef SPW_OPS_CUDA_PIXEL_H
#define SPW_OPS_CUDA_PIXEL_H

#include <stddef.h>
#include <stdint.h>

#include "ops/color_px.h"
#include "ops/cuda/gpu_plugin.h"
#include "ops/px.h"
#include "ops/warp_px.h"

#define SPW_PX_PRECISION 22     /* ops/resample.c's PRECISION_BITS */

SPW_PX uint8_t spw_px_clip8(int32_t v)
{
    return v >= (255 << SPW_PX_PRECISION) ? 255 : v <= 0 ? 0 : (uint8_t)(v >> SPW_PX_PRECISION);
}

/* Pass 1: channel c of output column xx on source row y (pointer to that row's src_x_first pixel). */
SPW_PX uint8_t spw_px_resample_h(const struct spw_gpu_resample *a, const uint8_t *row, const int32_t *bounds,
                                 const int32_t *kk, int xx, int c)
{
    const int first = bounds[2 * xx] - a->src_x_first, n = bounds[2 * xx + 1];
    const int32_t *k = kk + (size_t)xx * (size_t)a->ksize_h;
    int32_t acc = 1 << (SPW_PX_PRECISION - 1);
    for (int t = 0; t < n; t++)
        acc += row[3 * (first + t) + c] * k[t];
    return spw_px_clip8(acc);
}

/* Pass 2: byte i (of out_w * 3) of output row yy, from pass 1's rows (row r is source row row_first + r). */
SPW_PX uint8_t spw_px_resample_v(const struct spw_gpu_resample *a, const uint8_t *rows, size_t stride,
                                 const int32_t *bounds, const int32_t *kk, int yy, int i)
{
    const int first = bounds[2 * yy] - a->row_first, n = bounds[2 * yy + 1];
    const int32_t *k = kk + (size_t)yy * (size_t)a->ksize_v;
    int32_t acc = 1 << (SPW_PX_PRECISION - 1);
    for (int t = 0; t < n; t++)
        acc += rows[(size_t)(first + t) * stride + i] * k[t];
    return spw_px_clip8(acc);
}

/* The output step for pixel (x, y), channel c, of a w x h image: where it lands after the flips, and its
 * value (through the table for the float kinds). */
SPW_PX void spw_px_sink(const struct spw_gpu_sink *a, const uint8_t *src, void *dst, const void *lut, int x, int y,
                        int c)
{
    const int ox = a->hflip ? a->w - 1 - x : x, oy = a->vflip ? a->h - 1 - y : y;
    const uint8_t v = src[(size_t)y * a->src_stride + 3 * (size_t)x + c];
    const size_t plane = (size_t)a->w * (size_t)a->h, chw = (size_t)c * plane + (size_t)oy * a->w + ox;
    switch (a->kind) {
    case SPW_GPU_OUT_U8_HWC:
        ((uint8_t *)dst)[((size_t)oy * a->w + ox) * 3 + c] = v;
        break;
    case SPW_GPU_OUT_U8_CHW:
        ((uint8_t *)dst)[chw] = v;
        break;
    case SPW_GPU_OUT_F32_CHW:
        ((float *)dst)[chw] = ((const float *)lut)[c * 256 + v];
        break;
    case SPW_GPU_OUT_F16_CHW:
        ((uint16_t *)dst)[chw] = ((const uint16_t *)lut)[c * 256 + v];
        break;
    }
}

/* Channel c of pixel (x, y) after a colour op (not LUT3 with its own index, see below). */
SPW_PX uint8_t spw_px_color(const struct spw_gpu_color *a, const uint8_t *src, const uint8_t *lut, int x, int y,
                            int c)
{
    const uint8_t *p = src + (size_t)y * a->src.stride + 3 * (size_t)x;
    switch (a->op) {
    case SPW_GPU_LUT3:
        return lut[c * 256 + p[c]];
    case SPW_GPU_SATURATION:
        return spw_px_blend(a->alpha, spw_px_luma(p[0], p[1], p[2]), p[c]);
    case SPW_GPU_SHARPNESS: {
        if (x == 0 || y == 0 || x == a->src.w - 1 || y == a->src.h - 1)
            return p[c];        /* Pillow's filter leaves the border as is */
        const size_t s = a->src.stride;
        const uint8_t *up = p - s, *dn = p + s;
        const int sum = up[c - 3] + up[c] + up[c + 3] + p[c - 3] + 5 * p[c] + p[c + 3] + dn[c - 3] + dn[c] +
                        dn[c + 3];
        return spw_px_blend(a->alpha, spw_px_smooth(sum), p[c]);
    }
    case SPW_GPU_HUE: {
        uint8_t o[3];
        spw_px_hue(p, a->hue_shift, o);
        return o[c];
    }
    }
    return p[c];
}

/* Floor division by 65536 of a 16.16 value (Pillow's `>> 16`). */
SPW_PX int64_t spw_px_fix_int(int64_t v)
{
    return v >= 0 ? v >> 16 : -((-v + 65535) >> 16);
}

/* The source pixel of output pixel (x, y) of a warp into *sx, *sy; 0 when it falls outside (the ink). */
SPW_PX int spw_px_warp_src(const struct spw_gpu_warp *a, const int32_t *xi, const int32_t *yi, int x, int y,
                           int *sx, int *sy)
{
    const int w = a->src.w, h = a->src.h;
    int64_t X = x, Y = y;
    switch (a->kind) {
    case SPW_GPU_WARP_TRANSPOSE:        /* Image.rotate's exact paths, read backwards */
        if (a->transpose == 180) {
            X = w - 1 - x;
            Y = h - 1 - y;
        } else if (a->transpose == 90) {
            X = w - 1 - y;
            Y = x;
        } else if (a->transpose == 270) {
            X = y;
            Y = h - 1 - x;
        }
        break;
    case SPW_GPU_WARP_SCALE:
        X = xi[x];
        Y = yi[y];
        break;
    case SPW_GPU_WARP_FIXED:
        X = spw_px_fix_int(a->fx[2] + (int64_t)y * a->fx[1] + (int64_t)x * a->fx[0]);
        Y = spw_px_fix_int(a->fx[5] + (int64_t)y * a->fx[4] + (int64_t)x * a->fx[3]);
        break;
    case SPW_GPU_WARP_BILINEAR:     /* not a nearest warp: spw_px_warp samples it */
        break;
    }
    *sx = (int)X;
    *sy = (int)Y;
    return X >= 0 && X < w && Y >= 0 && Y < h;
}

/* Output pixel (x, y) of a warp into d (3 bytes): a nearest one's source pixel or ink, or a bilinear sample. */
SPW_PX void spw_px_warp(const struct spw_gpu_warp *a, const int32_t *xi, const int32_t *yi, int x, int y, uint8_t *d)
{
    const uint8_t *src = (const uint8_t *)(uintptr_t)a->src.data;
    if (a->kind == SPW_GPU_WARP_BILINEAR) {
        spw_px_bilinear(src, a->src.stride, a->src.w, a->src.h, a->m, a->ink, x, y, d);
        return;
    }
    int sx, sy;
    const uint8_t *p = spw_px_warp_src(a, xi, yi, x, y, &sx, &sy) ? src + (size_t)sy * a->src.stride + 3 * (size_t)sx
                                                                   : a->ink;
    d[0] = p[0];
    d[1] = p[1];
    d[2] = p[2];
}

#endif
