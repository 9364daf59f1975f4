/* tests/unit/check_audio_decode.c - ops/audio_decode (decode_audio's kernel) on files made at test time from
 * espeak-ng speech with Debian's encoders (tests/unit/audio_cases.py): the format told by content; FLAC equal
 * to its WAV sample for sample; every format's length and rate, planar and downmixed; every prefix of every
 * file refused with a message, never a crash; declared lengths over max_samples refused before allocating
 * (a FLAC claiming 2^36 - 1 samples); a damaged FLAC frame refused; the spec's decode_audio op, audio_folder
 * source and tar extensions. (Sample values against soundfile: tests/audio/codec_reference.py.) */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "tests/unit/fixture_dir.h"
#include "lib/err.h"
#include "ops/audio_decode.h"
#include "ops/wav.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/tar_index.h"

#define CAP (1LL << 26)

static char g_root[256];

static void setup(void)
{
    spw_fixture_make(g_root, sizeof g_root, "audio", "tests/unit/audio_cases.py");
}

static void teardown(void)
{
    spw_fixture_remove(g_root);
}

static uint8_t *slurp(const char *name, size_t *len)
{
    return spw_fixture_read(g_root, name, len);
}

/* Decode NAME; fails the test with the message when refused. */
static float *decode_ok(const char *name, bool downmix, struct spw_audio_info *info)
{
    size_t len;
    uint8_t *buf = slurp(name, &len);
    float *out = NULL;
    char err[256] = "";
    int rc = spw_audio_decode(buf, len, downmix, CAP, info, &out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: rc %d: %s", name, rc, err);
    free(buf);
    return out;
}

static int64_t wav_frames(const char *name)
{
    struct spw_audio_info info;
    free(decode_ok(name, false, &info));
    ck_assert_int_eq(info.format, SPW_AUDIO_WAV);
    return info.frames;
}

START_TEST(test_audio_decode_sniff_tells_formats_by_content)
{
    static const char *const names[] = {"mono.wav", "mono.flac", "mono.mp3", "mono.ogg", "mono.opus"};
    static const enum spw_audio_format want[] = {SPW_AUDIO_WAV, SPW_AUDIO_FLAC, SPW_AUDIO_MP3, SPW_AUDIO_VORBIS,
                                                 SPW_AUDIO_OPUS};
    for (int i = 0; i < 5; i++) {
        size_t len;
        uint8_t *b = slurp(names[i], &len);
        ck_assert_msg(spw_audio_sniff(b, len) == want[i], "%s", names[i]);
        free(b);
    }
    /* an ID3v2 tag before fLaC is FLAC; before anything else, MP3 */
    const uint8_t id3_flac[] = {'I', 'D', '3', 4, 0, 0, 0, 0, 0, 2, 0, 0, 'f', 'L', 'a', 'C'};
    ck_assert_int_eq(spw_audio_sniff(id3_flac, sizeof id3_flac), SPW_AUDIO_FLAC);
    const uint8_t id3_mp3[] = {'I', 'D', '3', 4, 0, 0, 0, 0, 0, 2, 0, 0, 0xFF, 0xFB, 0x90, 0x00};
    ck_assert_int_eq(spw_audio_sniff(id3_mp3, sizeof id3_mp3), SPW_AUDIO_MP3);
    const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0}, adts[] = {0xFF, 0xF1, 0x50, 0x80};
    ck_assert_int_eq(spw_audio_sniff(jpeg, sizeof jpeg), SPW_AUDIO_UNKNOWN);
    ck_assert_int_eq(spw_audio_sniff(adts, sizeof adts), SPW_AUDIO_UNKNOWN);      /* AAC: layer bits 00 */
    ck_assert_str_eq(spw_audio_format_name(SPW_AUDIO_OPUS), "Ogg Opus");
    float *out = NULL;
    struct spw_audio_info info;
    char err[256];
    ck_assert_int_eq(spw_audio_decode(jpeg, sizeof jpeg, true, CAP, &info, &out, err, sizeof err), SPW_EDECODE);
    ck_assert_str_eq(err, "audio: not WAV, FLAC, MP3, Ogg Vorbis or Ogg Opus (4 bytes, starting ff d8 ff e0 )");
    ck_assert(out == NULL);
}
END_TEST

