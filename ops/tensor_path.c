/* ops/tensor_path.c - torchvision's tensor-path kernels (see tensor_path.h), operation for operation in
 * float32: the build's -ffp-contract=off keeps each product and sum rounded as torch's kernels round them,
 * and fmaf() stands where torch 1.13 fuses (its AVX2 grid_sample and the OpenBLAS bmm that maps the grid).
 * Checked against torchvision by tests/equiv/check_augmix.py. Pure; thread-safe. */
#include "ops/tensor_path.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

#include "lib/simd.h"
#include "ops/policy.h"

static const uint8_t *row_in(const struct spw_image *img, int y)
{
    return img->data + (size_t)y * img->stride;
}

static uint8_t *row_out(const struct spw_image *img, int y)
{
    return img->data + (size_t)y * img->stride;
}

/* float -> uint8 as .clamp(0, 255).to(torch.uint8): truncation toward zero. */
static inline uint8_t clamp_trunc(float v)
{
    const int i = (int)v;           /* truncated first, then clamped: the same, and integer ops vectorize */
    return (uint8_t)(i < 0 ? 0 : i > 255 ? 255 : i);
}

/* torch.round then .to(uint8): half to even (the default rounding mode), kept in range. */
static inline uint8_t round_even(float v)
{
    v = nearbyintf(v);
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

/* One of the four neighbours; NULL outside the image (zeros padding). */
static inline const uint8_t *texel(const struct spw_image *in, int x, int y)
{
    return x >= 0 && y >= 0 && x < in->w && y < in->h ? row_in(in, y) + (size_t)x * 3 : NULL;
}

/* One output pixel's sample at (ix, iy) away from the fast path: nearest, a fill, or taps outside. */
static void sample_edge(const struct spw_image *in, float ix, float iy, int interp, const double *fill,
                        const float fill_f[3], uint8_t *o)
{
    const int w = in->w, h = in->h;
    float v[3] = {0, 0, 0}, mask = 0.0f;
    if (interp == SPW_INTERP_NEAREST) {
        const float nx = nearbyintf(ix), ny = nearbyintf(iy);
        if (nx >= 0.0f && ny >= 0.0f && nx < (float)w && ny < (float)h) {
            const uint8_t *p = row_in(in, (int)ny) + (size_t)(int)nx * 3;
            for (int c = 0; c < 3; c++)
                v[c] = (float)p[c];
            mask = 1.0f;
        }
        for (int c = 0; c < 3; c++)
            o[c] = round_even(fill && mask < 0.5f ? fill_f[c] : v[c]);
        return;
    }
    const float x0 = floorf(ix), y0 = floorf(iy);
    if (!(x0 >= -1.0f && y0 >= -1.0f && x0 < (float)w && y0 < (float)h)) {     /* NaN falls here */
        for (int c = 0; c < 3; c++)
            o[c] = round_even(fill ? fill_f[c] : 0.0f);
        return;
    }
    const float wx = ix - x0, ex = 1.0f - wx, ny = iy - y0, sy = 1.0f - ny;
    const float wt[4] = {sy * ex, sy * wx, ny * ex, ny * wx};   /* nw, ne, sw, se */
    const int xi = (int)x0, yi = (int)y0;
    const uint8_t *p[4] = {texel(in, xi, yi), texel(in, xi + 1, yi), texel(in, xi, yi + 1),
                           texel(in, xi + 1, yi + 1)};
    for (int k = 0; k < 4; k++) {
        if (!p[k])
            continue;
        for (int c = 0; c < 3; c++)
            v[c] = fmaf((float)p[k][c], wt[k], v[c]);
        mask = fmaf(1.0f, wt[k], mask);
    }
    for (int c = 0; c < 3; c++)
        o[c] = round_even(fill ? v[c] * mask + (1.0f - mask) * fill_f[c] : v[c]);
}

/* One output row's pixels from their sample points (ix, iy), in input pixels: all four taps inside go the
 * fast way (grid_sample's weights and its fused accumulation, nw ne sw se; lrintf rounds half to even as
 * torch.round), the rest through sample_edge. */
SPW_FMA_CLONES static void sample_row(const struct spw_image *in, const float *ixs, const float *iys, int n,
                                      int interp, const double *fill, const float fill_f[3], uint8_t *o)
{
    const bool fast = interp == SPW_INTERP_BILINEAR && !fill;
    const float last_x = (float)(in->w - 1), last_y = (float)(in->h - 1);
    for (int k = 0; k < n; k++, o += 3) {
        const float ix = ixs[k], iy = iys[k], fx = floorf(ix), fy = floorf(iy);
        if (!fast || !(fx >= 0.0f && fy >= 0.0f && fx < last_x && fy < last_y)) {
            sample_edge(in, ix, iy, interp, fill, fill_f, o);
            continue;
        }
        const float wx = ix - fx, ex = 1.0f - wx, ny = iy - fy, sy = 1.0f - ny;
        const float nw = sy * ex, ne = sy * wx, sw = ny * ex, se = ny * wx;
        const uint8_t *p = row_in(in, (int)fy) + (size_t)(int)fx * 3, *q = p + in->stride;
        for (int c = 0; c < 3; c++) {
            float v = (float)p[c] * nw;
            v = fmaf((float)p[c + 3], ne, v);
            v = fmaf((float)q[c], sw, v);
            v = fmaf((float)q[c + 3], se, v);
            const long i = lrintf(v);   /* v is in [0, 255 + ulps] */
            o[c] = (uint8_t)(i > 255 ? 255 : i);
        }
    }
}

static int check_warp(const struct spw_image *in, const struct spw_image *out, int interp)
{
    int rc = spw_image_rgb_pair(in, out);
    return rc ? rc : in->data == out->data || (interp != SPW_INTERP_NEAREST && interp != SPW_INTERP_BILINEAR)
                         ? -EINVAL : 0;
}

static void fill_floats(const double *fill, float fill_f[3])
{
    for (int c = 0; c < 3; c++)
        fill_f[c] = fill ? (float)fill[c] : 0.0f;
}

enum { CHUNK = 256 };   /* sample points worked out at a time */

/* The API functions below call these (static: GCC exports a target_clones function's ifunc whatever
 * -fvisibility says). */
SPW_FMA_CLONES static int affine_run(const struct spw_image *in, const double matrix[6], int interp,
                                     const double *fill, struct spw_image *out)
{
    int rc = check_warp(in, out, interp);
    if (rc)
        return rc;
    const int w = in->w, h = in->h;
    /* theta = the matrix in float32; rescaled_theta = theta^T / [w / 2, h / 2] */
    const float half_w = (float)(0.5 * w), half_h = (float)(0.5 * h);
    float r[3][2], fill_f[3], ixs[CHUNK], iys[CHUNK];
    for (int k = 0; k < 3; k++) {
        r[k][0] = (float)matrix[k] / half_w;
        r[k][1] = (float)matrix[3 + k] / half_h;
    }
    fill_floats(fill, fill_f);
    const float size_x = (float)w / 2.0f, size_y = (float)h / 2.0f, cx = (float)(w * 0.5 - 0.5);
    for (int y = 0; y < h; y++) {
        /* _gen_affine_grid's base grid: linspace(-n / 2 + 0.5, n / 2 - 0.5, n), exact half-integers */
        const float yb = (float)y - (float)(h * 0.5 - 0.5);
        for (int x0 = 0; x0 < w; x0 += CHUNK) {
            const int n = w - x0 < CHUNK ? w - x0 : CHUNK;
            for (int k = 0; k < n; k++) {      /* the grid: a loop the fma clone vectorizes */
                const float xb = (float)(x0 + k) - cx;
                /* bmm([x, y, 1], rescaled_theta) as OpenBLAS's sgemm accumulates it, then grid_sample's
                 * unnormalize ((g + 1) * size / 2 - 0.5, fused) */
                const float gx = fmaf(yb, r[1][0], xb * r[0][0]) + r[2][0];
                const float gy = fmaf(yb, r[1][1], xb * r[0][1]) + r[2][1];
                ixs[k] = fmaf(gx + 1.0f, size_x, -0.5f);
                iys[k] = fmaf(gy + 1.0f, size_y, -0.5f);
            }
            sample_row(in, ixs, iys, n, interp, fill, fill_f, row_out(out, y) + (size_t)x0 * 3);
        }
    }
    return 0;
}

SPW_FMA_CLONES static int displace_run(const struct spw_image *in, const float *disp, int interp,
                                       const double *fill, struct spw_image *out)
{
    int rc = check_warp(in, out, interp);
    if (rc || !disp)
        return rc ? rc : -EINVAL;
    const int w = in->w, h = in->h;
    const float size_x = (float)w / 2.0f, size_y = (float)h / 2.0f;
    float fill_f[3], lin_x[CHUNK], ixs[CHUNK], iys[CHUNK];
    fill_floats(fill, fill_f);
    /* _create_identity_grid: linspace((-n + 1) / n, (n - 1) / n, n) each way, in float32; a column chunk's x
     * values once, then every row of that chunk */
    const float x_lo = (float)((-w + 1) / (double)w), x_hi = (float)((w - 1) / (double)w);
    const float y_lo = (float)((-h + 1) / (double)h), y_hi = (float)((h - 1) / (double)h);
    for (int x0 = 0; x0 < w; x0 += CHUNK) {
        const int n = w - x0 < CHUNK ? w - x0 : CHUNK;
        for (int k = 0; k < n; k++)
            lin_x[k] = spw_torch_linspace(x_lo, x_hi, w, x0 + k);
        for (int y = 0; y < h; y++) {
            const float gy0 = spw_torch_linspace(y_lo, y_hi, h, y);
            const float *d = disp + ((size_t)y * w + (size_t)x0) * 2;
            for (int k = 0; k < n; k++) {
                const float gx = lin_x[k] + d[2 * k], gy = gy0 + d[2 * k + 1];
                ixs[k] = fmaf(gx + 1.0f, size_x, -0.5f);
                iys[k] = fmaf(gy + 1.0f, size_y, -0.5f);
            }
            sample_row(in, ixs, iys, n, interp, fill, fill_f, row_out(out, y) + (size_t)x0 * 3);
        }
    }
    return 0;
}

int spw_tensor_affine_run(const struct spw_image *in, const double matrix[6], int interp, const double *fill,
                          struct spw_image *out)
{
    return affine_run(in, matrix, interp, fill, out);
}

int spw_tensor_displace_run(const struct spw_image *in, const float *disp, int interp, const double *fill,
                            struct spw_image *out)
{
    return displace_run(in, disp, interp, fill, out);
}

/* _blend against a constant per value: a LUT of clamp(factor * v + (1 - factor) * other). */
static void blend_lut(float factor, float rest_times_other, uint8_t lut[256])
{
    for (int v = 0; v < 256; v++)
        lut[v] = clamp_trunc(factor * (float)v + rest_times_other);
}

static void apply_lut(const struct spw_image *in, const uint8_t lut[256], struct spw_image *out)
{
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (size_t i = 0; i < (size_t)in->w * 3; i++)
            d[i] = lut[s[i]];
    }
}

