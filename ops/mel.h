/* ops/mel.h - mel filterbanks as torchaudio.functional.melscale_fbanks (htk or slaney scale, no norm or
 * slaney area norm) and their application to a spectrogram. The bank is stored sparse (each filter's
 * first nonzero bin and its weights), made once per op at pipeline setup, then read from many threads.
 * Not a spectrogram: see ops/stft.h. */
#ifndef SPW_OPS_MEL_H
#define SPW_OPS_MEL_H

#include <stdbool.h>
#include <stdint.h>

enum spw_mel_scale { SPW_MEL_HTK = 0, SPW_MEL_SLANEY = 1 };
enum spw_mel_norm { SPW_MEL_NORM_NONE = 0, SPW_MEL_NORM_SLANEY = 1 };

struct spw_mel_bank {
    int n_freqs, n_mels;
    int *first;             /* [n_mels]: first frequency bin with a nonzero weight */
    int *count;             /* [n_mels]: how many bins from first */
    float **w;              /* [n_mels][count]: the weights */
};

/* The bank for n_freqs linear bins (n_fft / 2 + 1) of a sample_rate signal, n_mels filters between f_min and
 * f_max Hz (0 <= f_min < f_max <= sample_rate / 2). Returns 0, -EINVAL or -ENOMEM. */
int spw_mel_bank_init(struct spw_mel_bank *b, int n_freqs, double f_min, double f_max, int n_mels, int sample_rate,
                      enum spw_mel_scale scale, enum spw_mel_norm norm);
void spw_mel_bank_free(struct spw_mel_bank *b);
/* The dense matrix [n_freqs][n_mels] as torchaudio returns it (tests compare it). */
void spw_mel_bank_dense(const struct spw_mel_bank *b, float *out);
/* mel[m][t] = sum_f bank[f][m] * spec[f][t] for spec [n_freqs][frames] into mel [n_mels][frames]. */
void spw_mel_apply(const struct spw_mel_bank *b, const float *spec, int64_t frames, float *mel);
/* The same for count frames as ops/stft.h hands them over (frame j of bin f at mag[f * stride + j]), into
 * columns [t0, t0 + count) of mel [n_mels][frames]. Sums in the same order as spw_mel_apply: equal results. */
void spw_mel_apply_frames(const struct spw_mel_bank *b, const float *mag, int stride, int count, int64_t t0,
                          int64_t frames, float *mel);

#endif
