/* tests/unit/check_stft.c - ops/stft and ops/mel on synthetic signals: a tone lands in its bin, frame counts
 * follow torch.stft, FFTW plans are made once per size (also from 4 threads at once), the window is centred
 * (Parseval per frame), power 1 is the root of power 2, and mel banks have the triangles and slaney areas
 * torchaudio's formulas give. The numeric match to torch itself is tests/audio/dsp_reference.py. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "ops/mel.h"
#include "ops/stft.h"

static float *alloc_scratch(const struct spw_stft_params *p)
{
    size_t bytes = (size_t)spw_stft_scratch_floats(p) * sizeof(float);
    float *s = aligned_alloc(64, (bytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Magnitudes of x as [n_fft/2+1][frames]; *frames gets the frame count. */
static float *stft(const struct spw_stft_params *p, const float *x, int64_t n, int64_t *frames)
{
    const struct spw_stft_plan *pl;
    ck_assert_int_eq(spw_stft_plan_get(p, &pl), 0);
    *frames = spw_stft_frames(p, n);
    ck_assert_int_gt(*frames, 0);
    float *out = malloc(sizeof(float) * (size_t)(p->n_fft / 2 + 1) * (size_t)*frames);
    float *scratch = alloc_scratch(p);
    spw_stft_run(pl, x, n, out, scratch);
    free(scratch);
    return out;
}

/* Deterministic noise in [-1, 1) (xorshift), so failures reproduce. */
static void fill_noise(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        x[i] = (float)(seed / 2147483648.0 - 1.0);
    }
}

static double hann(int k, int len)
{
    return 0.5 - 0.5 * cos(2.0 * M_PI * k / len);
}

START_TEST(test_stft_tone_peaks_in_its_bin)
{
    /* cos at bin 16 of 512 over 16 * 256 + 1 samples: even about both ends, so the reflection padding
     * continues the tone exactly and every frame, edge ones too, sees a pure bin-16 tone. */
    const int n_fft = 512, bin = 16;
    const int64_t n = 16 * 256 + 1;
    float *x = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)cos(2.0 * M_PI * bin * (double)i / n_fft);
    for (int center = 0; center <= 1; center++) {
        struct spw_stft_params p = {.n_fft = n_fft, .hop_length = 160, .win_length = n_fft, .center = center,
                                    .power = 2};
        int64_t frames;
        float *s = stft(&p, x, n, &frames);
        for (int64_t t = 0; t < frames; t++) {
            int best = 0;
            for (int f = 1; f <= n_fft / 2; f++)
                if (s[f * frames + t] > s[best * frames + t])
                    best = f;
            ck_assert_msg(best == bin, "center %d frame %lld peaks at bin %d", center, (long long)t, best);
        }
        free(s);
    }
    free(x);
}
END_TEST

START_TEST(test_stft_frame_counts_follow_torch)
{
    struct spw_stft_params p = {.n_fft = 512, .hop_length = 128, .win_length = 400, .center = true, .power = 2};
    ck_assert_int_eq(spw_stft_frames(&p, 1000), 8);   /* 1 + (1000 + 512 - 512) / 128 */
    ck_assert_int_eq(spw_stft_frames(&p, 257), 3);
    ck_assert_int_eq(spw_stft_frames(&p, 256), -1);   /* reflection needs n > n_fft / 2 */
    p.center = false;
    ck_assert_int_eq(spw_stft_frames(&p, 1000), 4);   /* 1 + (1000 - 512) / 128 */
    ck_assert_int_eq(spw_stft_frames(&p, 512), 1);
    ck_assert_int_eq(spw_stft_frames(&p, 511), 0);
    p = (struct spw_stft_params){.n_fft = 401, .hop_length = 100, .win_length = 401, .center = true, .power = 1};
    ck_assert_int_eq(spw_stft_frames(&p, 1000), 10);  /* odd n_fft pads 200 a side: 1 + (1400 - 401) / 100 */
}
END_TEST

