/* ops/audio_decode.h - audio files of any supported format by content: the format from the magic bytes
 * (RIFF/RIFX WAVE, fLaC, ID3 or an MPEG audio frame sync, OggS then the first packet: \x01vorbis or
 * OpusHead), decoded from the caller's buffer to the planar float32 samples ops/wav gives: WAV through
 * ops/wav, FLAC through libFLAC, MP3 (MPEG-1/2/2.5 layer I-III) through libmpg123, Ogg Vorbis through
 * libvorbisfile and Ogg Opus through libopusfile. Not an encoder, and no resampling (Opus comes out at
 * 48 kHz, the rate libopusfile decodes to). Thread-safe: every call has its own decoder. */
#ifndef SPW_OPS_AUDIO_DECODE_H
#define SPW_OPS_AUDIO_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum spw_audio_format {
    SPW_AUDIO_UNKNOWN = 0,
    SPW_AUDIO_WAV,
    SPW_AUDIO_FLAC,
    SPW_AUDIO_MP3,
    SPW_AUDIO_VORBIS,
    SPW_AUDIO_OPUS,
};

/* What a decode gives besides the samples. */
struct spw_audio_info {
    enum spw_audio_format format;
    int channels;           /* in the file (the output has 1 when downmixed) */
    int sample_rate;        /* of the output: the file's; 48000 for Opus */
    int64_t frames;         /* samples per channel in the output */
};

/* The format by the magic bytes (an ID3v2 tag is skipped to tell FLAC from MP3); SPW_AUDIO_UNKNOWN when none
 * matches, an Ogg stream of another codec or a buffer too short to tell included. */
enum spw_audio_format spw_audio_sniff(const uint8_t *buf, size_t len);
/* "WAV", "FLAC", "MP3", "Ogg Vorbis", "Ogg Opus", "unknown". */
const char *spw_audio_format_name(enum spw_audio_format f);

/* Decode buf, whatever its format, into *out (malloc'd here, caller frees): planar float32
 * [out_channels][frames], out_channels = 1 when downmix (the mean of the channels, summed in channel order
 * as ops/wav does) else the file's. Values: WAV as spw_wav_decode; FLAC integers / 2^(bits - 1) (what
 * soundfile.read(dtype='float32') gives); MP3, Vorbis and Opus the decoder library's float output (MP3 with
 * gapless trimming from the LAME tag, as libsndfile asks libmpg123 for). The length the file declares
 * (FLAC STREAMINFO, the LAME/Xing frame count, the last Ogg granule) is checked against max_samples before
 * the output is allocated; a file that declares none grows its output up to max_samples and is refused past
 * it. Truncated files are refused: fewer FLAC samples than STREAMINFO states, fewer MP3 frames than the
 * LAME tag states, an Ogg stream whose last page is cut or lacks the end-of-stream flag. Returns 0,
 * SPW_EDECODE (corrupt, truncated, or not a known format), SPW_EUNSUPPORTED (another Ogg codec, more than
 * SPW_WAV_MAX_CHANNELS channels, ...), SPW_ETOOBIG or -ENOMEM, with a message in err naming the format;
 * *info and *out are written only on success. */
int spw_audio_decode(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                     float **out, char *err, size_t errlen);

#endif
