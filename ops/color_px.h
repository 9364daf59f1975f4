/* ops/color_px.h - the colour ops' scalar arithmetic (Pillow 9.4's, as ops/color.c applies it), shared with
 * the CUDA kernels: the blend, ITU-R 601-2 luma, the smoothing filter of sharpness, the tables of
 * equalize and autocontrast built from a channel's histogram, and Pillow's RGB <-> HSV for adjust_hue.
 * Pure functions. */
#ifndef SPW_OPS_COLOR_PX_H
#define SPW_OPS_COLOR_PX_H

#include <math.h>
#include <stdint.h>

#include "ops/px.h"

/* Pillow ImagingBlend (Blend.c): out = in1 + alpha * (in2 - in1) in float with alpha = (float)factor,
 * clipped to [0, 255] and truncated. For 0 <= alpha <= 1 Pillow skips the clip, but the value is then
 * already in range, so one expression covers both branches. */
SPW_PX uint8_t spw_px_blend(float alpha, int in1, int in2)
{
    float t = (float)in1 + alpha * (float)(in2 - in1);
    t = t > 0.0f ? t : 0.0f;                            /* branch-free (maxps / minps), so loops vectorize */
    t = t < 255.0f ? t : 255.0f;
    return (uint8_t)(int)t;
}

/* A blend factor the colour ops refuse: negative, NaN or infinite. */
SPW_PX int spw_px_bad_factor(double f)
{
    return !(f >= 0.0) || isinf(f);
}

