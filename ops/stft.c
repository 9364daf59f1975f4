/* ops/stft.c - STFT magnitudes (torch.stft semantics, periodic Hann window) over FFTW single precision.
 * Not a mel or log transform (ops/mel.c). Thread model: plans live in one process-wide table guarded by a
 * mutex (FFTW's planner is not thread-safe) and are never freed or evicted; spw_stft_run only executes a
 * plan on the caller's scratch (fftwf_execute_dft_r2c is thread-safe) and may run on many threads at once. */
#include "ops/stft.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

/* Plans are never evicted (callers keep the pointer for the process's life), so the table has a hard cap:
 * a 65th distinct parameter set gets -ENOMEM. Real pipelines use a handful. */
#define MAX_PLANS 64
/* Scratch pieces start on 64-byte boundaries: FFTW's new-array execute needs the same alignment as the
 * arrays the plan was made on (fftwf_malloc: 16/32/64 bytes by SIMD level), and 64 covers all of them. */
#define SCRATCH_ALIGN_FLOATS 16
/* Frames computed before their magnitudes are written out as [F][T]: one 64-byte line per frequency row
 * instead of one cache line per (frequency, frame). */
#define FRAME_BATCH 16

struct spw_stft_plan {
    struct spw_stft_params p;
    int n_freqs;              /* n_fft / 2 + 1 */
    int win_left;             /* first nonzero window tap in the n_fft frame */
    float *window;            /* [win_length]: the Hann taps, placed at win_left */
    fftwf_plan fft;           /* r2c of size n_fft; shared by the plans with the same n_fft */
    int in_align, out_align;  /* fftwf_alignment_of the planning arrays: run checks scratch against them */
};

static pthread_mutex_t g_plans_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spw_stft_plan *g_plans[MAX_PLANS];
static int g_n_plans;
static atomic_int g_fftw_plans_made;

static int64_t round_up_floats(int64_t n)
{
    return (n + SCRATCH_ALIGN_FLOATS - 1) / SCRATCH_ALIGN_FLOATS * SCRATCH_ALIGN_FLOATS;
}

static bool params_valid(const struct spw_stft_params *p)
{
    return p->n_fft >= 2 && p->n_fft <= SPW_STFT_MAX_NFFT && p->hop_length >= 1 && p->win_length >= 1 &&
           p->win_length <= p->n_fft && (p->power == 1.0 || p->power == 2.0);
}

static bool params_equal(const struct spw_stft_params *a, const struct spw_stft_params *b)
{
    return a->n_fft == b->n_fft && a->hop_length == b->hop_length && a->win_length == b->win_length &&
           a->center == b->center && a->power == b->power;
}

/* torch.hann_window(L, periodic=True): 0.5 - 0.5 cos(2 pi k / L), and [1] for L == 1. */
static void fill_hann(float *w, int len)
{
    if (len == 1) {
        w[0] = 1.0f;
        return;
    }
    for (int k = 0; k < len; k++)
        w[k] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * k / len));
}

/* An FFTW plan of this size made earlier (caller holds g_plans_mu), or NULL. */
static const struct spw_stft_plan *find_same_size(int n_fft)
{
    for (int i = 0; i < g_n_plans; i++)
        if (g_plans[i]->p.n_fft == n_fft)
            return g_plans[i];
    return NULL;
}

/* Plans an r2c transform on fftwf_malloc'd arrays laid out as in the scratch (caller holds g_plans_mu). */
static int make_fftw_plan(struct spw_stft_plan *pl)
{
    const struct spw_stft_plan *same = find_same_size(pl->p.n_fft);
    if (same) {
        pl->fft = same->fft;
        pl->in_align = same->in_align;
        pl->out_align = same->out_align;
        return 0;
    }
    float *in = fftwf_malloc(sizeof(float) * (size_t)pl->p.n_fft);
    fftwf_complex *out = fftwf_malloc(sizeof(fftwf_complex) * (size_t)pl->n_freqs);
    int rc = -ENOMEM;
    if (!in || !out)
        goto out;
    pl->fft = fftwf_plan_dft_r2c_1d(pl->p.n_fft, in, out, FFTW_ESTIMATE);
    if (!pl->fft)
        goto out;
    pl->in_align = fftwf_alignment_of(in);
    pl->out_align = fftwf_alignment_of((float *)out);
    atomic_fetch_add(&g_fftw_plans_made, 1);
    rc = 0;
out:
    fftwf_free(out);
    fftwf_free(in);
    return rc;
}

/* Builds a plan (caller holds g_plans_mu). */
static int make_plan(const struct spw_stft_params *p, struct spw_stft_plan **out)
{
    struct spw_stft_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return -ENOMEM;
    pl->p = *p;
    pl->n_freqs = p->n_fft / 2 + 1;
    pl->win_left = (p->n_fft - p->win_length) / 2;
    pl->window = malloc(sizeof(float) * (size_t)p->win_length);
    if (!pl->window || make_fftw_plan(pl) != 0) {
        free(pl->window);
        free(pl);
        return -ENOMEM;
    }
    fill_hann(pl->window, p->win_length);
    *out = pl;
    return 0;
}

int spw_stft_plan_get(const struct spw_stft_params *p, const struct spw_stft_plan **out)
{
    if (!p || !params_valid(p))
        return -EINVAL;
    int rc = 0;
    struct spw_stft_plan *pl = NULL;
    pthread_mutex_lock(&g_plans_mu);
    for (int i = 0; i < g_n_plans && !pl; i++)
        if (params_equal(&g_plans[i]->p, p))
            pl = g_plans[i];
    if (!pl) {
        rc = g_n_plans < MAX_PLANS ? make_plan(p, &pl) : -ENOMEM;
        if (rc == 0)
            g_plans[g_n_plans++] = pl;
    }
    pthread_mutex_unlock(&g_plans_mu);
    if (rc == 0)
        *out = pl;
    return rc;
}