START_TEST(test_stft_rejects_bad_params)
{
    const struct spw_stft_plan *pl = NULL;
    struct spw_stft_params ok = {.n_fft = 512, .hop_length = 128, .win_length = 400, .center = true, .power = 2};
    struct spw_stft_params p = ok;
    p.power = 3;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), -EINVAL);
    p = ok;
    p.win_length = 513;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), -EINVAL);
    p = ok;
    p.hop_length = 0;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), -EINVAL);
    p = ok;
    p.n_fft = SPW_STFT_MAX_NFFT + 1;
    p.win_length = 400;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), -EINVAL);
    ck_assert_ptr_null(pl);
}
END_TEST

struct plan_race {
    pthread_barrier_t *start;
    struct spw_stft_params p;
    const struct spw_stft_plan *got;
    int rc;
};

static void *get_plan_after_barrier(void *arg)
{
    struct plan_race *r = arg;
    pthread_barrier_wait(r->start);
    r->rc = spw_stft_plan_get(&r->p, &r->got);
    return NULL;
}

START_TEST(test_stft_plans_made_once_per_shape)
{
    /* sizes no other test uses, so the counts hold also under CK_FORK=no */
    struct spw_stft_params p = {.n_fft = 770, .hop_length = 100, .win_length = 700, .center = true, .power = 1};
    const struct spw_stft_plan *a, *b;
    int before = spw_stft_plans_made();
    ck_assert_int_eq(spw_stft_plan_get(&p, &a), 0);
    ck_assert_int_eq(spw_stft_plan_get(&p, &b), 0);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(spw_stft_plans_made(), before + 1);

    /* same n_fft, other hop: a new plan sharing the FFTW plan */
    p.hop_length = 77;
    ck_assert_int_eq(spw_stft_plan_get(&p, &b), 0);
    ck_assert_ptr_ne(a, b);
    ck_assert_int_eq(spw_stft_plans_made(), before + 1);

    /* a new n_fft from 4 threads at once: one plan, the same pointer for all */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 4);
    struct plan_race r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct plan_race){.start = &start, .p = p};
        r[i].p.n_fft = 772;
        pthread_create(&th[i], NULL, get_plan_after_barrier, &r[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(r[i].rc, 0);
        ck_assert_ptr_eq(r[i].got, r[0].got);
    }
    ck_assert_int_eq(spw_stft_plans_made(), before + 2);

    p.n_fft = 774;
    ck_assert_int_eq(spw_stft_plan_get(&p, &b), 0);
    ck_assert_int_eq(spw_stft_plans_made(), before + 3);
}
END_TEST

struct run_job {
    const struct spw_stft_params *p;
    const float *x;
    int64_t n;
    float *out;
};

static void *run_stft_job(void *arg)
{
    struct run_job *j = arg;
    const struct spw_stft_plan *pl;
    ck_assert_int_eq(spw_stft_plan_get(j->p, &pl), 0);
    float *scratch = alloc_scratch(j->p);
    for (int rep = 0; rep < 20; rep++)
        spw_stft_run(pl, j->x, j->n, j->out, scratch);
    free(scratch);
    return NULL;
}

START_TEST(test_stft_run_from_threads_matches_serial)
{
    const int64_t n = 8001;
    float *x = malloc(sizeof(float) * n);
    fill_noise(x, n, 4242);
    struct spw_stft_params p = {.n_fft = 512, .hop_length = 128, .win_length = 400, .center = true, .power = 1};
    int64_t frames;
    float *serial = stft(&p, x, n, &frames);
    const size_t n_out = (size_t)(p.n_fft / 2 + 1) * (size_t)frames;
    struct run_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct run_job){.p = &p, .x = x, .n = n, .out = malloc(sizeof(float) * n_out)};
        pthread_create(&th[i], NULL, run_stft_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert(memcmp(jobs[i].out, serial, sizeof(float) * n_out) == 0);
        free(jobs[i].out);
    }
    free(serial);
    free(x);
}
END_TEST

/* Plans are never evicted, so the table refuses a new shape once full and keeps serving the old ones. Runs
 * last: under CK_FORK=no it leaves the table full. */
START_TEST(test_stft_plan_table_is_capped)
{
    struct spw_stft_params p = {.n_fft = 300, .hop_length = 1, .win_length = 300, .center = false, .power = 2};
    const struct spw_stft_plan *first, *pl;
    ck_assert_int_eq(spw_stft_plan_get(&p, &first), 0);
    int rc = 0, made = 1;
    while (rc == 0 && made < 1000) {
        p.hop_length++;
        rc = spw_stft_plan_get(&p, &pl);
        made += rc == 0;
    }
    ck_assert_int_eq(rc, -ENOMEM);
    ck_assert_int_le(made, 64);
    p.hop_length = 1;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), 0);
    ck_assert_ptr_eq(pl, first);
}
END_TEST

