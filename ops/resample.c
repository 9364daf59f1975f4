/* ops/resample.c - Pillow's two-pass convolution resampler (Resample.c semantics), reimplemented:
 * coefficients from the filter at (x - center + 0.5)/filterscale, normalized, rounded to 22-bit integers;
 * each pass rounds and clips to uint8. Output rows go through a sink (flip, normalize). Thread-safe per plan. */
#include "ops/resample.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <immintrin.h>

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
    /* Scratch: the transposed source columns, the transposed horizontal result, that result in rows,
     * one output row and the vertical pass's row pointers (16 bytes of slack after each for vector tails). */
    const size_t rc = (size_t)p->row_count, w3 = (size_t)ow * 3, src3 = (size_t)(p->src_x1 - p->src_x0) * 3;
    const size_t scratch_bytes = src3 * 16 + w3 * 16 + w3 * rc + w3 + 96 + sizeof(uint8_t *) * ((size_t)kv + 1);
    p->scratch = malloc(scratch_bytes);
    if (!p->scratch) {
        free(p->block);
        p->block = NULL;
        return -ENOMEM;
    }
    p->cols = (uint8_t *)(((uintptr_t)p->scratch + 15) & ~(uintptr_t)15);
    p->hcols = p->cols + src3 * 16;
    p->hrows = p->hcols + w3 * 16;
    p->row = p->hrows + w3 * rc;
    p->tap_rows = (const uint8_t **)(void *)(((uintptr_t)(p->row + w3 + 32) + 7) & ~(uintptr_t)7);
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

/* Transpose one 16x16 byte block: four unpack rounds (bytes, words, dwords, qwords). */
static void transpose16(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride)
{
    __m128i x[16], a[16], b[16], c[16];
    for (int i = 0; i < 16; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(src + (size_t)i * sstride));
    for (int i = 0; i < 8; i++) {                       /* a[2i]: rows 2i,2i+1 cols 0-7; a[2i+1]: cols 8-15 */
        a[2 * i] = _mm_unpacklo_epi8(x[2 * i], x[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi8(x[2 * i], x[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) {                       /* b[4g+q]: rows 4g..4g+3, cols 4q..4q+3 */
        b[4 * g + 0] = _mm_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
        b[4 * g + 1] = _mm_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
        b[4 * g + 2] = _mm_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
        b[4 * g + 3] = _mm_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
    }
    for (int h = 0; h < 2; h++)                         /* c[8h+2q]: rows 8h..8h+7, cols 4q,4q+1 */
        for (int q = 0; q < 4; q++) {
            c[8 * h + 2 * q] = _mm_unpacklo_epi32(b[8 * h + q], b[8 * h + 4 + q]);
            c[8 * h + 2 * q + 1] = _mm_unpackhi_epi32(b[8 * h + q], b[8 * h + 4 + q]);
        }
    for (int q = 0; q < 4; q++)
        for (int k = 0; k < 2; k++) {                   /* column 4q+2k (+1): rows 0-7 then 8-15 */
            __m128i lo = c[2 * q + k], hi = c[8 + 2 * q + k];
            _mm_storeu_si128((__m128i *)(dst + (size_t)(4 * q + 2 * k) * dstride), _mm_unpacklo_epi64(lo, hi));
            _mm_storeu_si128((__m128i *)(dst + (size_t)(4 * q + 2 * k + 1) * dstride), _mm_unpackhi_epi64(lo, hi));
        }
}

/* Transpose a partial block (rows, cols <= 16) through a zero-padded 16x16 copy. */
static void transpose_edge(const uint8_t *src, size_t sstride, int rows, int cols, uint8_t *dst, size_t dstride)
{
    uint8_t a[16 * 16] = {0}, b[16 * 16];
    for (int i = 0; i < rows; i++)
        memcpy(a + 16 * i, src + (size_t)i * sstride, (size_t)cols);
    transpose16(a, 16, b, 16);
    for (int j = 0; j < cols; j++)
        memcpy(dst + (size_t)j * dstride, b + 16 * j, (size_t)rows);
}

/* Transpose a rows x cols byte matrix: dst[c][r] = src[r][c]. */
static void transpose_u8(const uint8_t *src, size_t sstride, int rows, int cols, uint8_t *dst, size_t dstride)
{
    for (int r = 0; r < rows; r += 16) {
        const int nr = rows - r < 16 ? rows - r : 16;
        for (int c = 0; c < cols; c += 16) {
            const int nc = cols - c < 16 ? cols - c : 16;
            const uint8_t *s = src + (size_t)r * sstride + c;
            uint8_t *d = dst + (size_t)c * dstride + r;
            if (nr == 16 && nc == 16)
                transpose16(s, sstride, d, dstride);
            else
                transpose_edge(s, sstride, nr, nc, d, dstride);
        }
    }
}

/* out[x] = clip8(sum_t rows[t][x] * k[t]) for x < len, with Pillow's rounding: the inner kernel of both
 * passes, in exact 32-bit integer arithmetic. 16 values per step (AVX2 or SSE4.1), then a scalar tail. */
__attribute__((target("avx2")))
static int dot_rows_avx2(const uint8_t *const *rows, const int32_t *k, int n, int len, uint8_t *out)
{
    const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    int x = 0;
    for (; x + 16 <= len; x += 16) {
        __m256i a0 = half, a1 = half;
        for (int t = 0; t < n; t++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(rows[t] + x));
            const __m256i kt = _mm256_set1_epi32(k[t]);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), kt));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), kt));
        }
        a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
        a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
        __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a0, a1), 0xD8);
        __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storeu_si128((__m128i *)(out + x), b);      /* saturation = Pillow's clip to [0, 255] */
    }
    return x;
}

