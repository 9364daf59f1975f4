/* ops/wav.c - RIFF/WAVE (and RIFX) parsing and decoding to planar float32: PCM 8 to 32-bit, IEEE float 32
 * and 64-bit, G.711 A-law and mu-law, plain or WAVE_FORMAT_EXTENSIBLE, each converted as libsndfile does.
 * Every size the file states is checked, in 64-bit arithmetic, against the buffer before it is used; fields
 * are assembled byte by byte (no unaligned loads). Not a writer, and no resampling. Thread-safe: pure
 * functions over the caller's buffer. */
#include "ops/wav.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

#define TAG_PCM 0x0001
#define TAG_FLOAT 0x0003
#define TAG_ALAW 0x0006
#define TAG_MULAW 0x0007
#define TAG_EXTENSIBLE 0xFFFE
#define FMT_MIN_SIZE 16
#define FMT_EXT_MIN_SIZE 40         /* 18 bytes of WAVEFORMATEX + cbSize 22 */
#define SIZE_TO_END 0xFFFFFFFFu     /* streaming writers leave sizes they could not seek back to fill */
#define SUPPORTED "PCM 8 to 32-bit, float 32/64-bit, A-law, mu-law"

/* Where the samples are and how they are encoded, once the header checks out. */
struct wav_layout {
    struct spw_wav_info info;
    int block_align;
    size_t data_off;
    uint64_t data_size;
};

/* Header fields are little-endian in RIFF files and big-endian in RIFX ones. */
static uint32_t rd16(bool be, const uint8_t *p)
{
    return be ? (uint32_t)p[0] << 8 | (uint32_t)p[1] : (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(bool be, const uint8_t *p)
{
    if (be)
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
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
    case 0x0011: return "IMA ADPCM";
    case 0x0031: return "GSM 6.10";
    case 0x0050: return "MPEG";
    case 0x0055: return "MP3";
    default: return NULL;
    }
}

/* The KSDATAFORMAT_SUBTYPE_* GUIDs are {0000TTTT-0000-0010-8000-00AA00389B71} with TTTT the format tag; Data1,
 * Data2 and Data3 are stored in the file's byte order, Data4 as bytes. */
static const uint8_t ks_guid_data4[8] = {0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

/* Resolve WAVE_FORMAT_EXTENSIBLE to the format tag of its SubFormat and its valid bits. */
static int extensible_tag(const uint8_t *fmt, uint32_t size, bool be, uint32_t bits, uint32_t *tag,
                          uint32_t *valid_bits, char *err, size_t errlen)
{
    if (size < FMT_EXT_MIN_SIZE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: extensible fmt chunk is %u bytes, shorter than %d",
                    (unsigned)size, FMT_EXT_MIN_SIZE);
    uint32_t cb_size = rd16(be, fmt + 16);
    if (cb_size < 22)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: extensible fmt cbSize is %u, shorter than 22", (unsigned)cb_size);
    const uint8_t *guid = fmt + 24;
    uint32_t data1 = rd32(be, guid);
    if (data1 >> 16 != 0 || rd16(be, guid + 4) != 0 || rd16(be, guid + 6) != 0x0010 ||
        memcmp(guid + 8, ks_guid_data4, sizeof ks_guid_data4) != 0)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: extensible SubFormat GUID is not a KSDATAFORMAT subtype");
    uint32_t valid = rd16(be, fmt + 18);
    if (valid == 0)
        valid = bits;       /* writers that do not know leave it 0 */
    if (valid > bits)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: %u valid bits exceed the %u-bit container",
                    (unsigned)valid, (unsigned)bits);
    *tag = data1;
    *valid_bits = valid;
    return 0;
}

/* The sample format of a format tag and bits per sample. PCM of any width up to 32 bits is read from
 * ceil(bits / 8) bytes and scaled by that container, as libsndfile reads it (12-bit PCM reads as 16-bit PCM,
 * its low 4 bits as stored); 8-bit PCM is unsigned. */
static int sample_format(uint32_t tag, uint32_t bits, enum spw_wav_format *format, char *err, size_t errlen)
{
    static const enum spw_wav_format pcm_by_bytes[] = {SPW_WAV_PCM_U8, SPW_WAV_PCM_S16, SPW_WAV_PCM_S24,
                                                       SPW_WAV_PCM_S32};
    switch (tag) {
    case TAG_PCM:
        if (bits == 0)
            return spw_fail(err, errlen, SPW_EDECODE, "WAV: bits per sample is 0");
        if (bits > 32)
            return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: %u-bit PCM (format tag 1) is not supported (" SUPPORTED
                        ")", (unsigned)bits);
        *format = pcm_by_bytes[(bits + 7) / 8 - 1];
        return 0;
    case TAG_FLOAT:
        if (bits != 32 && bits != 64)     /* valid bits below the container change nothing (as libsndfile) */
            return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: %u-bit float (format tag 3) is not supported ("
                        SUPPORTED ")", (unsigned)bits);
        *format = bits == 32 ? SPW_WAV_FLOAT32 : SPW_WAV_FLOAT64;
        return 0;
    case TAG_ALAW:
    case TAG_MULAW:
        if (bits != 8)
            return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: %u-bit %s (format tag %u) is not supported (8-bit "
                        "only)", (unsigned)bits, tag == TAG_ALAW ? "A-law" : "mu-law", (unsigned)tag);
        *format = tag == TAG_ALAW ? SPW_WAV_ALAW : SPW_WAV_MULAW;
        return 0;
    default: {
        const char *name = tag_name(tag);
        if (name)
            return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: %s (format tag %u) is not supported (" SUPPORTED ")",
                        name, (unsigned)tag);
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "WAV: format tag 0x%04x is not supported (" SUPPORTED ")",
                    (unsigned)tag);
    }
    }
}

