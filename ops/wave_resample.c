/* ops/wave_resample.c - windowed-sinc (Hann) polyphase resampling with torchaudio 0.13's kernel and framing
 * (functional.resample): one kernel row per output phase over the gcd-reduced rates, applied with stride
 * orig to the input as if zero-padded by width on the left and width + orig on the right. Mono float32 only;
 * not a streaming resampler (each call sees the whole signal). Plans are immutable after create, so run is
 * thread-safe and allocates nothing. */
#include "ops/wave_resample.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RATE 1000000
#define MAX_FILTER_WIDTH 64
#define MAX_KERNEL_BYTES ((int64_t)64 << 20)

struct spw_wave_resample_plan {
    bool copy;              /* identical rates: the signal is returned as is, as torchaudio does */
    int orig, new_;         /* rates divided by their gcd */
    int width;              /* zero padding on the left, in input samples */
    int taps;               /* kernel row length: 2 * width + orig */
    /* Per phase, the taps whose |t| < lowpass_filter_width. Outside, t is clamped to the window's zeros
     * (cos(pi/2)^2 ~ 4e-33), so torchaudio's sum over them adds nothing a float can hold. */
    int *first, *count;
    float *kernel;          /* [new_][taps] */
};

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* One phase's kernel row: phase i of new_ outputs per orig inputs. The steps are torchaudio's, in float32:
 * for a float32 waveform it builds the kernel in the waveform's dtype, and its rounding of t (~1e-6 for
 * rates like 320 -> 441) moves outputs by up to ~2e-5 of the peak, more than a double kernel differs from
 * its float64 result. Matching torchaudio's float32 output is the goal, so each operation is rounded as
 * it rounds them (this file needs -ffp-contract=off, as the Makefile builds, to keep them separate). */
static void fill_kernel_row(struct spw_wave_resample_plan *p, int i, int lowpass_filter_width,
                            double base_freq)
{
    const float lpw = (float)lowpass_filter_width, base = (float)base_freq, pi = (float)M_PI;
    const float scale = (float)(base_freq / p->orig);
    const float phase = (float)-i / (float)p->new_;
    float *row = p->kernel + (size_t)i * p->taps;
    int first = -1, last = -1;
    for (int k = 0; k < p->taps; k++) {
        float t = (phase + (float)(k - p->width) / (float)p->orig) * base;
        if (fabsf(t) < lpw) {
            if (first < 0)
                first = k;
            last = k;
        }
        t = fminf(fmaxf(t, -lpw), lpw);
        const float c = cosf(t * pi / lpw / 2.0f);
        const float x = t * pi;
        const float sinc = x == 0.0f ? 1.0f : sinf(x) / x;
        row[k] = sinc * (c * c * scale);
    }
    p->first[i] = first < 0 ? 0 : first;
    p->count[i] = first < 0 ? 0 : last - first + 1;
}

/* Width and kernel table size for the reduced rates; -EINVAL when the table would exceed MAX_KERNEL_BYTES. */
static int size_plan(struct spw_wave_resample_plan *p, int lowpass_filter_width, double base_freq)
{
    const double width = ceil((double)lowpass_filter_width * p->orig / base_freq);
    if (!(width <= MAX_KERNEL_BYTES))       /* also catches NaN */
        return -EINVAL;
    const int64_t taps = 2 * (int64_t)width + p->orig;
    if (taps * p->new_ > MAX_KERNEL_BYTES / (int64_t)sizeof(float))
        return -EINVAL;
    p->width = (int)width;
    p->taps = (int)taps;
    return 0;
}

static bool valid_params(int orig_rate, int new_rate, int lowpass_filter_width, double rolloff)
{
    return orig_rate >= 1 && orig_rate <= MAX_RATE && new_rate >= 1 && new_rate <= MAX_RATE &&
           lowpass_filter_width >= 1 && lowpass_filter_width <= MAX_FILTER_WIDTH && rolloff > 0.0 && rolloff <= 1.0;
}

int spw_wave_resample_plan_create(int orig_rate, int new_rate, int lowpass_filter_width, double rolloff,
                                  struct spw_wave_resample_plan **out)
{
    if (!valid_params(orig_rate, new_rate, lowpass_filter_width, rolloff))
        return -EINVAL;
    struct spw_wave_resample_plan *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    const int64_t g = gcd64(orig_rate, new_rate);
    p->orig = (int)(orig_rate / g);
    p->new_ = (int)(new_rate / g);
    p->copy = orig_rate == new_rate;
    if (p->copy) {
        *out = p;
        return 0;
    }
    const double base_freq = (p->orig < p->new_ ? p->orig : p->new_) * rolloff;
    int rc = size_plan(p, lowpass_filter_width, base_freq);
    if (rc != 0)
        goto out;
    p->kernel = malloc((size_t)p->new_ * (size_t)p->taps * sizeof(float));
    p->first = malloc((size_t)p->new_ * sizeof(int));
    p->count = malloc((size_t)p->new_ * sizeof(int));
    if (!p->kernel || !p->first || !p->count) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < p->new_; i++)
        fill_kernel_row(p, i, lowpass_filter_width, base_freq);
out:
    if (rc != 0) {
        spw_wave_resample_plan_destroy(p);
        return rc;
    }
    *out = p;
    return 0;
}

void spw_wave_resample_plan_destroy(struct spw_wave_resample_plan *p)
{
    if (!p)
        return;
    free(p->kernel);
    free(p->first);
    free(p->count);
    free(p);
}

/* ceil(new * n / orig) without overflow: whole strides of orig inputs give new_ outputs each. The reduced
 * rates give the same exact value as the original ones. -1 when the length does not fit in int64. */
int64_t spw_wave_resample_out_len(const struct spw_wave_resample_plan *p, int64_t n)
{
    if (n <= 0)
        return 0;
    if (p->copy)
        return n;
    const int64_t strides = n / p->orig, rest = n % p->orig;
    if (strides > (INT64_MAX - p->new_) / p->new_)
        return -1;
    return strides * p->new_ + (rest * p->new_ + p->orig - 1) / p->orig;
}

/* Output phase i of stride f: the row's non-zero taps over in[f * orig - width + k], zeros outside [0, n). */
static float apply_row(const struct spw_wave_resample_plan *p, int i, int64_t f, const float *in,
                       int64_t n)
{
    const int64_t start = f * p->orig - p->width + p->first[i];
    const float *row = p->kernel + (size_t)i * p->taps + p->first[i];
    int64_t lo = start < 0 ? -start : 0;
    int64_t hi = p->count[i];
    if (hi > n - start)
        hi = n - start;
    double acc = 0.0;
    for (int64_t k = lo; k < hi; k++)
        acc += (double)row[k] * in[start + k];
    return (float)acc;
}

void spw_wave_resample_run(const struct spw_wave_resample_plan *p, const float *in, int64_t n, float *out)
{
    if (n <= 0)
        return;
    if (p->copy) {
        memcpy(out, in, (size_t)n * sizeof(float));
        return;
    }
    const int64_t total = spw_wave_resample_out_len(p, n);
    int64_t j = 0;
    for (int64_t f = 0; j < total; f++)
        for (int i = 0; i < p->new_ && j < total; i++, j++)
            out[j] = apply_row(p, i, f, in, n);
}
