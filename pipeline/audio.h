/* pipeline/audio.h - the audio ops on element values: decode_wav / decode_audio into a float32 waveform
 * [channels, samples], the waveform ops (resample, random_crop_audio, pad_audio, normalize_audio), stft into
 * [freq, time] (or [channels, freq, time] for several channels), and the spectrogram ops (mel, log,
 * amplitude_to_db, spec_augment), with torchaudio's names, defaults and layouts. Random choices draw from
 * the op's counter-based RNG, so a sample key gets the same crop and masks on any thread or machine.
 * Thread-safe: per-call state, mel banks read-only after setup, resampling plans from a locked cache. */
#ifndef SPW_PIPELINE_AUDIO_H
#define SPW_PIPELINE_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/rng.h"
#include "ops/mel.h"
#include "pipeline/element.h"
#include "pipeline/op_registry.h"
#include "pipeline/spec.h"

/* Make the mel banks of spec's mel ops into banks[n_ops] (zeroed by the caller). Returns 0 or -ENOMEM. */
int spw_audio_banks_init(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks);
void spw_audio_banks_free(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks);

/* The registry's runs (see spw_op_run_fn / spw_op_decode_fn). decode_wav (WAV) and decode_audio (any
 * format by content) decode the file's bytes into a [channels, samples] waveform (SPW_EDECODE /
 * SPW_EUNSUPPORTED / SPW_ETOOBIG on a bad or huge file). The others may fail with SPW_EUNSUPPORTED (e.g. a
 * clip too short for stft, a mel at another rate) or SPW_ETOOBIG (a resample or pad_audio output over
 * spec->max_samples); stft returns SPW_OP_RAN_NEXT when it ran the mel after it too (the linear
 * spectrogram is never stored). */
int spw_audio_op_decode(struct spw_op_call *c, const struct spw_group *g, const uint8_t *buf, size_t len,
                        struct spw_value *v, int *consumed);
int spw_audio_op_resample(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_crop_or_pad(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_normalize(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_stft(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_mel(struct spw_op_call *c, struct spw_value *v);
/* fbank: channel 0 of the waveform (torchaudio's channel=-1), its rate (when known) sample_frequency. */
int spw_audio_op_fbank(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_trim_frames(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_scale_shift(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_log_scale(struct spw_op_call *c, struct spw_value *v);
int spw_audio_op_spec_augment(struct spw_op_call *c, struct spw_value *v);

#endif