/* Pillow rgb2l (Convert.c): ITU-R 601-2 luma in 16.16 fixed point, rounded. */
SPW_PX int spw_px_luma(int r, int g, int b)
{
    return (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16;
}

/* Pillow's SMOOTH filter of a 3x3 neighbourhood (sum of the 9 values, the centre weighted 5): Pillow sums
 * kernel/13 floats plus 0.5 and truncates; the exact value (S + 6.5) / 13 is never within 0.5/13 of an
 * integer, far beyond float error, so (S + 6) / 13 is exact (the multiply-shift is exact to 3330). */
SPW_PX int spw_px_smooth(int sum)
{
    return (int)(((unsigned)sum + 6u) * 80660u >> 20);
}

/* The mean luma as ImageStat reports it, int(mean + 0.5): the mean is a ratio with denominator n, never
 * within 1/(2n) of a .5 tie, so floor((2 sum + n) / 2n) is exact. */
SPW_PX int spw_px_mean_luma(uint64_t sum, uint64_t n)
{
    return (int)((2 * sum + n) / (2 * n));
}

/* ImageOps.equalize for one channel: step = (total - count of the last used level) // 255; identity when
 * fewer than two levels are used or step is 0. Entries above 255 are clipped by Image.point. */
SPW_PX void spw_px_equalize_lut(const uint64_t hist[256], uint8_t lut[256])
{
    uint64_t total = 0, last = 0;
    int used = 0;
    for (int v = 0; v < 256; v++) {
        if (hist[v]) {
            total += hist[v];
            last = hist[v];
            used++;
        }
    }
    const uint64_t step = used > 1 ? (total - last) / 255 : 0;
    uint64_t acc = step / 2;
    for (int v = 0; v < 256; v++) {
        const uint64_t q = step ? acc / step : (uint64_t)v;
        lut[v] = q > 255 ? 255 : (uint8_t)q;
        acc += hist[v];
    }
}

/* ImageOps.autocontrast (cutoff 0) for one channel: int(v * scale + offset) in double, truncated toward
 * zero, clipped; identity when the channel has one level. */
SPW_PX void spw_px_autocontrast_lut(const uint64_t hist[256], uint8_t lut[256])
{
    int lo = 0, hi = 255;
    while (lo < 255 && !hist[lo])
        lo++;
    while (hi > 0 && !hist[hi])
        hi--;
    const double scale = hi > lo ? 255.0 / (hi - lo) : 1.0;
    const double offset = hi > lo ? (double)(-lo) * scale : 0.0;
    for (int v = 0; v < 256; v++) {
        const double t = hi > lo ? (double)v * scale + offset : (double)v;
        lut[v] = t <= 0.0 ? 0 : t >= 255.0 ? 255 : (uint8_t)(int)t;
    }
}

/* The tables of the ops that are a function of one byte: blend with a constant (brightness: 0; contrast: the
 * mean luma), posterize (keep the top bits), solarize (invert from the first value >= threshold), invert. */
SPW_PX void spw_px_blend_lut(float alpha, int degenerate, uint8_t lut[256])
{
    for (int v = 0; v < 256; v++)
        lut[v] = spw_px_blend(alpha, degenerate, v);
}

SPW_PX void spw_px_posterize_lut(int bits, uint8_t lut[256])
{
    const int mask = ~((1 << (8 - bits)) - 1) & 255;
    for (int v = 0; v < 256; v++)
        lut[v] = (uint8_t)(v & mask);
}

SPW_PX void spw_px_solarize_lut(int first, uint8_t lut[256])
{
    for (int v = 0; v < 256; v++)
        lut[v] = v >= first ? (uint8_t)(255 - v) : (uint8_t)v;
}

SPW_PX uint8_t spw_px_clip_int(int v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

/* Pillow rgb2hsv_row (Convert.c, after colorsys), same float/double mix so results agree bit for bit. */
SPW_PX void spw_px_rgb_to_hsv(int r, int g, int b, int *hue, int *sat, int *val)
{
    const int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    const int minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    *val = maxc;
    if (minc == maxc) {
        *hue = 0;
        *sat = 0;
        return;
    }
    const float cr = (float)(maxc - minc);
    const float s = cr / (float)maxc;
    /* the minimum channel's ratio is cr / cr: 1 exactly, so it is not divided for */
    const float rc = r == minc ? 1.0f : (float)(maxc - r) / cr;
    const float gc = g == minc ? 1.0f : (float)(maxc - g) / cr;
    const float bc = b == minc ? 1.0f : (float)(maxc - b) / cr;
    float h;
    if (r == maxc)
        h = bc - gc;
    else if (g == maxc)
        h = (float)(2.0 + rc - bc);
    else
        h = (float)(4.0 + gc - rc);
    /* fmod(h / 6 + 1, 1): the argument lies in (0.8, 1.9), where subtracting 1 is exact. */
    double hd = h / 6.0 + 1.0;
    if (hd >= 1.0)
        hd -= 1.0;
    h = (float)hd;
    *hue = spw_px_clip_int((int)(h * 255.0));
    *sat = spw_px_clip_int((int)(s * 255.0));
}

/* Pillow hsv2rgb's last step: sector i (of 6) of the hue puts v, p, q and t in their channels. */
SPW_PX void spw_px_hsv_sector(int i, uint8_t v, uint8_t p, uint8_t q, uint8_t t, uint8_t *o)
{
    switch (i) {
    case 0: o[0] = v; o[1] = t; o[2] = p; break;
    case 1: o[0] = q; o[1] = v; o[2] = p; break;
    case 2: o[0] = p; o[1] = v; o[2] = t; break;
    case 3: o[0] = p; o[1] = q; o[2] = v; break;
    case 4: o[0] = t; o[1] = p; o[2] = v; break;
    default: o[0] = v; o[1] = p; o[2] = q; break;
    }
}

/* Pillow hsv2rgb (Convert.c). Note `fs * f` is a float product, the rest double. */
SPW_PX void spw_px_hsv_to_rgb(int h, int s, int v, uint8_t *o)
{
    if (s == 0) {
        o[0] = o[1] = o[2] = (uint8_t)v;
        return;
    }
    const int i = (int)floor((float)h * 6.0 / 255.0);
    const float f = (float)((float)h * 6.0 / 255.0 - (float)i);
    const float fs = (float)((float)s / 255.0);
    const uint8_t p = spw_px_clip_int((int)round((float)v * (1.0 - fs)));
    const uint8_t q = spw_px_clip_int((int)round((float)v * (1.0 - fs * f)));
    const uint8_t t = spw_px_clip_int((int)round((float)v * (1.0 - fs * (1.0 - f))));
    spw_px_hsv_sector(i % 6, (uint8_t)v, p, q, t, o);
}

/* torchvision adjust_hue: np_h += np.uint8(hue_factor * 255): truncate toward zero, then wrap modulo 256. */
SPW_PX int spw_px_hue_shift(double hue_factor)
{
    return (int)(hue_factor * 255.0) & 255;
}

/* One pixel through HSV with its hue moved by shift, as adjust_hue does. */
SPW_PX void spw_px_hue(const uint8_t *in, int shift, uint8_t *out)
{
    int h, sat, v;
    spw_px_rgb_to_hsv(in[0], in[1], in[2], &h, &sat, &v);
    spw_px_hsv_to_rgb((h + shift) & 255, sat, v, out);
}

#endif