START_TEST(test_audio_decode_flac_equals_its_wav)
{
    for (int stereo = 0; stereo < 2; stereo++)
        for (int downmix = 0; downmix < 2; downmix++) {
            char wav[32], flac[32];
            snprintf(wav, sizeof wav, "%s.wav", stereo ? "stereo" : "mono");
            snprintf(flac, sizeof flac, "%s.flac", stereo ? "stereo" : "mono");
            struct spw_audio_info wi, fi;
            float *w = decode_ok(wav, downmix, &wi), *f = decode_ok(flac, downmix, &fi);
            ck_assert_int_eq(fi.format, SPW_AUDIO_FLAC);
            ck_assert_int_eq(fi.channels, stereo ? 2 : 1);
            ck_assert_int_eq(fi.sample_rate, wi.sample_rate);
            ck_assert_int_eq(fi.frames, wi.frames);
            const size_t n = (size_t)fi.frames * (downmix ? 1 : (size_t)fi.channels);
            ck_assert_msg(memcmp(w, f, n * sizeof(float)) == 0, "%s downmix %d differs from its WAV", flac, downmix);
            free(w);
            free(f);
        }
}
END_TEST

/* Lossy files: the rate, a length within the codec's framing of the WAV's, planar channels, and the downmix
 * equal to the mean of the planar channels as ops/wav computes it. */
static void check_lossy(const char *ext, enum spw_audio_format format, int rate_factor_num, int rate_factor_den,
                        int64_t slack)
{
    const int64_t wf = wav_frames("mono.wav");
    for (int stereo = 0; stereo < 2; stereo++) {
        char name[32];
        snprintf(name, sizeof name, "%s.%s", stereo ? "stereo" : "mono", ext);
        struct spw_audio_info pi, di;
        float *p = decode_ok(name, false, &pi), *d = decode_ok(name, true, &di);
        ck_assert_int_eq(pi.format, format);
        ck_assert_int_eq(pi.channels, stereo ? 2 : 1);
        ck_assert_int_eq(pi.sample_rate, format == SPW_AUDIO_OPUS ? 48000 : 22050);
        const int64_t want = wf * rate_factor_num / rate_factor_den;
        ck_assert_msg(pi.frames >= want && pi.frames <= want + slack, "%s: %lld frames, want %lld (+%lld)", name,
                      (long long)pi.frames, (long long)want, (long long)slack);
        ck_assert_int_eq(di.frames, pi.frames);
        for (int64_t i = 0; i < pi.frames; i++) {
            const float m = stereo ? (p[i] + p[pi.frames + i]) * 0.5f : p[i];
            ck_assert_msg(d[i] == m, "%s: downmix at %lld", name, (long long)i);
        }
        free(p);
        free(d);
    }
}

START_TEST(test_audio_decode_mp3_length_rate_and_downmix)
{
    check_lossy("mp3", SPW_AUDIO_MP3, 1, 1, 1152);
}
END_TEST

START_TEST(test_audio_decode_vorbis_length_rate_and_downmix)
{
    check_lossy("ogg", SPW_AUDIO_VORBIS, 1, 1, 0);
}
END_TEST

START_TEST(test_audio_decode_opus_decodes_at_48k)
{
    /* opusenc keeps the length: 48000 / 22050 of the WAV's, rounded */
    check_lossy("opus", SPW_AUDIO_OPUS, 48000, 22050, 1);
}
END_TEST

/* Every prefix up to 4 KiB, then every 97th byte: refused with a message naming the format, never a crash. */
static void walk_prefixes(const char *name, const char *codec)
{
    size_t len;
    uint8_t *buf = slurp(name, &len);
    int walked = 0;
    for (size_t n = 0; n < len; n += n < 4096 ? 1 : 97) {
        uint8_t *cut = malloc(n + 1);          /* exactly n bytes readable: ASan sees any over-read */
        memcpy(cut, buf, n);
        float *out = NULL;
        struct spw_audio_info info;
        char err[256] = "";
        int rc = spw_audio_decode(cut, n, true, CAP, &info, &out, err, sizeof err);
        ck_assert_msg(rc != 0, "%s: the %zu-byte prefix (of %zu) decodes to %lld frames", name, n, len,
                      rc == 0 ? (long long)info.frames : 0LL);
        ck_assert_msg(out == NULL, "%s: output written on a refusal", name);
        ck_assert_msg(strncmp(err, codec, strlen(codec)) == 0 || strncmp(err, "audio: ", 7) == 0,
                      "%s prefix %zu: message \"%s\"", name, n, err);
        free(cut);
        walked++;
    }
    ck_assert_int_gt(walked, 100);
    free(buf);
}

START_TEST(test_audio_decode_flac_every_prefix_refused)
{
    walk_prefixes("mono.flac", "FLAC: ");
    walk_prefixes("stereo.flac", "FLAC: ");
}
END_TEST

START_TEST(test_audio_decode_mp3_every_prefix_refused)
{
    walk_prefixes("mono.mp3", "MP3: ");
    walk_prefixes("stereo.mp3", "MP3: ");
}
END_TEST

