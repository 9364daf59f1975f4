/* ops/mel.c - mel filterbanks with torchaudio 0.13's melscale_fbanks formulas (computed in double, stored
 * as float, kept sparse) and their application to [n_freqs][frames] spectrograms. Not an STFT (ops/stft.c).
 * Thread model: init/free belong to one thread (pipeline setup); apply and dense only read the bank and are
 * safe from many threads at once. */
#include "ops/mel.h"

#include "lib/simd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Slaney's Auditory Toolbox scale (as librosa and torchaudio): linear at 200/3 Hz per mel below 1 kHz,
 * logarithmic above with 27 mels per factor 6.4. */
#define SLANEY_F_SP (200.0 / 3.0)
#define SLANEY_MIN_LOG_HZ 1000.0
#define SLANEY_MIN_LOG_MEL (SLANEY_MIN_LOG_HZ / SLANEY_F_SP)
#define SLANEY_LOGSTEP (log(6.4) / 27.0)

/* Caps the bank at what any STFT makes (n_fft 65536) and far more mels than anyone asks for. */
#define MAX_FREQS 32769
#define MAX_MELS 4096

static double hz_to_mel(double hz, enum spw_mel_scale scale)
{
    if (scale == SPW_MEL_HTK)
        return 2595.0 * log10(1.0 + hz / 700.0);
    if (hz < SLANEY_MIN_LOG_HZ)
        return hz / SLANEY_F_SP;
    return SLANEY_MIN_LOG_MEL + log(hz / SLANEY_MIN_LOG_HZ) / SLANEY_LOGSTEP;
}

static double mel_to_hz(double mel, enum spw_mel_scale scale)
{
    if (scale == SPW_MEL_HTK)
        return 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
    if (mel < SLANEY_MIN_LOG_MEL)
        return mel * SLANEY_F_SP;
    return SLANEY_MIN_LOG_HZ * exp(SLANEY_LOGSTEP * (mel - SLANEY_MIN_LOG_MEL));
}

/* torch.linspace(a, b, n)[i]; n == 1 gives a. */
static double linspace_at(double a, double b, int n, int i)
{
    return n == 1 ? a : a + (b - a) * i / (n - 1);
}

/* Weight of linear bin frequency hz in filter m (corners f_pts[m], f_pts[m+1], f_pts[m+2]): the lower of
 * the rising and falling slopes, clamped at 0, as torchaudio's _create_triangular_filterbank. */
static double triangle(const double *f_pts, int m, double hz)
{
    double down = (hz - f_pts[m]) / (f_pts[m + 1] - f_pts[m]);
    double up = (f_pts[m + 2] - hz) / (f_pts[m + 2] - f_pts[m + 1]);
    double w = down < up ? down : up;
    return w > 0.0 ? w : 0.0;
}

static bool args_valid(int n_freqs, double f_min, double f_max, int n_mels, int sample_rate,
                       enum spw_mel_scale scale, enum spw_mel_norm norm)
{
    return n_freqs >= 1 && n_freqs <= MAX_FREQS && n_mels >= 1 && n_mels <= MAX_MELS && sample_rate >= 1 &&
           f_min >= 0.0 && f_min < f_max && f_max <= sample_rate / 2.0 &&
           (scale == SPW_MEL_HTK || scale == SPW_MEL_SLANEY) &&
           (norm == SPW_MEL_NORM_NONE || norm == SPW_MEL_NORM_SLANEY);
}

/* Filter m's nonzero run over the bins: first index and count (0 when the filter falls between bins). */
static void filter_span(const double *f_pts, int m, const double *freqs, int n_freqs, int *first, int *count)
{
    int lo = 0;
    while (lo < n_freqs && triangle(f_pts, m, freqs[lo]) == 0.0)
        lo++;
    int hi = lo;
    while (hi < n_freqs && triangle(f_pts, m, freqs[hi]) > 0.0)
        hi++;
    *first = lo < n_freqs ? lo : 0;
    *count = hi - lo;
}

/* Fills b's filters from the corner frequencies (b->first/count/w allocated, w rows NULL). */
static int fill_filters(struct spw_mel_bank *b, const double *f_pts, const double *freqs, enum spw_mel_norm norm)
{
    for (int m = 0; m < b->n_mels; m++) {
        filter_span(f_pts, m, freqs, b->n_freqs, &b->first[m], &b->count[m]);
        if (b->count[m] == 0)
            continue;
        b->w[m] = malloc(sizeof(float) * (size_t)b->count[m]);
        if (!b->w[m])
            return -ENOMEM;
        /* Slaney area norm: each triangle scaled by 2 / its width in Hz, for about constant energy per band. */
        double scale = norm == SPW_MEL_NORM_SLANEY ? 2.0 / (f_pts[m + 2] - f_pts[m]) : 1.0;
        for (int k = 0; k < b->count[m]; k++)
            b->w[m][k] = (float)(triangle(f_pts, m, freqs[b->first[m] + k]) * scale);
    }
    return 0;
}

