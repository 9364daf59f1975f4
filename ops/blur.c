/* ops/blur.c - gaussian_blur (see blur.h). Thread-safe: no state. */
#include "ops/blur.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "lib/simd.h"

int spw_gaussian_kernel1d(int ksize, double sigma, float *out)
{
    if (ksize < 1 || ksize > SPW_BLUR_MAX_KERNEL || ksize % 2 == 0 || !(sigma > 0) || !isfinite(sigma))
        return -EINVAL;
    const float s = (float)sigma;
    const int half = (ksize - 1) / 2;       /* linspace(-half, half, ksize): whole numbers, exact */
    float sum = 0;
    for (int i = 0; i < ksize; i++) {
        const float x = (float)(i - half) / s;
        out[i] = expf(-0.5f * (x * x));
        sum += out[i];
    }
    for (int i = 0; i < ksize; i++)
        out[i] /= sum;
    return 0;
}

size_t spw_gaussian_blur_scratch(int w, int kx)
{
    /* one row of column sums with kx / 2 reflected columns each side, 3 channels */
    return sizeof(double) * 3 * ((size_t)w + 2 * (size_t)(kx / 2)) + 2 * sizeof(float) * SPW_BLUR_MAX_KERNEL;
}

/* torch's reflect padding: -1 -> 1, n -> n - 2 (the edge not repeated); |i| < n by the callers' check. */
static int reflect(int i, int n)
{
    return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
}

SPW_VECTOR_CLONES
static void blur(const struct spw_image *in, int kx, int ky, const float *wx, const float *wy, double *row,
                 struct spw_image *out)
{
    const int w = in->w, h = in->h, hx = kx / 2, hy = ky / 2;
    const size_t n = 3 * (size_t)w;
    double *mid = row + 3 * (size_t)hx;     /* the image's columns; row[0 .. 3 hx) and after: the reflections */
    for (int y = 0; y < h; y++) {
        for (size_t i = 0; i < n; i++)
            mid[i] = 0;
        for (int t = 0; t < ky; t++) {      /* the column pass: rows y - hy .. y + hy, reflected */
            const uint8_t *s = in->data + (size_t)reflect(y - hy + t, h) * in->stride;
            const double k = wy[t];
            for (size_t i = 0; i < n; i++)
                mid[i] += k * s[i];
        }
        for (int x = 1; x <= hx; x++)
            for (int ch = 0; ch < 3; ch++) {
                mid[-3 * x + ch] = mid[3 * reflect(-x, w) + ch];
                mid[3 * (w - 1 + x) + ch] = mid[3 * reflect(w - 1 + x, w) + ch];
            }
        uint8_t *d = out->data + (size_t)y * out->stride;
        for (size_t i = 0; i < n; i++) {    /* the row pass over the padded sums */
            double acc = 0;
            const double *p = row + i;
            for (int t = 0; t < kx; t++)
                acc += wx[t] * p[3 * t];
            d[i] = (uint8_t)nearbyint(acc);  /* torch.round: half to even (the default rounding mode) */
        }
    }
}

int spw_gaussian_blur_run(const struct spw_image *in, int kx, int ky, double sx, double sy, void *scratch,
                          struct spw_image *out)
{
    if (!in || !out || !in->data || !out->data || in->data == out->data || in->c != 3 || out->c != 3 ||
        in->w <= 0 || in->h <= 0 || in->w != out->w || in->h != out->h || !scratch)
        return -EINVAL;
    if (kx / 2 >= in->w || ky / 2 >= in->h)
        return -EINVAL;
    float *wx = (float *)((char *)scratch + sizeof(double) * 3 * ((size_t)in->w + 2 * (size_t)(kx / 2)));
    float *wy = wx + SPW_BLUR_MAX_KERNEL;
    if (spw_gaussian_kernel1d(kx, sx, wx) || spw_gaussian_kernel1d(ky, sy, wy))
        return -EINVAL;
    blur(in, kx, ky, wx, wy, scratch, out);
    return 0;
}
