/* tests/unit/check_decode.c - ops/jpeg, ops/resample, ops/sink on the committed fixtures
 * (tests/data/fixtures, made by tests/data/make_fixtures.py): exact decode vs Pillow's bytes, ROI decode
 * equal to the same region of a full decode, corrupt inputs rejected with clear errors, and damaged files
 * (cut, no EOI, garbage after EOI, bytes overwritten in the scan) judged as Pillow 9.4 judges them, the
 * same on every decode path (whole image, crops at the top, centre and bottom, DCT-scaled). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "ops/jpeg.h"
#include "ops/resample.h"
#include "ops/sink.h"

#define FIX "tests/data/fixtures/"

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void check_full_decode_matches(const char *jpg, const char *rgb)
{
    size_t len, rlen;
    uint8_t *buf = slurp(jpg, &len), *ref = slurp(rgb, &rlen);
    struct spw_jpeg_region reg;
    char err[256];
    ck_assert_int_eq(spw_jpeg_decode_region(buf, len, 1 << 30, 0, 0, 0, 0, 1, &reg, err, sizeof err), 0);
    ck_assert_uint_eq((size_t)reg.img.w * reg.img.h * 3, rlen);
    ck_assert(memcmp(reg.img.data, ref, rlen) == 0);
    spw_image_free(&reg.img);
    free(buf);
    free(ref);
}

START_TEST(test_decode_full_is_pillow_exact)
{
    check_full_decode_matches(FIX "rgb444.jpg", FIX "rgb444.rgb");
}
END_TEST

START_TEST(test_decode_cmyk_converts_like_pillow)
{
    check_full_decode_matches(FIX "cmyk.jpg", FIX "cmyk.rgb");
}
END_TEST

START_TEST(test_decode_roi_equals_full_region)
{
    const char *files[] = {FIX "rgb420.jpg", FIX "rgb444.jpg", FIX "gray.jpg", FIX "progressive.jpg"};
    for (int f = 0; f < 4; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        struct spw_jpeg_region full, roi;
        char err[256];
        ck_assert_int_eq(spw_jpeg_decode_region(buf, len, 1 << 30, 0, 0, 0, 0, 1, &full, err, sizeof err), 0);
        int x = 37, y = 21, w = full.img.w / 2, h = full.img.h / 2;
        ck_assert_int_eq(spw_jpeg_decode_region(buf, len, 1 << 30, x - 2, y - 2, w + 4, h + 4, 1, &roi, err,
                                                sizeof err), 0);
        ck_assert_int_le(roi.x0, x);
        ck_assert_int_le(roi.y0, y);
        for (int r = 0; r < h; r++) {
            const uint8_t *a = spw_image_at(&full.img, x, y + r);
            const uint8_t *b = spw_image_at(&roi.img, x - roi.x0, y + r - roi.y0);
            ck_assert_msg(memcmp(a, b, (size_t)w * 3) == 0, "%s row %d differs", files[f], y + r);
        }
        spw_image_free(&full.img);
        spw_image_free(&roi.img);
        free(buf);
    }
}
END_TEST

START_TEST(test_decode_scaled_size)
{
    size_t len;
    uint8_t *buf = slurp(FIX "rgb444.jpg", &len);
    struct spw_jpeg_region reg;
    char err[256];
    ck_assert_int_eq(spw_jpeg_decode_region(buf, len, 1 << 30, 0, 0, 0, 0, 4, &reg, err, sizeof err), 0);
    ck_assert_int_eq(reg.img.w, (203 + 3) / 4);
    ck_assert_int_eq(reg.img.h, (150 + 3) / 4);
    ck_assert_int_eq(reg.denom, 4);
    spw_image_free(&reg.img);
    free(buf);
}
END_TEST

START_TEST(test_decode_rejects_corrupt_inputs)
{
    size_t len;
    uint8_t *buf = slurp(FIX "rgb444.jpg", &len);
    struct spw_jpeg_region reg;
    struct spw_jpeg_info info;
    char err[256];
    /* zero bytes, not a JPEG, truncated mid-scan, truncated in the header */
    ck_assert_int_eq(spw_jpeg_decode_region(buf, 0, 1 << 30, 0, 0, 0, 0, 1, &reg, err, sizeof err), SPW_EDECODE);
    const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    ck_assert_int_eq(spw_jpeg_decode_region(png, sizeof png, 1 << 30, 0, 0, 0, 0, 1, &reg, err, sizeof err),
                     SPW_EDECODE);
    ck_assert(strstr(err, "not a JPEG") != NULL);
    ck_assert_int_eq(spw_jpeg_decode_region(buf, len / 2, 1 << 30, 0, 0, 0, 0, 1, &reg, err, sizeof err),
                     SPW_EDECODE);
    ck_assert_int_eq(spw_jpeg_header(buf, 40, 1 << 30, &info, err, sizeof err), SPW_EDECODE);
    /* a pixel cap below the image's size */
    ck_assert_int_eq(spw_jpeg_decode_region(buf, len, 1000, 0, 0, 0, 0, 1, &reg, err, sizeof err), SPW_ETOOBIG);
    ck_assert(strstr(err, "203x150") != NULL);
    free(buf);
}
END_TEST

