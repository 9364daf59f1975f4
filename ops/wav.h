/* ops/wav.h - decoding RIFF/WAVE (and big-endian RIFX) files to float32 samples: PCM unsigned 8-bit and
 * signed 16, 24 and 32-bit (fewer significant bits in the container too: 12 in 16, 20 in 24), IEEE float 32
 * and 64-bit, G.711 A-law and mu-law, plain or WAVE_FORMAT_EXTENSIBLE; the values soundfile.read(dtype=
 * 'float32') gives. Any channel count up to SPW_WAV_MAX_CHANNELS and any rate; chunks other than `fmt ` and
 * `data` (LIST, fact, ...) are skipped. Everything else (ADPCM, GSM, MP3, ...) is refused with a message.
 * Every size the file states is checked against the buffer and the caller's cap before anything is
 * allocated. Thread-safe: pure functions over the caller's buffer. */
#ifndef SPW_OPS_WAV_H
#define SPW_OPS_WAV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPW_WAV_MAX_CHANNELS 64
#define SPW_WAV_MAX_RATE 1000000            /* samples per second; above this the header is refused */

/* How each sample is stored (the SubFormat for WAVE_FORMAT_EXTENSIBLE). */
enum spw_wav_format {
    SPW_WAV_PCM_U8,         /* unsigned, offset 128 */
    SPW_WAV_PCM_S16,
    SPW_WAV_PCM_S24,        /* 3 bytes */
    SPW_WAV_PCM_S32,
    SPW_WAV_FLOAT32,
    SPW_WAV_FLOAT64,
    SPW_WAV_ALAW,           /* G.711, one byte */
    SPW_WAV_MULAW,          /* G.711, one byte */
};

struct spw_wav_info {
    int channels;           /* in the file */
    int sample_rate;
    enum spw_wav_format format;
    int bits;               /* bits per sample as stored (the container): 8, 16, 24, 32 or 64 */
    int valid_bits;         /* significant bits, <= bits (wValidBitsPerSample, or a plain header's 12 in 16) */
    bool big_endian;        /* a RIFX file */
    int64_t frames;         /* samples per channel */
};

/* Read the header only (fmt and where data is). Returns 0, SPW_EDECODE (malformed: bad RIFF/WAVE magic,
 * chunk sizes past the end, no fmt or data chunk, zero channels or rate, a block align other than channels x
 * bytes per sample), SPW_EUNSUPPORTED (a valid WAV in another encoding: ADPCM, GSM, PCM wider than 32 bits,
 * 16-bit float, ...; the message names the format tag) with a message in err. A data chunk that says more
 * bytes than the file holds is truncated data: SPW_EDECODE. */
int spw_wav_header(const uint8_t *buf, size_t len, struct spw_wav_info *info, char *err, size_t errlen);

/* Decode into *out (malloc'd here, caller frees): planar float32 [out_channels][frames], with
 * out_channels = 1 when downmix (the mean of the channels) else info->channels. Integers are scaled by
 * 1/2^(container bits - 1), unsigned 8-bit after subtracting 128, A-law and mu-law expanded to 16 bits by
 * G.711 and scaled by 1/32768, float64 rounded to float32 (as soundfile.read(dtype='float32'); 16-bit as
 * torchaudio.load too). Refuses with SPW_ETOOBIG, before allocating, when out_channels * frames >
 * max_samples. Returns 0, SPW_EDECODE / SPW_EUNSUPPORTED / SPW_ETOOBIG with a message in err, or -ENOMEM. */
int spw_wav_decode(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_wav_info *info,
                   float **out, char *err, size_t errlen);

#endif
