/* tests/unit/check_policy.c - unit tests for ops/policy: op tables and magnitudes pinned to torchvision
 * 0.14 / torch 1.13 values, choice frequencies against chi-square bounds, reproducibility per rng key,
 * image ownership across swaps. Frequency tests are deterministic (fixed keys) and use p = 0.001 bounds.
 * Not a comparison of pixels with torchvision (tests/equiv/check_ops.py does that). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/policy.h"

#define CHI2_DF1_P001 10.828
#define CHI2_DF13_P001 34.528
#define CHI2_DF24_P001 51.179

static struct spw_image make_noise(int w, int h, uint32_t seed)
{
    struct spw_image img;
    ck_assert_int_eq(spw_image_alloc(&img, w, h, 3), 0);
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        seed = seed * 1664525u + 1013904223u;
        img.data[i] = (uint8_t)(seed >> 24);
    }
    return img;
}

static struct spw_image make_blank(int w, int h)
{
    struct spw_image img;
    ck_assert_int_eq(spw_image_alloc(&img, w, h, 3), 0);
    memset(img.data, 0, (size_t)w * h * 3);
    return img;
}

static double chi_square(const long *counts, int k, long total)
{
    const double expect = (double)total / k;
    double x2 = 0.0;
    for (int i = 0; i < k; i++)
        x2 += (counts[i] - expect) * (counts[i] - expect) / expect;
    return x2;
}

START_TEST(test_policy_op_names_follow_torchvision_order)
{
    static const char *const want[SPW_AUG_OP_COUNT] = {
        "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
        "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"};
    for (int i = 0; i < SPW_AUG_OP_COUNT; i++)
        ck_assert_str_eq(spw_augment_op_name(i), want[i]);
    ck_assert_ptr_null(spw_augment_op_name(-1));
    ck_assert_ptr_null(spw_augment_op_name(SPW_AUG_OP_COUNT));
}
END_TEST

START_TEST(test_policy_magnitude_tables_match_torch_linspace)
{
    /* RandAugment()._augmentation_space(31, (224, 224)) entry 9, as float(tensor[9]) in torch 1.13. */
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_BRIGHTNESS, 31, 9, 0, 224, 224), 0.26999998092651367);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_SHEAR_X, 31, 9, 0, 224, 224), 0.09000000357627869);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_TRANSLATE_X, 31, 9, 0, 224, 224), 30.45317268371582);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_ROTATE, 31, 9, 0, 224, 224), 9.0);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_POSTERIZE, 31, 9, 0, 224, 224), 7.0);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_SOLARIZE, 31, 9, 0, 224, 224), 178.5);
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_EQUALIZE, 31, 9, 0, 224, 224), 0.0);
    /* TrivialAugmentWide()._augmentation_space(31): Rotate step 4.5, Posterize 8 - round(i / 5). */
    ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_ROTATE, 31, 1, 1, 224, 224), 4.5);
    static const int posterize[31] = {8, 8, 8, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 5, 5, 5,
                                      5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2};
    for (int i = 0; i < 31; i++)
        ck_assert_double_eq(spw_augment_magnitude(SPW_AUG_POSTERIZE, 31, i, 1, 9, 9), posterize[i]);
}
END_TEST