int spw_tensor_brightness_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc || !(factor >= 0))
        return rc ? rc : -EINVAL;
    uint8_t lut[256];
    blend_lut((float)factor, (float)(1.0 - factor) * 0.0f, lut);
    apply_lut(in, lut, out);
    return 0;
}

/* rgb_to_grayscale: (0.2989 r + 0.587 g) + 0.114 b in float32, truncated. */
static inline uint8_t grey(const uint8_t *p)
{
    return (uint8_t)((float)0.2989 * (float)p[0] + (float)0.587 * (float)p[1] + (float)0.114 * (float)p[2]);
}

int spw_tensor_saturation_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc || !(factor >= 0))
        return rc ? rc : -EINVAL;
    const float f = (float)factor, rest = (float)(1.0 - factor);
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x = 0; x < in->w; x++, s += 3, d += 3) {
            const float g = rest * (float)grey(s);
            const uint8_t r = s[0], gg = s[1], b = s[2];   /* read before an in-place write */
            d[0] = clamp_trunc(f * (float)r + g);
            d[1] = clamp_trunc(f * (float)gg + g);
            d[2] = clamp_trunc(f * (float)b + g);
        }
    }
    return 0;
}

int spw_tensor_contrast_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc || !(factor >= 0))
        return rc ? rc : -EINVAL;
    /* torch.mean of the grey in float32: a sum of integers, exact while it stays below 2^24 (65,793 pixels
     * of white), then divided by the count. Beyond that torch's cascade rounds as it adds; this rounds once. */
    double sum = 0;
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        for (int x = 0; x < in->w; x++, s += 3)
            sum += grey(s);
    }
    const float mean = (float)sum / (float)((double)in->w * in->h);
    uint8_t lut[256];
    blend_lut((float)factor, (float)(1.0 - factor) * mean, lut);
    apply_lut(in, lut, out);
    return 0;
}

