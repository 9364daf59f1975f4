/* ops/fbank.h - Kaldi filterbank features as torchaudio.compliance.kaldi.fbank computes them (Kaldi's
 * compute-fbank-feats): frames of frame_length ms every frame_shift ms (snip_edges, or Kaldi's mirrored
 * ends), dither, DC removal, the log energy (raw or windowed), pre-emphasis, a povey/hanning/hamming/
 * rectangular/blackman window, zero padding to a power of two, |FFT|^2 (FFTW, the process's plan for that
 * size, ops/stft.h), Kaldi's triangular mel bins (mel = 1127 ln(1 + f / 700)) and their log. Output is
 * [num_mel_bins (+1 energy), frames]: frequency rows, as this build's other spectrogram ops (torchaudio's
 * [frames, bins] transposed). A spw_fbank is made once per op and read-only after: thread-safe. */
#ifndef SPW_OPS_FBANK_H
#define SPW_OPS_FBANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/rng.h"

/* Values are stable: they travel in specs (KaldiWindow in the proto). */
enum spw_kaldi_window {
    SPW_KALDI_HAMMING = 0,
    SPW_KALDI_HANNING = 1,
    SPW_KALDI_POVEY = 2,
    SPW_KALDI_RECTANGULAR = 3,
    SPW_KALDI_BLACKMAN = 4
};

struct spw_fbank_params {              /* torchaudio's names; the others are fixed at its defaults */
    int num_mel_bins;                   /* > 3 */
    double frame_length, frame_shift;   /* milliseconds */
    double sample_frequency;            /* Hz */
    double dither;                      /* standard deviation of Gaussian noise added per sample (0: none) */
    double preemphasis_coefficient;     /* [0, 1] */
    double energy_floor;                /* the log energy is at least log(energy_floor) (0: no floor) */
    double low_freq, high_freq;         /* Hz; high_freq <= 0 is an offset from the Nyquist frequency */
    enum spw_kaldi_window window_type;
    bool remove_dc_offset, raw_energy, use_energy, htk_compat, snip_edges;
};

struct spw_stft_plan;

struct spw_fbank {
    struct spw_fbank_params p;
    int window_size, window_shift, padded, n_freqs;   /* samples; padded: the FFT size */
    float *window;                      /* window_size */
    float *banks;                       /* [num_mel_bins][n_freqs], the Nyquist column 0 as torchaudio's pad */
    int *band;                          /* [num_mel_bins][2]: each bank's nonzero columns [first, end) */
    const struct spw_stft_plan *fft;
};

/* Check p as torchaudio's asserts do and make fb. Returns 0, -EINVAL with a message, or -ENOMEM. */
int spw_fbank_init(struct spw_fbank *fb, const struct spw_fbank_params *p, char *err, size_t errlen);
void spw_fbank_free(struct spw_fbank *fb);
/* The shared fbank for p, made on first use under a lock and kept for the process (as the FFT plans; at
 * most 64 distinct ones, then -ENOSPC). Returns 0 with *out, or spw_fbank_init's error. */
int spw_fbank_get(const struct spw_fbank_params *p, const struct spw_fbank **out, char *err, size_t errlen);
/* Frames of n samples; -1 when n is shorter than one frame (torchaudio refuses such a waveform). */
int64_t spw_fbank_frames(const struct spw_fbank *fb, int64_t n);
/* Rows of the output: num_mel_bins, plus one with use_energy. */
int spw_fbank_rows(const struct spw_fbank *fb);
/* Floats of scratch spw_fbank_run needs (64-byte aligned: aligned_alloc or fftwf_malloc). */
int64_t spw_fbank_scratch_floats(const struct spw_fbank *fb);
/* The features of x[0 .. n) into out [spw_fbank_rows][frames]; dither draws from rng (unused at dither 0). */
void spw_fbank_run(const struct spw_fbank *fb, const float *x, int64_t n, struct spw_rng *rng, float *out,
                   float *scratch);

#endif