/* ---- damaged files: Pillow's verdict on every decode path ----
 * The expected verdicts are Pillow 9.4's (Image.open + convert("RGB"), same libjpeg-turbo 2.1.5) on the
 * same bytes; tests/cli/run.sh checks them against Pillow itself. */

/* Offset of the first byte after the first SOS segment: where the entropy-coded data starts. */
static size_t scan_start(const uint8_t *b, size_t len)
{
    size_t i = 2;
    while (i + 4 <= len) {
        ck_assert_uint_eq(b[i], 0xFF);
        size_t n = ((size_t)b[i + 2] << 8) | b[i + 3];
        if (b[i + 1] == 0xDA)
            return i + 2 + n;
        i += 2 + n;
    }
    ck_abort_msg("no SOS marker");
    return 0;
}

/* The decode calls the pipeline makes: whole image (decode_jpeg alone, padding crops), a region at the top,
 * centre and bottom (center_crop, crop, random_resized_crop), and DCT-scaled whole and region (resize,
 * random_resized_crop with a large crop). Each must return want_rc, with want_msg in its message. */
static void expect_every_path(const uint8_t *buf, size_t len, int want_rc, const char *want_msg, const char *what)
{
    struct spw_jpeg_info info;
    char err[256];
    ck_assert_int_eq(spw_jpeg_header(buf, len, 1 << 30, &info, err, sizeof err), 0);
    const int W = info.w, H = info.h;
    const struct { const char *name; int x, y, w, h, denom; } path[] = {
        {"whole", 0, 0, 0, 0, 1},           {"top", 0, 0, W, H / 4, 1},
        {"centre", W / 4, H / 4, W / 2, H / 2, 1}, {"bottom", 0, H - H / 4, W, H / 4, 1},
        {"whole 1/2", 0, 0, 0, 0, 2},       {"top-left 1/4", 0, 0, W / 2, H / 3, 4},
    };
    for (size_t k = 0; k < sizeof path / sizeof path[0]; k++) {
        struct spw_jpeg_region reg;
        err[0] = '\0';
        int rc = spw_jpeg_decode_region(buf, len, 1 << 30, path[k].x, path[k].y, path[k].w, path[k].h,
                                        path[k].denom, &reg, err, sizeof err);
        ck_assert_msg(rc == want_rc, "%s, %s decode: rc %d, want %d (%s)", what, path[k].name, rc, want_rc, err);
        if (rc == 0)
            spw_image_free(&reg.img);
        else
            ck_assert_msg(strstr(err, want_msg) != NULL, "%s, %s decode: message '%s' lacks '%s'", what,
                          path[k].name, err, want_msg);
    }
}

START_TEST(test_decode_cut_file_is_truncated_on_every_path)
{
    /* Pillow: "image file is truncated" for each cut, baseline 4:4:4 and 4:2:0 and progressive */
    const char *files[] = {FIX "rgb444.jpg", FIX "rgb420.jpg", FIX "progressive.jpg"};
    const int pct[] = {50, 90, 99};
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        for (int i = 0; i < 3; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s cut at %d%%", files[f], pct[i]);
            expect_every_path(buf, len * (size_t)pct[i] / 100, SPW_EDECODE, "truncated JPEG", what);
        }
        free(buf);
    }
}
END_TEST