__attribute__((target("sse4.1")))
static int dot_rows_sse41(const uint8_t *const *rows, const int32_t *k, int n, int len, uint8_t *out)
{
    const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    int x = 0;
    for (; x + 16 <= len; x += 16) {
        __m128i a0 = half, a1 = half, a2 = half, a3 = half;
        for (int t = 0; t < n; t++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(rows[t] + x));
            const __m128i kt = _mm_set1_epi32(k[t]);
            a0 = _mm_add_epi32(a0, _mm_mullo_epi32(_mm_cvtepu8_epi32(v), kt));
            a1 = _mm_add_epi32(a1, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 4)), kt));
            a2 = _mm_add_epi32(a2, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 8)), kt));
            a3 = _mm_add_epi32(a3, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 12)), kt));
        }
        __m128i lo = _mm_packs_epi32(_mm_srai_epi32(a0, PRECISION_BITS), _mm_srai_epi32(a1, PRECISION_BITS));
        __m128i hi = _mm_packs_epi32(_mm_srai_epi32(a2, PRECISION_BITS), _mm_srai_epi32(a3, PRECISION_BITS));
        _mm_storeu_si128((__m128i *)(out + x), _mm_packus_epi16(lo, hi));
    }
    return x;
}

static int have_avx2(void)
{
    return __builtin_cpu_supports("avx2");      /* reads libgcc's CPU model, set up at load time */
}

static void dot_rows(const uint8_t *const *rows, const int32_t *k, int n, int len, uint8_t *out)
{
    int x = have_avx2() ? dot_rows_avx2(rows, k, n, len, out) : dot_rows_sse41(rows, k, n, len, out);
    for (; x < len; x++) {
        int32_t acc = 1 << (PRECISION_BITS - 1);
        for (int t = 0; t < n; t++)
            acc += rows[t][x] * k[t];
        out[x] = clip8(acc);
    }
}

/* One strip of pass 1: hcols[(3 xx + c) * 16 + i] = clip8(sum_t k[xx][t] * cols[(3 (xmin + t) + c) * 16 + i]),
 * i.e. output column xx, channel c, for the strip's 16 rows. cols and hcols are 16-byte aligned. */
__attribute__((target("avx2")))
static void hpass_strip_avx2(const struct spw_resample_plan *p, const uint8_t *cols, uint8_t *hcols)
{
    const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    for (int xx = 0; xx < p->out_w; xx++) {
        const int xmin = p->bounds_h[2 * xx] - p->src_x0, n = p->bounds_h[2 * xx + 1];
        const int32_t *k = p->kk_h + (size_t)xx * p->ksize_h;
        const uint8_t *base = cols + (size_t)xmin * 48;
        for (int c = 0; c < 3; c++) {
            __m256i a0 = half, a1 = half;
            for (int t = 0; t < n; t++) {
                const __m128i v = _mm_load_si128((const __m128i *)(base + (size_t)(3 * t + c) * 16));
                const __m256i kt = _mm256_set1_epi32(k[t]);
                a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), kt));
                a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), kt));
            }
            a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
            a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
            __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a0, a1), 0xD8);
            _mm_store_si128((__m128i *)(hcols + (size_t)(3 * xx + c) * 16),
                            _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
        }
    }
}

