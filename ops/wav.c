/* ops/wav.c - RIFF/WAVE parsing and decoding to planar float32 (16-bit PCM, 32-bit IEEE float, plain or
 * WAVE_FORMAT_EXTENSIBLE). Every size the file states is checked, in 64-bit arithmetic, against the buffer
 * before it is used; fields are assembled byte by byte (no unaligned loads). Not a writer, and no
 * resampling or format conversion beyond int16 -> float. Thread-safe: pure functions over the caller's buffer. */
#include "ops/wav.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

#define TAG_PCM 0x0001
#define TAG_FLOAT 0x0003
#define TAG_EXTENSIBLE 0xFFFE
#define FMT_MIN_SIZE 16
#define FMT_EXT_MIN_SIZE 40         /* 18 bytes of WAVEFORMATEX + cbSize 22 */
#define SIZE_TO_END 0xFFFFFFFFu     /* streaming writers leave sizes they could not seek back to fill */

/* Where the samples are and how they are encoded, once the header checks out. */
struct wav_layout {
    struct spw_wav_info info;
    int block_align;
    size_t data_off;
    uint64_t data_size;
};


static uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A chunk id fit for a message: non-printable bytes become '?'. */
static void printable_id(const uint8_t *p, char out[5])
{
    for (int i = 0; i < 4; i++)
        out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    out[4] = '\0';
}

static const char *tag_name(uint32_t tag)
{
    switch (tag) {
    case 0x0002: return "MS ADPCM";
    case 0x0006: return "A-law";
    case 0x0007: return "mu-law";
    case 0x0011: return "IMA ADPCM";
    case 0x0031: return "GSM 6.10";
    case 0x0050: return "MPEG";
    case 0x0055: return "MP3";
    default: return NULL;
    }
}

/* The KSDATAFORMAT_SUBTYPE_* GUIDs share these 14 bytes after the 2-byte format tag. */
static const uint8_t ks_guid_suffix[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                           0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

/* Resolve WAVE_FORMAT_EXTENSIBLE to the format tag of its SubFormat. */
static int extensible_tag(const uint8_t *fmt, uint32_t size, uint32_t bits, uint32_t *tag, char *err, size_t errlen)
{
    if (size < FMT_EXT_MIN_SIZE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: extensible fmt chunk is %u bytes, shorter than %d",
                    (unsigned)size, FMT_EXT_MIN_SIZE);
    uint32_t cb_size = le16(fmt + 16);
    if (cb_size < 22)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: extensible fmt cbSize is %u, shorter than 22", (unsigned)cb_size);
    if (memcmp(fmt + 26, ks_guid_suffix, sizeof ks_guid_suffix) != 0)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: extensible SubFormat GUID is not a KSDATAFORMAT subtype");
    uint32_t valid_bits = le16(fmt + 18);
    if (valid_bits != 0 && valid_bits != bits)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED,
                    "WAV: %u valid bits in a %u-bit container is not supported (16-bit PCM or 32-bit float)",
                    (unsigned)valid_bits, (unsigned)bits);
    *tag = le16(fmt + 24);
    return 0;
}

static int check_encoding(uint32_t tag, uint32_t bits, char *err, size_t errlen)
{
    if (tag != TAG_PCM && tag != TAG_FLOAT) {
        const char *name = tag_name(tag);
        if (name)
            return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: %s (format tag %u) is not supported "
                        "(16-bit PCM or 32-bit float)", name, (unsigned)tag);
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: format tag 0x%04x is not supported "
                    "(16-bit PCM or 32-bit float)", (unsigned)tag);
    }
    if (bits == 0)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: bits per sample is 0");
    if (tag == TAG_PCM && bits != 16)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED,
                    "WAV: %u-bit PCM is not supported (16-bit PCM or 32-bit float)", (unsigned)bits);
    if (tag == TAG_FLOAT && bits != 32)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED,
                    "WAV: %u-bit float is not supported (16-bit PCM or 32-bit float)", (unsigned)bits);
    return 0;
}

