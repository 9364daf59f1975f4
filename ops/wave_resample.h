/* ops/wave_resample.h - band-limited resampling of float32 waveforms, as torchaudio.functional.resample
 * (sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99 by default): the rates are reduced by their gcd,
 * a windowed-sinc kernel per output phase is built once per (from, to, width, rolloff) in a plan, and run
 * applies it. A plan is immutable after create and may run from many threads at once. */
#ifndef SPW_OPS_WAVE_RESAMPLE_H
#define SPW_OPS_WAVE_RESAMPLE_H

#include <stdint.h>

struct spw_wave_resample_plan;

/* Plan resampling from orig_rate to new_rate Hz (both in [1, 1000000]) with lowpass_filter_width zero
 * crossings (>= 1, <= 64) and rolloff in (0, 1]. Returns 0 with *out, -EINVAL or -ENOMEM. */
int spw_wave_resample_plan_create(int orig_rate, int new_rate, int lowpass_filter_width, double rolloff,
                                  struct spw_wave_resample_plan **out);
void spw_wave_resample_plan_destroy(struct spw_wave_resample_plan *p);
/* Output length for n input samples: ceil(new * n / orig), as torchaudio (0 for n <= 0; -1 when it does not
 * fit in int64). */
int64_t spw_wave_resample_out_len(const struct spw_wave_resample_plan *p, int64_t n);
/* Resample n samples of in into out (spw_wave_resample_out_len(p, n) floats). Allocates nothing. */
void spw_wave_resample_run(const struct spw_wave_resample_plan *p, const float *in, int64_t n, float *out);

#endif
