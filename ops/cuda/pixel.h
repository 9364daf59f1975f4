/* ops/cuda/pixel.h - the per-pixel arithmetic of the GPU kernels, written once for nvcc and for a C
 * compiler: the CUDA plugin runs it in kernels, the host emulation plugin (tests/tools/gpuemu.c) in loops,
 * so the tests without a device check the very arithmetic the device runs. It matches ops/resample.c
 * (22-bit fixed-point taps, round half up, clip) and ops/sink.c (flips, per-channel tables) bit for bit.
 * Pure functions. */
#ifndef SPW_OPS_CUDA_PIXEL_H
#define SPW_OPS_CUDA_PIXEL_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cuda/gpu_plugin.h"
#include "ops/px.h"

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

#endif