/* Validate a fmt chunk body of size bytes (all within the buffer) and fill the encoding fields. */
static int parse_fmt(const uint8_t *fmt, uint32_t size, struct wav_layout *lay, char *err, size_t errlen)
{
    if (size < FMT_MIN_SIZE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: fmt chunk is %u bytes, shorter than %d",
                    (unsigned)size, FMT_MIN_SIZE);
    uint32_t tag = le16(fmt);
    uint32_t channels = le16(fmt + 2);
    uint32_t rate = le32(fmt + 4);
    uint32_t block_align = le16(fmt + 12);
    uint32_t bits = le16(fmt + 14);
    int rc;
    if (tag == TAG_EXTENSIBLE && (rc = extensible_tag(fmt, size, bits, &tag, err, errlen)) != 0)
        return rc;
    if (tag != TAG_PCM && tag != TAG_FLOAT)
        return check_encoding(tag, bits, err, errlen);
    if (channels == 0 || channels > SPW_WAV_MAX_CHANNELS)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: channels is %u, not in [1, %d]",
                    (unsigned)channels, SPW_WAV_MAX_CHANNELS);
    if (rate == 0 || rate > SPW_WAV_MAX_RATE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: sample rate is %u, not in [1, %d]",
                    (unsigned)rate, SPW_WAV_MAX_RATE);
    if ((rc = check_encoding(tag, bits, err, errlen)) != 0)
        return rc;
    if (block_align != channels * bits / 8)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: block_align is %u, not channels %u * %u bits / 8",
                    (unsigned)block_align, (unsigned)channels, (unsigned)bits);
    lay->info.channels = (int)channels;
    lay->info.sample_rate = (int)rate;
    lay->info.bits = (int)bits;
    lay->info.is_float = tag == TAG_FLOAT;
    lay->block_align = (int)block_align;
    return 0;
}

/* The end of the RIFF payload within the buffer: the stated size, or the buffer length when the size is a
 * streaming placeholder (0 or 0xFFFFFFFF) or says more than the buffer holds (a truncated file is then
 * reported by the chunk that runs past the end). */
static uint64_t riff_end(const uint8_t *buf, size_t len)
{
    uint64_t stated = le32(buf + 4);
    if (stated == 0 || stated == SIZE_TO_END || 8 + stated > len)
        return len;
    return 8 + stated;
}

/* The data chunk whose header is at pos, stating size bytes; end is the end of the RIFF payload. A size of
 * 0xFFFFFFFF is a streaming writer's placeholder and means the rest of the file. */
static int take_data(uint64_t pos, uint64_t size, uint64_t end, bool have_fmt, struct wav_layout *lay, char *err,
                     size_t errlen)
{
    if (!have_fmt)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: data chunk at offset %llu comes before any fmt chunk",
                    (unsigned long long)pos);
    uint64_t held = end - (pos + 8);
    if (size == SIZE_TO_END)
        size = held;
    else if (size > held)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: truncated data: data chunk says %llu bytes, the file holds %llu",
                    (unsigned long long)size, (unsigned long long)held);
    if (size % (uint64_t)lay->block_align != 0)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: data size %llu is not a whole number of frames (block_align %d)",
                    (unsigned long long)size, lay->block_align);
    lay->data_off = (size_t)(pos + 8);
    lay->data_size = size;
    lay->info.frames = (int64_t)(size / (uint64_t)lay->block_align);
    return 0;
}

/* Walk the chunks up to the data chunk; chunks after it are not read (a damaged trailer does not cost the
 * samples). */
static int parse_layout(const uint8_t *buf, size_t len, struct wav_layout *lay, char *err, size_t errlen)
{
    if (len < 12)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: file is %zu bytes, shorter than the 12-byte RIFF header", len);
    if (memcmp(buf, "RIFF", 4) != 0 || memcmp(buf + 8, "WAVE", 4) != 0)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: not a RIFF/WAVE file");
    const uint64_t end = riff_end(buf, len);
    bool have_fmt = false;
    uint64_t pos = 12;
    while (pos + 8 <= end) {
        const uint8_t *hdr = buf + pos;
        uint64_t size = le32(hdr + 4);
        if (memcmp(hdr, "data", 4) == 0)
            return take_data(pos, size, end, have_fmt, lay, err, errlen);
        if (size > end - (pos + 8)) {
            char id[5];
            printable_id(hdr, id);
            return spw_fail(err, errlen, SPW_EDECODE, "WAV: '%s' chunk at offset %llu says %llu bytes, past the end "
                        "of the file (%llu bytes)", id, (unsigned long long)pos, (unsigned long long)size,
                        (unsigned long long)end);
        }
        if (memcmp(hdr, "fmt ", 4) == 0) {
            int rc = parse_fmt(hdr + 8, (uint32_t)size, lay, err, errlen);
            if (rc != 0)
                return rc;
            have_fmt = true;
        }
        pos += 8 + size + (size & 1);       /* chunks are padded to an even size */
    }
    if (!have_fmt)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: no fmt chunk");
    return spw_fail(err, errlen, SPW_EDECODE, "WAV: no data chunk");
}