/* Validate a fmt chunk body of size bytes (all within the buffer) and fill the encoding fields. */
static int parse_fmt(const uint8_t *fmt, uint32_t size, struct wav_layout *lay, char *err, size_t errlen)
{
    const bool be = lay->info.big_endian;
    if (size < FMT_MIN_SIZE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: fmt chunk is %u bytes, shorter than %d",
                    (unsigned)size, FMT_MIN_SIZE);
    uint32_t tag = rd16(be, fmt);
    uint32_t channels = rd16(be, fmt + 2);
    uint32_t rate = rd32(be, fmt + 4);
    uint32_t block_align = rd16(be, fmt + 12);
    uint32_t bits = rd16(be, fmt + 14);
    uint32_t valid_bits = bits;
    enum spw_wav_format format = SPW_WAV_PCM_S16;
    int rc;
    if (tag == TAG_EXTENSIBLE && (rc = extensible_tag(fmt, size, be, bits, &tag, &valid_bits, err, errlen)) != 0)
        return rc;
    if ((rc = sample_format(tag, bits, &format, err, errlen)) != 0)
        return rc;
    if (channels == 0 || channels > SPW_WAV_MAX_CHANNELS)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: channels is %u, not in [1, %d]",
                    (unsigned)channels, SPW_WAV_MAX_CHANNELS);
    if (rate == 0 || rate > SPW_WAV_MAX_RATE)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: sample rate is %u, not in [1, %d]",
                    (unsigned)rate, SPW_WAV_MAX_RATE);
    const uint32_t bytes = (bits + 7) / 8;
    if (block_align != channels * bytes)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: block_align is %u, not channels %u * %u bytes (%u bits)",
                    (unsigned)block_align, (unsigned)channels, (unsigned)bytes, (unsigned)bits);
    lay->info.channels = (int)channels;
    lay->info.sample_rate = (int)rate;
    lay->info.format = format;
    lay->info.bits = (int)(bytes * 8);
    lay->info.valid_bits = (int)valid_bits;
    lay->block_align = (int)block_align;
    return 0;
}

/* The end of the RIFF payload within the buffer: the stated size, or the buffer length when the size is a
 * streaming placeholder (0 or 0xFFFFFFFF) or says more than the buffer holds (a truncated file is then
 * reported by the chunk that runs past the end). */
static uint64_t riff_end(const uint8_t *buf, size_t len, bool be)
{
    uint64_t stated = rd32(be, buf + 4);
    if (stated == 0 || stated == SIZE_TO_END || 8 + stated > len)
        return len;
    return 8 + stated;
}

/* The data chunk whose header is at pos, stating size bytes; end is the end of the RIFF payload, len the
 * buffer's. A size of 0xFFFFFFFF is a streaming writer's placeholder and means the rest of the payload. A
 * data chunk may run past a RIFF size that undercounts as long as the buffer holds it (libsndfile reads
 * such files: scipy's test-44100Hz-le-1ch-4bytes.wav states 12 bytes too few). */
