/* pipeline/audio.h - the audio ops on element values: decode_wav into a float32 waveform [channels,
 * samples], the waveform ops (resample, random_crop_audio, pad_audio, normalize_audio), stft into
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
#include "pipeline/spec.h"

/* True for the ops of audio pipelines (decode_wav and after). */
bool spw_audio_op(enum spw_op_kind kind);
/* Make the mel banks of spec's mel ops into banks[n_ops] (zeroed by the caller). Returns 0 or -ENOMEM. */
int spw_audio_banks_init(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks);
void spw_audio_banks_free(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks);
/* ops[0] (decode_wav) on the file's bytes into *v (empty). Returns 0, SPW_EDECODE / SPW_EUNSUPPORTED /
 * SPW_ETOOBIG with a message in err, or -ENOMEM. */
int spw_audio_decode(const struct spw_pipeline_spec *spec, const uint8_t *buf, size_t len, struct spw_value *v,
                     char *err, size_t errlen);

#define SPW_AUDIO_RAN_NEXT 1     /* stft ran the mel after it too (the linear spectrogram never stored) */

/* Audio op i (not decode_wav) on *v, replacing it. r is the op's RNG for this sample. Returns 0,
 * SPW_AUDIO_RAN_NEXT (op i + 1 ran as well: skip it), SPW_EUNSUPPORTED (e.g. a clip too short for stft, a
 * mel at another rate) or SPW_ETOOBIG (a resample or pad_audio output over spec->max_samples) with a
 * message, or -ENOMEM. */
int spw_audio_run_op(const struct spw_pipeline_spec *spec, const struct spw_mel_bank *banks, int i,
                     struct spw_rng *r, struct spw_value *v, char *err, size_t errlen);

#endif