int spw_wav_header(const uint8_t *buf, size_t len, struct spw_wav_info *info, char *err, size_t errlen)
{
    struct wav_layout lay;
    memset(&lay, 0, sizeof lay);
    int rc = parse_layout(buf, len, &lay, err, errlen);
    if (rc == 0)
        *info = lay.info;
    return rc;
}

static float pcm16_at(const uint8_t *p)
{
    int32_t v = (int32_t)le16(p);
    if (v >= 32768)
        v -= 65536;
    return (float)v / 32768.0f;
}

static float float32_at(const uint8_t *p)
{
    uint32_t u = le32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float sample_at(const struct wav_layout *lay, const uint8_t *p)
{
    return lay->info.is_float ? float32_at(p) : pcm16_at(p);
}

/* The common case (mono 16-bit) as one loop the compiler vectorizes; the same values as pcm16_at. */
static bool decode_mono_pcm16(const struct wav_layout *lay, const uint8_t *data, float *out)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (lay->info.channels != 1 || lay->info.is_float || lay->block_align != 2)
        return false;
    for (int64_t f = 0; f < lay->info.frames; f++) {
        int16_t v;
        memcpy(&v, data + 2 * f, sizeof v);
        out[f] = (float)v / 32768.0f;
    }
    return true;
#else
    (void)lay, (void)data, (void)out;
    return false;
#endif
}

static void decode_planar(const struct wav_layout *lay, const uint8_t *data, float *out)
{
    const int ch = lay->info.channels, bytes = lay->info.bits / 8;
    const int64_t frames = lay->info.frames;
    for (int64_t f = 0; f < frames; f++) {
        const uint8_t *frame = data + f * lay->block_align;
        for (int c = 0; c < ch; c++)
            out[c * frames + f] = sample_at(lay, frame + c * bytes);
    }
}

static void decode_downmix(const struct wav_layout *lay, const uint8_t *data, float *out)
{
    const int ch = lay->info.channels, bytes = lay->info.bits / 8;
    const float inv = 1.0f / (float)ch;
    for (int64_t f = 0; f < lay->info.frames; f++) {
        const uint8_t *frame = data + f * lay->block_align;
        float sum = 0.0f;
        for (int c = 0; c < ch; c++)
            sum += sample_at(lay, frame + c * bytes);
        out[f] = sum * inv;
    }
}

int spw_wav_decode(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_wav_info *info,
                   float **out, char *err, size_t errlen)
{
    struct wav_layout lay;
    memset(&lay, 0, sizeof lay);
    int rc = parse_layout(buf, len, &lay, err, errlen);
    if (rc != 0)
        return rc;
    const int64_t out_channels = downmix ? 1 : lay.info.channels;
    /* frames < 2^32 and channels <= 64, so the product fits in 64 bits. */
    const int64_t samples = out_channels * lay.info.frames;
    if (samples > max_samples)
        return spw_fail(err, errlen, SPW_ETOOBIG, "WAV: %lld samples (%lld frames x %lld channels) exceed the cap of %lld",
                    (long long)samples, (long long)lay.info.frames, (long long)out_channels, (long long)max_samples);
    if ((uint64_t)samples > SIZE_MAX / sizeof(float))
        return spw_fail(err, errlen, SPW_ETOOBIG, "WAV: %lld samples do not fit in memory", (long long)samples);
    float *pcm = malloc(samples > 0 ? (size_t)samples * sizeof(float) : 1);
    if (!pcm)
        return -ENOMEM;
    if (decode_mono_pcm16(&lay, buf + lay.data_off, pcm))
        ;
    else if (downmix)
        decode_downmix(&lay, buf + lay.data_off, pcm);
    else
        decode_planar(&lay, buf + lay.data_off, pcm);
    *info = lay.info;
    *out = pcm;
    return 0;
}