/* Parseval for a one-sided power spectrum of a real frame: sum |x|^2 = (P_0 + P_N/2 + 2 sum P_k) / N. */
static double onesided_energy(const float *s, int n_fft, int64_t frames, int64_t t)
{
    double e = s[t] + s[(int64_t)(n_fft / 2) * frames + t];
    for (int f = 1; f < n_fft / 2; f++)
        e += 2.0 * s[f * frames + t];
    return e / n_fft;
}

/* Energy of the windowed frame t computed directly, reflecting indices as torch's center padding does. */
static double windowed_energy(const float *x, int64_t n, const struct spw_stft_params *p, int64_t t)
{
    int64_t start = t * p->hop_length - (p->center ? p->n_fft / 2 : 0) + (p->n_fft - p->win_length) / 2;
    double e = 0;
    for (int k = 0; k < p->win_length; k++) {
        int64_t i = start + k;
        i = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
        double v = x[i] * hann(k, p->win_length);
        e += v * v;
    }
    return e;
}

START_TEST(test_stft_window_centred_parseval)
{
    const int64_t n = 3001;
    float *x = malloc(sizeof(float) * n);
    fill_noise(x, n, 12345);
    for (int center = 0; center <= 1; center++) {
        struct spw_stft_params p = {.n_fft = 512, .hop_length = 160, .win_length = 400, .center = center,
                                    .power = 2};
        int64_t frames;
        float *s = stft(&p, x, n, &frames);
        for (int64_t t = 0; t < frames; t++) {
            double want = windowed_energy(x, n, &p, t), got = onesided_energy(s, p.n_fft, frames, t);
            ck_assert_msg(fabs(got - want) <= 1e-4 * want, "center %d frame %lld: %g vs %g", center,
                          (long long)t, got, want);
        }
        free(s);
    }
    free(x);
}
END_TEST

START_TEST(test_stft_power1_is_root_of_power2)
{
    const int64_t n = 2049;
    float *x = malloc(sizeof(float) * n);
    fill_noise(x, n, 777);
    struct spw_stft_params p = {.n_fft = 256, .hop_length = 100, .win_length = 256, .center = true, .power = 1};
    int64_t frames;
    float *mag = stft(&p, x, n, &frames);
    p.power = 2;
    float *pow2 = stft(&p, x, n, &frames);
    float peak = 0;
    for (int64_t i = 0; i < (int64_t)(p.n_fft / 2 + 1) * frames; i++)
        peak = fmaxf(peak, pow2[i]);
    for (int64_t i = 0; i < (int64_t)(p.n_fft / 2 + 1) * frames; i++)
        ck_assert_float_eq_tol(mag[i] * mag[i], pow2[i], 1e-6 * peak);
    free(pow2);
    free(mag);
    free(x);
}
END_TEST

static float *dense(const struct spw_mel_bank *b)
{
    float *d = malloc(sizeof(float) * (size_t)b->n_freqs * (size_t)b->n_mels);
    spw_mel_bank_dense(b, d);
    return d;
}

/* slaney scale below 1 kHz is linear (200/3 Hz per mel): 0..1000 Hz in 3 filters puts the corners at
 * 0, 250, 500, 750, 1000 Hz, and bins every 100 Hz (n_freqs 11, sample rate 2000) sample them exactly. */
