/* ops/stft.h - short-time Fourier transform magnitudes with FFTW (single precision), as torch.stft with a
 * periodic Hann window (torch.hann_window(win_length) centred in n_fft), center padding by reflection, and
 * |X|^power. FFTW plans are made once per n_fft under a lock (FFTW's planner is not thread-safe) and kept
 * for the process; spw_stft_run executes them on the caller's buffers (new-array execute) from any thread.
 * A plan is the window and the FFTW plan; run allocates nothing beyond the scratch the caller passes. */
#ifndef SPW_OPS_STFT_H
#define SPW_OPS_STFT_H

#include <stdbool.h>
#include <stdint.h>

#define SPW_STFT_MAX_NFFT 65536

struct spw_stft_params {
    int n_fft;              /* [2, SPW_STFT_MAX_NFFT] */
    int hop_length;         /* >= 1 */
    int win_length;         /* [1, n_fft] */
    bool center;            /* pad n_fft/2 on both sides by reflection (torch's pad_mode "reflect") */
    double power;           /* 1 (magnitude) or 2 (power) */
};

struct spw_stft_plan;

/* The plan for these parameters (shared, made on first use; valid until process exit). Returns 0 with
 * *out, -EINVAL (bad parameters) or -ENOMEM. */
int spw_stft_plan_get(const struct spw_stft_params *p, const struct spw_stft_plan **out);
/* How many distinct FFTW plans the process has made (tests check plans are made once per shape). */
int spw_stft_plans_made(void);
/* Frames for n samples: 1 + (n + 2 * (n_fft / 2) - n_fft) / hop with center (1 + n / hop for an even
 * n_fft), else 1 + (n - n_fft) / hop (0 when n < n_fft);
 * -1 when center and n <= n_fft / 2 (reflection padding needs more samples, as torch refuses). */
int64_t spw_stft_frames(const struct spw_stft_params *p, int64_t n);
/* Scratch floats spw_stft_run needs (its caller allocates them once per thread or element). */
int64_t spw_stft_scratch_floats(const struct spw_stft_params *p);
/* Magnitudes of n samples into out: [n_fft / 2 + 1][frames] row-major (frequency rows, time columns, as
 * torch). scratch holds spw_stft_scratch_floats floats, 64-byte aligned (aligned_alloc or fftwf_malloc). */
void spw_stft_run(const struct spw_stft_plan *plan, const float *x, int64_t n, float *out, float *scratch);
/* The same, handing the magnitudes over a few frames at a time instead of storing them: emit(ctx, mag,
 * stride, t0, count) gets frames [t0, t0 + count) with frame t0 + j of frequency f at mag[f * stride + j]
 * (valid during the call), so a consumer (a mel bank) never needs the whole spectrogram in memory. */
typedef void (*spw_stft_emit_fn)(void *ctx, const float *mag, int stride, int64_t t0, int count);
void spw_stft_run_frames(const struct spw_stft_plan *plan, const float *x, int64_t n, spw_stft_emit_fn emit,
                         void *ctx, float *scratch);
/* One frame the caller windowed itself (Kaldi's features): |rfft|^2 of the plan's n_fft samples at
 * scratch[0 ..) (scratch as spw_stft_run's) into power[n_fft / 2 + 1]. The plan's window is not applied. */
void spw_stft_frame_power(const struct spw_stft_plan *plan, float *scratch, float *power);

#endif