START_TEST(test_audio_decode_vorbis_every_prefix_refused)
{
    walk_prefixes("mono.ogg", "Ogg Vorbis: ");
    walk_prefixes("stereo.ogg", "Ogg Vorbis: ");
}
END_TEST

START_TEST(test_audio_decode_opus_every_prefix_refused)
{
    walk_prefixes("mono.opus", "Ogg Opus: ");
    walk_prefixes("stereo.opus", "Ogg Opus: ");
}
END_TEST

START_TEST(test_audio_decode_flac_huge_streaminfo_refused_before_allocating)
{
    size_t len;
    uint8_t *buf = slurp("mono.flac", &len);
    /* STREAMINFO: "fLaC", a 4-byte block header, then 10 bytes of block sizes and frame sizes, then 20 bits
     * of rate, 3 of channels - 1, 5 of bits - 1 and 36 of total samples */
    ck_assert(memcmp(buf, "fLaC", 4) == 0 && (buf[4] & 0x7f) == 0);
    uint8_t *t = buf + 8 + 13;
    t[0] |= 0x0f;
    memset(t + 1, 0xff, 4);                     /* 2^36 - 1 samples */
    float *out = NULL;
    struct spw_audio_info info;
    char err[256] = "";
    ck_assert_int_eq(spw_audio_decode(buf, len, true, CAP, &info, &out, err, sizeof err), SPW_ETOOBIG);
    ck_assert_str_eq(err, "FLAC: STREAMINFO states 68719476735 frames x 1 channels, over the cap of 67108864 "
                          "samples");
    ck_assert(out == NULL);
    free(buf);
}
END_TEST

START_TEST(test_audio_decode_declared_lengths_over_the_cap_refused)
{
    static const char *const names[] = {"stereo.flac", "stereo.mp3", "stereo.ogg", "stereo.opus"};
    static const char *const said[] = {"FLAC: STREAMINFO states", "MP3: its frames hold",
                                       "Ogg Vorbis: its last granule states", "Ogg Opus: its last granule states"};
    for (int i = 0; i < 4; i++) {
        size_t len;
        uint8_t *buf = slurp(names[i], &len);
        float *out = NULL;
        struct spw_audio_info info;
        char err[256] = "";
        /* planar stereo: twice the frames; one frame fewer than that fits no more */
        ck_assert_int_eq(spw_audio_decode(buf, len, false, 1000, &info, &out, err, sizeof err), SPW_ETOOBIG);
        ck_assert_msg(strstr(err, said[i]) != NULL, "%s: %s", names[i], err);
        ck_assert(out == NULL);
        free(buf);
    }
}
END_TEST

START_TEST(test_audio_decode_flac_damaged_frame_refused)
{
    size_t len;
    uint8_t *buf = slurp("mono.flac", &len);
    buf[len / 2] ^= 0x5a;
    float *out = NULL;
    struct spw_audio_info info;
    char err[256] = "";
    ck_assert_int_eq(spw_audio_decode(buf, len, true, CAP, &info, &out, err, sizeof err), SPW_EDECODE);
    ck_assert_msg(strncmp(err, "FLAC: corrupt: ", 15) == 0, "%s", err);
    ck_assert(out == NULL);
    free(buf);
}
END_TEST

START_TEST(test_audio_decode_ogg_damaged_page_refused)
{
    size_t len;
    uint8_t *buf = slurp("mono.ogg", &len);
    buf[len / 2] ^= 0x5a;                       /* the page's CRC no longer matches: a hole */
    float *out = NULL;
    struct spw_audio_info info;
    char err[256] = "";
    ck_assert_int_eq(spw_audio_decode(buf, len, true, CAP, &info, &out, err, sizeof err), SPW_EDECODE);
    ck_assert_msg(strncmp(err, "Ogg Vorbis: ", 12) == 0, "%s", err);
    free(buf);
}
END_TEST

static struct spw_pipeline_spec *parse(const char *format, const char *op)
{
    char json[512], err[256];
    snprintf(json, sizeof json, "{\"source\": {\"format\": \"%s\", \"path\": \"/d\"}, \"ops\": [{\"op\": \"%s\"}, "
             "{\"op\": \"resample\", \"rate\": 16000}], \"batch\": {\"size\": 2}}", format, op);
    struct spw_pipeline_spec *s = NULL;
    ck_assert_msg(spw_spec_parse_json(json, &s, err, sizeof err) == 0, "%s", err);
    return s;
}