static int take_data(uint64_t pos, uint64_t size, uint64_t end, size_t len, bool have_fmt, struct wav_layout *lay,
                     char *err, size_t errlen)
{
    if (!have_fmt)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: data chunk at offset %llu comes before any fmt chunk",
                    (unsigned long long)pos);
    const uint64_t held = (uint64_t)len - (pos + 8);
    if (size == SIZE_TO_END)
        size = end - (pos + 8);
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
    if ((memcmp(buf, "RIFF", 4) != 0 && memcmp(buf, "RIFX", 4) != 0) || memcmp(buf + 8, "WAVE", 4) != 0)
        return spw_fail(err, errlen, SPW_EDECODE, "WAV: not a RIFF/WAVE file");
    const bool be = buf[3] == 'X';
    lay->info.big_endian = be;
    const uint64_t end = riff_end(buf, len, be);
    bool have_fmt = false;
    uint64_t pos = 12;
    while (pos + 8 <= end) {
        const uint8_t *hdr = buf + pos;
        uint64_t size = rd32(be, hdr + 4);
        if (memcmp(hdr, "data", 4) == 0)
            return take_data(pos, size, end, len, have_fmt, lay, err, errlen);
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

/* ---- samples: one reader per stored format, each giving what libsndfile's float reader gives ---- */

/* G.711 expansion to a 16-bit linear value, as in the ITU-T reference (Sun's g711.c, whose values
 * libsndfile's tables hold). A-law: the even bits are inverted on the wire; a 4-bit mantissa, a 3-bit
 * segment (exponent), the sign bit set for positive values; |x| <= 32256. */
static int alaw_expand(uint8_t code)
{
    const int a = code ^ 0x55;
    const int seg = (a >> 4) & 7;
    int t = (a & 0x0f) << 4;
    t += seg == 0 ? 8 : 0x108;      /* half a step, plus the implicit leading 1 above segment 0 */
    if (seg > 1)
        t <<= seg - 1;
    return (a & 0x80) ? t : -t;
}

/* mu-law: all bits inverted on the wire; a 4-bit mantissa and 3-bit segment of the magnitude plus a bias of
 * 0x84 (33 << 2) that the encoder added; the sign bit set for negative values; |x| <= 32124. */
static int mulaw_expand(uint8_t code)
{
    const int u = ~code & 0xff;
    int t = (((u & 0x0f) << 3) + 0x84) << ((u >> 4) & 7);
    return (u & 0x80) ? 0x84 - t : t - 0x84;
}

/* The 256 float values of a G.711 code (16-bit value / 32768, as soundfile reads them). */
static void g711_table(enum spw_wav_format format, float lut[256])
{
    for (int code = 0; code < 256; code++)
        lut[code] = (float)(format == SPW_WAV_ALAW ? alaw_expand((uint8_t)code) : mulaw_expand((uint8_t)code)) /
                    32768.0f;
}

/* Scales are powers of two, so dividing by them is exact and equals libsndfile's multiply by 1/2^(bits-1). */
static inline float u8_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return (float)((int)p[0] - 128) / 128.0f;
}

static inline float g711_at(const uint8_t *p, const float *lut)
{
    return lut[p[0]];
}

static inline float s16_from(uint32_t u)
{
    int32_t v = (int32_t)u - (int32_t)((u & 0x8000u) << 1);
    return (float)v / 32768.0f;
}

static inline float s16le_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s16_from((uint32_t)p[0] | (uint32_t)p[1] << 8);
}

static inline float s16be_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s16_from((uint32_t)p[0] << 8 | (uint32_t)p[1]);
}

static inline float s24_from(uint32_t u)
{
    int32_t v = (int32_t)u - (int32_t)((u & 0x800000u) << 1);
    return (float)v / 8388608.0f;
}

static inline float s24le_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s24_from((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16);
}

static inline float s24be_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s24_from((uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | (uint32_t)p[2]);
}

/* int32 -> float rounds to 24 bits, as libsndfile's (float) cast does. */
static inline float s32_from(uint32_t u)
{
    int64_t v = (int64_t)u - (int64_t)((uint64_t)(u & 0x80000000u) << 1);
    return (float)v / 2147483648.0f;
}

static inline float s32le_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s32_from(rd32(false, p));
}

static inline float s32be_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return s32_from(rd32(true, p));
}

static inline float f32_from(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float f32le_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return f32_from(rd32(false, p));
}

static inline float f32be_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return f32_from(rd32(true, p));
}

static inline float f64_from(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return (float)d;
}

static inline float f64le_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return f64_from((uint64_t)rd32(false, p + 4) << 32 | rd32(false, p));
}