START_TEST(test_policy_rand_augment_op_choice_uniform)
{
    /* 31000 single-op draws, one rng key per sample: chi-square against uniform over 14 ops. */
    struct spw_image img = make_noise(4, 4, 1), tmp = make_blank(4, 4);
    long counts[SPW_RAND_AUGMENT_OPS] = {0};
    const long n = 31000;
    for (long i = 0; i < n; i++) {
        struct spw_rng rng;
        struct spw_aug_step step;
        spw_rng_init(&rng, 42, 0, (uint64_t)i, 0);
        ck_assert_int_eq(spw_rand_augment_run(&img, &tmp, &rng, 1, 9, 31, NULL, SPW_INTERP_NEAREST, &step), 0);
        ck_assert(step.op >= 0 && step.op < SPW_RAND_AUGMENT_OPS);
        counts[step.op]++;
    }
    const double x2 = chi_square(counts, SPW_RAND_AUGMENT_OPS, n);
    ck_assert_msg(x2 < CHI2_DF13_P001, "chi-square %.2f over 13 df", x2);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_trivial_augment_op_choice_uniform)
{
    struct spw_image img = make_noise(4, 4, 2), tmp = make_blank(4, 4);
    long counts[SPW_RAND_AUGMENT_OPS] = {0};
    const long n = 14000;
    for (long i = 0; i < n; i++) {
        struct spw_rng rng;
        struct spw_aug_step step;
        spw_rng_init(&rng, 7, 1, (uint64_t)i, 3);
        ck_assert_int_eq(spw_trivial_augment_run(&img, &tmp, &rng, 31, NULL, SPW_INTERP_NEAREST, &step), 0);
        counts[step.op]++;
    }
    const double x2 = chi_square(counts, SPW_RAND_AUGMENT_OPS, n);
    ck_assert_msg(x2 < CHI2_DF13_P001, "chi-square %.2f over 13 df", x2);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_auto_augment_subpolicy_choice_uniform)
{
    struct spw_image img = make_noise(4, 4, 3), tmp = make_blank(4, 4);
    long counts[SPW_AUTO_AUGMENT_SUBPOLICIES] = {0};
    const long n = 25000;
    for (long i = 0; i < n; i++) {
        struct spw_rng rng;
        int sub = -1;
        spw_rng_init(&rng, 9, 0, (uint64_t)i, 1);
        ck_assert_int_eq(spw_auto_augment_run(&img, &tmp, &rng, SPW_AUTO_AUGMENT_IMAGENET, NULL, SPW_INTERP_NEAREST,
                                              &sub, NULL), 0);
        ck_assert(sub >= 0 && sub < SPW_AUTO_AUGMENT_SUBPOLICIES);
        counts[sub]++;
    }
    const double x2 = chi_square(counts, SPW_AUTO_AUGMENT_SUBPOLICIES, n);
    ck_assert_msg(x2 < CHI2_DF24_P001, "chi-square %.2f over 24 df", x2);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_auto_augment_applies_listed_ops_with_their_probability)
{
    /* ImageNet sub-policy 0 is (Posterize 0.4 bin 8, Rotate 0.6 bin 9); 12 is (Equalize 0.0, Equalize 0.8). */
    struct spw_image img = make_noise(6, 6, 4), tmp = make_blank(6, 6);
    long seen0 = 0, applied0[2] = {0, 0}, seen12 = 0, applied12_first = 0;
    for (long i = 0; i < 20000; i++) {
        struct spw_rng rng;
        struct spw_aug_step steps[2];
        int sub;
        spw_rng_init(&rng, 5, 0, (uint64_t)i, 2);
        ck_assert_int_eq(spw_auto_augment_run(&img, &tmp, &rng, SPW_AUTO_AUGMENT_IMAGENET, NULL, SPW_INTERP_NEAREST,
                                              &sub, steps), 0);
        if (sub == 0) {
            seen0++;
            ck_assert(steps[0].op == -1 || (steps[0].op == SPW_AUG_POSTERIZE && steps[0].magnitude == 4.0));
            ck_assert(steps[1].op == -1 || (steps[1].op == SPW_AUG_ROTATE && fabs(steps[1].magnitude) == 30.0));
            applied0[0] += steps[0].op != -1;
            applied0[1] += steps[1].op != -1;
        } else if (sub == 12) {
            seen12++;
            applied12_first += steps[0].op != -1;
        }
    }
    ck_assert(seen0 > 600 && seen12 > 600);
    ck_assert_int_eq(applied12_first, 0);
    /* Binomial proportions within 4 standard deviations. */
    const double p[2] = {0.4, 0.6};
    for (int k = 0; k < 2; k++) {
        const double sd = sqrt(seen0 * p[k] * (1 - p[k]));
        ck_assert_msg(fabs(applied0[k] - seen0 * p[k]) < 4 * sd, "op %d applied %ld of %ld", k, applied0[k], seen0);
    }
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_signed_ops_negated_half_the_time)
{
    struct spw_image img = make_noise(4, 4, 5), tmp = make_blank(4, 4);
    long counts[2] = {0, 0};
    for (long i = 0; i < 20000; i++) {
        struct spw_rng rng;
        struct spw_aug_step step;
        spw_rng_init(&rng, 11, 0, (uint64_t)i, 0);
        ck_assert_int_eq(spw_rand_augment_run(&img, &tmp, &rng, 1, 20, 31, NULL, SPW_INTERP_NEAREST, &step), 0);
        if (step.op >= SPW_AUG_SHEAR_X && step.op <= SPW_AUG_SHARPNESS)
            counts[step.magnitude < 0]++;
        else
            ck_assert(step.magnitude >= 0);
    }
    const double x2 = chi_square(counts, 2, counts[0] + counts[1]);
    ck_assert_msg(x2 < CHI2_DF1_P001, "signs %ld+ %ld-", counts[0], counts[1]);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_same_rng_key_gives_identical_output)
{
    struct spw_image a = make_noise(37, 23, 6), at = make_blank(37, 23);
    struct spw_image b = make_noise(37, 23, 6), bt = make_blank(37, 23);
    for (uint64_t sample = 0; sample < 50; sample++) {
        struct spw_rng r1, r2;
        struct spw_aug_step s1[3], s2[3];
        spw_rng_init(&r1, 1234, 2, sample, 4);
        spw_rng_init(&r2, 1234, 2, sample, 4);
        ck_assert_int_eq(spw_rand_augment_run(&a, &at, &r1, 3, 15, 31, NULL, SPW_INTERP_NEAREST, s1), 0);
        ck_assert_int_eq(spw_rand_augment_run(&b, &bt, &r2, 3, 15, 31, NULL, SPW_INTERP_NEAREST, s2), 0);
        for (int k = 0; k < 3; k++) {
            ck_assert_int_eq(s1[k].op, s2[k].op);
            ck_assert_double_eq(s1[k].magnitude, s2[k].magnitude);
        }
        ck_assert_mem_eq(a.data, b.data, 37 * 23 * 3);
    }
    spw_image_free(&a);
    spw_image_free(&at);
    spw_image_free(&b);
    spw_image_free(&bt);
}
END_TEST