START_TEST(test_mel_known_values)
{
    struct spw_mel_bank b;
    ck_assert_int_eq(spw_mel_bank_init(&b, 11, 0, 1000, 3, 2000, SPW_MEL_SLANEY, SPW_MEL_NORM_NONE), 0);
    float *d = dense(&b);
    const float want0[11] = {0, 0.4f, 0.8f, 0.8f, 0.4f, 0, 0, 0, 0, 0, 0};
    for (int f = 0; f < 11; f++)
        ck_assert_float_eq_tol(d[f * 3 + 0], want0[f], 1e-6);
    ck_assert_float_eq_tol(d[5 * 3 + 1], 1.0f, 1e-6);   /* filter 1 peaks at 500 Hz */
    ck_assert_float_eq_tol(d[7 * 3 + 2], 0.8f, 1e-6);   /* filter 2 rises from 500 Hz to 750 Hz */
    ck_assert_float_eq_tol(d[7 * 3 + 1], 0.2f, 1e-6);   /* while filter 1 falls */
    /* rows sum to 1 between the first and last peak (250..750 Hz): neighbouring triangles cross-fade */
    for (int f = 3; f <= 7; f++)
        ck_assert_float_eq_tol(d[f * 3] + d[f * 3 + 1] + d[f * 3 + 2], 1.0f, 1e-6);
    ck_assert_int_eq(b.first[0], 1);
    ck_assert_int_eq(b.count[0], 4);
    free(d);
    spw_mel_bank_free(&b);

    /* slaney norm: filter 0 spans 0..500 Hz, so its weights are scaled by 2 / 500 */
    ck_assert_int_eq(spw_mel_bank_init(&b, 11, 0, 1000, 3, 2000, SPW_MEL_SLANEY, SPW_MEL_NORM_SLANEY), 0);
    d = dense(&b);
    ck_assert_float_eq_tol(d[2 * 3 + 0], 0.8f * 2 / 500, 1e-9);
    ck_assert_float_eq_tol(d[5 * 3 + 1], 2.0f / 500, 1e-9);
    free(d);
    spw_mel_bank_free(&b);
}
END_TEST

START_TEST(test_mel_htk_rows_sum_to_one_inside)
{
    struct spw_mel_bank b;
    const int n_freqs = 513, n_mels = 40, sr = 16000;
    ck_assert_int_eq(spw_mel_bank_init(&b, n_freqs, 0, 8000, n_mels, sr, SPW_MEL_HTK, SPW_MEL_NORM_NONE), 0);
    float *d = dense(&b);
    /* bins from the first filter's peak to the last one's (its largest weight: bins before it are below
     * the peak, since past the peak the weights fall) */
    int lo = b.first[1], hi = b.first[n_mels - 1];
    for (int k = 1; k < b.count[n_mels - 1]; k++)
        if (b.w[n_mels - 1][k] > b.w[n_mels - 1][hi - b.first[n_mels - 1]])
            hi = b.first[n_mels - 1] + k;
    ck_assert_int_gt(hi - lo, 400);
    for (int f = lo; f < hi; f++) {
        float sum = 0;
        for (int m = 0; m < n_mels; m++)
            sum += d[f * n_mels + m];
        ck_assert_msg(fabsf(sum - 1.0f) < 1e-5f, "bin %d sums to %g", f, sum);
    }
    free(d);
    spw_mel_bank_free(&b);
}
END_TEST

START_TEST(test_mel_slaney_norm_gives_unit_area)
{
    /* area in Hz of a slaney-normed triangle is 1 (0.5 * width * 2 / width); bins 3.9 Hz apart sample the
     * >= 100 Hz wide filters finely enough for the Riemann sum to be within 2% */
    struct spw_mel_bank b;
    const int n_freqs = 2049, sr = 16000;
    const double df = (sr / 2) / (double)(n_freqs - 1);
    ck_assert_int_eq(spw_mel_bank_init(&b, n_freqs, 0, 8000, 40, sr, SPW_MEL_SLANEY, SPW_MEL_NORM_SLANEY), 0);
    for (int m = 0; m < b.n_mels; m++) {
        double area = 0;
        for (int k = 0; k < b.count[m]; k++)
            area += b.w[m][k] * df;
        ck_assert_msg(fabs(area - 1.0) < 0.02, "filter %d area %g", m, area);
    }
    spw_mel_bank_free(&b);
}
END_TEST

struct mel_sink {
    const struct spw_mel_bank *b;
    int64_t frames;
    float *mel;
};

static void mel_sink_emit(void *ctx, const float *mag, int stride, int64_t t0, int count)
{
    const struct mel_sink *m = ctx;
    spw_mel_apply_frames(m->b, mag, stride, count, t0, m->frames, m->mel);
}

