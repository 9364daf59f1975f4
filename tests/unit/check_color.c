/* tests/unit/check_color.c - unit tests for ops/color: algebraic properties of the point ops and golden
 * pixels taken from torchvision 0.14 + Pillow 9.4 (the full photo comparison is tests/equiv/check_ops.py).
 * Not a benchmark. Each test builds its own images; Check may fork them in parallel-safe isolation. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops/color.h"
#include "ops/color_px.h"

/* Four pixels whose PIL results are pinned below. */
static const uint8_t quad[12] = {100, 150, 200, 10, 250, 30, 255, 0, 128, 77, 77, 77};

static struct spw_image make(int w, int h, const uint8_t *px)
{
    struct spw_image img;
    ck_assert_int_eq(spw_image_alloc(&img, w, h, 3), 0);
    if (px)
        memcpy(img.data, px, (size_t)w * h * 3);
    return img;
}

/* Deterministic pseudo-random pixels (LCG), so failures reproduce. */
static struct spw_image make_noise(int w, int h, uint32_t seed)
{
    struct spw_image img = make(w, h, NULL);
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        seed = seed * 1664525u + 1013904223u;
        img.data[i] = (uint8_t)(seed >> 24);
    }
    return img;
}

static void assert_pixels(const struct spw_image *img, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(img->data[i] == want[i], "byte %zu: got %u want %u", i, img->data[i], want[i]);
}

START_TEST(test_color_invert_twice_is_identity)
{
    struct spw_image a = make_noise(17, 9, 1), b = make(17, 9, NULL), c = make(17, 9, NULL);
    ck_assert_int_eq(spw_invert_run(&a, &b), 0);
    ck_assert_int_eq(spw_invert_run(&b, &c), 0);
    ck_assert_int_eq(b.data[0], 255 - a.data[0]);
    ck_assert_mem_eq(a.data, c.data, 17 * 9 * 3);
    spw_image_free(&a);
    spw_image_free(&b);
    spw_image_free(&c);
}
END_TEST

START_TEST(test_color_posterize_masks_low_bits)
{
    struct spw_image a = make_noise(8, 8, 2), b = make(8, 8, NULL);
    for (int bits = 0; bits <= 8; bits++) {
        ck_assert_int_eq(spw_posterize_run(&a, bits, &b), 0);
        const uint8_t mask = (uint8_t)(0xff00 >> bits);
        for (int i = 0; i < 8 * 8 * 3; i++)
            ck_assert_int_eq(b.data[i], a.data[i] & mask);
    }
    ck_assert_int_eq(spw_posterize_run(&a, 9, &b), -EINVAL);
    ck_assert_int_eq(spw_posterize_run(&a, -1, &b), -EINVAL);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_solarize_inverts_at_and_above_threshold)
{
    uint8_t px[6] = {99, 100, 101, 0, 255, 128};
    struct spw_image a = make(2, 1, px);
    ck_assert_int_eq(spw_solarize_run(&a, 100.0, &a), 0);
    const uint8_t want[6] = {99, 155, 154, 0, 0, 127};
    assert_pixels(&a, want, 6);
    spw_image_free(&a);
}
END_TEST

START_TEST(test_color_equalize_constant_image_is_identity)
{
    uint8_t px[5 * 4 * 3];
    memset(px, 93, sizeof px);
    struct spw_image a = make(5, 4, px), b = make(5, 4, NULL);
    ck_assert_int_eq(spw_equalize_run(&a, &b), 0);
    ck_assert_mem_eq(b.data, px, sizeof px);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_equalize_two_levels_become_black_and_white)
{
    /* 300 pixels at 40 and 20 at 90 in every channel: step = 300 // 255 = 1, so 40 -> 0, 90 -> 300 -> 255. */
    struct spw_image a = make(320, 1, NULL);
    for (int x = 0; x < 320; x++)
        memset(a.data + x * 3, x < 300 ? 40 : 90, 3);
    ck_assert_int_eq(spw_equalize_run(&a, &a), 0);
    for (int x = 0; x < 320; x++)
        ck_assert_int_eq(a.data[x * 3 + 1], x < 300 ? 0 : 255);
    spw_image_free(&a);
}
END_TEST

