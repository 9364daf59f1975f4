/* ops/color.c - colour kernels bit-exact with Pillow 9.4 as torchvision 0.14 calls it on PIL images.
 * Not a tensor-path port and not a general colour library: RGB (c == 3) only.
 * Pure functions over caller-owned views: no allocation, no globals; thread-safe. Integer LUTs where
 * the Pillow result is a function of one byte; otherwise Pillow's own float expression per element,
 * evaluated in the same precision (this file relies on -std=c11, i.e. no FMA contraction). */
#include "ops/color.h"

#include "lib/simd.h"
#include "ops/color_px.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const uint8_t *row_in(const struct spw_image *img, int y)
{
    return img->data + (size_t)y * img->stride;
}

static uint8_t *row_out(const struct spw_image *img, int y)
{
    return img->data + (size_t)y * img->stride;
}

static void copy_image(const struct spw_image *in, struct spw_image *out)
{
    if (in->data == out->data)
        return;
    const size_t n = (size_t)in->w * 3;
    for (int y = 0; y < in->h; y++)
        memcpy(row_out(out, y), row_in(in, y), n);
}

/* Same LUT for every channel. */
static void apply_lut(const struct spw_image *in, const uint8_t lut[256], struct spw_image *out)
{
    const size_t n = (size_t)in->w * 3;
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (size_t i = 0; i < n; i++)
            d[i] = lut[s[i]];
    }
}

/* One LUT per channel. */
static void apply_lut3(const struct spw_image *in, const uint8_t lut[3][256], struct spw_image *out)
{
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x = 0; x < in->w; x++, s += 3, d += 3) {
            d[0] = lut[0][s[0]];
            d[1] = lut[1][s[1]];
            d[2] = lut[2][s[2]];
        }
    }
}

static void histogram3(const struct spw_image *in, uint64_t hist[3][256])
{
    memset(hist, 0, sizeof(uint64_t) * 3 * 256);
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        for (int x = 0; x < in->w; x++, s += 3) {
            hist[0][s[0]]++;
            hist[1][s[1]]++;
            hist[2][s[2]]++;
        }
    }
}

int spw_adjust_brightness_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (spw_px_bad_factor(factor))
        return -EINVAL;
    uint8_t lut[256];
    spw_px_blend_lut((float)factor, 0, lut);
    apply_lut(in, lut, out);
    return 0;
}

int spw_adjust_contrast_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (spw_px_bad_factor(factor))
        return -EINVAL;
    /* ImageStat mean of convert('L') as int(mean + 0.5). */
    uint64_t sum = 0;
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint32_t row_sum = 0;
        for (int x = 0; x < in->w; x++, s += 3)
            row_sum += (uint32_t)spw_px_luma(s[0], s[1], s[2]);
        sum += row_sum;
    }
    const int mean = spw_px_mean_luma(sum, (uint64_t)in->w * (uint64_t)in->h);
    uint8_t lut[256];
    spw_px_blend_lut((float)factor, mean, lut);
    apply_lut(in, lut, out);
    return 0;
}

/* The float blends vectorize; AVX2 doubles their width where the CPU has it. The clones are static and the
 * API functions call them: GCC exports a target_clones function's ifunc whatever -fvisibility says. */
SPW_VECTOR_CLONES
static int saturation_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (spw_px_bad_factor(factor))
        return -EINVAL;
    const float alpha = (float)factor;
    if (alpha == 1.0f) {
        copy_image(in, out);
        return 0;
    }
    /* Per row: each pixel's luma repeated for its three channels, then one element-wise blend over the
     * row (which vectorizes). Rows are done in chunks so the luma buffer stays on the stack. */
    enum { CHUNK = 1024 };
    uint8_t lum[CHUNK * 3];
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x0 = 0; x0 < in->w; x0 += CHUNK) {
            const int nx = in->w - x0 < CHUNK ? in->w - x0 : CHUNK;
            const uint8_t *sp = s + 3 * (size_t)x0;
            uint8_t *dp = d + 3 * (size_t)x0;
            for (int x = 0; x < nx; x++) {
                const uint8_t l = (uint8_t)spw_px_luma(sp[3 * x], sp[3 * x + 1], sp[3 * x + 2]);
                lum[3 * x] = lum[3 * x + 1] = lum[3 * x + 2] = l;
            }
            for (int i = 0; i < 3 * nx; i++)
                dp[i] = spw_px_blend(alpha, lum[i], sp[i]);
        }
    }
    return 0;
}

int spw_adjust_saturation_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    return saturation_run(in, factor, out);
}

SPW_VECTOR_CLONES
static int sharpness_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (spw_px_bad_factor(factor) || in->data == out->data)
        return -EINVAL;
    const float alpha = (float)factor;
    /* Pillow's filter leaves the image border as is (and images under 3x3 untouched); blending a pixel
     * with itself returns it, so the border is a copy. */
    copy_image(in, out);
    if (in->w < 3 || in->h < 3 || alpha == 1.0f)
        return 0;
    const int n = (in->w - 1) * 3;
    for (int y = 1; y < in->h - 1; y++) {
        const uint8_t *restrict up = row_in(in, y - 1), *restrict mid = row_in(in, y);
        const uint8_t *restrict dn = row_in(in, y + 1);
        uint8_t *restrict d = row_out(out, y);
        for (int i = 3; i < n; i++) {
            const int sum = up[i - 3] + up[i] + up[i + 3] + mid[i - 3] + 5 * mid[i] + mid[i + 3] +
                            dn[i - 3] + dn[i] + dn[i + 3];
            d[i] = spw_px_blend(alpha, spw_px_smooth(sum), mid[i]);
        }
    }
    return 0;
}