START_TEST(test_decode_missing_eoi_follows_pillow)
{
    /* Without its final FF D9 a file is truncated when libjpeg asks for bytes after the last MCU (Pillow:
     * "image file is truncated"), as for rgb444.jpg and progressive.jpg (a progressive file is read to its
     * EOI before the first row); no_eoi_pillow_ok.jpg is one whose last MCU is already in the bit buffer,
     * which Pillow decodes, so must every path, even one that could stop at the top. */
    size_t len;
    uint8_t *buf = slurp(FIX "rgb444.jpg", &len);
    ck_assert(buf[len - 2] == 0xFF && buf[len - 1] == 0xD9);
    expect_every_path(buf, len - 2, SPW_EDECODE, "no end-of-image marker", "rgb444.jpg without EOI");
    free(buf);
    buf = slurp(FIX "progressive.jpg", &len);
    expect_every_path(buf, len - 2, SPW_EDECODE, "no end-of-image marker", "progressive.jpg without EOI");
    free(buf);
    buf = slurp(FIX "no_eoi_pillow_ok.jpg", &len);
    ck_assert(!(buf[len - 2] == 0xFF && buf[len - 1] == 0xD9));
    expect_every_path(buf, len, 0, "", "no_eoi_pillow_ok.jpg");
    free(buf);
}
END_TEST

START_TEST(test_decode_garbage_after_eoi_is_ignored)
{
    /* Pillow stops at EOI: bytes after it, even another SOI and markers, change nothing */
    size_t len, rlen;
    uint8_t *buf = slurp(FIX "rgb444.jpg", &len), *ref = slurp(FIX "rgb444.rgb", &rlen);
    uint8_t *b = malloc(len + 4 + 512);
    memcpy(b, buf, len);
    memcpy(b + len, "\xff\xd8\xff\xe0", 4);
    for (int i = 0; i < 512; i++)
        b[len + 4 + i] = (uint8_t)(i * 37 + 11);
    expect_every_path(b, len + 4 + 512, 0, "", "rgb444.jpg + 516 bytes after EOI");
    struct spw_jpeg_region reg;
    char err[256];
    ck_assert_int_eq(spw_jpeg_decode_region(b, len + 4 + 512, 1 << 30, 0, 0, 0, 0, 1, &reg, err, sizeof err), 0);
    ck_assert(memcmp(reg.img.data, ref, rlen) == 0);
    spw_image_free(&reg.img);
    free(b);
    free(ref);
    free(buf);
}
END_TEST

START_TEST(test_decode_overwritten_scan_bytes_are_not_an_error)
{
    /* 64 bytes in the middle of the scan zeroed, or set to 0x55: libjpeg warns ("Corrupt JPEG data: bad
     * Huffman code", "premature end of data segment") and Pillow ignores warnings, delivering garbled
     * blocks; so must Spillway, on the paths that decode the damage and on those that stop above it */
    const char *files[] = {FIX "rgb444.jpg", FIX "rgb420.jpg", FIX "progressive.jpg"};
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        size_t s = scan_start(buf, len), mid = s + (len - s) / 2;
        char what[128];
        uint8_t *b = malloc(len);
        memcpy(b, buf, len);
        memset(b + mid, 0, 64);
        snprintf(what, sizeof what, "%s with 64 zeroed scan bytes", files[f]);
        expect_every_path(b, len, 0, "", what);
        memset(b + mid, 0x55, 64);
        snprintf(what, sizeof what, "%s with 64 scan bytes set to 0x55", files[f]);
        expect_every_path(b, len, 0, "", what);
        free(b);
        free(buf);
    }
}
END_TEST

START_TEST(test_decode_marker_in_scan_follows_pillow)
{
    /* Two scan bytes overwritten with a marker: libjpeg stops reading the scan there (a warning) and Pillow's
     * jpeg_finish_decompress then reads that marker. An SOI is an error ("two SOI markers"), an EOI or a
     * restart marker is not. The crop at the top stops above the damage and must still say the same. */
    const char *files[] = {FIX "rgb444.jpg", FIX "rgb420.jpg", FIX "progressive.jpg"};
    const struct { uint8_t code; int rc; const char *msg; } m[] = {
        {0xD8, SPW_EDECODE, "corrupt JPEG"}, {0xD9, 0, ""}, {0xD3, 0, ""},
    };
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        size_t s = scan_start(buf, len), mid = s + (len - s) / 2;
        for (int i = 0; i < 3; i++) {
            uint8_t *b = malloc(len);
            memcpy(b, buf, len);
            b[mid] = 0xFF;
            b[mid + 1] = m[i].code;
            char what[128];
            snprintf(what, sizeof what, "%s with FF %02X in the scan", files[f], m[i].code);
            expect_every_path(b, len, m[i].rc, m[i].msg, what);
            free(b);
        }
        free(buf);
    }
}
END_TEST