START_TEST(test_color_autocontrast_stretches_each_channel_to_full_range)
{
    uint8_t px[9] = {50, 10, 7, 100, 20, 7, 75, 15, 7};
    struct spw_image a = make(3, 1, px);
    ck_assert_int_eq(spw_autocontrast_run(&a, &a), 0);
    /* PIL: int(v * scale + offset) in double, scale = 255 / (hi - lo). 100 * 5.1 - 255 lands just below
     * 255 and truncates to 254 (as in Pillow); a flat channel is left alone. */
    const uint8_t want[9] = {0, 0, 7, 254, 255, 7, 127, 127, 7};
    assert_pixels(&a, want, 9);
    spw_image_free(&a);
}
END_TEST

START_TEST(test_color_brightness_matches_pil_truncation)
{
    struct spw_image a = make(4, 1, quad), b = make(4, 1, NULL);
    ck_assert_int_eq(spw_adjust_brightness_run(&a, 1.37, &b), 0);
    const uint8_t want[12] = {137, 205, 255, 13, 255, 41, 255, 0, 175, 105, 105, 105};
    assert_pixels(&b, want, 12);
    ck_assert_int_eq(spw_adjust_brightness_run(&a, 0.0, &b), 0);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(b.data[i], 0);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_factor_one_is_identity)
{
    struct spw_image a = make_noise(13, 11, 3), b = make(13, 11, NULL);
    int (*const run[4])(const struct spw_image *, double, struct spw_image *) = {
        spw_adjust_brightness_run, spw_adjust_contrast_run, spw_adjust_saturation_run,
        spw_adjust_sharpness_run};
    for (int k = 0; k < 4; k++) {
        memset(b.data, 0, 13 * 11 * 3);
        ck_assert_int_eq(run[k](&a, 1.0, &b), 0);
        ck_assert_mem_eq(a.data, b.data, 13 * 11 * 3);
    }
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_contrast_zero_gives_rounded_luma_mean)
{
    struct spw_image a = make(4, 1, quad), b = make(4, 1, NULL);
    ck_assert_int_eq(spw_adjust_contrast_run(&a, 0.0, &b), 0);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(b.data[i], 116);
    ck_assert_int_eq(spw_adjust_contrast_run(&a, 1.3, &b), 0);
    const uint8_t want[12] = {95, 160, 225, 0, 255, 4, 255, 0, 131, 65, 65, 65};
    assert_pixels(&b, want, 12);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_saturation_matches_pil_luma_blend)
{
    struct spw_image a = make(4, 1, quad), b = make(4, 1, NULL);
    ck_assert_int_eq(spw_adjust_saturation_run(&a, 0.0, &b), 0);
    const uint8_t grey[12] = {141, 141, 141, 153, 153, 153, 91, 91, 91, 77, 77, 77};
    assert_pixels(&b, grey, 12);
    ck_assert_int_eq(spw_adjust_saturation_run(&a, 1.6, &b), 0);
    const uint8_t vivid[12] = {75, 155, 235, 0, 255, 0, 255, 0, 150, 77, 77, 77};
    assert_pixels(&b, vivid, 12);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_sharpness_matches_pil_and_keeps_border)
{
    static const uint8_t in[60] = {248, 194, 190, 207, 147, 26, 237, 21, 245, 211, 239, 45, 5, 157, 159,
                                   60, 54, 236, 109, 46, 199, 82, 32, 205, 36, 7, 134, 222, 57, 146,
                                   8, 149, 14, 15, 22, 10, 144, 208, 24, 24, 7, 41, 11, 85, 59,
                                   104, 225, 110, 226, 201, 8, 159, 26, 27, 163, 122, 33, 41, 201, 67};
    static const uint8_t want[60] = {248, 194, 190, 207, 147, 26, 237, 21, 245, 211, 239, 45, 5, 157, 159,
                                     60, 54, 236, 99, 11, 248, 57, 0, 255, 0, 0, 145, 222, 57, 146,
                                     8, 149, 14, 0, 0, 0, 170, 255, 0, 0, 0, 13, 11, 85, 59,
                                     104, 225, 110, 226, 201, 8, 159, 26, 27, 163, 122, 33, 41, 201, 67};
    struct spw_image a = make(5, 4, in), b = make(5, 4, NULL);
    ck_assert_int_eq(spw_adjust_sharpness_run(&a, 2.0, &b), 0);
    assert_pixels(&b, want, 60);
    ck_assert_int_eq(spw_adjust_sharpness_run(&a, 2.0, &a), -EINVAL);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_sharpness_leaves_images_under_3x3_unchanged)
{
    struct spw_image a = make_noise(2, 7, 4), b = make(2, 7, NULL);
    ck_assert_int_eq(spw_adjust_sharpness_run(&a, 0.0, &b), 0);
    ck_assert_mem_eq(a.data, b.data, 2 * 7 * 3);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

START_TEST(test_color_hue_matches_pil_hsv_round_trip)
{
    struct spw_image a = make(4, 1, quad), b = make(4, 1, NULL);
    /* Factor 0 is not an identity: PIL's 8-bit HSV round trip moves saturated colours. */
    ck_assert_int_eq(spw_adjust_hue_run(&a, 0.0, &b), 0);
    const uint8_t zero[12] = {100, 152, 200, 11, 250, 28, 255, 0, 132, 77, 77, 77};
    assert_pixels(&b, zero, 12);
    ck_assert_int_eq(spw_adjust_hue_run(&a, 0.25, &b), 0);
    const uint8_t quarter[12] = {196, 100, 200, 11, 118, 250, 255, 240, 0, 77, 77, 77};
    assert_pixels(&b, quarter, 12);
    ck_assert_int_eq(spw_adjust_hue_run(&a, -0.4, &b), 0);
    const uint8_t neg[12] = {192, 200, 100, 250, 11, 84, 0, 234, 255, 77, 77, 77};
    assert_pixels(&b, neg, 12);
    ck_assert_int_eq(spw_adjust_hue_run(&a, 0.51, &b), -EINVAL);
    spw_image_free(&a);
    spw_image_free(&b);
}
END_TEST

/* Hue at shift (0..255 but 128, which no factor in [-0.5, 0.5] makes) on colours c0, c0 + step, ... < 2^24,
 * through spw_adjust_hue_run, against spw_px_hue per pixel. */
static void hue_against_reference(int shift, uint32_t step)
{
    const uint32_t n = ((1u << 24) + step - 1) / step;
    struct spw_image in = make((int)n, 1, NULL), out = make((int)n, 1, NULL);
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t c = k * step;
        in.data[3 * k] = (uint8_t)(c >> 16), in.data[3 * k + 1] = (uint8_t)(c >> 8), in.data[3 * k + 2] = (uint8_t)c;
    }
    const int s = shift < 128 ? shift : shift - 256;       /* the factor whose uint8(factor * 255) is shift */
    const double factor = (s + (s < 0 ? -0.5 : 0.5)) / 255.0;
    ck_assert_int_eq(spw_px_hue_shift(factor), shift);
    ck_assert_int_eq(spw_adjust_hue_run(&in, factor, &out), 0);
    for (uint32_t k = 0; k < n; k++) {
        uint8_t want[3];
        spw_px_hue(in.data + 3 * k, shift, want);
        if (memcmp(want, out.data + 3 * k, 3) != 0)
            ck_abort_msg("rgb (%d, %d, %d) shift %d: %d %d %d, reference %d %d %d", in.data[3 * k],
                         in.data[3 * k + 1], in.data[3 * k + 2], shift, out.data[3 * k], out.data[3 * k + 1],
                         out.data[3 * k + 2], want[0], want[1], want[2]);
    }
    spw_image_free(&in);
    spw_image_free(&out);
}