int spw_adjust_sharpness_run(const struct spw_image *in, double factor, struct spw_image *out)
{
    return sharpness_run(in, factor, out);
}

/* spw_px_hue with hsv_to_rgb's per-h and per-s constants (sector, f, fs) taken from tables made per call,
 * and round() of a value >= 0 as floor(x + 0.5): equal to spw_px_hue for all 2^24 colours at every shift
 * (tests/unit/check_color.c proves it exhaustively). */
struct hue_tables {
    uint8_t sector[256];        /* (int)floor(h * 6.0 / 255.0) % 6 */
    float f[256];               /* its fraction, as hsv_to_rgb computes it */
    float fs[256];              /* s / 255 */
    double p[256];              /* 1.0 - fs */
};

static void hue_tables_init(struct hue_tables *t)
{
    for (int v = 0; v < 256; v++) {
        const int i = (int)floor((float)v * 6.0 / 255.0);
        t->sector[v] = (uint8_t)(i % 6);
        t->f[v] = (float)((float)v * 6.0 / 255.0 - (float)i);
        t->fs[v] = (float)((float)v / 255.0);
        t->p[v] = 1.0 - t->fs[v];
    }
}

static inline uint8_t round_clip(double x)      /* x >= 0: clip((int)round(x)) */
{
    const int i = (int)(x + 0.5);
    return i >= 255 ? 255 : (uint8_t)i;
}

static inline void hue_px(const struct hue_tables *t, const uint8_t *in, int shift, uint8_t *o)
{
    int hue, sat, maxc;
    spw_px_rgb_to_hsv(in[0], in[1], in[2], &hue, &sat, &maxc);
    if (sat == 0) {             /* grey, or too little chroma for a step: the value alone */
        o[0] = o[1] = o[2] = (uint8_t)maxc;
        return;
    }
    const int hs = (hue + shift) & 255;
    const float fs = t->fs[sat], f = t->f[hs];
    const double v = (double)(float)maxc;
    const uint8_t p = round_clip(v * t->p[sat]);
    const uint8_t q = round_clip(v * (1.0 - fs * f));
    const uint8_t tt = round_clip(v * (1.0 - fs * (1.0 - f)));
    spw_px_hsv_sector(t->sector[hs], (uint8_t)maxc, p, q, tt, o);
}

int spw_adjust_hue_run(const struct spw_image *in, double hue_factor, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (!(hue_factor >= -0.5 && hue_factor <= 0.5))
        return -EINVAL;
    const int shift = spw_px_hue_shift(hue_factor);
    struct hue_tables t;
    hue_tables_init(&t);
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x = 0; x < in->w; x++, s += 3, d += 3)
            hue_px(&t, s, shift, d);
    }
    return 0;
}

int spw_posterize_run(const struct spw_image *in, int bits, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (bits < 0 || bits > 8)
        return -EINVAL;
    uint8_t lut[256];
    spw_px_posterize_lut(bits, lut);
    apply_lut(in, lut, out);
    return 0;
}

int spw_solarize_first(double threshold)
{
    /* v < threshold keeps v: the first inverted value is the smallest integer >= threshold. */
    return threshold <= 0.0 ? 0 : threshold > 255.0 ? 256 : (int)ceil(threshold);
}

int spw_solarize_run(const struct spw_image *in, double threshold, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    if (isnan(threshold))
        return -EINVAL;
    uint8_t lut[256];
    spw_px_solarize_lut(spw_solarize_first(threshold), lut);
    apply_lut(in, lut, out);
    return 0;
}

int spw_grayscale_run(const struct spw_image *in, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (int x = 0; x < in->w; x++, s += 3, d += 3)
            d[0] = d[1] = d[2] = (uint8_t)spw_px_luma(s[0], s[1], s[2]);
    }
    return 0;
}

int spw_invert_run(const struct spw_image *in, struct spw_image *out)
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    const size_t n = (size_t)in->w * 3;
    for (int y = 0; y < in->h; y++) {
        const uint8_t *s = row_in(in, y);
        uint8_t *d = row_out(out, y);
        for (size_t i = 0; i < n; i++)
            d[i] = (uint8_t)(255 - s[i]);
    }
    return 0;
}

/* Histogram each channel, build its table with make, apply the three tables. */
static int histogram_lut_run(const struct spw_image *in, struct spw_image *out,
                             void (*make)(const uint64_t hist[256], uint8_t lut[256]))
{
    int rc = spw_image_rgb_pair(in, out);
    if (rc)
        return rc;
    uint64_t hist[3][256];
    uint8_t lut[3][256];
    histogram3(in, hist);
    for (int c = 0; c < 3; c++)
        make(hist[c], lut[c]);
    apply_lut3(in, lut, out);
    return 0;
}

int spw_equalize_run(const struct spw_image *in, struct spw_image *out)
{
    return histogram_lut_run(in, out, spw_px_equalize_lut);
}

int spw_autocontrast_run(const struct spw_image *in, struct spw_image *out)
{
    return histogram_lut_run(in, out, spw_px_autocontrast_lut);
}