__attribute__((target("sse4.1")))
static void hpass_strip_sse41(const struct spw_resample_plan *p, const uint8_t *cols, uint8_t *hcols)
{
    const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    for (int xx = 0; xx < p->out_w; xx++) {
        const int xmin = p->bounds_h[2 * xx] - p->src_x0, n = p->bounds_h[2 * xx + 1];
        const int32_t *k = p->kk_h + (size_t)xx * p->ksize_h;
        const uint8_t *base = cols + (size_t)xmin * 48;
        for (int c = 0; c < 3; c++) {
            __m128i a0 = half, a1 = half, a2 = half, a3 = half;
            for (int t = 0; t < n; t++) {
                const __m128i v = _mm_load_si128((const __m128i *)(base + (size_t)(3 * t + c) * 16));
                const __m128i kt = _mm_set1_epi32(k[t]);
                a0 = _mm_add_epi32(a0, _mm_mullo_epi32(_mm_cvtepu8_epi32(v), kt));
                a1 = _mm_add_epi32(a1, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 4)), kt));
                a2 = _mm_add_epi32(a2, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 8)), kt));
                a3 = _mm_add_epi32(a3, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(v, 12)), kt));
            }
            __m128i lo = _mm_packs_epi32(_mm_srai_epi32(a0, PRECISION_BITS), _mm_srai_epi32(a1, PRECISION_BITS));
            __m128i hi = _mm_packs_epi32(_mm_srai_epi32(a2, PRECISION_BITS), _mm_srai_epi32(a3, PRECISION_BITS));
            _mm_store_si128((__m128i *)(hcols + (size_t)(3 * xx + c) * 16), _mm_packus_epi16(lo, hi));
        }
    }
}

static void hpass_strip(const struct spw_resample_plan *p, const uint8_t *cols, uint8_t *hcols)
{
    if (have_avx2())
        hpass_strip_avx2(p, cols, hcols);
    else
        hpass_strip_sse41(p, cols, hcols);
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
    const int rc = p->row_count, w3 = p->out_w * 3;
    const uint8_t **tap = p->tap_rows;
    /* Pass 1, horizontal, on strips of 16 source rows: transpose the strip (its byte columns become
     * 16-byte rows), take each output column (and channel) as a weighted sum of 3-apart rows, 16 source
     * rows per vector, and transpose back. A strip and its result stay in L1. */
    const uint8_t *rows;
    size_t rows_stride;
    if (p->need_h) {
        const int src3 = (p->src_x1 - p->src_x0) * 3;
        const uint8_t *src = in->data + (size_t)(p->row_first - in_y0) * in->stride + 3 * (size_t)(p->src_x0 - in_x0);
        for (int r0 = 0; r0 < rc; r0 += 16) {
            const int nr = rc - r0 < 16 ? rc - r0 : 16;
            transpose_u8(src + (size_t)r0 * in->stride, in->stride, nr, src3, p->cols, 16);
            hpass_strip(p, p->cols, p->hcols);
            transpose_u8(p->hcols, 16, w3, nr, p->hrows + (size_t)r0 * w3, (size_t)w3);
        }
        rows = p->hrows;
        rows_stride = (size_t)w3;
    } else {
        rows = in->data + (size_t)(p->row_first - in_y0) * in->stride + 3 * (size_t)(p->src_x0 - in_x0);
        rows_stride = in->stride;
    }
    /* Pass 2, vertical, straight into the sink. */
    for (int yy = 0; yy < p->out_h; yy++) {
        if (!p->need_v) {
            spw_sink_put_row(out, yy, rows + (size_t)yy * rows_stride);
            continue;
        }
        const int ymin = p->bounds_v[2 * yy] - p->row_first, n = p->bounds_v[2 * yy + 1];
        for (int t = 0; t < n; t++)
            tap[t] = rows + (size_t)(ymin + t) * rows_stride;
        dot_rows(tap, p->kk_v + (size_t)yy * p->ksize_v, n, w3, p->row);
        spw_sink_put_row(out, yy, p->row);
    }
}