/* The CPU's hue path (tables, fewer divisions, round as floor(x + 0.5)) against spw_px_hue, the shared
 * reference the GPU kernel also runs: every one of the 2^24 colours at shifts 0 and 129, and every 251st at
 * every shift a factor can make, so each (hue, saturation, value) the second half meets is covered. */
START_TEST(test_color_hue_fast_path_equals_reference_exhaustively)
{
    hue_against_reference(0, 1);
    hue_against_reference(129, 1);
    for (int shift = 0; shift < 256; shift++)
        if (shift != 128)
            hue_against_reference(shift, 251);
}
END_TEST

/* Kernel k of the in-place-capable set, with fixed parameters. */
static int run_inplace_capable(int k, const struct spw_image *in, struct spw_image *out)
{
    switch (k) {
    case 0: return spw_adjust_brightness_run(in, 1.3, out);
    case 1: return spw_adjust_contrast_run(in, 0.6, out);
    case 2: return spw_adjust_saturation_run(in, 1.8, out);
    case 3: return spw_adjust_hue_run(in, -0.2, out);
    case 4: return spw_posterize_run(in, 3, out);
    case 5: return spw_solarize_run(in, 77, out);
    case 6: return spw_equalize_run(in, out);
    case 7: return spw_autocontrast_run(in, out);
    default: return spw_invert_run(in, out);
    }
}

