/* ops/wav.h - decoding RIFF/WAVE files to float32 samples: PCM 16-bit and IEEE float 32-bit, plain or
 * WAVE_FORMAT_EXTENSIBLE, any channel count up to SPW_WAV_MAX_CHANNELS and any rate; chunks other than
 * `fmt ` and `data` (LIST, fact, ...) are skipped. Everything else is refused with a message. Every size
 * the file states is checked against the buffer and the caller's cap before anything is allocated.
 * Thread-safe: pure functions over the caller's buffer. */
#ifndef SPW_OPS_WAV_H
#define SPW_OPS_WAV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPW_WAV_MAX_CHANNELS 64
#define SPW_WAV_MAX_RATE 1000000            /* samples per second; above this the header is refused */

struct spw_wav_info {
    int channels;           /* in the file */
    int sample_rate;
    int bits;               /* 16 or 32 */
    bool is_float;
    int64_t frames;         /* samples per channel */
};

/* Read the header only (fmt and where data is). Returns 0, SPW_EDECODE (malformed: bad RIFF/WAVE magic,
 * chunk sizes past the end, no fmt or data chunk, zero channels or rate), SPW_EUNSUPPORTED (a valid WAV
 * in another encoding: 8/24-bit PCM, 64-bit float, A-law, ...) with a message in err. A data chunk that
 * says more bytes than the file holds is truncated data: SPW_EDECODE. */
int spw_wav_header(const uint8_t *buf, size_t len, struct spw_wav_info *info, char *err, size_t errlen);

/* Decode into *out (malloc'd here, caller frees): planar float32 [out_channels][frames], with
 * out_channels = 1 when downmix (the mean of the channels) else info->channels. Int16 is scaled by 1/32768
 * (as torchaudio.load and soundfile). Refuses with SPW_ETOOBIG, before allocating, when
 * out_channels * frames > max_samples. Returns 0, SPW_EDECODE / SPW_EUNSUPPORTED / SPW_ETOOBIG with a
 * message in err, or -ENOMEM. */
int spw_wav_decode(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_wav_info *info,
                   float **out, char *err, size_t errlen);

#endif