static inline float f64be_at(const uint8_t *p, const float *lut)
{
    (void)lut;
    return f64_from((uint64_t)rd32(true, p) << 32 | rd32(true, p + 4));
}

/* The planar and the downmix loop of one stored format: the format is fixed inside each loop (no per-sample
 * dispatch), so the reader inlines. */
#define WAV_LOOPS(name, bytes, at)                                                                               \
    static void planar_##name(const struct wav_layout *lay, const uint8_t *data, const float *lut, float *out)  \
    {                                                                                                           \
        const int ch = lay->info.channels;                                                                      \
        const int64_t frames = lay->info.frames;                                                                \
        for (int64_t f = 0; f < frames; f++) {                                                                  \
            const uint8_t *frame = data + f * lay->block_align;                                                 \
            for (int c = 0; c < ch; c++)                                                                        \
                out[c * frames + f] = at(frame + c * (bytes), lut);                                             \
        }                                                                                                       \
    }                                                                                                           \
    static void downmix_##name(const struct wav_layout *lay, const uint8_t *data, const float *lut, float *out) \
    {                                                                                                           \
        const int ch = lay->info.channels;                                                                      \
        const float inv = 1.0f / (float)ch;                                                                     \
        for (int64_t f = 0; f < lay->info.frames; f++) {                                                        \
            const uint8_t *frame = data + f * lay->block_align;                                                 \
            float sum = 0.0f;                                                                                   \
            for (int c = 0; c < ch; c++)                                                                        \
                sum += at(frame + c * (bytes), lut);                                                            \
            out[f] = sum * inv;                                                                                 \
        }                                                                                                       \
    }

WAV_LOOPS(u8, 1, u8_at)
WAV_LOOPS(g711, 1, g711_at)
WAV_LOOPS(s16le, 2, s16le_at)
WAV_LOOPS(s16be, 2, s16be_at)
WAV_LOOPS(s24le, 3, s24le_at)
WAV_LOOPS(s24be, 3, s24be_at)
WAV_LOOPS(s32le, 4, s32le_at)
WAV_LOOPS(s32be, 4, s32be_at)
WAV_LOOPS(f32le, 4, f32le_at)
WAV_LOOPS(f32be, 4, f32be_at)
WAV_LOOPS(f64le, 8, f64le_at)
WAV_LOOPS(f64be, 8, f64be_at)

typedef void (*wav_loop)(const struct wav_layout *lay, const uint8_t *data, const float *lut, float *out);

/* [format][big_endian] -> {planar, downmix} */
static const wav_loop wav_loops[][2][2] = {
    [SPW_WAV_PCM_U8] = {{planar_u8, downmix_u8}, {planar_u8, downmix_u8}},
    [SPW_WAV_PCM_S16] = {{planar_s16le, downmix_s16le}, {planar_s16be, downmix_s16be}},
    [SPW_WAV_PCM_S24] = {{planar_s24le, downmix_s24le}, {planar_s24be, downmix_s24be}},
    [SPW_WAV_PCM_S32] = {{planar_s32le, downmix_s32le}, {planar_s32be, downmix_s32be}},
    [SPW_WAV_FLOAT32] = {{planar_f32le, downmix_f32le}, {planar_f32be, downmix_f32be}},
    [SPW_WAV_FLOAT64] = {{planar_f64le, downmix_f64le}, {planar_f64be, downmix_f64be}},
    [SPW_WAV_ALAW] = {{planar_g711, downmix_g711}, {planar_g711, downmix_g711}},
    [SPW_WAV_MULAW] = {{planar_g711, downmix_g711}, {planar_g711, downmix_g711}},
};

/* The common case (mono little-endian 16-bit) as one loop the compiler vectorizes; the same values as
 * s16le_at. */
static bool decode_mono_pcm16(const struct wav_layout *lay, const uint8_t *data, float *out)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (lay->info.channels != 1 || lay->info.format != SPW_WAV_PCM_S16 || lay->info.big_endian)
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
    float lut[256];
    if (lay.info.format == SPW_WAV_ALAW || lay.info.format == SPW_WAV_MULAW)
        g711_table(lay.info.format, lut);
    if (!decode_mono_pcm16(&lay, buf + lay.data_off, pcm))
        wav_loops[lay.info.format][lay.info.big_endian][downmix](&lay, buf + lay.data_off, lut, pcm);
    *info = lay.info;
    *out = pcm;
    return 0;
}
