/* tests/unit/check_wav.c - ops/wav on WAV files built in memory: exact decoding of every stored format
 * (unsigned 8, 16, 24, 32-bit PCM, float 32/64, A-law, mu-law, big-endian RIFX, PCM narrower than its
 * container), downmix, WAVE_FORMAT_EXTENSIBLE with valid bits, skipped chunks, each malformed or unsupported
 * header refused with its code, the sample cap, every prefix of a valid file of each format refused without
 * reading past it (each prefix is its own malloc, so ASan sees overreads); and ops/wave_resample: amplitude
 * kept, stopband attenuated, output length, copy at equal rates. Single-threaded. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "ops/wav.h"
#include "ops/wave_resample.h"

#define CAP (1 << 24)

/* A growable byte buffer for writing WAV files. */
struct wavbuf {
    uint8_t *b;
    size_t n, cap;
};

static void put(struct wavbuf *w, const void *src, size_t len)
{
    if (w->n + len > w->cap) {
        w->cap = (w->n + len) * 2 + 64;
        w->b = realloc(w->b, w->cap);
        ck_assert_ptr_nonnull(w->b);
    }
    memcpy(w->b + w->n, src, len);
    w->n += len;
}

static void put_u16(struct wavbuf *w, uint32_t v)
{
    const uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_u32(struct wavbuf *w, uint32_t v)
{
    const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void set_u32(struct wavbuf *w, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        w->b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void put_float(struct wavbuf *w, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    put_u32(w, u);
}

static void begin_riff(struct wavbuf *w)
{
    memset(w, 0, sizeof *w);
    put(w, "RIFF", 4);
    put_u32(w, 0);
    put(w, "WAVE", 4);
}

static void end_riff(struct wavbuf *w)
{
    set_u32(w, 4, (uint32_t)(w->n - 8));
}

/* A chunk with the given id and body, padded to an even size. */
static void put_chunk(struct wavbuf *w, const char *id, const void *body, uint32_t size)
{
    put(w, id, 4);
    put_u32(w, size);
    put(w, body, size);
    if (size & 1)
        put(w, "", 1);
}

static void put_fmt(struct wavbuf *w, uint32_t tag, uint32_t channels, uint32_t rate, uint32_t bits,
                    uint32_t block_align)
{
    put(w, "fmt ", 4);
    put_u32(w, 16);
    put_u16(w, tag);
    put_u16(w, channels);
    put_u32(w, rate);
    put_u32(w, rate * block_align);
    put_u16(w, block_align);
    put_u16(w, bits);
}

static const uint8_t ks_suffix[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                      0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

static void put_fmt_extensible(struct wavbuf *w, uint32_t subtag, uint32_t channels, uint32_t rate, uint32_t bits)
{
    const uint32_t block_align = channels * bits / 8;
    put(w, "fmt ", 4);
    put_u32(w, 40);
    put_u16(w, 0xFFFE);
    put_u16(w, channels);
    put_u32(w, rate);
    put_u32(w, rate * block_align);
    put_u16(w, block_align);
    put_u16(w, bits);
    put_u16(w, 22);             /* cbSize */
    put_u16(w, bits);           /* validBitsPerSample */
    put_u32(w, channels == 2 ? 0x3 : 0x4);  /* channel mask */
    put_u16(w, subtag);
    put(w, ks_suffix, sizeof ks_suffix);
}

static void put_data_header(struct wavbuf *w, uint32_t size)
{
    put(w, "data", 4);
    put_u32(w, size);
}

static const int16_t pcm_values[] = {0, 1, -1, 32767, -32768, 12345, -12345, 256, -257};
#define N_PCM ((int)(sizeof pcm_values / sizeof pcm_values[0]))

/* A mono 16-bit file of pcm_values with optional LIST / fact chunks before data and a trailing chunk. */
static void make_pcm16_mono(struct wavbuf *w, bool extra_chunks)
{
    begin_riff(w);
    if (extra_chunks)
        put_chunk(w, "LIST", "INFOISFT\x05\0\0\0spw\0\0", 17);     /* odd size: one pad byte follows */
    put_fmt(w, 1, 1, 16000, 16, 2);
    if (extra_chunks)
        put_chunk(w, "fact", "\x09\0\0\0", 4);
    put_data_header(w, N_PCM * 2);
    for (int i = 0; i < N_PCM; i++)
        put_u16(w, (uint16_t)pcm_values[i]);
    if (extra_chunks)
        put_chunk(w, "id3 ", "abc", 3);
    end_riff(w);
}

static void check_pcm16_mono(const float *out, const struct spw_wav_info *info)
{
    ck_assert_int_eq(info->channels, 1);
    ck_assert_int_eq(info->sample_rate, 16000);
    ck_assert_int_eq(info->bits, 16);
    ck_assert_int_eq(info->valid_bits, 16);
    ck_assert_int_eq(info->format, SPW_WAV_PCM_S16);
    ck_assert(!info->big_endian);
    ck_assert_int_eq(info->frames, N_PCM);
    for (int i = 0; i < N_PCM; i++)
        ck_assert_msg(out[i] == (float)pcm_values[i] / 32768.0f, "sample %d: %g", i, (double)out[i]);
}

static int decode(const struct wavbuf *w, bool downmix, int64_t max_samples, struct spw_wav_info *info,
                  float **out, char *err, size_t errlen)
{
    return spw_wav_decode(w->b, w->n, downmix, max_samples, info, out, err, errlen);
}

START_TEST(test_wav_pcm16_mono_exact)
{
    struct wavbuf w;
    make_pcm16_mono(&w, false);
    struct spw_wav_info info, hinfo;
    float *out;
    char err[256];
    ck_assert_int_eq(spw_wav_header(w.b, w.n, &hinfo, err, sizeof err), 0);
    ck_assert_int_eq(hinfo.frames, N_PCM);
    for (int downmix = 0; downmix <= 1; downmix++) {
        ck_assert_int_eq(decode(&w, downmix, CAP, &info, &out, err, sizeof err), 0);
        check_pcm16_mono(out, &info);
        free(out);
    }
    free(w.b);
}
END_TEST

static const float left[] = {0.5f, -1.0f, 0.25f, 3.0f, 1e-3f}, right[] = {0.25f, 1.0f, -0.75f, -2.0f, 7e-3f};
#define N_STEREO 5

static void check_stereo(const struct wavbuf *w)
{
    struct spw_wav_info info;
    float *out;
    char err[256];
    ck_assert_int_eq(decode(w, false, CAP, &info, &out, err, sizeof err), 0);
    ck_assert_int_eq(info.channels, 2);
    ck_assert_int_eq(info.frames, N_STEREO);
    for (int i = 0; i < N_STEREO; i++) {
        ck_assert(out[i] == left[i]);
        ck_assert(out[N_STEREO + i] == right[i]);
    }
    free(out);
    ck_assert_int_eq(decode(w, true, CAP, &info, &out, err, sizeof err), 0);
    ck_assert_int_eq(info.channels, 2);
    for (int i = 0; i < N_STEREO; i++)
        ck_assert_msg(out[i] == (left[i] + right[i]) * 0.5f, "frame %d: %g", i, (double)out[i]);
    free(out);
}

static void put_stereo_data(struct wavbuf *w)
{
    put_data_header(w, N_STEREO * 8);
    for (int i = 0; i < N_STEREO; i++) {
        put_float(w, left[i]);
        put_float(w, right[i]);
    }
}

START_TEST(test_wav_float_stereo_planes_and_downmix_mean)
{
    struct wavbuf w;
    begin_riff(&w);
    put_fmt(&w, 3, 2, 44100, 32, 8);
    put_stereo_data(&w);
    end_riff(&w);
    check_stereo(&w);
    free(w.b);
}
END_TEST

START_TEST(test_wav_extensible_pcm16_and_float)
{
    struct wavbuf w;
    begin_riff(&w);
    put_fmt_extensible(&w, 3, 2, 48000, 32);
    put_stereo_data(&w);
    end_riff(&w);
    check_stereo(&w);
    free(w.b);

    begin_riff(&w);
    put_fmt_extensible(&w, 1, 1, 16000, 16);
    put_data_header(&w, N_PCM * 2);
    for (int i = 0; i < N_PCM; i++)
        put_u16(&w, (uint16_t)pcm_values[i]);
    end_riff(&w);
    struct spw_wav_info info;
    float *out;
    char err[256];
    ck_assert_int_eq(decode(&w, false, CAP, &info, &out, err, sizeof err), 0);
    check_pcm16_mono(out, &info);
    free(out);
    free(w.b);
}
END_TEST

START_TEST(test_wav_skips_list_and_fact_chunks)
{
    struct wavbuf w;
    make_pcm16_mono(&w, true);
    struct spw_wav_info info;
    float *out;
    char err[256];
    ck_assert_int_eq(decode(&w, false, CAP, &info, &out, err, sizeof err), 0);
    check_pcm16_mono(out, &info);
    free(out);
    free(w.b);
}
END_TEST

START_TEST(test_wav_streaming_riff_size_uses_buffer_length)
{
    const uint32_t sizes[] = {0, 0xFFFFFFFFu};
    for (int i = 0; i < 2; i++) {
        struct wavbuf w;
        make_pcm16_mono(&w, true);
        set_u32(&w, 4, sizes[i]);
        struct spw_wav_info info;
        float *out;
        char err[256];
        ck_assert_int_eq(decode(&w, false, CAP, &info, &out, err, sizeof err), 0);
        check_pcm16_mono(out, &info);
        free(out);
        free(w.b);
    }
    /* A streaming data size too: the samples run to the end of the file. */
    struct wavbuf w;
    make_pcm16_mono(&w, false);
    set_u32(&w, 4, 0xFFFFFFFFu);
    set_u32(&w, 40, 0xFFFFFFFFu);
    struct spw_wav_info info;
    float *out;
    char err[256];
    ck_assert_int_eq(decode(&w, false, CAP, &info, &out, err, sizeof err), 0);
    check_pcm16_mono(out, &info);
    free(out);
    free(w.b);
}
END_TEST

/* Decode a copy of exactly len bytes (so ASan catches any read past it); returns the code, and checks
 * the output parameters are left alone on failure. */
static int decode_exact(const uint8_t *b, size_t len, char *err, size_t errlen)
{
    uint8_t *copy = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, b, len);
    struct spw_wav_info info = {.channels = -7}, hinfo;
    float *out = NULL;
    int rc = spw_wav_decode(copy, len, false, CAP, &info, &out, err, errlen);
    int hrc = spw_wav_header(copy, len, &hinfo, err, errlen);
    ck_assert_int_eq(rc, hrc);
    if (rc != 0) {
        ck_assert_ptr_null(out);
        ck_assert_int_eq(info.channels, -7);
    }
    free(out);
    free(copy);
    return rc;
}

static void expect_fail(struct wavbuf *w, int code, const char *needle)
{
    char err[256] = "";
    int rc = decode_exact(w->b, w->n, err, sizeof err);
    ck_assert_msg(rc == code, "expected %d got %d (%s) for '%s'", code, rc, err, needle);
    ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    free(w->b);
}

/* A valid header for fmt fields (tag, channels, rate, bits, block_align), then data of 8 bytes. */
static void make_with_fmt(struct wavbuf *w, uint32_t tag, uint32_t ch, uint32_t rate, uint32_t bits, uint32_t ba)
{
    begin_riff(w);
    put_fmt(w, tag, ch, rate, bits, ba);
    put_data_header(w, 8);
    put(w, "\0\0\0\0\0\0\0\0", 8);
    end_riff(w);
}

START_TEST(test_wav_rejects_malformed_headers)
{
    struct wavbuf w;
    make_pcm16_mono(&w, false);
    w.n = 10;
    expect_fail(&w, SPW_EDECODE, "shorter than the 12-byte");

    make_pcm16_mono(&w, false);
    memcpy(w.b + 8, "AVI ", 4);
    expect_fail(&w, SPW_EDECODE, "not a RIFF/WAVE");

    make_pcm16_mono(&w, false);
    memcpy(w.b, "RIFY", 4);
    expect_fail(&w, SPW_EDECODE, "not a RIFF/WAVE");

    make_pcm16_mono(&w, false);
    set_u32(&w, 16, 1000);          /* fmt chunk size */
    expect_fail(&w, SPW_EDECODE, "past the end");

    make_pcm16_mono(&w, false);
    set_u32(&w, 40, N_PCM * 2 + 2); /* data chunk size: one frame more than the file holds */
    expect_fail(&w, SPW_EDECODE, "truncated data");

    make_with_fmt(&w, 1, 0, 16000, 16, 0);
    expect_fail(&w, SPW_EDECODE, "channels is 0");

    make_with_fmt(&w, 1, 65, 16000, 16, 130);
    expect_fail(&w, SPW_EDECODE, "channels is 65");

    make_with_fmt(&w, 1, 1, 0, 16, 2);
    expect_fail(&w, SPW_EDECODE, "sample rate is 0");

    make_with_fmt(&w, 1, 1, 2000000, 16, 2);
    expect_fail(&w, SPW_EDECODE, "sample rate is 2000000");

    make_with_fmt(&w, 1, 2, 16000, 16, 2);
    expect_fail(&w, SPW_EDECODE, "block_align is 2");

    make_with_fmt(&w, 3, 1, 16000, 32, 4);
    set_u32(&w, 40, 6);             /* 6 bytes of 4-byte frames */
    expect_fail(&w, SPW_EDECODE, "data size 6 is not a whole number of frames");

    make_pcm16_mono(&w, false);
    set_u32(&w, 16, 14);            /* fmt says 14 bytes */
    expect_fail(&w, SPW_EDECODE, "fmt chunk is 14 bytes");

    begin_riff(&w);
    put_data_header(&w, 2);
    put(&w, "\0\0", 2);
    end_riff(&w);
    expect_fail(&w, SPW_EDECODE, "before any fmt");

    begin_riff(&w);
    put_fmt(&w, 1, 1, 16000, 16, 2);
    put_chunk(&w, "LIST", "abcd", 4);
    end_riff(&w);
    expect_fail(&w, SPW_EDECODE, "no data chunk");
}
END_TEST

START_TEST(test_wav_refuses_other_encodings)
{
    struct wavbuf w;
    make_with_fmt(&w, 2, 1, 16000, 4, 256);
    expect_fail(&w, SPW_EUNSUPPORTED, "MS ADPCM (format tag 2) is not supported");

    make_with_fmt(&w, 0x11, 1, 16000, 4, 256);
    expect_fail(&w, SPW_EUNSUPPORTED, "IMA ADPCM (format tag 17)");

    make_with_fmt(&w, 1, 1, 16000, 36, 5);
    expect_fail(&w, SPW_EUNSUPPORTED, "36-bit PCM (format tag 1) is not supported");

    make_with_fmt(&w, 1, 1, 16000, 64, 8);
    expect_fail(&w, SPW_EUNSUPPORTED, "64-bit PCM");

    make_with_fmt(&w, 3, 1, 16000, 16, 2);
    expect_fail(&w, SPW_EUNSUPPORTED, "16-bit float (format tag 3)");

    make_with_fmt(&w, 6, 1, 8000, 16, 2);
    expect_fail(&w, SPW_EUNSUPPORTED, "16-bit A-law (format tag 6)");

    make_with_fmt(&w, 7, 1, 8000, 4, 1);
    expect_fail(&w, SPW_EUNSUPPORTED, "4-bit mu-law (format tag 7)");

    make_with_fmt(&w, 0x1234, 1, 16000, 16, 2);
    expect_fail(&w, SPW_EUNSUPPORTED, "format tag 0x1234");

    begin_riff(&w);
    put_fmt_extensible(&w, 1, 1, 16000, 16);
    w.b[12 + 8 + 30] ^= 0xFF;       /* a byte of the GUID suffix */
    put_data_header(&w, 2);
    put(&w, "\0\0", 2);
    end_riff(&w);
    expect_fail(&w, SPW_EUNSUPPORTED, "SubFormat GUID");

    begin_riff(&w);
    put_fmt_extensible(&w, 2, 1, 16000, 16);    /* the MS ADPCM SubFormat */
    put_data_header(&w, 2);
    put(&w, "\0\0", 2);
    end_riff(&w);
    expect_fail(&w, SPW_EUNSUPPORTED, "MS ADPCM (format tag 2)");

    begin_riff(&w);
    put_fmt_extensible(&w, 1, 1, 16000, 16);
    w.b[12 + 8 + 18] = 17;          /* validBitsPerSample 17 in a 16-bit container */
    put_data_header(&w, 2);
    put(&w, "\0\0", 2);
    end_riff(&w);
    expect_fail(&w, SPW_EDECODE, "17 valid bits exceed the 16-bit container");

    make_with_fmt(&w, 1, 3, 8000, 24, 4);           /* scipy's 24bit-inconsistent: 3 channels x 3 bytes != 4 */
    expect_fail(&w, SPW_EDECODE, "block_align is 4, not channels 3 * 3 bytes (24 bits)");
}
END_TEST

START_TEST(test_wav_cap_refuses_before_decoding)
{
    struct wavbuf w;
    begin_riff(&w);
    put_fmt(&w, 3, 2, 44100, 32, 8);
    put_stereo_data(&w);
    end_riff(&w);
    struct spw_wav_info info = {.channels = -7};
    float *out = NULL;
    char err[256];
    /* 5 frames x 2 channels = 10 samples; downmixed, 5 */
    ck_assert_int_eq(decode(&w, false, 9, &info, &out, err, sizeof err), SPW_ETOOBIG);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(info.channels, -7);
    ck_assert_msg(strstr(err, "10 samples") != NULL, "%s", err);
    ck_assert_int_eq(decode(&w, true, 4, &info, &out, err, sizeof err), SPW_ETOOBIG);
    ck_assert_int_eq(decode(&w, true, 5, &info, &out, err, sizeof err), 0);
    free(out);
    ck_assert_int_eq(decode(&w, false, 10, &info, &out, err, sizeof err), 0);
    free(out);
    free(w.b);
}
END_TEST

START_TEST(test_wav_every_prefix_refused_until_data_complete)
{
    struct wavbuf w;
    make_pcm16_mono(&w, true);
    /* Where the data chunk's samples end: header, LIST (17 + pad), fmt, fact, data header, samples. */
    const size_t data_end = 12 + (8 + 18) + (8 + 16) + (8 + 4) + 8 + N_PCM * 2;
    ck_assert_uint_lt(data_end, w.n);
    for (size_t len = 0; len < w.n; len++) {
        char err[256];
        int rc = decode_exact(w.b, len, err, sizeof err);
        if (len >= data_end)
            ck_assert_msg(rc == 0, "prefix %zu: %d %s", len, rc, err);
        else
            ck_assert_msg(rc == SPW_EDECODE, "prefix %zu: %d %s", len, rc, err);
        if (len >= data_end - N_PCM * 2 && len < data_end)
            ck_assert_msg(strstr(err, "truncated data") != NULL, "prefix %zu: %s", len, err);
    }
    free(w.b);
}
END_TEST

/* Write the low `bytes` bytes of v, little-endian or (be) big-endian. */
static void put_int(struct wavbuf *w, uint64_t v, int bytes, bool be)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++)
        b[be ? bytes - 1 - i : i] = (uint8_t)(v >> (8 * i));
    put(w, b, (size_t)bytes);
}

/* A file with a plain 16-byte fmt chunk (block_align channels x ceil(bits / 8)) and n interleaved samples of
 * ceil(bits / 8) bytes; RIFX, every field big-endian, when be. */
static void make_plain(struct wavbuf *w, bool be, uint32_t tag, uint32_t channels, uint32_t bits,
                       const uint64_t *samples, int n)
{
    const uint32_t bytes = (bits + 7) / 8, block_align = channels * bytes;
    memset(w, 0, sizeof *w);
    put(w, be ? "RIFX" : "RIFF", 4);
    put_int(w, 0, 4, be);
    put(w, "WAVE", 4);
    put(w, "fmt ", 4);
    put_int(w, 16, 4, be);
    put_int(w, tag, 2, be);
    put_int(w, channels, 2, be);
    put_int(w, 8000, 4, be);
    put_int(w, 8000 * block_align, 4, be);
    put_int(w, block_align, 2, be);
    put_int(w, bits, 2, be);
    put(w, "data", 4);
    put_int(w, (uint64_t)n * bytes, 4, be);
    for (int i = 0; i < n; i++)
        put_int(w, samples[i], (int)bytes, be);
    if ((n * bytes) & 1)
        put(w, "", 1);
    for (int i = 0; i < 4; i++)
        w->b[be ? 7 - i : 4 + i] = (uint8_t)((w->n - 8) >> (8 * i));
}

/* A WAVE_FORMAT_EXTENSIBLE file: SubFormat tag subtag, a bits-wide container with valid_bits significant. */
static void make_extensible(struct wavbuf *w, uint32_t subtag, uint32_t channels, uint32_t bits, uint32_t valid_bits,
                            const uint64_t *samples, int n)
{
    begin_riff(w);
    put_fmt_extensible(w, subtag, channels, 8000, bits);
    w->b[12 + 8 + 18] = (uint8_t)valid_bits;
    w->b[12 + 8 + 19] = (uint8_t)(valid_bits >> 8);
    put_data_header(w, (uint32_t)n * bits / 8);
    for (int i = 0; i < n; i++)
        put_int(w, samples[i], (int)bits / 8, false);
    end_riff(w);
}

/* Decode w, expect the header fields and exactly the planar samples want [channels][frames]; downmixed, the
 * mean of the channels as the decoder sums them (channel order, then times 1/channels). Frees w. */
static void expect_samples(struct wavbuf *w, enum spw_wav_format format, int bits, int valid_bits, int channels,
                           const float *want, int frames)
{
    struct spw_wav_info info;
    float *out;
    char err[256] = "";
    int rc = decode(w, false, CAP, &info, &out, err, sizeof err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
    ck_assert_int_eq(info.format, format);
    ck_assert_int_eq(info.bits, bits);
    ck_assert_int_eq(info.valid_bits, valid_bits);
    ck_assert_int_eq(info.channels, channels);
    ck_assert_int_eq(info.frames, frames);
    for (int i = 0; i < channels * frames; i++)
        ck_assert_msg(out[i] == want[i] || (isnan(out[i]) && isnan(want[i])), "sample %d: %a, want %a", i,
                      (double)out[i], (double)want[i]);
    free(out);
    ck_assert_int_eq(decode(w, true, CAP, &info, &out, err, sizeof err), 0);
    for (int f = 0; f < frames; f++) {
        float sum = 0.0f;
        for (int c = 0; c < channels; c++)
            sum += want[c * frames + f];
        ck_assert_msg(out[f] == sum * (1.0f / (float)channels), "frame %d: %a", f, (double)out[f]);
    }
    free(out);
    free(w->b);
}

START_TEST(test_wav_pcm_u8_offset_128_scaled_by_128)
{
    struct wavbuf w;
    const uint64_t s[] = {0, 1, 127, 128, 129, 255};       /* L R L R L R */
    const float want[] = {-1.0f, -0.0078125f, 0.0078125f, -0.9921875f, 0.0f, 0.9921875f};
    make_plain(&w, false, 1, 2, 8, s, 6);
    expect_samples(&w, SPW_WAV_PCM_U8, 8, 8, 2, want, 3);
}
END_TEST

START_TEST(test_wav_pcm24_three_bytes_scaled_by_2_pow_23)
{
    struct wavbuf w;
    const uint64_t s[] = {0x000000, 0x000001, 0xFFFFFF, 0x7FFFFF, 0x800000, 0x123456};
    const float want[] = {0.0f, 0x1p-23f, -0x1p-23f, 0x1.fffffcp-1f, -1.0f, 0x1.23456p-3f};
    make_plain(&w, false, 1, 1, 24, s, 6);
    expect_samples(&w, SPW_WAV_PCM_S24, 24, 24, 1, want, 6);
}
END_TEST

START_TEST(test_wav_pcm32_rounded_to_float_and_scaled_by_2_pow_31)
{
    struct wavbuf w;
    const uint64_t s[] = {0x40000000, 0xC0000000, 0x7FFFFFFF, 0x80000000, 1, 123456789, (uint32_t)-123456789, 0};
    /* INT32_MAX rounds to 2^31 in float, so to 1.0 (as soundfile gives) */
    const float want[] = {0.5f, -0.5f, 1.0f, -1.0f, 0x1p-31f, 0x1.d6f346p-5f, -0x1.d6f346p-5f, 0.0f};
    make_plain(&w, false, 1, 2, 32, s, 8);
    const float planar[] = {want[0], want[2], want[4], want[6], want[1], want[3], want[5], want[7]};
    expect_samples(&w, SPW_WAV_PCM_S32, 32, 32, 2, planar, 4);
}
END_TEST

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

START_TEST(test_wav_float64_rounded_to_float32)
{
    struct wavbuf w;
    const uint64_t s[] = {double_bits(0.1), double_bits(-1.5), double_bits(1e-40), double_bits(1e39),
                          double_bits(-1e39), double_bits(2.0)};
    const float want[] = {0x1.99999ap-4f, -1.5f, 0x1.16c2p-133f, INFINITY, -INFINITY, 2.0f};
    make_plain(&w, false, 3, 1, 64, s, 6);
    expect_samples(&w, SPW_WAV_FLOAT64, 64, 64, 1, want, 6);
}
END_TEST

/* G.711 codes and their 16-bit expansions (ITU-T G.711 tables 1 and 2; libsndfile's alaw_decode[0] is -5504
 * and ulaw_decode[0] -32124), read as value / 32768. */
static const uint64_t alaw_codes[] = {0xD5, 0x55, 0xAA, 0x2A, 0x80, 0x00};
static const float alaw_want[] = {8 / 32768.0f, -8 / 32768.0f, 32256 / 32768.0f, -32256 / 32768.0f,
                                  5504 / 32768.0f, -5504 / 32768.0f};
static const uint64_t mulaw_codes[] = {0x00, 0x80, 0xFF, 0x7F, 0x7E, 0x70};
static const float mulaw_want[] = {-32124 / 32768.0f, 32124 / 32768.0f, 0.0f, 0.0f, -8 / 32768.0f,
                                   -120 / 32768.0f};

START_TEST(test_wav_alaw_and_mulaw_g711_expansion)
{
    struct wavbuf w;
    make_plain(&w, false, 6, 1, 8, alaw_codes, 6);
    expect_samples(&w, SPW_WAV_ALAW, 8, 8, 1, alaw_want, 6);
    make_plain(&w, false, 7, 1, 8, mulaw_codes, 6);
    expect_samples(&w, SPW_WAV_MULAW, 8, 8, 1, mulaw_want, 6);
    make_extensible(&w, 6, 1, 8, 8, alaw_codes, 6);
    expect_samples(&w, SPW_WAV_ALAW, 8, 8, 1, alaw_want, 6);
    make_extensible(&w, 7, 1, 8, 8, mulaw_codes, 6);
    expect_samples(&w, SPW_WAV_MULAW, 8, 8, 1, mulaw_want, 6);
}
END_TEST

START_TEST(test_wav_valid_bits_below_container_scaled_by_container)
{
    /* soundfile scales by the container and keeps low bits a writer left set */
    struct wavbuf w;
    const uint64_t s24[] = {0x123450, 0xFFFFF0, 0x800000, 0x00000F};
    const float want24[] = {0x1.2345p-3f, -0x1p-19f, -1.0f, 0x1.ep-20f};
    make_extensible(&w, 1, 1, 24, 20, s24, 4);
    expect_samples(&w, SPW_WAV_PCM_S24, 24, 20, 1, want24, 4);
    make_plain(&w, false, 1, 1, 20, s24, 4);        /* a plain header saying 20 bits: 3-byte samples */
    expect_samples(&w, SPW_WAV_PCM_S24, 24, 20, 1, want24, 4);

    const uint64_t s16[] = {0x7FF0, 0x8000, 0x0010, 0xFFF0};
    const float want16[] = {0x1.ffcp-1f, -1.0f, 0x1p-11f, -0x1p-11f};    /* L R L R -> planar below */
    const float planar16[] = {want16[0], want16[2], want16[1], want16[3]};
    make_extensible(&w, 1, 2, 16, 12, s16, 4);
    expect_samples(&w, SPW_WAV_PCM_S16, 16, 12, 2, planar16, 2);
    make_plain(&w, false, 1, 2, 12, s16, 4);
    expect_samples(&w, SPW_WAV_PCM_S16, 16, 12, 2, planar16, 2);

    const uint64_t s8[] = {0x00, 0xF8};             /* 5 valid bits of unsigned 8 */
    const float want8[] = {-1.0f, 0.9375f};
    make_plain(&w, false, 1, 1, 5, s8, 2);
    expect_samples(&w, SPW_WAV_PCM_U8, 8, 5, 1, want8, 2);

    const uint64_t s32[] = {0x12345600};
    const float want32[] = {0x1.23456p-3f};
    make_extensible(&w, 1, 1, 32, 24, s32, 1);
    expect_samples(&w, SPW_WAV_PCM_S32, 32, 24, 1, want32, 1);
}
END_TEST

START_TEST(test_wav_rifx_big_endian_fields_and_samples)
{
    struct wavbuf w;
    const uint64_t s16[] = {0x1234, 0x8000, 0x7FFF, 0xFFFF};
    const float want16[] = {0x1.234p-3f, 0x1.fffcp-1f, -1.0f, -0x1p-15f};
    make_plain(&w, true, 1, 2, 16, s16, 4);
    struct spw_wav_info info;
    char err[256];
    ck_assert_int_eq(spw_wav_header(w.b, w.n, &info, err, sizeof err), 0);
    ck_assert(info.big_endian);
    expect_samples(&w, SPW_WAV_PCM_S16, 16, 16, 2, want16, 2);

    const uint64_t s24[] = {0x123456, 0x800000};
    const float want24[] = {0x1.23456p-3f, -1.0f};
    make_plain(&w, true, 1, 1, 24, s24, 2);
    expect_samples(&w, SPW_WAV_PCM_S24, 24, 24, 1, want24, 2);

    const uint64_t s32[] = {0xC0000000};
    const float want32[] = {-0.5f};
    make_plain(&w, true, 1, 1, 32, s32, 1);
    expect_samples(&w, SPW_WAV_PCM_S32, 32, 32, 1, want32, 1);

    const uint64_t f32[] = {0x3E800000};            /* 0.25f */
    const float wantf32[] = {0.25f};
    make_plain(&w, true, 3, 1, 32, f32, 1);
    expect_samples(&w, SPW_WAV_FLOAT32, 32, 32, 1, wantf32, 1);

    const uint64_t f64[] = {double_bits(-0.5)};
    const float wantf64[] = {-0.5f};
    make_plain(&w, true, 3, 1, 64, f64, 1);
    expect_samples(&w, SPW_WAV_FLOAT64, 64, 64, 1, wantf64, 1);
}
END_TEST

START_TEST(test_wav_every_prefix_of_each_format_refused)
{
    const uint64_t s[] = {0x12, 0x80, 0x7F3456, 0xFF, 0x8000, 0x12345678, 0x3F000000, 0xFF0000};
    struct wavbuf files[12];
    int n = 0;
    make_plain(&files[n++], false, 1, 2, 8, s, 8);          /* unsigned 8 */
    make_plain(&files[n++], false, 1, 2, 24, s, 8);
    make_plain(&files[n++], false, 1, 2, 32, s, 8);
    make_plain(&files[n++], false, 3, 1, 64, s, 8);
    make_plain(&files[n++], false, 6, 2, 8, s, 8);          /* A-law */
    make_plain(&files[n++], false, 7, 1, 8, s, 8);          /* mu-law */
    make_plain(&files[n++], false, 1, 1, 12, s, 8);
    make_plain(&files[n++], true, 1, 2, 24, s, 8);          /* RIFX */
    make_plain(&files[n++], true, 3, 1, 64, s, 8);
    make_extensible(&files[n++], 1, 2, 24, 20, s, 8);
    make_extensible(&files[n++], 7, 2, 8, 8, s, 8);
    make_extensible(&files[n++], 3, 1, 64, 64, s, 8);
    for (int i = 0; i < n; i++) {
        const struct wavbuf *w = &files[i];
        char err[256];
        ck_assert_int_eq(decode_exact(w->b, w->n, err, sizeof err), 0);
        for (size_t len = 0; len < w->n; len++) {
            int rc = decode_exact(w->b, len, err, sizeof err);
            ck_assert_msg(rc == SPW_EDECODE, "file %d prefix %zu of %zu: %d %s", i, len, w->n, rc, err);
        }
        free(w->b);
    }
}
END_TEST

START_TEST(test_wav_pcm24_data_past_buffer_refused_before_allocating)
{
    /* The sizes would pass any cap: only the check against the buffer stands between them and malloc. */
    const uint32_t sizes[] = {0xFFFFFFF0u, 0x7FFFFFFEu, 6 * 5};
    for (int i = 0; i < 3; i++) {
        struct wavbuf w;
        const uint64_t s[] = {1, 2, 3, 4, 5, 6, 7, 8};
        make_plain(&w, false, 1, 2, 24, s, 8);      /* 4 frames of 6 bytes */
        set_u32(&w, 40, sizes[i]);
        struct spw_wav_info info = {.channels = -7};
        float *out = NULL;
        char err[256] = "";
        ck_assert_int_eq(spw_wav_decode(w.b, w.n, false, INT64_MAX, &info, &out, err, sizeof err), SPW_EDECODE);
        ck_assert_ptr_null(out);
        ck_assert_int_eq(info.channels, -7);
        char want[128];
        snprintf(want, sizeof want, "truncated data: data chunk says %u bytes, the file holds 24", (unsigned)sizes[i]);
        ck_assert_msg(strstr(err, want) != NULL, "%s", err);
        free(w.b);
    }
}
END_TEST

START_TEST(test_wav_data_may_run_past_an_undercounting_riff_size)
{
    /* scipy's test-44100Hz-le-1ch-4bytes.wav: the RIFF size is 12 bytes short, the data chunk whole; soundfile
     * reads all of it, and so do we */
    struct wavbuf w;
    const uint64_t s[] = {0x40000000, 0xC0000000, 0x20000000, 0};
    const float want[] = {0.5f, -0.5f, 0.25f, 0.0f};
    make_plain(&w, false, 1, 1, 32, s, 4);
    set_u32(&w, 4, (uint32_t)(w.n - 8 - 12));
    expect_samples(&w, SPW_WAV_PCM_S32, 32, 32, 1, want, 4);
}
END_TEST

static double rms(const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

/* Resample one second of a unit sine at freq Hz from orig to new; returns RMS(middle half of output) over
 * RMS(input). */
static double tone_gain(int orig, int new_rate, double freq)
{
    struct spw_wave_resample_plan *p;
    ck_assert_int_eq(spw_wave_resample_plan_create(orig, new_rate, 6, 0.99, &p), 0);
    float *in = malloc((size_t)orig * sizeof(float));
    for (int i = 0; i < orig; i++)
        in[i] = (float)sin(2.0 * M_PI * freq * i / orig);
    const int64_t m = spw_wave_resample_out_len(p, orig);
    ck_assert_int_eq(m, new_rate);
    float *out = malloc((size_t)m * sizeof(float));
    spw_wave_resample_run(p, in, orig, out);
    double gain = rms(out + m / 4, m / 2) / rms(in, orig);
    free(out);
    free(in);
    spw_wave_resample_plan_destroy(p);
    return gain;
}

START_TEST(test_wave_resample_keeps_passband_amplitude)
{
    double gain = tone_gain(48000, 16000, 1000.0);
    ck_assert_msg(fabs(gain - 1.0) < 0.01, "1 kHz gain %f", gain);
}
END_TEST

START_TEST(test_wave_resample_attenuates_above_new_nyquist)
{
    double gain = tone_gain(16000, 8000, 7000.0);
    ck_assert_msg(20.0 * log10(gain) <= -60.0, "7 kHz at 8 kHz: %.1f dB", 20.0 * log10(gain));
}
END_TEST

START_TEST(test_wave_resample_out_len_is_ceil)
{
    const int cases[][3] = {{48000, 16000, 1},     {48000, 16000, 47999}, {44100, 16000, 44101},
                            {16000, 22050, 997},   {8000, 16000, 5},      {22050, 8000, 12345},
                            {16000, 44100, 16001}, {3, 7, 10},            {1000000, 1, 999999}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t orig = cases[c][0], new_rate = cases[c][1], n = cases[c][2];
        struct spw_wave_resample_plan *p;
        ck_assert_int_eq(spw_wave_resample_plan_create((int)orig, (int)new_rate, 6, 0.99, &p), 0);
        const int64_t m = spw_wave_resample_out_len(p, n);
        ck_assert_int_eq(m, (new_rate * n + orig - 1) / orig);
        float *in = calloc((size_t)n, sizeof(float)), *out = malloc((size_t)m * sizeof(float));
        spw_wave_resample_run(p, in, n, out);     /* exactly m floats: ASan sees any write past them */
        for (int64_t i = 0; i < m; i++)
            ck_assert(out[i] == 0.0f);
        free(out);
        free(in);
        spw_wave_resample_plan_destroy(p);
    }
}
END_TEST

START_TEST(test_wave_resample_same_rate_copies)
{
    struct spw_wave_resample_plan *p;
    ck_assert_int_eq(spw_wave_resample_plan_create(22050, 22050, 6, 0.99, &p), 0);
    float in[101], out[101];
    for (int i = 0; i < 101; i++)
        in[i] = (float)sin(i * 0.37) * 3.0f;
    ck_assert_int_eq(spw_wave_resample_out_len(p, 101), 101);
    spw_wave_resample_run(p, in, 101, out);
    ck_assert(memcmp(in, out, sizeof in) == 0);
    spw_wave_resample_plan_destroy(p);
}
END_TEST

START_TEST(test_wave_resample_refuses_bad_plans)
{
    struct spw_wave_resample_plan *p = NULL;
    ck_assert_int_eq(spw_wave_resample_plan_create(0, 16000, 6, 0.99, &p), -EINVAL);
    ck_assert_int_eq(spw_wave_resample_plan_create(16000, 1000001, 6, 0.99, &p), -EINVAL);
    ck_assert_int_eq(spw_wave_resample_plan_create(16000, 8000, 0, 0.99, &p), -EINVAL);
    ck_assert_int_eq(spw_wave_resample_plan_create(16000, 8000, 6, 0.0, &p), -EINVAL);
    ck_assert_int_eq(spw_wave_resample_plan_create(16000, 8000, 6, 1.5, &p), -EINVAL);
    ck_assert_int_eq(spw_wave_resample_plan_create(16000, 8000, 6, NAN, &p), -EINVAL);
    /* coprime rates: 1000000 phases of ~2000014 taps is far past the 64 MiB kernel table */
    ck_assert_int_eq(spw_wave_resample_plan_create(999999, 1000000, 6, 0.99, &p), -EINVAL);
    ck_assert_ptr_null(p);
    spw_wave_resample_plan_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wav");
    TCase *tc = tcase_create("wav");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_wav_pcm16_mono_exact);
    tcase_add_test(tc, test_wav_float_stereo_planes_and_downmix_mean);
    tcase_add_test(tc, test_wav_extensible_pcm16_and_float);
    tcase_add_test(tc, test_wav_skips_list_and_fact_chunks);
    tcase_add_test(tc, test_wav_streaming_riff_size_uses_buffer_length);
    tcase_add_test(tc, test_wav_rejects_malformed_headers);
    tcase_add_test(tc, test_wav_refuses_other_encodings);
    tcase_add_test(tc, test_wav_cap_refuses_before_decoding);
    tcase_add_test(tc, test_wav_every_prefix_refused_until_data_complete);
    tcase_add_test(tc, test_wav_pcm_u8_offset_128_scaled_by_128);
    tcase_add_test(tc, test_wav_pcm24_three_bytes_scaled_by_2_pow_23);
    tcase_add_test(tc, test_wav_pcm32_rounded_to_float_and_scaled_by_2_pow_31);
    tcase_add_test(tc, test_wav_float64_rounded_to_float32);
    tcase_add_test(tc, test_wav_alaw_and_mulaw_g711_expansion);
    tcase_add_test(tc, test_wav_valid_bits_below_container_scaled_by_container);
    tcase_add_test(tc, test_wav_rifx_big_endian_fields_and_samples);
    tcase_add_test(tc, test_wav_every_prefix_of_each_format_refused);
    tcase_add_test(tc, test_wav_pcm24_data_past_buffer_refused_before_allocating);
    tcase_add_test(tc, test_wav_data_may_run_past_an_undercounting_riff_size);
    tcase_add_test(tc, test_wave_resample_keeps_passband_amplitude);
    tcase_add_test(tc, test_wave_resample_attenuates_above_new_nyquist);
    tcase_add_test(tc, test_wave_resample_out_len_is_ceil);
    tcase_add_test(tc, test_wave_resample_same_rate_copies);
    tcase_add_test(tc, test_wave_resample_refuses_bad_plans);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