int spw_stft_plans_made(void)
{
    return atomic_load(&g_fftw_plans_made);
}

int64_t spw_stft_frames(const struct spw_stft_params *p, int64_t n)
{
    int64_t pad = p->center ? p->n_fft / 2 : 0;
    if (p->center && n <= pad)
        return -1;
    int64_t padded = n + 2 * pad;
    if (padded < p->n_fft)
        return 0;
    return 1 + (padded - p->n_fft) / p->hop_length;
}

/* Layout: frame input [n_fft], FFT output [n_freqs complex], magnitudes [n_freqs][FRAME_BATCH]. */
int64_t spw_stft_scratch_floats(const struct spw_stft_params *p)
{
    int64_t n_freqs = p->n_fft / 2 + 1;
    return round_up_floats(p->n_fft) + round_up_floats(2 * n_freqs) + FRAME_BATCH * n_freqs;
}

/* Sample i of the signal reflect-padded on both sides (x[-i] = x[i], x[n-1+i] = x[n-1-i]); the padding is
 * shorter than n, so one reflection always lands inside. */
static float reflected(const float *x, int64_t n, int64_t i)
{
    if (i < 0)
        i = -i;
    else if (i >= n)
        i = 2 * (n - 1) - i;
    return x[i];
}

/* Windowed frame starting at signal position start (negative or running past n under center padding). */
static void load_frame(const struct spw_stft_plan *pl, const float *x, int64_t n, int64_t start, float *in)
{
    const int left = pl->win_left, len = pl->p.win_length;
    const float *w = pl->window;
    memset(in, 0, sizeof(float) * (size_t)left);
    memset(in + left + len, 0, sizeof(float) * (size_t)(pl->p.n_fft - left - len));
    int64_t s = start + left;
    if (s >= 0 && s + len <= n) {
        for (int k = 0; k < len; k++)
            in[left + k] = x[s + k] * w[k];
    } else {
        for (int k = 0; k < len; k++)
            in[left + k] = reflected(x, n, s + k) * w[k];
    }
}

/* Frame b's magnitudes into column b of mag [n_freqs][FRAME_BATCH]. */
static void magnitudes(const float *spec, int n_freqs, bool squared, float *mag, int b)
{
    if (squared) {
        for (int f = 0; f < n_freqs; f++)
            mag[f * FRAME_BATCH + b] = spec[2 * f] * spec[2 * f] + spec[2 * f + 1] * spec[2 * f + 1];
    } else {
        for (int f = 0; f < n_freqs; f++)
            mag[f * FRAME_BATCH + b] = sqrtf(spec[2 * f] * spec[2 * f] + spec[2 * f + 1] * spec[2 * f + 1]);
    }
}

void spw_stft_run_frames(const struct spw_stft_plan *pl, const float *x, int64_t n, spw_stft_emit_fn emit,
                         void *ctx, float *scratch)
{
    const int64_t frames = spw_stft_frames(&pl->p, n);
    assert(frames >= 0);
    assert(((uintptr_t)scratch & (SCRATCH_ALIGN_FLOATS * sizeof(float) - 1)) == 0);
    float *in = scratch;
    float *spec = in + round_up_floats(pl->p.n_fft);
    float *mag = spec + round_up_floats(2 * (int64_t)pl->n_freqs);
    assert(fftwf_alignment_of(in) == pl->in_align && fftwf_alignment_of(spec) == pl->out_align);
    const int64_t pad = pl->p.center ? pl->p.n_fft / 2 : 0;
    for (int64_t t0 = 0; t0 < frames; t0 += FRAME_BATCH) {
        int batch = frames - t0 < FRAME_BATCH ? (int)(frames - t0) : FRAME_BATCH;
        for (int b = 0; b < batch; b++) {
            load_frame(pl, x, n, (t0 + b) * pl->p.hop_length - pad, in);
            fftwf_execute_dft_r2c(pl->fft, in, (fftwf_complex *)spec);
            magnitudes(spec, pl->n_freqs, pl->p.power == 2.0, mag, b);
        }
        emit(ctx, mag, FRAME_BATCH, t0, batch);
    }
}

void spw_stft_frame_power(const struct spw_stft_plan *pl, float *scratch, float *power)
{
    float *spec = scratch + round_up_floats(pl->p.n_fft);
    fftwf_execute_dft_r2c(pl->fft, scratch, (fftwf_complex *)spec);
    for (int f = 0; f < pl->n_freqs; f++)
        power[f] = spec[2 * f] * spec[2 * f] + spec[2 * f + 1] * spec[2 * f + 1];
}

struct column_writer {
    int n_freqs;
    int64_t frames;
    float *out;
};

static void write_columns(void *ctx, const float *mag, int stride, int64_t t0, int count)
{
    const struct column_writer *w = ctx;
    for (int f = 0; f < w->n_freqs; f++)
        memcpy(w->out + (int64_t)f * w->frames + t0, mag + (int64_t)f * stride, sizeof(float) * (size_t)count);
}

void spw_stft_run(const struct spw_stft_plan *pl, const float *x, int64_t n, float *out, float *scratch)
{
    struct column_writer w = {pl->n_freqs, spw_stft_frames(&pl->p, n), out};
    spw_stft_run_frames(pl, x, n, write_columns, &w, scratch);
}
