/* ops/blur.c - gaussian_blur (see blur.h). Thread-safe: no state. */
#include "ops/blur.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Pillow's _gaussian_blur_radius: the extended box's radius for `passes` passes, in its float arithmetic. */
static float pil_box_radius(float radius, int passes)
{
    float sigma2, big_l, l, a;
    sigma2 = radius * radius / passes;
    big_l = (float)sqrt(12.0 * sigma2 + 1.0);
    l = (float)floor((big_l - 1.0) / 2.0);
    a = (2 * l + 1) * (l * (l + 1) - 3 * sigma2);
    a /= 6 * (sigma2 - (l + 1) * (l + 1));
    return l + a;
}

/* Pillow's ImagingLineBoxBlur on one channel of a line: n values `step` bytes apart, in place (tmp: n bytes). */
static void pil_line_blur(uint8_t *line, size_t step, int n, int radius, uint32_t ww, uint32_t fw, uint8_t *tmp)
{
    const int last = n - 1, edge_a = radius + 1 < n ? radius + 1 : n, edge_b = n - radius - 1 > 0 ? n - radius - 1 : 0;
#define IN(i) ((uint32_t)line[(size_t)(i) * step])
#define MOVE(sub, add) acc += IN(add) - IN(sub)
#define SAVE(x, left, right) tmp[x] = (uint8_t)((acc * ww + (IN(left) + IN(right)) * fw + (1u << 23)) >> 24)
    uint32_t acc = IN(0) * (uint32_t)(radius + 1);
    for (int x = 0; x < edge_a - 1; x++)
        acc += IN(x);
    acc += IN(last) * (uint32_t)(radius - edge_a + 1);
    if (edge_a <= edge_b) {
        for (int x = 0; x < edge_a; x++) {
            MOVE(0, x + radius);
            SAVE(x, 0, x + radius + 1);
        }
        for (int x = edge_a; x < edge_b; x++) {
            MOVE(x - radius - 1, x + radius);
            SAVE(x, x - radius - 1, x + radius + 1);
        }
        for (int x = edge_b; x <= last; x++) {
            MOVE(x - radius - 1, last);
            SAVE(x, x - radius - 1, last);
        }
    } else {
        for (int x = 0; x < edge_b; x++) {
            MOVE(0, x + radius);
            SAVE(x, 0, x + radius + 1);
        }
        for (int x = edge_b; x < edge_a; x++) {
            MOVE(0, last);
            SAVE(x, 0, last);
        }
        for (int x = edge_a; x <= last; x++) {
            MOVE(x - radius - 1, last);
            SAVE(x, x - radius - 1, last);
        }
    }
#undef IN
#undef MOVE
#undef SAVE
    for (int x = 0; x < n; x++)
        line[(size_t)x * step] = tmp[x];
}

/* pil_line_blur down every column at once: the columns are independent lanes that take the same steps, so
 * each step is one pass along a row (the lanes vectorise, the reads are sequential). src rows -> dst rows,
 * w3 bytes each, n rows; acc: w3 lanes. The same bytes as pil_line_blur on each column. */
SPW_VECTOR_CLONES
static void pil_columns_blur(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, int w3, int n,
                             int radius, uint32_t ww, uint32_t fw, uint32_t *acc)
{
    const int last = n - 1, edge_a = radius + 1 < n ? radius + 1 : n, edge_b = n - radius - 1 > 0 ? n - radius - 1 : 0;
#define ROW(i) (src + (size_t)(i) * sstride)
    {
        const uint8_t *r0 = ROW(0), *rl = ROW(last);
        for (int j = 0; j < w3; j++)
            acc[j] = (uint32_t)r0[j] * (uint32_t)(radius + 1) + (uint32_t)rl[j] * (uint32_t)(radius - edge_a + 1);
        for (int x = 0; x < edge_a - 1; x++) {
            const uint8_t *r = ROW(x);
            for (int j = 0; j < w3; j++)
                acc[j] += r[j];
        }
    }
    /* row x of the output: acc moves by (add - sub), then the weighted sum with the rows sub and right; the
     * three regions of pil_line_blur (either order of its edges) in one rule */
    for (int x = 0; x <= last; x++) {
        const int sub = x < edge_a ? 0 : x - radius - 1, add = x < edge_b ? x + radius : last,
                  right = x < edge_b ? x + radius + 1 : last;
        const uint8_t *rs = ROW(sub), *ra = ROW(add), *rlf = rs, *rr = ROW(right);
        uint8_t *d = dst + (size_t)x * dstride;
        for (int j = 0; j < w3; j++) {
            acc[j] += (uint32_t)ra[j] - (uint32_t)rs[j];
            d[j] = (uint8_t)((acc[j] * ww + ((uint32_t)rlf[j] + (uint32_t)rr[j]) * fw + (1u << 23)) >> 24);
        }
    }
#undef ROW
}

int spw_pil_gaussian_blur_run(const struct spw_image *in, double radius, struct spw_image *out)
{
    if (!in || !out || !in->data || !out->data || in->c != 3 || out->c != 3 || in->w <= 0 || in->h <= 0 ||
        in->w != out->w || in->h != out->h || !(radius >= 0) || !isfinite(radius))
        return -EINVAL;
    if (in->data != out->data)
        for (int y = 0; y < in->h; y++)
            memcpy(out->data + (size_t)y * out->stride, in->data + (size_t)y * in->stride, 3 * (size_t)in->w);
    const float r = pil_box_radius((float)radius, 3);
    const int ri = (int)r;
    const uint32_t ww = (uint32_t)((float)(1u << 24) / (r * 2 + 1));
    const uint32_t fw = ((1u << 24) - (uint32_t)(ri * 2 + 1) * ww) / 2;
    const size_t w3 = 3 * (size_t)in->w;
    uint8_t *tmp = malloc((size_t)(in->w > in->h ? in->w : in->h));
    uint8_t *spare = malloc(w3 * (size_t)in->h);        /* the column passes' other image */
    uint32_t *acc = malloc(sizeof *acc * w3);
    if (!tmp || !spare || !acc) {
        free(tmp), free(spare), free(acc);
        return -ENOMEM;
    }
    for (int pass = 0; pass < 3; pass++)            /* ImagingBoxBlur: three horizontal passes ... */
        for (int y = 0; y < out->h; y++)
            for (int ch = 0; ch < 3; ch++)
                pil_line_blur(out->data + (size_t)y * out->stride + ch, 3, out->w, ri, ww, fw, tmp);
    /* ... then three on the transposed image: out -> spare -> out -> spare, copied back */
    pil_columns_blur(out->data, out->stride, spare, w3, (int)w3, out->h, ri, ww, fw, acc);
    pil_columns_blur(spare, w3, out->data, out->stride, (int)w3, out->h, ri, ww, fw, acc);
    pil_columns_blur(out->data, out->stride, spare, w3, (int)w3, out->h, ri, ww, fw, acc);
    for (int y = 0; y < out->h; y++)
        memcpy(out->data + (size_t)y * out->stride, spare + (size_t)y * w3, w3);
    free(tmp), free(spare), free(acc);
    return 0;
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