/* One row of adjust_sharpness: x in [x0, x1) (in channel values) blended with its smoothed value (smooth) or
 * with itself (the border). */
SPW_VECTOR_CLONES static void sharpen_row(const uint8_t *restrict up, const uint8_t *restrict s,
                                          const uint8_t *restrict dn, uint8_t *restrict d, int n, float f,
                                          float rest)
{
    /* conv2d with [1 1 1; 1 5 1; 1 1 1] / 13 in float32, rounded: the sum is k / 13 for an integer k, never
     * within float error of a half, so the integer rounding (2k + 13) / 26 is the same */
    for (int i = 3; i < n - 3; i++) {
        const int k = up[i - 3] + up[i] + up[i + 3] + s[i - 3] + 5 * s[i] + s[i + 3] + dn[i - 3] + dn[i] +
                      dn[i + 3];
        d[i] = clamp_trunc(f * (float)s[i] + rest * (float)((2 * k + 13) / 26));
    }
}

static void blend_self(const uint8_t *s, uint8_t *d, int n, float f, float rest)
{
    for (int i = 0; i < n; i++)
        d[i] = clamp_trunc(f * (float)s[i] + rest * (float)s[i]);
}

int spw_tensor_sharpness_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc || in->data == out->data || !(factor >= 0))
        return rc ? rc : -EINVAL;
    const int w = in->w, h = in->h, n = w * 3;
    const float f = (float)factor, rest = (float)(1.0 - factor);
    for (int y = 0; y < h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        if (w <= 2 || h <= 2) {     /* torchvision returns such images as they are */
            memcpy(d, s, (size_t)n);
        } else if (y == 0 || y == h - 1) {      /* the border keeps its values: a blend with itself */
            blend_self(s, d, n, f, rest);
        } else {
            sharpen_row(s - in->stride, s, s + in->stride, d, n, f, rest);
            blend_self(s, d, 3, f, rest);
            blend_self(s + n - 3, d + n - 3, 3, f, rest);
        }
    }
    return 0;
}

int spw_tensor_autocontrast_run(const struct spw_image *in, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        for (int x = 0; x < in->w; x++, s += 3)
            for (int c = 0; c < 3; c++) {
                lo[c] = s[c] < lo[c] ? s[c] : lo[c];
                hi[c] = s[c] > hi[c] ? s[c] : hi[c];
            }
    }
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        /* bound / (max - min) is Tensor.__rdiv__: reciprocal, then times 255 */
        const float minimum = hi[c] > lo[c] ? (float)lo[c] : 0.0f;
        const float scale = hi[c] > lo[c] ? (1.0f / ((float)hi[c] - (float)lo[c])) * 255.0f : 1.0f;
        for (int v = 0; v < 256; v++)
            lut[c][v] = clamp_trunc(((float)v - minimum) * scale);
    }
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x = 0; x < in->w; x++, s += 3, d += 3)
            for (int c = 0; c < 3; c++)
                d[c] = lut[c][s[c]];
    }
    return 0;
}