/* stft+mel fused (frames handed to the bank a few at a time) gives the same floats as the spectrogram
 * stored whole and then the bank applied. */
START_TEST(test_stft_frames_into_mel_equals_whole_spectrogram)
{
    const struct spw_stft_params p = {512, 160, 400, true, 2.0};
    const int64_t n = 16000 * 3 + 77;
    float *x = malloc(sizeof(float) * (size_t)n);
    fill_noise(x, n, 7);
    int64_t frames;
    float *spec = stft(&p, x, n, &frames);
    struct spw_mel_bank b;
    ck_assert_int_eq(spw_mel_bank_init(&b, 257, 0, 8000, 80, 16000, SPW_MEL_SLANEY, SPW_MEL_NORM_SLANEY), 0);
    float *whole = malloc(sizeof(float) * 80 * (size_t)frames), *fused = malloc(sizeof(float) * 80 * (size_t)frames);
    spw_mel_apply(&b, spec, frames, whole);
    const struct spw_stft_plan *pl;
    ck_assert_int_eq(spw_stft_plan_get(&p, &pl), 0);
    float *scratch = alloc_scratch(&p);
    struct mel_sink sink = {&b, frames, fused};
    spw_stft_run_frames(pl, x, n, mel_sink_emit, &sink, scratch);
    ck_assert_int_eq(memcmp(whole, fused, sizeof(float) * 80 * (size_t)frames), 0);
    free(scratch);
    free(fused);
    free(whole);
    free(spec);
    free(x);
    spw_mel_bank_free(&b);
}
END_TEST

START_TEST(test_mel_apply_matches_dense_and_empty_filters)
{
    /* 5 bins 1 kHz apart under 40 mels: most filters fall between bins and are empty (count 0) */
    struct spw_mel_bank b;
    ck_assert_int_eq(spw_mel_bank_init(&b, 5, 0, 4000, 40, 8000, SPW_MEL_HTK, SPW_MEL_NORM_NONE), 0);
    int empty = 0;
    for (int m = 0; m < b.n_mels; m++)
        empty += b.count[m] == 0;
    ck_assert_int_gt(empty, 0);
    const int64_t frames = 37;
    float *spec = malloc(sizeof(float) * 5 * frames), *mel = malloc(sizeof(float) * 40 * frames);
    fill_noise(spec, 5 * frames, 99);
    spw_mel_apply(&b, spec, frames, mel);
    float *d = dense(&b);
    for (int m = 0; m < 40; m++)
        for (int64_t t = 0; t < frames; t++) {
            double want = 0;
            for (int f = 0; f < 5; f++)
                want += (double)d[f * 40 + m] * spec[f * frames + t];
            ck_assert_double_eq_tol(mel[m * frames + t], want, 1e-5);
        }
    free(d);
    free(mel);
    free(spec);
    spw_mel_bank_free(&b);
    ck_assert_int_eq(spw_mel_bank_init(&b, 5, 100, 50, 40, 8000, SPW_MEL_HTK, SPW_MEL_NORM_NONE), -EINVAL);
    ck_assert_int_eq(spw_mel_bank_init(&b, 5, 0, 5000, 40, 8000, SPW_MEL_HTK, SPW_MEL_NORM_NONE), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stft");
    TCase *tc = tcase_create("stft");
    tcase_add_test(tc, test_stft_tone_peaks_in_its_bin);
    tcase_add_test(tc, test_stft_frame_counts_follow_torch);
    tcase_add_test(tc, test_stft_rejects_bad_params);
    tcase_add_test(tc, test_stft_plans_made_once_per_shape);
    tcase_add_test(tc, test_stft_window_centred_parseval);
    tcase_add_test(tc, test_stft_power1_is_root_of_power2);
    tcase_add_test(tc, test_mel_known_values);
    tcase_add_test(tc, test_mel_htk_rows_sum_to_one_inside);
    tcase_add_test(tc, test_mel_slaney_norm_gives_unit_area);
    tcase_add_test(tc, test_mel_apply_matches_dense_and_empty_filters);
    tcase_add_test(tc, test_stft_frames_into_mel_equals_whole_spectrogram);
    tcase_add_test(tc, test_stft_run_from_threads_matches_serial);
    tcase_add_test(tc, test_stft_plan_table_is_capped);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