START_TEST(test_policy_different_samples_draw_different_ops)
{
    struct spw_image img = make_noise(5, 5, 7), tmp = make_blank(5, 5);
    int distinct = 0, first = -1;
    for (uint64_t sample = 0; sample < 20; sample++) {
        struct spw_rng rng;
        struct spw_aug_step step;
        spw_rng_init(&rng, 1, 0, sample, 0);
        ck_assert_int_eq(spw_trivial_augment_run(&img, &tmp, &rng, 31, NULL, SPW_INTERP_NEAREST, &step), 0);
        if (first < 0)
            first = step.op;
        distinct += step.op != first;
    }
    ck_assert_int_gt(distinct, 0);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_magnitude_zero_brightness_is_identity)
{
    struct spw_image img = make_noise(9, 7, 8), tmp = make_blank(9, 7), ref = make_noise(9, 7, 8);
    const int ops[] = {SPW_AUG_IDENTITY, SPW_AUG_BRIGHTNESS, SPW_AUG_COLOR, SPW_AUG_CONTRAST, SPW_AUG_SHARPNESS,
                       SPW_AUG_TRANSLATE_X, SPW_AUG_SHEAR_Y, SPW_AUG_ROTATE};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ck_assert_int_eq(spw_augment_op_run(&img, &tmp, ops[k], 0.0, NULL, SPW_INTERP_NEAREST), 0);
        ck_assert_msg(memcmp(img.data, ref.data, 9 * 7 * 3) == 0, "%s(0) changed the image",
                      spw_augment_op_name(ops[k]));
    }
    spw_image_free(&img);
    spw_image_free(&tmp);
    spw_image_free(&ref);
}
END_TEST

START_TEST(test_policy_geometric_op_leaves_result_in_img)
{
    /* Rotate by 90 on a square image is PIL's exact transpose: pixel (w-1, 0) lands at (0, 0). */
    struct spw_image img = make_noise(8, 8, 9), tmp = make_blank(8, 8);
    uint8_t *const bufs[2] = {img.data, tmp.data};
    uint8_t corner[3];
    memcpy(corner, spw_image_at(&img, 7, 0), 3);
    ck_assert_int_eq(spw_augment_op_run(&img, &tmp, SPW_AUG_ROTATE, 90.0, NULL, SPW_INTERP_NEAREST), 0);
    ck_assert_mem_eq(spw_image_at(&img, 0, 0), corner, 3);
    ck_assert(img.data != tmp.data);
    ck_assert(img.data == bufs[0] || img.data == bufs[1]);
    ck_assert(tmp.data == bufs[0] || tmp.data == bufs[1]);
    spw_image_free(&img);
    spw_image_free(&tmp);
}
END_TEST

START_TEST(test_policy_color_jitter_draws_permutation_within_ranges)
{
    struct spw_image img = make_noise(6, 5, 10);
    const double b[2] = {0.6, 1.4}, c[2] = {0.5, 1.0}, s[2] = {1.0, 2.0}, h[2] = {-0.1, 0.2};
    long first[4] = {0, 0, 0, 0};
    for (uint64_t i = 0; i < 4000; i++) {
        struct spw_rng rng;
        struct spw_color_jitter_draw d;
        spw_rng_init(&rng, 3, 0, i, 0);
        ck_assert_int_eq(spw_color_jitter_run(&img, &rng, b, c, s, h, &d), 0);
        int seen = 0;
        for (int k = 0; k < 4; k++) {
            seen |= 1 << d.order[k];
            ck_assert(d.enabled[k]);
        }
        ck_assert_int_eq(seen, 15);
        first[d.order[0]]++;
        ck_assert(d.factor[0] >= 0.6 && d.factor[0] < 1.4);
        ck_assert(d.factor[1] >= 0.5 && d.factor[1] < 1.0);
        ck_assert(d.factor[2] >= 1.0 && d.factor[2] < 2.0);
        ck_assert(d.factor[3] >= -0.1 && d.factor[3] < 0.2);
    }
    ck_assert_msg(chi_square(first, 4, 4000) < 16.266, "first-op counts %ld %ld %ld %ld", first[0], first[1],
                  first[2], first[3]);   /* chi-square, 3 df, p = 0.001 */
    spw_image_free(&img);
}
END_TEST