START_TEST(test_color_in_place_equals_out_of_place)
{
    struct spw_image src = make_noise(19, 6, 5), out = make(19, 6, NULL), inplace = make(19, 6, NULL);
    const size_t n = 19 * 6 * 3;
    for (int k = 0; k < 9; k++) {
        memcpy(inplace.data, src.data, n);
        ck_assert_int_eq(run_inplace_capable(k, &src, &out), 0);
        ck_assert_int_eq(run_inplace_capable(k, &inplace, &inplace), 0);
        ck_assert_msg(memcmp(out.data, inplace.data, n) == 0, "kernel %d differs in place", k);
    }
    spw_image_free(&src);
    spw_image_free(&out);
    spw_image_free(&inplace);
}
END_TEST

START_TEST(test_color_respects_stride_padding)
{
    /* A 3x2 view inside rows of 16 bytes: padding bytes must survive and results match a packed copy. */
    uint8_t buf[2 * 16], packed_out[18];
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(i * 37 + 11);
    struct spw_image view = {3, 2, 3, 16, buf};
    struct spw_image packed = make(3, 2, NULL), pout = {3, 2, 3, 9, packed_out};
    memcpy(packed.data, buf, 9);
    memcpy(packed.data + 9, buf + 16, 9);
    ck_assert_int_eq(spw_adjust_saturation_run(&packed, 1.7, &pout), 0);
    ck_assert_int_eq(spw_adjust_saturation_run(&view, 1.7, &view), 0);
    ck_assert_mem_eq(buf, packed_out, 9);
    ck_assert_mem_eq(buf + 16, packed_out + 9, 9);
    for (int i = 9; i < 16; i++)
        ck_assert_int_eq(buf[i], (uint8_t)(i * 37 + 11));
    spw_image_free(&packed);
}
END_TEST

START_TEST(test_color_rejects_bad_views_and_factors)
{
    struct spw_image rgb = make(4, 4, NULL), small = make(3, 4, NULL), grey;
    ck_assert_int_eq(spw_image_alloc(&grey, 4, 4, 1), 0);
    ck_assert_int_eq(spw_invert_run(&grey, &grey), -EINVAL);
    ck_assert_int_eq(spw_invert_run(&rgb, &small), -EINVAL);
    ck_assert_int_eq(spw_invert_run(NULL, &rgb), -EINVAL);
    ck_assert_int_eq(spw_adjust_brightness_run(&rgb, -0.1, &rgb), -EINVAL);
    ck_assert_int_eq(spw_adjust_contrast_run(&rgb, NAN, &rgb), -EINVAL);
    spw_image_free(&rgb);
    spw_image_free(&small);
    spw_image_free(&grey);
}
END_TEST

static Suite *color_suite(void)
{
    Suite *s = suite_create("color");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_color_invert_twice_is_identity);
    tcase_add_test(tc, test_color_posterize_masks_low_bits);
    tcase_add_test(tc, test_color_solarize_inverts_at_and_above_threshold);
    tcase_add_test(tc, test_color_equalize_constant_image_is_identity);
    tcase_add_test(tc, test_color_equalize_two_levels_become_black_and_white);
    tcase_add_test(tc, test_color_autocontrast_stretches_each_channel_to_full_range);
    tcase_add_test(tc, test_color_brightness_matches_pil_truncation);
    tcase_add_test(tc, test_color_factor_one_is_identity);
    tcase_add_test(tc, test_color_contrast_zero_gives_rounded_luma_mean);
    tcase_add_test(tc, test_color_saturation_matches_pil_luma_blend);
    tcase_add_test(tc, test_color_sharpness_matches_pil_and_keeps_border);
    tcase_add_test(tc, test_color_sharpness_leaves_images_under_3x3_unchanged);
    tcase_add_test(tc, test_color_hue_matches_pil_hsv_round_trip);
    tcase_add_test(tc, test_color_in_place_equals_out_of_place);
    tcase_add_test(tc, test_color_respects_stride_padding);
    tcase_add_test(tc, test_color_rejects_bad_views_and_factors);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("exhaustive");        /* 2^24 colours twice, then 2^16 at 255 shifts */
    tcase_set_timeout(ex, 300);
    tcase_add_test(ex, test_color_hue_fast_path_equals_reference_exhaustively);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(color_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