START_TEST(test_audio_decode_spec_op_source_and_extensions)
{
    struct spw_pipeline_spec *s = parse("audio_folder", "decode_audio");
    ck_assert_int_eq(s->ops[0].kind, SPW_OP_DECODE_AUDIO);
    ck_assert(s->ops[0].mono);                  /* decode_wav's default */
    ck_assert_int_eq(s->source.format, SPW_SOURCE_AUDIO_FOLDER);
    ck_assert_int_eq(s->source.media, SPW_MEDIA_ANY_AUDIO);
    ck_assert(s->batch.pad);                    /* an audio pipeline's default */
    Spillway__V1__Pipeline *msg;
    char err[256];
    ck_assert_int_eq(spw_spec_to_proto(s, &msg), 0);
    ck_assert_int_eq(msg->ops[0]->op, SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_AUDIO);
    ck_assert_int_eq(msg->source->format, SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_AUDIO_FOLDER);
    struct spw_pipeline_spec *back;
    ck_assert_msg(spw_spec_from_proto(msg, &back, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(back->ops[0].kind, SPW_OP_DECODE_AUDIO);
    ck_assert_int_eq(back->source.format, SPW_SOURCE_AUDIO_FOLDER);
    spw_spec_free(back);
    spw_spec_proto_free(msg);
    spw_spec_free(s);
    /* the aliases: decode_wav in audio_folder, decode_audio in wav_folder; decode_wav stays WAV only */
    s = parse("audio_folder", "decode_wav");
    ck_assert_int_eq(s->source.media, SPW_MEDIA_AUDIO);
    spw_spec_free(s);
    s = parse("wav_folder", "decode_audio");
    ck_assert_int_eq(s->source.media, SPW_MEDIA_ANY_AUDIO);
    spw_spec_free(s);
    s = NULL;
    ck_assert_int_eq(spw_spec_parse_json("{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\"}, \"ops\": "
                                         "[{\"op\": \"decode_audio\"}], \"batch\": {\"size\": 1}}", &s, err,
                                         sizeof err), SPW_ESPEC);
    ck_assert_str_eq(err, "source.format: \"image_folder\" does not hold audio (ops[0] is \"decode_audio\"; use "
                          "audio_folder or tar_shards)");
    ck_assert_int_eq(spw_spec_parse_json("{\"source\": {\"format\": \"audio_folder\", \"path\": \"/d\"}, \"ops\": "
                                         "[{\"op\": \"decode_jpeg\"}], \"batch\": {\"size\": 1}}", &s, err,
                                         sizeof err), SPW_ESPEC);
    ck_assert_int_eq(spw_spec_parse_json("{\"source\": {\"format\": \"audio_folder\", \"path\": \"/d\"}, \"ops\": "
                                         "[{\"op\": \"decode_audio\"}, {\"op\": \"center_crop\", \"size\": 3}], "
                                         "\"batch\": {\"size\": 1}}", &s, err, sizeof err), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1]: image op \"center_crop\" in an audio pipeline (ops[0] is \"decode_audio\")");
    for (const char *const *e = (const char *const[]){"wav", "FLAC", "mp3", "ogg", "Opus", "seg.flac", NULL}; *e; e++)
        ck_assert_msg(spw_tar_media_ext(*e, SPW_MEDIA_ANY_AUDIO), "%s", *e);
    ck_assert(!spw_tar_media_ext("m4a", SPW_MEDIA_ANY_AUDIO));
    ck_assert(!spw_tar_media_ext("flac", SPW_MEDIA_AUDIO));         /* decode_wav lists what it did */
    ck_assert(spw_tar_media_ext("wav", SPW_MEDIA_AUDIO));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("audio_decode");
    TCase *tc = tcase_create("audio_decode");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_audio_decode_sniff_tells_formats_by_content);
    tcase_add_test(tc, test_audio_decode_flac_equals_its_wav);
    tcase_add_test(tc, test_audio_decode_mp3_length_rate_and_downmix);
    tcase_add_test(tc, test_audio_decode_vorbis_length_rate_and_downmix);
    tcase_add_test(tc, test_audio_decode_opus_decodes_at_48k);
    tcase_add_test(tc, test_audio_decode_flac_every_prefix_refused);
    tcase_add_test(tc, test_audio_decode_mp3_every_prefix_refused);
    tcase_add_test(tc, test_audio_decode_vorbis_every_prefix_refused);
    tcase_add_test(tc, test_audio_decode_opus_every_prefix_refused);
    tcase_add_test(tc, test_audio_decode_flac_huge_streaminfo_refused_before_allocating);
    tcase_add_test(tc, test_audio_decode_declared_lengths_over_the_cap_refused);
    tcase_add_test(tc, test_audio_decode_flac_damaged_frame_refused);
    tcase_add_test(tc, test_audio_decode_ogg_damaged_page_refused);
    tcase_add_test(tc, test_audio_decode_spec_op_source_and_extensions);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
