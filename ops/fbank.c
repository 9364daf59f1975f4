/* ops/fbank.c - Kaldi fbank (see fbank.h), in float32 as torchaudio computes it (a frame's sums in double),
 * each pass over a frame a loop the compiler vectorizes. Tables shared, read-only after init; thread-safe. */
#include "ops/fbank.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/fastmath.h"
#include "ops/stft.h"

#define SCRATCH_ALIGN 16    /* floats: 64 bytes, as ops/stft.c lays its scratch out */

static int64_t round_up(int64_t n)
{
    return (n + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

static double mel(double f)
{
    return 1127.0 * log(1.0 + f / 700.0);
}

static void fill_window(float *w, int n, enum spw_kaldi_window t)
{
    const double a = 2.0 * M_PI / (n - 1);
    for (int k = 0; k < n; k++) {
        const double hann = 0.5 - 0.5 * cos(a * k);
        switch (t) {
        case SPW_KALDI_HAMMING: w[k] = (float)(0.54 - 0.46 * cos(a * k)); break;
        case SPW_KALDI_HANNING: w[k] = (float)hann; break;
        case SPW_KALDI_POVEY: w[k] = (float)pow(hann, 0.85); break;
        case SPW_KALDI_RECTANGULAR: w[k] = 1.0f; break;
        case SPW_KALDI_BLACKMAN: w[k] = (float)(0.42 - 0.5 * cos(a * k) + 0.08 * cos(2.0 * a * k)); break;
        }
    }
}

int spw_fbank_init(struct spw_fbank *fb, const struct spw_fbank_params *p, char *err, size_t errlen)
{
    memset(fb, 0, sizeof *fb);
    fb->p = *p;
    fb->window_shift = (int)(p->sample_frequency * p->frame_shift * 0.001);
    fb->window_size = (int)(p->sample_frequency * p->frame_length * 0.001);
    int padded = 1;
    while (padded < fb->window_size)    /* round_to_power_of_two */
        padded *= 2;
    fb->padded = padded;
    fb->n_freqs = padded / 2 + 1;
    const double nyquist = 0.5 * p->sample_frequency;
    const double high = p->high_freq <= 0 ? p->high_freq + nyquist : p->high_freq, low = p->low_freq;
    if (fb->window_size < 2 || padded > SPW_STFT_MAX_NFFT)
        return spw_fail(err, errlen, -EINVAL, "frame_length %g ms at %g Hz is %d samples: give 2 to %d",
                        p->frame_length, p->sample_frequency, fb->window_size, SPW_STFT_MAX_NFFT);
    if (fb->window_shift < 1)
        return spw_fail(err, errlen, -EINVAL, "frame_shift %g ms at %g Hz is under one sample", p->frame_shift,
                        p->sample_frequency);
    if (p->num_mel_bins <= 3)
        return spw_fail(err, errlen, -EINVAL, "num_mel_bins %d: must be more than 3", p->num_mel_bins);
    if (!(low >= 0 && low < nyquist && high > 0 && high <= nyquist && low < high))
        return spw_fail(err, errlen, -EINVAL, "low_freq %g and high_freq %g (%g) against the Nyquist frequency %g: "
                        "need 0 <= low < high <= Nyquist", low, p->high_freq, high, nyquist);
    const struct spw_stft_params sp = {.n_fft = padded, .hop_length = 1, .win_length = padded, .center = false,
                                       .power = 2};
    int rc = spw_stft_plan_get(&sp, &fb->fft);
    fb->window = malloc(sizeof(float) * (size_t)fb->window_size);
    fb->banks = calloc((size_t)p->num_mel_bins * (size_t)fb->n_freqs, sizeof(float));
    fb->band = calloc(2 * (size_t)p->num_mel_bins, sizeof(int));
    if (rc || !fb->window || !fb->banks || !fb->band) {
        spw_fbank_free(fb);
        return spw_fail(err, errlen, -ENOMEM, "out of memory for fbank's tables");
    }
    fill_window(fb->window, fb->window_size, p->window_type);
    const double lo = mel(low), delta = (mel(high) - lo) / (p->num_mel_bins + 1), width = p->sample_frequency / padded;
    for (int b = 0; b < p->num_mel_bins; b++) {     /* get_mel_banks without VTLN */
        const double left = lo + b * delta, center = lo + (b + 1) * delta, right = lo + (b + 2) * delta;
        for (int k = 0; k < padded / 2; k++) {
            const double m = mel(width * k), up = (m - left) / (center - left), down = (right - m) / (right - center);
            const double w = up < down ? up : down;
            fb->banks[(size_t)b * fb->n_freqs + k] = w > 0 ? (float)w : 0.0f;
        }
        int first = 0, end = fb->n_freqs;       /* the sum skips zero weights: x + 0.0 * finite is x */
        while (first < end && fb->banks[(size_t)b * fb->n_freqs + first] == 0.0f)
            first++;
        while (end > first && fb->banks[(size_t)b * fb->n_freqs + end - 1] == 0.0f)
            end--;
        fb->band[2 * b] = first, fb->band[2 * b + 1] = end;
    }
    return 0;
}

void spw_fbank_free(struct spw_fbank *fb)
{
    free(fb->window);
    free(fb->banks);
    free(fb->band);
    fb->window = fb->banks = NULL;
    fb->band = NULL;
}

#define MAX_SHARED 64
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spw_fbank *g_shared[MAX_SHARED];
static int g_n_shared;

static bool same(const struct spw_fbank_params *a, const struct spw_fbank_params *b)
{
    return a->num_mel_bins == b->num_mel_bins && a->frame_length == b->frame_length &&
           a->frame_shift == b->frame_shift && a->sample_frequency == b->sample_frequency && a->dither == b->dither &&
           a->preemphasis_coefficient == b->preemphasis_coefficient && a->energy_floor == b->energy_floor &&
           a->low_freq == b->low_freq && a->high_freq == b->high_freq && a->window_type == b->window_type &&
           a->remove_dc_offset == b->remove_dc_offset && a->raw_energy == b->raw_energy &&
           a->use_energy == b->use_energy && a->htk_compat == b->htk_compat && a->snip_edges == b->snip_edges;
}

int spw_fbank_get(const struct spw_fbank_params *p, const struct spw_fbank **out, char *err, size_t errlen)
{
    int rc = 0;
    struct spw_fbank *fb = NULL;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n_shared && !fb; i++)
        if (same(&g_shared[i]->p, p))
            fb = g_shared[i];
    if (!fb && g_n_shared == MAX_SHARED)
        rc = spw_fail(err, errlen, -ENOSPC, "more than %d distinct fbank settings in one process", MAX_SHARED);
    if (!fb && rc == 0) {
        fb = calloc(1, sizeof *fb);
        rc = fb ? spw_fbank_init(fb, p, err, errlen) : spw_fail(err, errlen, -ENOMEM, "out of memory");
        if (rc == 0)
            g_shared[g_n_shared++] = fb;
        else
            free(fb), fb = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    *out = fb;
    return rc;
}

int64_t spw_fbank_frames(const struct spw_fbank *fb, int64_t n)
{
    if (n < fb->window_size)
        return -1;
    return fb->p.snip_edges ? 1 + (n - fb->window_size) / fb->window_shift
                            : (n + fb->window_shift / 2) / fb->window_shift;
}

int spw_fbank_rows(const struct spw_fbank *fb)
{
    return fb->p.num_mel_bins + (fb->p.use_energy ? 1 : 0);
}

int64_t spw_fbank_scratch_floats(const struct spw_fbank *fb)
{
    /* the FFT's input and output (as spw_stft_run's scratch), the power spectrum, one frame, its dither, the
     * mel energies */
    return round_up(fb->padded) + round_up(2 * (int64_t)fb->n_freqs) + round_up(fb->n_freqs) +
           2 * round_up(fb->window_size) + round_up(fb->p.num_mel_bins);
}

/* Sample i of Kaldi's mirrored signal: x[-1 - j] = x[j] and x[n + j] = x[n - 1 - j] (the edge repeated). */
static float mirrored(const float *x, int64_t n, int64_t i)
{
    if (i < 0)
        i = -i - 1;
    if (i >= n)
        i = 2 * n - 1 - i;
    return x[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ln(max(sum of squares, FLT_EPSILON)), floored at ln(energy_floor) when that is set. */
static float log_energy(const float *f, int n, double floor)
{
    double e = 0;
    for (int k = 0; k < n; k++)
        e += (double)f[k] * f[k];
    e = log(e > FLT_EPSILON ? e : FLT_EPSILON);
    return (float)(floor > 0 && e < log(floor) ? log(floor) : e);
}

/* Mel bank b's energy in the power spectrum (its band only: the rest of the row is zeros), floored at
 * FLT_EPSILON: a float32 dot product as torch.mm's, in eight partial sums the compiler vectorizes. */
static float mel_energy(const struct spw_fbank *fb, const float *restrict power, int b)
{
    const float *restrict w = fb->banks + (size_t)b * fb->n_freqs;
    const int end = fb->band[2 * b + 1];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, e = 0;
    int k = fb->band[2 * b];
    for (; k + 8 <= end; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += w[k + j] * power[k + j];
    for (; k < end; k++)
        e += w[k] * power[k];
    e += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return e > FLT_EPSILON ? e : FLT_EPSILON;
}

/* One frame as torchaudio's _get_window prepares it, in float32: dither, DC offset, raw energy, pre-emphasis
 * (the first sample against itself) and the window, into the FFT's zero-padded input. Returns the log
 * energy (when the frame's energy is wanted). */
static float prepare_frame(const struct spw_fbank *fb, float *restrict f, const float *restrict noise,
                           float *restrict in)
{
    const struct spw_fbank_params *p = &fb->p;
    const int size = fb->window_size;
    if (noise) {
        const float dither = (float)p->dither;
        for (int k = 0; k < size; k++)
            f[k] += noise[k] * dither;
    }
    if (p->remove_dc_offset) {
        double sum = 0;
        for (int k = 0; k < size; k++)
            sum += f[k];
        const float mean = (float)(sum / size);
        for (int k = 0; k < size; k++)
            f[k] -= mean;
    }
    float energy = 0;
    if (p->use_energy && p->raw_energy)
        energy = log_energy(f, size, p->energy_floor);
    const float coef = (float)p->preemphasis_coefficient, *restrict w = fb->window;
    in[0] = (f[0] - coef * f[0]) * w[0];
    for (int k = 1; k < size; k++)
        in[k] = (f[k] - coef * f[k - 1]) * w[k];
    for (int k = size; k < fb->padded; k++)
        in[k] = 0.0f;
    if (p->use_energy && !p->raw_energy)
        energy = log_energy(in, size, p->energy_floor);
    return energy;
}

void spw_fbank_run(const struct spw_fbank *fb, const float *x, int64_t n, struct spw_rng *rng, float *out,
                   float *scratch)
{
    const struct spw_fbank_params *p = &fb->p;
    const int64_t frames = spw_fbank_frames(fb, n);
    const int size = fb->window_size, bins = p->num_mel_bins;
    const int64_t pad = p->snip_edges ? 0 : fb->window_size / 2 - fb->window_shift / 2;
    float *in = scratch, *power = scratch + round_up(fb->padded) + round_up(2 * (int64_t)fb->n_freqs);
    float *frame = power + round_up(fb->n_freqs), *noise = frame + round_up(size), *mel = noise + round_up(size);
    const int energy_row = p->htk_compat ? bins : 0, mel_row = p->use_energy && !p->htk_compat ? 1 : 0;
    struct spw_fastrng rand;            /* the dither: a normal per sample, from the op's stream */
    if (p->dither != 0)
        spw_fastrng_seed(&rand, rng);
    for (int64_t t = 0; t < frames; t++) {
        const int64_t start = t * fb->window_shift - pad;
        if (start >= 0 && start + size <= n)
            memcpy(frame, x + start, (size_t)size * sizeof *frame);
        else
            for (int k = 0; k < size; k++)
                frame[k] = mirrored(x, n, start + k);
        if (p->dither != 0)
            spw_fastrng_normals(&rand, noise, size);
        const float energy = prepare_frame(fb, frame, p->dither != 0 ? noise : NULL, in);
        spw_stft_frame_power(fb->fft, scratch, power);
        uint32_t odd = 0;
        for (int b = 0; b < bins; b++) {
            union { float f; uint32_t u; } e = {.f = mel_energy(fb, power, b)};
            mel[b] = e.f;
            odd |= e.u >= 0x7f800000u;      /* infinite or NaN (a huge or broken input) */
        }
        if (odd)
            for (int b = 0; b < bins; b++)
                mel[b] = logf(mel[b]);
        else                                /* normal floats: the vectorized ln, within an ulp */
            spw_fast_log_block(mel, bins, 0.0f);
        for (int b = 0; b < bins; b++)
            out[(size_t)(mel_row + b) * frames + t] = mel[b];
        if (p->use_energy)
            out[(size_t)energy_row * frames + t] = energy;
    }
}