START_TEST(test_decode_pick_denom_keeps_margin)
{
    ck_assert_int_eq(spw_jpeg_pick_denom(300, 300, 224, 224), 1);
    ck_assert_int_eq(spw_jpeg_pick_denom(672, 672, 224, 224), 2);
    ck_assert_int_eq(spw_jpeg_pick_denom(2000, 1400, 224, 224), 4);
    ck_assert_int_eq(spw_jpeg_pick_denom(4000, 4000, 100, 100), 8);
}
END_TEST

START_TEST(test_resample_identity_box_is_copy)
{
    struct spw_image in;
    ck_assert_int_eq(spw_image_alloc(&in, 31, 17, 3), 0);
    for (size_t i = 0; i < 31 * 17 * 3; i++)
        in.data[i] = (uint8_t)(i * 7);
    struct spw_image out;
    ck_assert_int_eq(spw_image_alloc(&out, 31, 17, 3), 0);
    struct spw_resample_plan p;
    float box[4] = {0, 0, 31, 17};
    int clip[4] = {0, 0, 31, 17};
    ck_assert_int_eq(spw_resample_plan_init(&p, box, clip, 31, 17, NULL, 1, true), 0);
    struct spw_sink s = {.kind = SPW_SINK_U8_HWC, .w = 31, .h = 17, .data = out.data, .stride = out.stride};
    spw_resample_run(&p, &in, 0, 0, &s);
    ck_assert(memcmp(in.data, out.data, 31 * 17 * 3) == 0);
    spw_resample_plan_free(&p);
    spw_image_free(&in);
    spw_image_free(&out);
}
END_TEST

START_TEST(test_resample_constant_stays_constant)
{
    struct spw_image in;
    ck_assert_int_eq(spw_image_alloc(&in, 300, 200, 3), 0);
    memset(in.data, 123, 300 * 200 * 3);
    for (int interp = 0; interp <= 2; interp++) {
        uint8_t out[64 * 48 * 3];
        struct spw_resample_plan p;
        float box[4] = {10.5f, 3, 290, 199};
        int clip[4] = {0, 0, 300, 200};
        ck_assert_int_eq(spw_resample_plan_init(&p, box, clip, 64, 48, NULL, interp, true), 0);
        struct spw_sink s = {.kind = SPW_SINK_U8_HWC, .w = 64, .h = 48, .data = out, .stride = 64 * 3};
        spw_resample_run(&p, &in, 0, 0, &s);
        for (size_t i = 0; i < sizeof out; i++)
            ck_assert_uint_eq(out[i], 123);
        spw_resample_plan_free(&p);
    }
    spw_image_free(&in);
}
END_TEST

START_TEST(test_sink_flip_and_normalize)
{
    const uint8_t row[6] = {0, 51, 255, 255, 0, 102};
    float out[6];
    struct spw_normalize_lut lut;
    const double mean[3] = {0.5, 0.5, 0.5}, stdv[3] = {0.5, 0.5, 0.5};
    spw_normalize_lut_init(&lut, mean, stdv);
    struct spw_sink s = {.kind = SPW_SINK_F32_CHW, .w = 2, .h = 1, .data = out, .lut = &lut, .hflip = true};
    spw_sink_put_row(&s, 0, row);
    /* CHW planes, pixel order mirrored: R = [255, 0], G = [0, 51], B = [102, 255] */
    ck_assert(out[0] == 1.0f && out[1] == -1.0f);
    ck_assert(out[2] == -1.0f && out[3] == (51.0f / 255.0f - 0.5f) / 0.5f);
    ck_assert(out[5] == 1.0f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, test_decode_full_is_pillow_exact);
    tcase_add_test(tc, test_decode_cmyk_converts_like_pillow);
    tcase_add_test(tc, test_decode_roi_equals_full_region);
    tcase_add_test(tc, test_decode_scaled_size);
    tcase_add_test(tc, test_decode_rejects_corrupt_inputs);
    tcase_add_test(tc, test_decode_cut_file_is_truncated_on_every_path);
    tcase_add_test(tc, test_decode_missing_eoi_follows_pillow);
    tcase_add_test(tc, test_decode_garbage_after_eoi_is_ignored);
    tcase_add_test(tc, test_decode_overwritten_scan_bytes_are_not_an_error);
    tcase_add_test(tc, test_decode_marker_in_scan_follows_pillow);
    tcase_add_test(tc, test_decode_pick_denom_keeps_margin);
    tcase_add_test(tc, test_resample_identity_box_is_copy);
    tcase_add_test(tc, test_resample_constant_stays_constant);
    tcase_add_test(tc, test_sink_flip_and_normalize);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