int spw_mel_bank_init(struct spw_mel_bank *b, int n_freqs, double f_min, double f_max, int n_mels, int sample_rate,
                      enum spw_mel_scale scale, enum spw_mel_norm norm)
{
    if (!args_valid(n_freqs, f_min, f_max, n_mels, sample_rate, scale, norm))
        return -EINVAL;
    memset(b, 0, sizeof *b);
    b->n_freqs = n_freqs;
    b->n_mels = n_mels;
    int rc = -ENOMEM;
    double *freqs = malloc(sizeof(double) * (size_t)n_freqs);
    double *f_pts = malloc(sizeof(double) * (size_t)(n_mels + 2));
    b->first = calloc((size_t)n_mels, sizeof(int));
    b->count = calloc((size_t)n_mels, sizeof(int));
    b->w = calloc((size_t)n_mels, sizeof(float *));
    if (!freqs || !f_pts || !b->first || !b->count || !b->w)
        goto out;
    /* torchaudio spaces the bins up to sample_rate // 2 (integer division) */
    for (int i = 0; i < n_freqs; i++)
        freqs[i] = linspace_at(0.0, (double)(sample_rate / 2), n_freqs, i);
    double m_min = hz_to_mel(f_min, scale), m_max = hz_to_mel(f_max, scale);
    for (int i = 0; i < n_mels + 2; i++)
        f_pts[i] = mel_to_hz(linspace_at(m_min, m_max, n_mels + 2, i), scale);
    rc = fill_filters(b, f_pts, freqs, norm);
out:
    free(f_pts);
    free(freqs);
    if (rc != 0)
        spw_mel_bank_free(b);
    return rc;
}

void spw_mel_bank_free(struct spw_mel_bank *b)
{
    if (!b)
        return;
    for (int m = 0; b->w && m < b->n_mels; m++)
        free(b->w[m]);
    free(b->w);
    free(b->count);
    free(b->first);
    memset(b, 0, sizeof *b);
}

void spw_mel_bank_dense(const struct spw_mel_bank *b, float *out)
{
    memset(out, 0, sizeof(float) * (size_t)b->n_freqs * (size_t)b->n_mels);
    for (int m = 0; m < b->n_mels; m++)
        for (int k = 0; k < b->count[m]; k++)
            out[(size_t)(b->first[m] + k) * (size_t)b->n_mels + (size_t)m] = b->w[m][k];
}

/* One mel row's BLOCK frames with the block size a constant, so the loop over frames is fully vectorized
 * and unrolled. */
enum { BLOCK = 16 };
SPW_VECTOR_CLONES static void mel_row_block(const float *restrict w, int first, int count, const float *restrict mag, int stride,
                          float *restrict row)
{
    float acc[BLOCK] = {0};
    for (int k = 0; k < count; k++) {
        const float *restrict src = mag + (int64_t)(first + k) * stride;
        for (int j = 0; j < BLOCK; j++)
            acc[j] += w[k] * src[j];
    }
    memcpy(row, acc, sizeof acc);
}

void spw_mel_apply_frames(const struct spw_mel_bank *b, const float *mag, int stride, int count, int64_t t0,
                          int64_t frames, float *mel)
{
    if (count == BLOCK) {
        for (int m = 0; m < b->n_mels; m++)
            mel_row_block(b->w[m], b->first[m], b->count[m], mag, stride, mel + (int64_t)m * frames + t0);
        return;
    }
    for (int m = 0; m < b->n_mels; m++) {
        float *restrict row = mel + (int64_t)m * frames + t0;
        memset(row, 0, sizeof(float) * (size_t)count);
        for (int k = 0; k < b->count[m]; k++) {
            const float *restrict src = mag + (int64_t)(b->first[m] + k) * stride;
            const float w = b->w[m][k];
            for (int j = 0; j < count; j++)
                row[j] += w * src[j];
        }
    }
}

void spw_mel_apply(const struct spw_mel_bank *b, const float *spec, int64_t frames, float *mel)
{
    for (int m = 0; m < b->n_mels; m++) {
        float *restrict row = mel + (int64_t)m * frames;
        memset(row, 0, sizeof(float) * (size_t)frames);
        for (int k = 0; k < b->count[m]; k++) {
            const float *restrict src = spec + (int64_t)(b->first[m] + k) * frames;
            const float w = b->w[m][k];
            for (int64_t t = 0; t < frames; t++)
                row[t] += w * src[t];
        }
    }
}