START_TEST(test_policy_color_jitter_identity_ranges_change_nothing)
{
    struct spw_image img = make_noise(6, 5, 11), ref = make_noise(6, 5, 11);
    double b[2], h[2];
    spw_color_jitter_range(0.0, 0, b);
    spw_color_jitter_range(0.0, 1, h);
    ck_assert(b[0] == 1.0 && b[1] == 1.0 && h[0] == 0.0 && h[1] == 0.0);
    struct spw_rng rng;
    struct spw_color_jitter_draw d;
    spw_rng_init(&rng, 1, 0, 0, 0);
    ck_assert_int_eq(spw_color_jitter_run(&img, &rng, b, b, b, h, &d), 0);
    for (int k = 0; k < 4; k++)
        ck_assert(!d.enabled[k]);
    ck_assert_mem_eq(img.data, ref.data, 6 * 5 * 3);
    spw_color_jitter_range(0.4, 0, b);
    ck_assert(fabs(b[0] - 0.6) < 1e-12 && fabs(b[1] - 1.4) < 1e-12);
    spw_color_jitter_range(1.5, 0, b);
    ck_assert(b[0] == 0.0);
    spw_image_free(&img);
    spw_image_free(&ref);
}
END_TEST

START_TEST(test_policy_rejects_bad_arguments)
{
    struct spw_image img = make_noise(4, 4, 12), tmp = make_blank(4, 4), small = make_blank(3, 4);
    struct spw_rng rng;
    spw_rng_init(&rng, 1, 0, 0, 0);
    ck_assert_int_eq(spw_rand_augment_run(&img, &tmp, &rng, 2, 31, 31, NULL, SPW_INTERP_NEAREST, NULL), -EINVAL);
    ck_assert_int_eq(spw_rand_augment_run(&img, &tmp, &rng, 2, 0, 1, NULL, SPW_INTERP_NEAREST, NULL), -EINVAL);
    ck_assert_int_eq(spw_rand_augment_run(&img, &small, &rng, 2, 9, 31, NULL, SPW_INTERP_NEAREST, NULL), -EINVAL);
    ck_assert_int_eq(spw_rand_augment_run(&img, &img, &rng, 2, 9, 31, NULL, SPW_INTERP_NEAREST, NULL), -EINVAL);
    ck_assert_int_eq(spw_auto_augment_run(&img, &tmp, &rng, 7, NULL, SPW_INTERP_NEAREST, NULL, NULL), -EINVAL);
    ck_assert_int_eq(spw_trivial_augment_run(&img, &tmp, NULL, 31, NULL, SPW_INTERP_NEAREST, NULL), -EINVAL);
    ck_assert_int_eq(spw_augment_op_run(&img, &tmp, SPW_AUG_OP_COUNT, 0.0, NULL, SPW_INTERP_NEAREST), -EINVAL);
    const double bad_hue[2] = {-0.6, 0.1}, reversed[2] = {1.2, 0.8};
    ck_assert_int_eq(spw_color_jitter_run(&img, &rng, NULL, NULL, NULL, bad_hue, NULL), -EINVAL);
    ck_assert_int_eq(spw_color_jitter_run(&img, &rng, reversed, NULL, NULL, NULL, NULL), -EINVAL);
    spw_image_free(&img);
    spw_image_free(&tmp);
    spw_image_free(&small);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_policy_op_names_follow_torchvision_order);
    tcase_add_test(tc, test_policy_magnitude_tables_match_torch_linspace);
    tcase_add_test(tc, test_policy_rand_augment_op_choice_uniform);
    tcase_add_test(tc, test_policy_trivial_augment_op_choice_uniform);
    tcase_add_test(tc, test_policy_auto_augment_subpolicy_choice_uniform);
    tcase_add_test(tc, test_policy_auto_augment_applies_listed_ops_with_their_probability);
    tcase_add_test(tc, test_policy_signed_ops_negated_half_the_time);
    tcase_add_test(tc, test_policy_same_rng_key_gives_identical_output);
    tcase_add_test(tc, test_policy_different_samples_draw_different_ops);
    tcase_add_test(tc, test_policy_magnitude_zero_brightness_is_identity);
    tcase_add_test(tc, test_policy_geometric_op_leaves_result_in_img);
    tcase_add_test(tc, test_policy_color_jitter_draws_permutation_within_ranges);
    tcase_add_test(tc, test_policy_color_jitter_identity_ranges_change_nothing);
    tcase_add_test(tc, test_policy_rejects_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(policy_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
