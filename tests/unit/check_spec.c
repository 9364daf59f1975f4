/* tests/unit/check_spec.c - unit tests for pipeline/spec.c and pipeline/spec_proto.c: defaults, the exact
 * text of error messages, JSON and proto round trips, and truncated/mutated inputs that must never crash.
 * Not an executor test: no image is touched. Single-threaded; Check may fork one process per test. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* strdup, strnlen, mkstemp: POSIX, not C11 */
#endif
#include "lib/err.h"
#include "pipeline/element_size.h"
#include "pipeline/op_registry.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXAMPLE                                                                                            \
    "{\"source\": {\"format\": \"image_folder\", \"path\": \"DIR\", \"shuffle\": true, \"seed\": 7,"         \
    " \"epochs\": 1},\n"                                                                                   \
    " \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": [224, 224]},\n"        \
    "         {\"op\": \"random_horizontal_flip\", \"p\": 0.5},"                                            \
    " {\"op\": \"rand_augment\", \"num_ops\": 2, \"magnitude\": 9},\n"                                      \
    "         {\"op\": \"normalize\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224, 0.225]}],\n"  \
    " \"batch\": {\"size\": 64, \"drop_remainder\": false, \"layout\": \"HWC\"},\n"                         \
    " \"on_error\": \"skip\", \"max_pixels\": 89478485, \"max_file_bytes\": 67108864}"

/* Every op kind with non-default values (to_tensor is in ALL_OPS_TO_TENSOR: one of the two per spec). */
#define ALL_OPS                                                                                            \
    "{\"op\": \"decode_jpeg\"},"                                                                           \
    "{\"op\": \"resize\", \"size\": 256, \"interpolation\": \"bicubic\", \"max_size\": 300,"                 \
    " \"antialias\": false},"                                                                              \
    "{\"op\": \"center_crop\", \"size\": [200, 180]},"                                                     \
    "{\"op\": \"crop\", \"top\": -3, \"left\": 4, \"height\": 100, \"width\": 90},"                        \
    "{\"op\": \"random_crop\", \"size\": 64, \"padding\": 4, \"pad_if_needed\": true, \"fill\": [1, 2, 3]}," \
    "{\"op\": \"random_crop\", \"size\": 64, \"padding\": [1, 2, 3, 4], \"padding_mode\": \"reflect\"},"     \
    "{\"op\": \"pad\", \"padding\": [3, 5], \"fill\": 9, \"padding_mode\": \"symmetric\"},"                 \
    "{\"op\": \"pad\", \"padding\": 2},"                                                                   \
    "{\"op\": \"random_resized_crop\", \"size\": [32], \"scale\": [0.5, 0.9], \"ratio\": [0.5, 2],"          \
    " \"interpolation\": \"nearest\", \"antialias\": false},"                                              \
    "{\"op\": \"horizontal_flip\"}, {\"op\": \"vertical_flip\"},"                                          \
    "{\"op\": \"random_horizontal_flip\", \"p\": 0.25}, {\"op\": \"random_vertical_flip\", \"p\": 1},"      \
    "{\"op\": \"rotate\", \"angle\": -12.5, \"interpolation\": \"bilinear\", \"expand\": false, \"fill\": 7}," \
    "{\"op\": \"affine\", \"angle\": 5, \"translate\": [2, -3], \"scale\": 1.25, \"shear\": [4, 6],"         \
    " \"interpolation\": \"bilinear\", \"fill\": [9, 8, 7]},"                                               \
    "{\"op\": \"adjust_brightness\", \"factor\": 1.5}, {\"op\": \"adjust_contrast\", \"factor\": 0},"        \
    "{\"op\": \"adjust_saturation\", \"factor\": 2}, {\"op\": \"adjust_hue\", \"factor\": -0.25},"          \
    "{\"op\": \"adjust_sharpness\", \"factor\": 3}, {\"op\": \"posterize\", \"bits\": 3},"                 \
    "{\"op\": \"solarize\", \"threshold\": 128.5}, {\"op\": \"equalize\"}, {\"op\": \"autocontrast\"},"   \
    "{\"op\": \"invert\"}, {\"op\": \"grayscale\", \"num_output_channels\": 3},"                          \
    "{\"op\": \"random_grayscale\", \"p\": 0.2}, {\"op\": \"random_posterize\", \"bits\": 2, \"p\": 0.3},"   \
    "{\"op\": \"random_solarize\", \"threshold\": 99.5, \"p\": 0.4}, {\"op\": \"random_equalize\", \"p\": 0}," \
    "{\"op\": \"random_autocontrast\", \"p\": 1}, {\"op\": \"random_invert\", \"p\": 0.75},"           \
    "{\"op\": \"random_adjust_sharpness\", \"sharpness_factor\": 0.5, \"p\": 0.6},"                     \
    "{\"op\": \"random_apply\", \"p\": 0.8, \"ops\": [{\"op\": \"color_jitter\", \"brightness\": 0.4},"        \
    " {\"op\": \"random_choice\", \"ops\": [{\"op\": \"invert\"}, {\"op\": \"random_order\", \"ops\":"          \
    " [{\"op\": \"equalize\"}, {\"op\": \"posterize\", \"bits\": 2}]}], \"p\": [0.25, 3]}]},"                 \
    "{\"op\": \"random_choice\", \"ops\": [{\"op\": \"rotate\", \"angle\": 3}]},"                           \
    "{\"op\": \"gaussian_blur\", \"kernel_size\": [7, 3], \"sigma\": [0.5, 1.5]},"                          \
    "{\"op\": \"gaussian_blur\", \"kernel_size\": 23, \"sigma\": 2},"                                         \
    "{\"op\": \"pil_gaussian_blur\", \"radius\": [0, 3.5]}, {\"op\": \"pil_gaussian_blur\", \"radius\": 1},"  \
    "{\"op\": \"random_perspective\", \"distortion_scale\": 0.25, \"p\": 0.75, \"interpolation\": \"nearest\","  \
    " \"fill\": [1, 2, 3]},"                                                                                  \
    "{\"op\": \"color_jitter\", \"brightness\": 0.4, \"contrast\": [0.5, 1.5], \"saturation\": 0,"          \
    " \"hue\": 0.1},"                                                                                      \
    "{\"op\": \"rand_augment\", \"num_ops\": 3, \"magnitude\": 5, \"num_magnitude_bins\": 11,"              \
    " \"interpolation\": \"nearest\", \"fill\": 128},"                                                     \
    "{\"op\": \"auto_augment\", \"policy\": \"imagenet\", \"fill\": [1, 1, 1]},"                           \
    "{\"op\": \"trivial_augment_wide\", \"num_magnitude_bins\": 5, \"interpolation\": \"nearest\"},"   \
    "{\"op\": \"aug_mix\"}, {\"op\": \"aug_mix\", \"severity\": 10, \"mixture_width\": 16, \"chain_depth\": 2,"  \
    " \"alpha\": 0.25, \"all_ops\": false, \"interpolation\": \"nearest\", \"fill\": [0, 0, 0]},"           \
    "{\"op\": \"elastic_transform\"}, {\"op\": \"elastic_transform\", \"alpha\": [20, 70.5], \"sigma\": 0,"   \
    " \"interpolation\": \"nearest\", \"fill\": 7},"                                                     \
    "{\"op\": \"random_resize\", \"min_size\": 260}, {\"op\": \"random_resize\", \"min_size\": 260,"         \
    " \"max_size\": 1040, \"interpolation\": \"nearest\", \"antialias\": false},"                             \
    "{\"op\": \"random_shortest_size\", \"min_size\": [480, 512, 800], \"max_size\": 1333},"               \
    "{\"op\": \"random_shortest_size\", \"min_size\": 600, \"max_size\": 1000, \"interpolation\": \"bicubic\"}," \
    "{\"op\": \"pad_if_smaller\", \"size\": 480}, {\"op\": \"pad_if_smaller\", \"size\": [32, 48], \"fill\": 9}"

static char *spec_text(const char *ops)
{
    static const char head[] =
        "{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/shard-*.tar\"}, \"ops\": [";
    static const char tail[] = "], \"batch\": {\"size\": 8}}";
    size_t n = strlen(head) + strlen(ops) + strlen(tail) + 1;
    char *s = malloc(n);
    ck_assert_ptr_nonnull(s);
    snprintf(s, n, "%s%s%s", head, ops, tail);
    return s;
}

static struct spw_pipeline_spec *parse_ok(const char *text)
{
    struct spw_pipeline_spec *spec = NULL;
    char err[256] = "";
    int rc = spw_spec_parse_json(text, &spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "parse failed: %s", err);
    ck_assert_ptr_nonnull(spec);
    return spec;
}

static struct spw_pipeline_spec *parse_ops_ok(const char *ops)
{
    char *t = spec_text(ops);
    struct spw_pipeline_spec *spec = parse_ok(t);
    free(t);
    return spec;
}

/* Field-by-field equality (no memcmp: padding is not part of a spec). */
static bool op_equal(const struct spw_op_spec *a, const struct spw_op_spec *b);

static bool children_equal(const struct spw_op_spec *a, const struct spw_op_spec *b)
{
    for (int k = 0; k < a->n_ops && k < b->n_ops; k++)
        if (!op_equal(&a->ops[k], &b->ops[k]))
            return false;
    return true;
}

static bool op_equal(const struct spw_op_spec *a, const struct spw_op_spec *b)
{
#define EQ(f) (a->f == b->f)
#define EQ2(f) (a->f[0] == b->f[0] && a->f[1] == b->f[1])
#define EQ3(f) (EQ2(f) && a->f[2] == b->f[2])
    return EQ(kind) && EQ(size_h) && EQ(size_w) && EQ(max_size) && EQ(interpolation) && EQ(antialias) &&
           EQ2(scale) && EQ2(ratio) && EQ(p) && EQ(top) && EQ(left) && EQ(height) && EQ(width) && EQ2(padding) &&
           a->padding[2] == b->padding[2] && a->padding[3] == b->padding[3] && EQ(padding_mode) &&
           EQ(pad_if_needed) && EQ(angle) && EQ2(translate) && EQ(affine_scale) && EQ2(shear) && EQ(expand) &&
           EQ3(fill) && EQ(factor) && EQ(bits) && EQ(threshold) && EQ2(brightness) && EQ2(contrast) &&
           EQ2(saturation) && EQ2(hue) && EQ(num_ops) && EQ(magnitude) && EQ(num_magnitude_bins) && EQ(policy) &&
           EQ(erase_random_value) && EQ3(erase_value) && EQ3(mean) && EQ3(std) && EQ(dtype) && EQ(mono) &&
           EQ(rate) && EQ(lowpass_filter_width) && EQ(rolloff) && EQ(samples) && EQ(trim) && EQ(frames) &&
           EQ(offset) && EQ(distortion_scale) && EQ(has_fill) && EQ(severity) && EQ(mixture_width) &&
           EQ(chain_depth) && EQ(alpha) && EQ(all_ops) && EQ2(elastic_alpha) && EQ(n_fft) && EQ(hop_length) &&
           EQ(win_length) && EQ(center) && EQ(power) && EQ(sample_rate) && EQ(n_mels) && EQ(f_min) && EQ(f_max) &&
           EQ(mel_scale) && EQ(mel_norm) && EQ(eps) && EQ(stype) && EQ(top_db) && EQ(freq_mask_param) &&
           EQ(time_mask_param) && EQ(num_freq_masks) && EQ(num_time_masks) && EQ(num_output_channels) &&
           EQ2(kernel_size) && EQ2(sigma) && EQ(n_min_size) &&
           !memcmp(a->min_size, b->min_size, sizeof a->min_size) && EQ(n_ops) && EQ(n_weights) &&
           !a->weights == !b->weights &&
           (!a->weights || !memcmp(a->weights, b->weights, (size_t)a->n_weights * sizeof *a->weights)) &&
           children_equal(a, b);
#undef EQ
#undef EQ2
#undef EQ3
}

static void assert_spec_equal(const struct spw_pipeline_spec *a, const struct spw_pipeline_spec *b)
{
    ck_assert_int_eq(a->source.format, b->source.format);
    ck_assert_str_eq(a->source.path, b->source.path);
    ck_assert_int_eq(a->source.shuffle, b->source.shuffle);
    ck_assert_uint_eq(a->source.seed, b->source.seed);
    ck_assert_int_eq(a->source.epochs, b->source.epochs);
    ck_assert_int_eq(!a->source.label_key, !b->source.label_key);
    if (a->source.label_key)
        ck_assert_str_eq(a->source.label_key, b->source.label_key);
    ck_assert_int_eq(a->source.no_labels, b->source.no_labels);
    ck_assert_int_eq(a->source.n_fields, b->source.n_fields);
    for (int k = 0; k < a->source.n_fields; k++) {
        const struct spw_sample_field_spec *x = &a->source.fields[k], *y = &b->source.fields[k];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_str_eq(x->from, y->from);
        ck_assert_int_eq(x->kind, y->kind);
        ck_assert_int_eq(!x->key, !y->key);
        if (x->key)
            ck_assert_str_eq(x->key, y->key);
        ck_assert_int_eq(!x->labels_key, !y->labels_key);
        if (x->labels_key)
            ck_assert_str_eq(x->labels_key, y->labels_key);
        ck_assert(x->ignore_index == y->ignore_index && x->box_format == y->box_format && x->min_size == y->min_size);
    }
    ck_assert_int_eq(a->n_ops, b->n_ops);
    for (int i = 0; i < a->n_ops; i++)
        ck_assert_msg(op_equal(&a->ops[i], &b->ops[i]), "ops[%d] (%s) differs", i, spw_op_name(a->ops[i].kind));
    ck_assert_int_eq(a->batch.size, b->batch.size);
    ck_assert_int_eq(a->batch.drop_remainder, b->batch.drop_remainder);
    ck_assert_int_eq(a->batch.layout, b->batch.layout);
    ck_assert_int_eq(a->batch.pad, b->batch.pad);
    ck_assert_int_eq(a->batch.mix.num_classes, b->batch.mix.num_classes);
    ck_assert(a->batch.mix.mixup_alpha == b->batch.mix.mixup_alpha &&
              a->batch.mix.cutmix_alpha == b->batch.mix.cutmix_alpha && a->batch.mix.p == b->batch.mix.p &&
              a->batch.mix.switch_prob == b->batch.mix.switch_prob);
    ck_assert_int_eq(a->on_error, b->on_error);
    ck_assert_int_eq(a->max_pixels, b->max_pixels);
    ck_assert_int_eq(a->max_file_bytes, b->max_file_bytes);
    ck_assert_int_eq(a->max_samples, b->max_samples);
    ck_assert_int_eq(a->source.media, b->source.media);
}

/* Parse must fail with SPW_ESPEC and exactly this message. */
static void expect_error(const char *text, const char *msg)
{
    struct spw_pipeline_spec *spec = (struct spw_pipeline_spec *)(uintptr_t)1; /* must stay untouched */
    char err[512] = "";
    int rc = spw_spec_parse_json(text, &spec, err, sizeof(err));
    ck_assert_msg(rc == SPW_ESPEC, "expected SPW_ESPEC for %s, got %d", text, rc);
    ck_assert_ptr_eq(spec, (struct spw_pipeline_spec *)(uintptr_t)1);
    ck_assert_str_eq(err, msg);
}

static void expect_ops_error(const char *ops, const char *msg)
{
    char *t = spec_text(ops);
    expect_error(t, msg);
    free(t);
}

/* ---- defaults ------------------------------------------------------------------------------------- */

START_TEST(test_spec_defaults_filled)
{
    struct spw_pipeline_spec *s = parse_ops_ok(
        "{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 256}, {\"op\": \"random_resized_crop\","
        " \"size\": 224}, {\"op\": \"random_horizontal_flip\"}, {\"op\": \"rotate\", \"angle\": 10},"
        " {\"op\": \"affine\"}, {\"op\": \"rand_augment\"}, {\"op\": \"auto_augment\"},"
        " {\"op\": \"trivial_augment_wide\"}, {\"op\": \"color_jitter\"}, {\"op\": \"random_crop\", \"size\": 9},"
        " {\"op\": \"to_tensor\"}, {\"op\": \"random_erasing\"}");
    ck_assert_int_eq(s->source.format, SPW_SOURCE_TAR_SHARDS);
    ck_assert_str_eq(s->source.path, "/d/shard-*.tar");
    ck_assert(s->source.shuffle);
    ck_assert_uint_eq(s->source.seed, 0);
    ck_assert_int_eq(s->source.epochs, 1);
    ck_assert_int_eq(s->batch.size, 8);
    ck_assert(!s->batch.drop_remainder);
    ck_assert_int_eq(s->batch.layout, SPW_LAYOUT_HWC);
    ck_assert_int_eq(s->on_error, SPW_ON_ERROR_SKIP);
    ck_assert_int_eq(s->max_pixels, 89478485);
    ck_assert_int_eq(s->max_file_bytes, 64 << 20);
    ck_assert_int_eq(s->n_ops, 13);

    const struct spw_op_spec *o = s->ops;
    ck_assert_int_eq(o[1].kind, SPW_OP_RESIZE);
    ck_assert_int_eq(o[1].size_h, 256);
    ck_assert_int_eq(o[1].size_w, 0);
    ck_assert_int_eq(o[1].max_size, 0);
    ck_assert_int_eq(o[1].interpolation, SPW_INTERP_BILINEAR);
    ck_assert(o[1].antialias);

    ck_assert_int_eq(o[2].size_h, 224);
    ck_assert_int_eq(o[2].size_w, 0);
    ck_assert_double_eq(o[2].scale[0], 0.08);
    ck_assert_double_eq(o[2].scale[1], 1.0);
    ck_assert_double_eq(o[2].ratio[0], 3.0 / 4.0);
    ck_assert_double_eq(o[2].ratio[1], 4.0 / 3.0);
    ck_assert_int_eq(o[2].interpolation, SPW_INTERP_BILINEAR);
    ck_assert(o[2].antialias);

    ck_assert_double_eq(o[3].p, 0.5);

    ck_assert_double_eq(o[4].angle, 10);
    ck_assert_int_eq(o[4].interpolation, SPW_INTERP_NEAREST);
    ck_assert(!o[4].expand);
    ck_assert_double_eq(o[4].fill[0], 0);

    ck_assert_double_eq(o[5].angle, 0);
    ck_assert_double_eq(o[5].translate[0], 0);
    ck_assert_double_eq(o[5].affine_scale, 1.0);
    ck_assert_double_eq(o[5].shear[0], 0);
    ck_assert_double_eq(o[5].shear[1], 0);
    ck_assert_int_eq(o[5].interpolation, SPW_INTERP_NEAREST);

    ck_assert_int_eq(o[6].num_ops, 2);
    ck_assert_int_eq(o[6].magnitude, 9);
    ck_assert_int_eq(o[6].num_magnitude_bins, 31);
    ck_assert_int_eq(o[6].interpolation, SPW_INTERP_NEAREST);
    ck_assert_double_eq(o[6].fill[2], 0);

    ck_assert_int_eq(o[7].policy, SPW_AA_IMAGENET);
    ck_assert_int_eq(o[8].num_magnitude_bins, 31);

    for (int i = 0; i < 2; i++) { /* ColorJitter() defaults: every factor off */
        ck_assert_double_eq(o[9].brightness[i], 0);
        ck_assert_double_eq(o[9].contrast[i], 0);
        ck_assert_double_eq(o[9].saturation[i], 0);
        ck_assert_double_eq(o[9].hue[i], 0);
    }

    ck_assert_int_eq(o[10].size_h, 9);
    ck_assert_int_eq(o[10].padding[0] | o[10].padding[1] | o[10].padding[2] | o[10].padding[3], 0);
    ck_assert_int_eq(o[10].padding_mode, SPW_PAD_CONSTANT);
    ck_assert(!o[10].pad_if_needed);

    ck_assert_int_eq(o[11].dtype, SPW_DTYPE_F32);

    ck_assert_double_eq(o[12].p, 0.5);
    ck_assert_double_eq(o[12].scale[0], 0.02);
    ck_assert_double_eq(o[12].scale[1], 0.33);
    ck_assert_double_eq(o[12].ratio[0], 0.3);
    ck_assert_double_eq(o[12].ratio[1], 3.3);
    ck_assert(!o[12].erase_random_value);
    ck_assert_double_eq(o[12].erase_value[0], 0);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_spec_example_parses)
{
    struct spw_pipeline_spec *s = parse_ok(EXAMPLE);
    ck_assert_int_eq(s->source.format, SPW_SOURCE_IMAGE_FOLDER);
    ck_assert_str_eq(s->source.path, "DIR");
    ck_assert_uint_eq(s->source.seed, 7);
    ck_assert_int_eq(s->n_ops, 5);
    ck_assert_int_eq(s->ops[1].kind, SPW_OP_RANDOM_RESIZED_CROP);
    ck_assert_int_eq(s->ops[1].size_h, 224);
    ck_assert_int_eq(s->ops[1].size_w, 224);
    ck_assert_int_eq(s->ops[3].magnitude, 9);
    ck_assert_double_eq(s->ops[4].mean[0], 0.485);
    ck_assert_double_eq(s->ops[4].std[2], 0.225);
    ck_assert_int_eq(s->batch.size, 64);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_spec_value_forms)
{
    struct spw_pipeline_spec *s = parse_ops_ok(
        "{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": [7]}, {\"op\": \"affine\", \"shear\": 3},"
        " {\"op\": \"affine\", \"shear\": [5]}, {\"op\": \"rotate\", \"angle\": 1, \"fill\": [4]},"
        " {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1], \"dtype\": \"float16\"},"
        " {\"op\": \"random_erasing\", \"value\": \"random\"}, {\"op\": \"random_erasing\", \"value\": [1, 2, 3]},"
        " {\"op\": \"random_erasing\", \"value\": 0.5}");
    ck_assert_int_eq(s->ops[1].size_h, 7); /* [s] is the single-int form, as torchvision */
    ck_assert_int_eq(s->ops[1].size_w, 0);
    ck_assert_double_eq(s->ops[2].shear[0], 3); /* F.affine: a number shears along x only */
    ck_assert_double_eq(s->ops[2].shear[1], 0);
    ck_assert_double_eq(s->ops[3].shear[0], 5); /* ... a one-element list along both */
    ck_assert_double_eq(s->ops[3].shear[1], 5);
    ck_assert_double_eq(s->ops[4].fill[1], 4);
    ck_assert_int_eq(s->ops[5].dtype, SPW_DTYPE_F16);
    ck_assert(s->ops[6].erase_random_value);
    ck_assert(!s->ops[7].erase_random_value);
    ck_assert_double_eq(s->ops[7].erase_value[2], 3);
    ck_assert_double_eq(s->ops[8].erase_value[1], 0.5);
    spw_spec_free(s);
}
END_TEST

/* torchvision ColorJitter._check_input, case by case. */
START_TEST(test_spec_color_jitter_matches_torchvision)
{
    struct spw_pipeline_spec *s = parse_ops_ok(
        "{\"op\": \"decode_jpeg\"},"
        " {\"op\": \"color_jitter\", \"brightness\": 0.4, \"contrast\": 1.5, \"saturation\": [0.2, 3],"
        "  \"hue\": 0.1},"
        " {\"op\": \"color_jitter\", \"brightness\": 0, \"contrast\": [1, 1], \"saturation\": [0, 1],"
        "  \"hue\": [0, 0]},"
        " {\"op\": \"color_jitter\", \"hue\": [-0.5, 0.5], \"brightness\": [1, 1.0000001]}");
    const struct spw_op_spec *a = &s->ops[1], *b = &s->ops[2], *c = &s->ops[3];
    ck_assert_double_eq(a->brightness[0], 1.0 - 0.4); /* [1 - v, 1 + v] */
    ck_assert_double_eq(a->brightness[1], 1.0 + 0.4);
    ck_assert_double_eq(a->contrast[0], 0.0); /* clipped at 0 */
    ck_assert_double_eq(a->contrast[1], 2.5);
    ck_assert_double_eq(a->saturation[0], 0.2); /* a pair is kept */
    ck_assert_double_eq(a->saturation[1], 3);
    ck_assert_double_eq(a->hue[0], -0.1); /* hue: [-v, v], no clipping */
    ck_assert_double_eq(a->hue[1], 0.1);
    ck_assert_double_eq(b->brightness[0], 0); /* 0 -> [1, 1] -> None (off) */
    ck_assert_double_eq(b->brightness[1], 0);
    ck_assert_double_eq(b->contrast[0], 0); /* [1, 1] -> off */
    ck_assert_double_eq(b->contrast[1], 0);
    ck_assert_double_eq(b->saturation[0], 0);
    ck_assert_double_eq(b->saturation[1], 1);
    ck_assert_double_eq(b->hue[0], 0); /* [0, 0] -> off */
    ck_assert_double_eq(b->hue[1], 0);
    ck_assert_double_eq(c->hue[0], -0.5);
    ck_assert_double_eq(c->brightness[1], 1.0000001);
    spw_spec_free(s);
}
END_TEST

/* ---- error messages ------------------------------------------------------------------------------- */

START_TEST(test_spec_rejects_what_kernels_lack)
{
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"rand_augment\", \"interpolation\": \"bicubic\"}",
                     "ops[1].interpolation: \"bicubic\" is not supported for \"rand_augment\" (use nearest or "
                     "bilinear)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"rotate\", \"angle\": 3, \"interpolation\": \"bicubic\"}",
                     "ops[1].interpolation: \"bicubic\" is not supported for \"rotate\" (use nearest or bilinear)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"rotate\", \"angle\": 3, \"expand\": true}",
                     "ops[1].expand: true is not supported (the output keeps the input's size)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\", \"num_output_channels\": 2}",
                     "ops[1].num_output_channels: 2: give 1 or 3");
    /* one channel: what may follow a grayscale with num_output_channels 1 (pipeline/channels.h) */
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_apply\", \"ops\": [{\"op\": \"grayscale\"}]}",
                     "ops[1].ops[0].num_output_channels: 1 inside a combinator: the output's channels would "
                     "depend on the draw");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\"}, {\"op\": \"aug_mix\"}",
                     "ops[2]: \"aug_mix\" after a grayscale with num_output_channels 1 is not supported (it needs "
                     "three channels; put it before, or use num_output_channels 3)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\"}, {\"op\": \"rotate\", \"angle\": 3,"
                     " \"fill\": [1, 2, 3]}",
                     "ops[2].fill: per-channel values differ on a one-channel image (after a grayscale with "
                     "num_output_channels 1): give one value");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\"}, {\"op\": \"normalize\","
                     " \"mean\": [0.485, 0.456, 0.406], \"std\": [0.5]}",
                     "ops[2].mean: per-channel values differ on a one-channel image (after a grayscale with "
                     "num_output_channels 1): give one value");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\"}, {\"op\": \"random_choice\", \"ops\":"
                     " [{\"op\": \"grayscale\", \"num_output_channels\": 3}]}",
                     "ops[2].ops[0].num_output_channels: 3 inside a combinator: the output's channels would depend "
                     "on the draw (the image is one channel here)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"grayscale\"}, {\"op\": \"python\","
                     " \"function\": \"m:f\"}",
                     "ops[2]: \"python\" after a grayscale with num_output_channels 1 is not supported (it needs "
                     "three channels; put it before, or use num_output_channels 3)");
    expect_error("{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\"}, \"ops\": [{\"op\": \"decode_jpeg\"},"
                 " {\"op\": \"grayscale\"}], \"views\": [{\"ops\": [{\"op\": \"center_crop\", \"size\": 8}]}],"
                 " \"batch\": {\"size\": 8}}",
                     "views: not supported yet after a grayscale with num_output_channels 1 (use 3)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"aug_mix\", \"interpolation\": \"bicubic\"}",
                     "ops[1].interpolation: \"bicubic\" is not supported for \"aug_mix\" (use nearest or bilinear)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"elastic_transform\", \"sigma\": [3, 0]}",
                     "ops[1].sigma: [3, 0]: give both > 0, or both 0 (no blur)");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"elastic_transform\", \"alpha\": [1, 2, 3]}",
                     "ops[1].alpha: expected 1 or 2 numbers, got 3");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resize\", \"min_size\": 300, \"max_size\": 299}",
                     "ops[1].max_size: 299 is below min_size 300");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_shortest_size\", \"min_size\": [480]}",
                     "ops[1].max_size: required");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_shortest_size\", \"min_size\": [],"
                     " \"max_size\": 9}",
                     "ops[1].min_size: expected an integer or a list of 1 to 16 integers, got array");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_shortest_size\", \"min_size\": [480, 0],"
                     " \"max_size\": 9}",
                     "ops[1].min_size[1]: 0 is outside [1, 65535]");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"pad_if_smaller\"}", "ops[1].size: required");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"aug_mix\", \"severity\": 11}",
                     "ops[1].severity: 11 is outside [1, 10]");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"aug_mix\", \"alpha\": 0}",
                     "ops[1].alpha: 0 is outside (0, 1000000]");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"aug_mix\", \"chain_depth\": 17}",
                     "ops[1].chain_depth: 17 is outside [-1, 16]");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"aug_mix\", \"fill\": [1, 2]}",
                     "ops[1].fill: expected 1 or 3 numbers, got 2");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_adjust_sharpness\", \"p\": 0.5}",
                     "ops[1].sharpness_factor: required");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"gaussian_blur\", \"kernel_size\": [7, 4]}",
                     "ops[1].kernel_size[1]: 4 is even: a kernel size is odd");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"gaussian_blur\", \"kernel_size\": 3, \"sigma\": 0}",
                     "ops[1].sigma: 0 must be > 0");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"gaussian_blur\", \"kernel_size\": 3, \"sigma\": [2, 1]}",
                     "ops[1].sigma: [2, 1] must be [min, max] with min <= max");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"gaussian_blur\", \"kernel_size\": 1025}",
                     "ops[1].kernel_size: 1025 is outside [1, 1023]");
}
END_TEST

START_TEST(test_spec_error_messages_from_brief)
{
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": 224},"
                     " {\"op\": \"random_horizontal_flip\"}, {\"op\": \"rand_augment\", \"magnitude\": 40}",
                     "ops[3].magnitude: 40 is outside [0, 30]");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resize_crop\", \"size\": 224}",
                     "ops[1]: unknown op \"random_resize_crop\"");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 224},"
                     " {\"op\": \"random_horizontal_flip\", \"p\": \"0.5\"}",
                     "ops[2].p: expected a number, got string");
    expect_error("{\"source\": {\"format\": \"csv\", \"path\": \"x\"}, \"ops\": [{\"op\": \"decode_jpeg\"}],"
                 " \"batch\": {\"size\": 1}}",
                 "source.format: \"csv\" is not one of image_folder, tar_shards, wav_folder, audio_folder, coco");
    expect_ops_error("{\"op\": \"resize\", \"size\": 224}, {\"op\": \"decode_jpeg\"}",
                     "ops[0]: \"decode_jpeg\" must come before image ops");
}
END_TEST

START_TEST(test_spec_error_messages_structure)
{
    expect_ops_error("",
                     "ops: must start with \"decode_jpeg\", \"decode_image\", \"decode_audio\" or \"decode_wav\"");
    expect_ops_error("{\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1]}",
                     "ops[0]: \"decode_jpeg\" must come before \"normalize\"");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"invert\"}, {\"op\": \"decode_jpeg\"}",
                     "ops[2]: \"decode_jpeg\" must be the first op and appear once");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"}, {\"op\": \"invert\"}",
                     "ops[2]: image op \"invert\" must come before \"to_tensor\" (ops[1])");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"},"
                     " {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1]}",
                     "ops[2]: at most one of normalize/to_tensor (ops[1] is \"to_tensor\")");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_erasing\"}, {\"op\": \"to_tensor\"}",
                     "ops[1]: \"random_erasing\" works on tensors and must come after normalize or to_tensor");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, \"invert\"", "ops[1]: expected an object, got string");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"size\": 3}", "ops[1]: missing \"op\"");
    expect_ops_error("{\"op\": 5}", "ops[0].op: expected a string, got integer");
    /* where an op stands is checked before its fields */
    expect_ops_error("{\"op\": \"resize\", \"sizes\": 1}", "ops[0]: \"decode_jpeg\" must come before image ops");
}
END_TEST

START_TEST(test_spec_error_messages_fields)
{
    static const struct {
        const char *op, *msg;
    } cases[] = {
        {"{\"op\": \"random_horizontal_flip\", \"prob\": 0.5}",
         "ops[1]: unknown field \"prob\" for \"random_horizontal_flip\""},
        {"{\"op\": \"horizontal_flip\", \"p\": 0.5}", "ops[1]: unknown field \"p\" for \"horizontal_flip\""},
        {"{\"op\": \"resize\"}", "ops[1].size: required"},
        {"{\"op\": \"resize\", \"size\": 224.5}",
         "ops[1].size: expected an integer or [height, width], got number"},
        {"{\"op\": \"resize\", \"size\": [1, 2, 3]}", "ops[1].size: expected 1 or 2 integers, got 3"},
        {"{\"op\": \"resize\", \"size\": [10, 0]}", "ops[1].size[1]: 0 is outside [1, 65535]"},
        {"{\"op\": \"resize\", \"size\": 224, \"interpolation\": \"lanczos\"}",
         "ops[1].interpolation: \"lanczos\" is not one of nearest, bilinear, bicubic"},
        {"{\"op\": \"resize\", \"size\": [224, 224], \"max_size\": 300}",
         "ops[1].max_size: only allowed when size is a single integer, not [224, 224]"},
        {"{\"op\": \"resize\", \"size\": 224, \"max_size\": 224}",
         "ops[1].max_size: 224 must be greater than size 224"},
        {"{\"op\": \"resize\", \"size\": 224, \"antialias\": 1}",
         "ops[1].antialias: expected a boolean, got integer"},
        {"{\"op\": \"crop\", \"top\": 0, \"left\": 0, \"height\": 5}", "ops[1].width: required"},
        {"{\"op\": \"random_crop\", \"size\": 8, \"fill\": [1, 2]}", "ops[1].fill: expected 1 or 3 numbers, got 2"},
        {"{\"op\": \"random_crop\", \"size\": 8, \"fill\": 256}", "ops[1].fill: 256 is outside [0, 255]"},
        {"{\"op\": \"random_crop\", \"size\": 8, \"padding\": -1}", "ops[1].padding: -1 is outside [0, 65535]"},
        {"{\"op\": \"random_crop\", \"size\": 8, \"padding\": [1, 2, 3]}",
         "ops[1].padding: expected an integer, [left/right, top/bottom] or [left, top, right, bottom], got array"},
        {"{\"op\": \"pad\", \"padding\": [1, -2]}", "ops[1].padding[1]: -2 is outside [0, 65535]"},
        {"{\"op\": \"pad\", \"padding\": 1, \"padding_mode\": \"wrap\"}",
         "ops[1].padding_mode: \"wrap\" is not one of constant, edge, reflect, symmetric"},
        {"{\"op\": \"pad\"}", "ops[1].padding: required"},
        {"{\"op\": \"random_resized_crop\", \"size\": 8, \"scale\": [0.9, 0.1]}",
         "ops[1].scale: [0.9, 0.1] must be [min, max] with min <= max"},
        {"{\"op\": \"random_resized_crop\", \"size\": 8, \"ratio\": [0, 1]}", "ops[1].ratio[0]: 0 must be > 0"},
        {"{\"op\": \"random_resized_crop\", \"size\": 8, \"scale\": 0.5}",
         "ops[1].scale: expected [min, max], got number"},
        {"{\"op\": \"random_vertical_flip\", \"p\": 1.5}", "ops[1].p: 1.5 is outside [0, 1]"},
        {"{\"op\": \"rotate\"}", "ops[1].angle: required"},
        {"{\"op\": \"affine\", \"scale\": 0}", "ops[1].scale: 0 must be > 0"},
        {"{\"op\": \"affine\", \"translate\": [1]}", "ops[1].translate: expected 2 numbers, got 1"},
        {"{\"op\": \"adjust_brightness\", \"factor\": -0.5}", "ops[1].factor: -0.5 must be >= 0"},
        {"{\"op\": \"adjust_hue\", \"factor\": 0.75}", "ops[1].factor: 0.75 is outside [-0.5, 0.5]"},
        {"{\"op\": \"posterize\", \"bits\": 9}", "ops[1].bits: 9 is outside [0, 8]"},
        {"{\"op\": \"solarize\", \"threshold\": 300}", "ops[1].threshold: 300 is outside [0, 255]"},
        {"{\"op\": \"color_jitter\", \"brightness\": -1}", "ops[1].brightness: -1 must be >= 0"},
        {"{\"op\": \"color_jitter\", \"hue\": 0.7}", "ops[1].hue: 0.7 is outside [0, 0.5]"},
        {"{\"op\": \"color_jitter\", \"hue\": [-0.6, 0.2]}",
         "ops[1].hue: [-0.6, 0.2] must satisfy -0.5 <= min <= max <= 0.5"},
        {"{\"op\": \"color_jitter\", \"contrast\": [1.5, 0.5]}",
         "ops[1].contrast: [1.5, 0.5] must satisfy 0 <= min <= max"},
        {"{\"op\": \"color_jitter\", \"saturation\": [0, 0]}",
         "ops[1].saturation: [0, 0] is not supported; use adjust_saturation with factor 0"},
        {"{\"op\": \"color_jitter\", \"saturation\": [1]}", "ops[1].saturation: expected 2 numbers, got 1"},
        {"{\"op\": \"color_jitter\", \"saturation\": \"x\"}",
         "ops[1].saturation: expected a number or [min, max], got string"},
        {"{\"op\": \"rand_augment\", \"magnitude\": -1}", "ops[1].magnitude: -1 is outside [0, 30]"},
        {"{\"op\": \"rand_augment\", \"num_magnitude_bins\": 5, \"magnitude\": 5}",
         "ops[1].magnitude: 5 is outside [0, 4]"},
        {"{\"op\": \"rand_augment\", \"num_magnitude_bins\": 1}",
         "ops[1].num_magnitude_bins: 1 is outside [2, 1024]"},
        {"{\"op\": \"rand_augment\", \"num_ops\": 33}", "ops[1].num_ops: 33 is outside [0, 32]"},
        {"{\"op\": \"auto_augment\", \"policy\": \"cifar10\"}",
         "ops[1].policy: \"cifar10\" is not one of imagenet"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char ops[512];
        snprintf(ops, sizeof(ops), "{\"op\": \"decode_jpeg\"}, %s", cases[i].op);
        expect_ops_error(ops, cases[i].msg);
    }
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"normalize\", \"mean\": [0, 0], \"std\": [1, 1, 1]}",
                     "ops[1].mean: expected 1 or 3 numbers, got 2");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 0, 1]}",
                     "ops[1].std[1]: 0 must be > 0");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"normalize\", \"mean\": [0, 0, 0]}",
                     "ops[1].std: required");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\", \"dtype\": \"uint8\"}",
                     "ops[1].dtype: \"uint8\" is not one of float32, float16");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"},"
                     " {\"op\": \"random_erasing\", \"value\": \"x\"}",
                     "ops[2].value: \"x\" is not one of random");
}
END_TEST

#define SRC_D "\"source\": {\"format\": \"image_folder\", \"path\": \"d\"}"
#define OPS_D "\"ops\": [{\"op\": \"decode_jpeg\"}]"

START_TEST(test_spec_error_messages_top_level)
{
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 1}, \"shuffle\": true}",
                 "unknown top-level key \"shuffle\"");
    expect_error("{\"ops\": [{\"op\": \"decode_jpeg\"}], \"batch\": {\"size\": 1}}", "source: required");
    expect_error("{" SRC_D ", \"batch\": {\"size\": 1}}",
                 "ops: required");
    expect_error("{" SRC_D ", " OPS_D "}",
                 "batch: required");
    expect_error("{\"source\": {\"format\": \"image_folder\"}, \"ops\": [], \"batch\": {\"size\": 1}}",
                 "source.path: required");
    expect_error("{\"source\": {\"format\": \"image_folder\", \"path\": \"\"}, \"ops\": [],"
                 " \"batch\": {\"size\": 1}}",
                 "source.path: must not be empty");
    expect_error("{\"source\": {\"format\": \"image_folder\", \"path\": \"d\", \"glob\": 1}, \"ops\": [],"
                 " \"batch\": {\"size\": 1}}",
                 "source: unknown key \"glob\"");
    expect_error("{\"source\": {\"format\": \"image_folder\", \"path\": \"d\", \"epochs\": -1}, \"ops\": [],"
                 " \"batch\": {\"size\": 1}}",
                 "source.epochs: -1 must be >= 0");
    expect_error("{\"source\": {\"format\": \"image_folder\", \"path\": \"d\", \"seed\": \"7\"}, \"ops\": [],"
                 " \"batch\": {\"size\": 1}}",
                 "source.seed: expected an integer, got string");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 0}}",
                 "batch.size: 0 is outside [1, 65536]");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 65537}}",
                 "batch.size: 65537 is outside [1, 65536]");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 2, \"layout\": \"NCHW\"}}",
                 "batch.layout: \"NCHW\" is not one of HWC, CHW");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 2}, \"on_error\": \"retry\"}",
                 "on_error: \"retry\" is not one of skip, fail");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 2}, \"max_pixels\": 0}",
                 "max_pixels: 0 must be >= 1");
    expect_error("{" SRC_D ", " OPS_D ","
                 " \"batch\": {\"size\": 2}, \"max_file_bytes\": -5}",
                 "max_file_bytes: -5 must be >= 1");
    expect_error("[1, 2]", "spec: expected an object, got array");
    expect_error("{\"source\": 3, \"ops\": [], \"batch\": {}}", "source: expected an object, got integer");
}
END_TEST

START_TEST(test_spec_syntax_errors_report_line_and_column)
{
    expect_error("{\"source\": {\"format\": \"image_folder\",\n  \"path\": \"d\",}}",
                 "2:15: string or '}' expected near '}'");
    expect_error("{\"a\": 1,\n\"a\": 2}", "2:3: duplicate object key near '\"a\"'");
    expect_error("", "1:0: '[' or '{' expected near end of file");
    expect_error("{} x", "1:4: end of file expected near 'x'");

    /* nesting is bounded by jansson (2048 levels), not by the stack */
    size_t depth = 100000, o = 0;
    char *deep = malloc(2 * depth + 16);
    ck_assert_ptr_nonnull(deep);
    o += (size_t)sprintf(deep, "{\"ops\": ");
    memset(deep + o, '[', depth), o += depth;
    memset(deep + o, ']', depth), o += depth;
    strcpy(deep + o, "}");
    expect_error(deep, "1:2056: maximum parsing depth reached near '['");
    free(deep);
}
END_TEST

START_TEST(test_spec_caps_on_text_and_ops)
{
    size_t n = SPW_SPEC_MAX_JSON_BYTES + 10;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', n);
    big[0] = '{', big[n - 1] = '}', big[n] = '\0';
    expect_error(big, "spec text is longer than the cap of 1048576 bytes");
    free(big);

    size_t cap = 64 + 32 * (SPW_SPEC_MAX_OPS + 1);
    char *ops = malloc(cap);
    ck_assert_ptr_nonnull(ops);
    size_t o = (size_t)snprintf(ops, cap, "{\"op\": \"decode_jpeg\"}");
    for (int i = 0; i < SPW_SPEC_MAX_OPS; i++)
        o += (size_t)snprintf(ops + o, cap - o, ", {\"op\": \"invert\"}");
    expect_ops_error(ops, "ops: 257 ops, more than the cap of 256");
    /* exactly the cap is fine */
    ops[strlen(ops) - strlen(", {\"op\": \"invert\"}")] = '\0';
    struct spw_pipeline_spec *s = parse_ops_ok(ops);
    ck_assert_int_eq(s->n_ops, SPW_SPEC_MAX_OPS);
    spw_spec_free(s);
    free(ops);
}
END_TEST

START_TEST(test_spec_error_buffer_small_or_null)
{
    struct spw_pipeline_spec *s = NULL;
    char err[8];
    ck_assert_int_eq(spw_spec_parse_json("{", &s, NULL, 0), SPW_ESPEC);
    ck_assert_int_eq(spw_spec_parse_json("[]", &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "spec: e"); /* truncated, still terminated */
    ck_assert_int_eq(spw_spec_parse_json(NULL, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_ptr_null(s);
}
END_TEST

/* ---- round trips ---------------------------------------------------------------------------------- */

static void check_json_round_trip(const char *text)
{
    struct spw_pipeline_spec *a = parse_ok(text);
    char *j1 = spw_spec_to_json(a);
    ck_assert_ptr_nonnull(j1);
    struct spw_pipeline_spec *b = parse_ok(j1);
    assert_spec_equal(a, b);
    char *j2 = spw_spec_to_json(b);
    ck_assert_str_eq(j1, j2); /* canonical: one spec, one text */
    free(j1);
    free(j2);
    spw_spec_free(a);
    spw_spec_free(b);
}

START_TEST(test_spec_json_round_trip)
{
    check_json_round_trip(EXAMPLE);
    char *t = spec_text(ALL_OPS ", {\"op\": \"normalize\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224,"
                                " 0.225], \"dtype\": \"float16\"}, {\"op\": \"random_erasing\", \"p\": 0.1,"
                                " \"scale\": [0.1, 0.2], \"ratio\": [0.5, 1.5], \"value\": \"random\"},"
                                " {\"op\": \"random_erasing\", \"value\": [0.5, -1, 2]}");
    check_json_round_trip(t);
    free(t);
    t = spec_text(ALL_OPS ", {\"op\": \"to_tensor\"}");
    check_json_round_trip(t);
    free(t);
}
END_TEST

/* Every audio op with non-default values, and one with the defaults (null f_max, top_db and norm). */
#define AUDIO_SPEC(ops)                                                                                    \
    "{\"source\": {\"format\": \"wav_folder\", \"path\": \"/d/speech\"}, \"ops\": [" ops                \
    "], \"batch\": {\"size\": 8}, \"max_samples\": 1000000}"
#define AUDIO_ALL                                                                                          \
    "{\"op\": \"decode_wav\", \"mono\": false}, {\"op\": \"resample\", \"rate\": 8000,"                      \
    " \"lowpass_filter_width\": 12, \"rolloff\": 0.9}, {\"op\": \"pad_audio\", \"samples\": 9000},"            \
    " {\"op\": \"random_crop_audio\", \"samples\": 8000}, {\"op\": \"normalize_audio\"},"                     \
    " {\"op\": \"stft\", \"n_fft\": 400, \"hop_length\": 100, \"win_length\": 300, \"center\": false,"       \
    " \"power\": 1}, {\"op\": \"mel\", \"sample_rate\": 8000, \"n_mels\": 40, \"f_min\": 20, \"f_max\": 3800," \
    " \"mel_scale\": \"slaney\", \"norm\": \"slaney\"}, {\"op\": \"amplitude_to_db\", \"stype\": \"magnitude\"," \
    " \"top_db\": 80}, {\"op\": \"log\", \"eps\": 0.001}, {\"op\": \"spec_augment\", \"freq_mask_param\": 7,"  \
    " \"time_mask_param\": 9, \"num_freq_masks\": 2, \"num_time_masks\": 3}"
#define AUDIO_DEFAULTS                                                                                     \
    "{\"op\": \"decode_wav\"}, {\"op\": \"stft\", \"n_fft\": 512}, {\"op\": \"mel\"},"                      \
    " {\"op\": \"amplitude_to_db\"}, {\"op\": \"spec_augment\"}"

static void check_proto_round_trip(const char *text);

#define FBANK_ALL                                                                                          \
    "{\"op\": \"decode_wav\"}, {\"op\": \"fbank\", \"num_mel_bins\": 80, \"frame_length\": 20,"               \
    " \"frame_shift\": 8.5, \"sample_frequency\": 8000, \"dither\": 0.001, \"preemphasis_coefficient\": 0.5,"  \
    " \"window_type\": \"blackman\", \"remove_dc_offset\": false, \"energy_floor\": 0, \"raw_energy\": false,"  \
    " \"use_energy\": true, \"htk_compat\": true, \"low_freq\": 60, \"high_freq\": -400, \"snip_edges\": false},"  \
    " {\"op\": \"spec_augment\", \"time_mask_param\": 20}, {\"op\": \"trim_frames\", \"frames\": 300},"        \
    " {\"op\": \"scale_shift\", \"factor\": 0.025, \"offset\": -1.5}"
#define WHISPER                                                                                            \
    "{\"op\": \"decode_wav\"}, {\"op\": \"pad_audio\", \"samples\": 480000, \"trim\": true},"               \
    " {\"op\": \"stft\", \"n_fft\": 400, \"hop_length\": 160}, {\"op\": \"scale_shift\"}"

START_TEST(test_spec_audio_round_trips)
{
    check_json_round_trip(AUDIO_SPEC(FBANK_ALL));
    check_proto_round_trip(AUDIO_SPEC(FBANK_ALL));
    check_json_round_trip(AUDIO_SPEC(WHISPER));
    check_proto_round_trip(AUDIO_SPEC(WHISPER));
    struct spw_pipeline_spec *w = parse_ok(AUDIO_SPEC(WHISPER));
    ck_assert(w->ops[1].trim && w->ops[3].factor == 1.0 && w->ops[3].offset == 0.0);
    spw_spec_free(w);
    struct spw_pipeline_spec *f = parse_ok(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"fbank\"}"));
    ck_assert(f->ops[1].n_mels == 23 && f->ops[1].frame_length == 25.0 && f->ops[1].frame_shift == 10.0 &&
              f->ops[1].sample_frequency == 16000.0 && f->ops[1].dither == 0.0 &&
              f->ops[1].preemphasis_coefficient == 0.97 && f->ops[1].window_type == SPW_KALDI_POVEY &&
              f->ops[1].remove_dc_offset && f->ops[1].energy_floor == 1.0 && f->ops[1].raw_energy &&
              !f->ops[1].use_energy && !f->ops[1].htk_compat && f->ops[1].f_min == 20.0 && f->ops[1].f_max == 0.0 &&
              f->ops[1].snip_edges);     /* torchaudio.compliance.kaldi.fbank's defaults */
    spw_spec_free(f);
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"fbank\"}, {\"op\": \"mel\"}"),
                 "ops[2]: \"mel\" after \"fbank\" (ops[1]): fbank's rows are mel bins already");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"fbank\"}, {\"op\": \"stft\", \"n_fft\": 8}"),
                 "ops[2]: at most one of stft/fbank (ops[1] is \"fbank\")");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"fbank\", \"window_type\": \"hann\"}"),
                 "ops[1].window_type: \"hann\" is not one of hamming, hanning, povey, rectangular, blackman");
    check_json_round_trip(AUDIO_SPEC(AUDIO_ALL));
    check_json_round_trip(AUDIO_SPEC(AUDIO_DEFAULTS));
    check_proto_round_trip(AUDIO_SPEC(AUDIO_ALL));
    check_proto_round_trip(AUDIO_SPEC(AUDIO_DEFAULTS));
    struct spw_pipeline_spec *s = parse_ok(AUDIO_SPEC(AUDIO_DEFAULTS));
    ck_assert_int_eq(s->source.media, SPW_MEDIA_AUDIO);
    ck_assert_int_eq(s->ops[0].mono, true);
    ck_assert_int_eq(s->ops[1].hop_length, 128);        /* torch.stft: n_fft / 4 */
    ck_assert_int_eq(s->ops[1].win_length, 512);
    ck_assert_int_eq(s->ops[1].center, true);
    ck_assert(s->ops[1].power == 2);
    ck_assert_int_eq(s->ops[2].sample_rate, 16000);     /* torchaudio's MelSpectrogram defaults */
    ck_assert_int_eq(s->ops[2].n_mels, 128);
    ck_assert(s->ops[2].f_max == 0 && s->ops[2].mel_norm == SPW_MEL_NORM_NONE);
    ck_assert_int_eq(s->ops[4].num_freq_masks, 1);
    ck_assert_int_eq(s->max_samples, 1000000);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_spec_audio_error_messages)
{
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"mel\"}"),
                 "ops[1]: \"mel\" works on spectrograms and must come after \"stft\"");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"stft\", \"n_fft\": 64}, {\"op\": \"pad_audio\","
                            " \"samples\": 5}"),
                 "ops[2]: waveform op \"pad_audio\" must come before \"stft\" (ops[1])");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"random_horizontal_flip\"}"),
                 "ops[1]: image op \"random_horizontal_flip\" in an audio pipeline (ops[0] is \"decode_wav\")");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"stft\", \"n_fft\": 64}",
                     "ops[1]: audio op \"stft\" needs \"decode_audio\" or \"decode_wav\" as the first op");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"stft\", \"n_fft\": 64, \"win_length\": 65}"),
                 "ops[1].win_length: 65 is more than n_fft 64");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"stft\", \"n_fft\": 64, \"power\": 1.5}"),
                 "ops[1].power: 1.5 is not 1 (magnitude) or 2 (power)");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"stft\", \"n_fft\": 64},"
                            " {\"op\": \"mel\", \"sample_rate\": 8000, \"f_max\": 5000}"),
                 "ops[2].f_max: 5000 is above the Nyquist frequency 4000 of sample_rate 8000");
    expect_error(AUDIO_SPEC("{\"op\": \"decode_wav\"}, {\"op\": \"resample\"}"), "ops[1].rate: required");
    expect_error("{\"source\": {\"format\": \"wav_folder\", \"path\": \"/d\"}, \"ops\": [{\"op\": "
                 "\"decode_jpeg\"}], \"batch\": {\"size\": 8}}",
                 "source.format: \"wav_folder\" does not hold images (ops[0] is \"decode_jpeg\"; use image_folder or "
                 "tar_shards)");
}
END_TEST

START_TEST(test_spec_to_json_is_canonical_text)
{
    struct spw_pipeline_spec *s = parse_ok(EXAMPLE);
    char *j = spw_spec_to_json(s);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(
        j, "{\"source\": {\"format\": \"image_folder\", \"path\": \"DIR\", \"shuffle\": true, \"seed\": 7,"
           " \"epochs\": 1},\n"
           " \"ops\": [\n"
           "  {\"op\": \"decode_jpeg\", \"exif_transpose\": false},\n"
           "  {\"op\": \"random_resized_crop\", \"size\": [224, 224], \"scale\": [0.08, 1.0], \"ratio\": [0.75, "
           "1.3333333333333333], \"interpolation\": \"bilinear\", \"antialias\": true},\n"
           "  {\"op\": \"random_horizontal_flip\", \"p\": 0.5},\n"
           "  {\"op\": \"rand_augment\", \"num_ops\": 2, \"num_magnitude_bins\": 31, \"magnitude\": 9, "
           "\"interpolation\": \"nearest\", \"fill\": [0.0, 0.0, 0.0]},\n"
           "  {\"op\": \"normalize\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224, 0.225], \"dtype\": "
           "\"float32\"}\n"
           " ],\n"
           " \"batch\": {\"size\": 64, \"drop_remainder\": false, \"layout\": \"HWC\"},\n"
           " \"on_error\": \"skip\",\n"
           " \"max_pixels\": 89478485,\n"
           " \"max_file_bytes\": 67108864,\n"
           " \"max_samples\": 67108864}");
    free(j);
    spw_spec_free(s);
}
END_TEST

static Spillway__V1__Pipeline *wire_copy(const Spillway__V1__Pipeline *msg, uint8_t **buf)
{
    size_t n = spillway__v1__pipeline__get_packed_size(msg);
    *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(*buf);
    ck_assert_uint_eq(spillway__v1__pipeline__pack(msg, *buf), n);
    Spillway__V1__Pipeline *copy = spillway__v1__pipeline__unpack(NULL, n, *buf);
    ck_assert_ptr_nonnull(copy);
    return copy;
}

static void check_proto_round_trip(const char *text)
{
    struct spw_pipeline_spec *a = parse_ok(text), *b = NULL;
    Spillway__V1__Pipeline *msg = NULL;
    uint8_t *buf;
    char err[256] = "";
    ck_assert_int_eq(spw_spec_to_proto(a, &msg), 0);
    Spillway__V1__Pipeline *copy = wire_copy(msg, &buf);
    int rc = spw_spec_from_proto(copy, &b, err, sizeof(err));
    ck_assert_msg(rc == 0, "from_proto: %s", err);
    assert_spec_equal(a, b);
    spillway__v1__pipeline__free_unpacked(copy, NULL);
    spw_spec_proto_free(msg);
    free(buf);
    spw_spec_free(a);
    spw_spec_free(b);
}

START_TEST(test_spec_proto_round_trip)
{
    check_proto_round_trip(EXAMPLE);
    char *t = spec_text(ALL_OPS ", {\"op\": \"normalize\", \"mean\": [1, 2, 3], \"std\": [4, 5, 6]},"
                                " {\"op\": \"random_erasing\", \"value\": \"random\"},"
                                " {\"op\": \"random_erasing\", \"value\": 3}");
    check_proto_round_trip(t);
    free(t);
    t = spec_text(ALL_OPS ", {\"op\": \"to_tensor\", \"dtype\": \"float16\"}");
    check_proto_round_trip(t);
    free(t);
}
END_TEST

#define LABEL_KEY_SPEC(FORMAT, KEY)                                                                         \
    "{\"source\": {\"format\": \"" FORMAT "\", \"path\": \"/d/s-{0..9}.tar\", \"label_key\": " KEY "},"        \
    " \"ops\": [{\"op\": \"decode_jpeg\"}], \"batch\": {\"size\": 1}}"

START_TEST(test_spec_label_key_round_trips_and_is_only_for_tar)
{
    const char *text = LABEL_KEY_SPEC("tar_shards", "\"label\"");
    struct spw_pipeline_spec *s = parse_ok(text);
    ck_assert_str_eq(s->source.label_key, "label");
    spw_spec_free(s);
    check_json_round_trip(text);
    check_proto_round_trip(text);
    s = parse_ok(EXAMPLE);                          /* absent: NULL, and not in the canonical text */
    ck_assert_ptr_null(s->source.label_key);
    char *j = spw_spec_to_json(s);
    ck_assert_ptr_null(strstr(j, "label_key"));
    free(j);
    spw_spec_free(s);
    expect_error(LABEL_KEY_SPEC("image_folder", "\"label\""),
                 "source.label_key: only for tar_shards (it names a field of KEY.json members)");
    expect_error(LABEL_KEY_SPEC("tar_shards", "3"), "source.label_key: expected a string, got integer");
    expect_error(LABEL_KEY_SPEC("tar_shards", "\"\""), "source.label_key: 0 bytes, outside [1, 256]");
}
END_TEST

#define FIELDS_SPEC(FORMAT, SOURCE_MORE, BATCH_MORE)                                                       \
    "{\"source\": {\"format\": \"" FORMAT "\", \"path\": \"/d/s-{0..9}.tar\"" SOURCE_MORE "},"                   \
    " \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"                              \
    " {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1]}], \"batch\": {\"size\": 2" BATCH_MORE "}}"

/* source.labels and source.fields: parsed in order, written back only when set (older specs keep their
 * canonical text), carried by the proto form; what is wrong is named. */
START_TEST(test_spec_labels_and_fields)
{
    const char *text = FIELDS_SPEC("tar_shards", ", \"labels\": false, \"fields\": {\"caption\": {\"from\": \"txt\"},"
                                   " \"title\": {\"from\": \"json\", \"key\": \"title\"}, \"raw_meta\": "
                                   "{\"from\": \"Meta.JSON\", \"as\": \"raw\"}, \"mask\": {\"from\": \"seg.jpg\"}}", "");
    struct spw_pipeline_spec *s = parse_ok(text);
    ck_assert(s->source.no_labels);
    ck_assert_int_eq(s->source.n_fields, 4);
    ck_assert_str_eq(s->source.fields[0].name, "caption");
    ck_assert_int_eq(s->source.fields[0].kind, SPW_SAMPLE_FIELD_TEXT);
    ck_assert_ptr_null(s->source.fields[0].key);
    ck_assert_str_eq(s->source.fields[1].key, "title");
    ck_assert_int_eq(s->source.fields[2].kind, SPW_SAMPLE_FIELD_RAW);
    ck_assert_str_eq(s->source.fields[3].from, "seg.jpg");      /* a longer extension is not the media */
    spw_spec_free(s);
    check_json_round_trip(text);
    check_proto_round_trip(text);
    s = parse_ok(EXAMPLE);
    char *j = spw_spec_to_json(s);
    ck_assert_ptr_null(strstr(j, "labels"));
    ck_assert_ptr_null(strstr(j, "fields"));
    free(j);
    spw_spec_free(s);
    expect_error(FIELDS_SPEC("image_folder", ", \"fields\": {\"c\": {\"from\": \"txt\"}}", ""),
                 "source.fields.c.path: required for a folder source (the folder of each sample's file, under the "
                 "same relative name)");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\", \"path\": \"/x\"}}", ""),
                 "source.fields.c.path: only for folders (a tar_shards field is a member of the sample's key: "
                 "\"from\")");
    text = FIELDS_SPEC("image_folder", ", \"labels\": false, \"fields\": {\"m\": {\"from\": \"png\", \"path\": "
                       "\"/d/seg\", \"as\": \"mask\"}}", "");
    check_json_round_trip(text);                    /* a folder's mask: png as the images are */
    check_proto_round_trip(text);
    /* coco: annotations required and only there; one boxes field, "boxes" by default; no labels */
    s = parse_ok("{\"source\": {\"format\": \"coco\", \"path\": \"/c/img\", \"annotations\": \"/c/a.json\"}, "
                 "\"ops\": [{\"op\": \"decode_image\"}], \"batch\": {\"size\": 2}}");
    ck_assert(s->source.no_labels && s->source.n_fields == 1 && s->source.fields[0].kind == SPW_SAMPLE_FIELD_BOXES);
    ck_assert_str_eq(s->source.fields[0].name, "boxes");
    char *coco = spw_spec_to_json(s);
    spw_spec_free(s);
    check_json_round_trip(coco);
    check_proto_round_trip(coco);
    free(coco);
    expect_error("{\"source\": {\"format\": \"coco\", \"path\": \"/c/img\"}, \"ops\": [{\"op\": "
                 "\"decode_image\"}], \"batch\": {\"size\": 2}}",
                 "source.annotations: required for coco (the instances_*.json of the images in path)");
    expect_error("{\"source\": {\"format\": \"coco\", \"path\": \"/c/img\", \"annotations\": \"/a.json\", "
                 "\"labels\": true}, \"ops\": [{\"op\": \"decode_image\"}], \"batch\": {\"size\": 2}}",
                 "source.labels: a coco source has boxes, not a class per image (leave labels out)");
    expect_error("{\"source\": {\"format\": \"coco\", \"path\": \"/c/img\", \"annotations\": \"/a.json\", "
                 "\"fields\": {\"c\": {\"from\": \"txt\"}}}, \"ops\": [{\"op\": \"decode_image\"}], "
                 "\"batch\": {\"size\": 2}}",
                 "source.fields.c: a coco source's field is its boxes: {\"from\": \"annotations\", \"as\": \"boxes\"}");
    expect_error(FIELDS_SPEC("tar_shards", ", \"annotations\": \"/a.json\"", ""),
                 "source.annotations: only for coco (its instances_*.json)");
    expect_error("{\"source\": {\"format\": \"coco\", \"path\": \"/c/img\", \"annotations\": \"/a.json\"}, "
                 "\"ops\": [{\"op\": \"decode_wav\"}], \"batch\": {\"size\": 2}}",
                 "source.format: \"coco\" does not hold audio (ops[0] is \"decode_wav\"; use wav_folder or tar_shards)");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"labels\": {\"from\": \"txt\"}}", ""),
                 "source.fields: name \"labels\" is a batch part's own name (data, labels, lengths, viewN, "
                 "NAME_lengths, NAME_labels, NAME_counts)");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"a_lengths\": {\"from\": \"txt\"}}", ""),
                 "source.fields: name \"a_lengths\" is a batch part's own name (data, labels, lengths, viewN, "
                 "NAME_lengths, NAME_labels, NAME_counts)");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"1x\": {\"from\": \"txt\"}}", ""),
                 "source.fields: name \"1x\": use 1 to 32 of A-Z a-z 0-9 _, not starting with a digit");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {}}", ""),
                 "source.fields.c.from: required (the member's extension, e.g. \"txt\" for KEY.txt)");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \".txt\"}}", ""),
                 "source.fields.c.from: the extension after KEY., without a leading dot or a slash");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\", \"as\": \"box\"}}", ""),
                 "source.fields.c.as: \"box\" is not one of text, raw, mask, boxes");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\", \"key\": \"k\"}}", ""),
                 "source.fields.c.key: only for a .json member (from is \"txt\")");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\", \"size\": 1}}", ""),
                 "source.fields.c: unknown key \"size\"");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\"}, \"d\": {\"from\": \"TXT\"}}", ""),
                 "source.fields.d.from: \"TXT\" is field c's member too");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"jpg\"}}", ""),
                 "source.fields: field c: \"jpg\" members are the samples' own media (ops[0] \"decode_jpeg\")");
    /* masks: ignore_index, and the ops a mask cannot follow yet refused, naming them */
    s = parse_ok(FIELDS_SPEC("tar_shards", ", \"fields\": {\"seg\": {\"from\": \"seg.png\", \"as\": \"mask\"}}", ""));
    ck_assert_int_eq(s->source.fields[0].kind, SPW_SAMPLE_FIELD_MASK);
    ck_assert_int_eq(s->source.fields[0].ignore_index, 255);
    spw_spec_free(s);
    text = FIELDS_SPEC("tar_shards", ", \"fields\": {\"seg\": {\"from\": \"png\", \"as\": \"mask\", "
                       "\"ignore_index\": 0}}", "");
    check_json_round_trip(text);
    check_proto_round_trip(text);
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"txt\", \"ignore_index\": 3}}", ""),
                 "source.fields.c.ignore_index: only for a mask (\"as\": \"mask\")");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"m\": {\"from\": \"png\", \"as\": \"mask\", "
                             "\"ignore_index\": 256}}", ""),
                 "source.fields.m.ignore_index: 256 is outside [0, 255]");
    expect_error("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"m\": "
                 "{\"from\": \"png\", \"as\": \"mask\"}}}, \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": "
                 "\"rand_augment\"}], \"batch\": {\"size\": 2}}",
                 "ops[1]: \"rand_augment\" moves pixels in a way a mask (field m) cannot follow yet");
    expect_error("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"m\": "
                 "{\"from\": \"png\", \"as\": \"mask\"}}}, \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": "
                 "\"random_apply\", \"ops\": [{\"op\": \"invert\"}, {\"op\": \"horizontal_flip\"}]}], "
                 "\"batch\": {\"size\": 2}}",
                 "ops[1]: \"random_apply\" moves pixels in a way a mask (field m) cannot follow yet");
    s = parse_ok("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"m\": "
                 "{\"from\": \"png\", \"as\": \"mask\"}}}, \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": "
                 "\"random_apply\", \"ops\": [{\"op\": \"invert\"}]}], \"batch\": {\"size\": 2}}");
    spw_spec_free(s);                               /* photometric ones in a combinator: the mask stays */
    expect_error("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"m\": "
                 "{\"from\": \"png\", \"as\": \"mask\"}}}, \"ops\": [{\"op\": \"decode_wav\"}], "
                 "\"batch\": {\"size\": 2}}",
                 "source.fields: field m: a mask is for image pipelines");
    expect_error("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"m\": "
                 "{\"from\": \"png\", \"as\": \"mask\"}}}, \"ops\": [{\"op\": \"decode_jpeg\"}], \"views\": "
                 "[{\"ops\": [{\"op\": \"center_crop\", \"size\": 8}]}], \"batch\": {\"size\": 2}}",
                 "views: not with a mask field (m) yet");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"m\": {\"from\": \"png\", \"as\": \"mask\"}}",
                             ", \"mix\": {\"num_classes\": 10, \"mixup_alpha\": 0.2}"),
                 "batch.mix: not with a mask field (m)");
    /* boxes: the .json's list and ids (defaults "boxes", "labels"), xyxy or xywh, min_size */
    s = parse_ok(FIELDS_SPEC("tar_shards", ", \"fields\": {\"b\": {\"from\": \"json\", \"as\": \"boxes\"}}", ""));
    ck_assert_int_eq(s->source.fields[0].kind, SPW_SAMPLE_FIELD_BOXES);
    ck_assert_str_eq(s->source.fields[0].key, "boxes");
    ck_assert_str_eq(s->source.fields[0].labels_key, "labels");
    ck_assert_int_eq(s->source.fields[0].box_format, SPW_BOX_XYXY);
    ck_assert(s->source.fields[0].min_size == 0);
    spw_spec_free(s);
    text = FIELDS_SPEC("tar_shards", ", \"fields\": {\"b\": {\"from\": \"ann.json\", \"as\": \"boxes\", \"key\": "
                       "\"bbox\", \"labels_key\": \"category_id\", \"format\": \"xywh\", \"min_size\": 2.5}}", "");
    check_json_round_trip(text);
    check_proto_round_trip(text);
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"b\": {\"from\": \"txt\", \"as\": \"boxes\"}}", ""),
                 "source.fields.b.from: boxes come from a .json member, not \"txt\"");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"c\": {\"from\": \"json\", \"format\": \"xywh\"}}", ""),
                 "source.fields.c: \"format\" is for boxes (\"as\": \"boxes\")");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"b\": {\"from\": \"json\", \"as\": \"boxes\", "
                             "\"format\": \"cxcywh\"}}", ""),
                 "source.fields.b.format: \"cxcywh\" is not one of xyxy, xywh");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"b\": {\"from\": \"json\", \"as\": \"boxes\", "
                             "\"min_size\": -1}}", ""),
                 "source.fields.b.min_size: -1 is outside [0, 1000000]");
    expect_error(FIELDS_SPEC("tar_shards", ", \"fields\": {\"b_counts\": {\"from\": \"json\"}}", ""),
                 "source.fields: name \"b_counts\" is a batch part's own name (data, labels, lengths, viewN, "
                 "NAME_lengths, NAME_labels, NAME_counts)");
    expect_error("{\"source\": {\"format\": \"tar_shards\", \"path\": \"/d/s.tar\", \"fields\": {\"b\": "
                 "{\"from\": \"json\", \"as\": \"boxes\"}}}, \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": "
                 "\"elastic_transform\"}], \"batch\": {\"size\": 2}}",
                 "ops[1]: \"elastic_transform\" moves pixels in a way boxes (field b) cannot follow yet");
    expect_error(FIELDS_SPEC("tar_shards", ", \"labels\": false, \"label_key\": \"l\"", ""),
                 "source.label_key: is for labels, and source.labels is false");
    expect_error(FIELDS_SPEC("tar_shards", ", \"labels\": 0", ""), "source.labels: expected a boolean, got integer");
    expect_error(FIELDS_SPEC("tar_shards", ", \"labels\": false", ", \"mix\": {\"num_classes\": 10, \"mixup_alpha\": 0.2}"),
                 "batch.mix: mixes labels, and source.labels is false");
}
END_TEST

static void expect_proto_error(const Spillway__V1__Pipeline *msg, const char *want);

/* A peer's fields on the wire: a name given twice or not UTF-8 is refused before the JSON rules run. */
START_TEST(test_spec_fields_from_proto)
{
    Spillway__V1__Pipeline *msg = NULL;
    struct spw_pipeline_spec *s = parse_ok(FIELDS_SPEC("tar_shards", ", \"fields\": {\"a\": {\"from\": \"txt\"},"
                                                       " \"b\": {\"from\": \"json\"}}", ""));
    ck_assert_int_eq(spw_spec_to_proto(s, &msg), 0);
    spw_spec_free(s);
    ck_assert_int_eq((int)msg->source->n_fields, 2);
    char *saved = msg->source->fields[1]->name;
    msg->source->fields[1]->name = (char *)"a";
    expect_proto_error(msg, "source.fields[1]: a name given twice");
    msg->source->fields[1]->name = (char *)"\xc3\x28";
    expect_proto_error(msg, "source.fields[1]: not valid UTF-8");
    msg->source->fields[1]->name = saved;
    msg->source->fields[1]->as = (Spillway__V1__FieldKind)7;
    expect_proto_error(msg, "source.fields.b.as: \"7\" is not one of text, raw, mask, boxes");
    spw_spec_proto_free(msg);
}
END_TEST

/* A hand-built message: absent fields take the JSON defaults, and the JSON rules (and messages) apply. */
START_TEST(test_spec_from_proto_validates_like_json)
{
    Spillway__V1__Source src = SPILLWAY__V1__SOURCE__INIT;
    Spillway__V1__Batch batch = SPILLWAY__V1__BATCH__INIT;
    Spillway__V1__Op decode = SPILLWAY__V1__OP__INIT, flip = SPILLWAY__V1__OP__INIT;
    Spillway__V1__Op *ops[2] = {&decode, &flip};
    Spillway__V1__Pipeline msg = SPILLWAY__V1__PIPELINE__INIT;
    struct spw_pipeline_spec *s = NULL;
    char err[256] = "";

    src.opt_format_case = SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT;
    src.format = SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_TAR_SHARDS;
    src.path = (char *)"/s/*.tar";
    batch.opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE;
    batch.size = 4;
    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_HORIZONTAL_FLIP;
    msg.source = &src, msg.batch = &batch, msg.ops = ops, msg.n_ops = 2;

    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), 0);
    ck_assert_double_eq(s->ops[1].p, 0.5);
    ck_assert(s->source.shuffle);
    ck_assert_int_eq(s->source.epochs, 1);
    ck_assert_int_eq(s->max_pixels, 89478485);
    spw_spec_free(s);
    s = NULL;

    flip.opt_p_case = SPILLWAY__V1__OP__OPT_P_P, flip.p = 2;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].p: 2 is outside [0, 1]");

    flip.opt_p_case = SPILLWAY__V1__OP__OPT_P__NOT_SET;
    flip.opt_bits_case = SPILLWAY__V1__OP__OPT_BITS_BITS, flip.bits = 3;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1]: unknown field \"bits\" for \"random_horizontal_flip\"");

    flip.opt_bits_case = SPILLWAY__V1__OP__OPT_BITS__NOT_SET;
    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_RAND_AUGMENT;
    flip.opt_magnitude_case = SPILLWAY__V1__OP__OPT_MAGNITUDE_MAGNITUDE, flip.magnitude = 40;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].magnitude: 40 is outside [0, 30]");

    flip.opt_magnitude_case = SPILLWAY__V1__OP__OPT_MAGNITUDE__NOT_SET;
    flip.op = (Spillway__V1__OpKind)99;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1]: unknown op \"99\"");

    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_RESIZE;
    int32_t size[1] = {224};
    flip.size = size, flip.n_size = 1;
    flip.opt_interpolation_case = SPILLWAY__V1__OP__OPT_INTERPOLATION_INTERPOLATION;
    flip.interpolation = (Spillway__V1__Interpolation)7;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].interpolation: \"7\" is not one of nearest, bilinear, bicubic");
    flip.opt_interpolation_case = SPILLWAY__V1__OP__OPT_INTERPOLATION__NOT_SET;

    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_INVERT;
    flip.size = NULL, flip.n_size = 0;
    decode.op = SPILLWAY__V1__OP_KIND__OP_KIND_INVERT;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[0]: \"decode_jpeg\" must come before image ops");
    decode.op = SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_JPEG;

    src.opt_seed_case = SPILLWAY__V1__SOURCE__OPT_SEED_SEED, src.seed = UINT64_MAX;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "source.seed: 18446744073709551615 is outside [0, 9223372036854775807]");
    src.opt_seed_case = SPILLWAY__V1__SOURCE__OPT_SEED__NOT_SET;

    src.path = (char *)"/s/\xff.tar";
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "source.path: not valid UTF-8");
    src.path = (char *)"";
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "source.path: required");
    src.path = (char *)"/s/*.tar";

    msg.batch = NULL;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "batch: required");
    msg.batch = &batch;

    batch.opt_layout_case = SPILLWAY__V1__BATCH__OPT_LAYOUT_LAYOUT;
    batch.layout = SPILLWAY__V1__LAYOUT__LAYOUT_CHW;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(s->batch.layout, SPW_LAYOUT_CHW);
    spw_spec_free(s);
    s = NULL;

    /* the "one value is the scalar form" rule: fill [5] and brightness [0.4] */
    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_COLOR_JITTER;
    double bright[1] = {0.4};
    flip.brightness = bright, flip.n_brightness = 1;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), 0);
    ck_assert_double_eq(s->ops[1].brightness[0], 1.0 - 0.4);
    ck_assert_double_eq(s->ops[1].brightness[1], 1.0 + 0.4);
    spw_spec_free(s);
    s = NULL;
    flip.brightness = NULL, flip.n_brightness = 0;

    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_NORMALIZE;
    double mean[3] = {0, 0, 0}, std[3] = {1, INFINITY, 1};
    flip.mean = mean, flip.n_mean = 3, flip.std = std, flip.n_std = 3;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].std[1]: inf is not a finite number");
    flip.opt_p_case = SPILLWAY__V1__OP__OPT_P_P, flip.p = NAN;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].p: nan is not a finite number");
    flip.opt_p_case = SPILLWAY__V1__OP__OPT_P__NOT_SET;
    flip.mean = flip.std = NULL, flip.n_mean = flip.n_std = 0;

    flip.op = SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_ERASING;
    double val[3] = {1, 2, 3};
    flip.value = val, flip.n_value = 3;
    flip.opt_value_random_case = SPILLWAY__V1__OP__OPT_VALUE_RANDOM_VALUE_RANDOM, flip.value_random = 1;
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1].value: value_random and value are both set");

    msg.n_ops = SPW_SPEC_MAX_OPS + 1; /* refused before ops are read */
    ck_assert_int_eq(spw_spec_from_proto(&msg, &s, err, sizeof(err)), SPW_ESPEC);
    ck_assert_str_eq(err, "ops: 257 ops, more than the cap of 256");
    ck_assert_ptr_null(s);
}
END_TEST

/* ---- files ---------------------------------------------------------------------------------------- */

START_TEST(test_spec_load_file)
{
    char path[] = "/tmp/check_spec_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs(EXAMPLE, f);
    fclose(f);
    struct spw_pipeline_spec *s = NULL;
    char err[256] = "", want[300];
    ck_assert_int_eq(spw_spec_load_file(path, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(s->n_ops, 5);
    spw_spec_free(s);
    s = NULL;

    f = fopen(path, "w");
    fputs("{\n \"ops\": [}", f);
    fclose(f);
    ck_assert_int_eq(spw_spec_load_file(path, &s, err, sizeof(err)), SPW_ESPEC);
    snprintf(want, sizeof(want), "%s:2:10: unexpected token near '}'", path);
    ck_assert_str_eq(err, want);

    f = fopen(path, "w");
    fputs("{\"ops\": []}", f);
    fclose(f);
    ck_assert_int_eq(spw_spec_load_file(path, &s, err, sizeof(err)), SPW_ESPEC);
    snprintf(want, sizeof(want), "%s: source: required", path);
    ck_assert_str_eq(err, want);

    f = fopen(path, "w");
    for (int i = 0; i < (SPW_SPEC_MAX_JSON_BYTES >> 4) + 1; i++)
        fputs("                ", f);
    fclose(f);
    ck_assert_int_eq(spw_spec_load_file(path, &s, err, sizeof(err)), SPW_ESPEC);
    snprintf(want, sizeof(want), "%s: larger than the cap of 1048576 bytes", path);
    ck_assert_str_eq(err, want);

    unlink(path);
    ck_assert_int_eq(spw_spec_load_file(path, &s, err, sizeof(err)), -ENOENT);
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(s);
}
END_TEST

START_TEST(test_spec_names)
{
    ck_assert_str_eq(spw_op_name(SPW_OP_DECODE_JPEG), "decode_jpeg");
    ck_assert_str_eq(spw_op_name(SPW_OP_TO_TENSOR), "to_tensor");
    ck_assert_ptr_null(spw_op_name(SPW_OP_COUNT));
    ck_assert_ptr_null(spw_op_name((enum spw_op_kind)-1));
    ck_assert_str_eq(spw_interp_name(SPW_INTERP_BICUBIC), "bicubic");
    ck_assert_str_eq(spw_dtype_name(SPW_DTYPE_F16), "float16");
    ck_assert_str_eq(spw_layout_name(SPW_LAYOUT_CHW), "CHW");
    ck_assert_str_eq(spw_source_format_name(SPW_SOURCE_TAR_SHARDS), "tar_shards");
    ck_assert_str_eq(spw_on_error_name(SPW_ON_ERROR_FAIL), "fail");
    ck_assert_str_eq(spw_aa_policy_name(SPW_AA_IMAGENET), "imagenet");
    ck_assert_ptr_null(spw_aa_policy_name((enum spw_aa_policy)1));
    /* the proto enums mirror the C ones */
    ck_assert_int_eq(SPILLWAY__V1__OP_KIND__OP_KIND_TO_TENSOR, SPW_OP_TO_TENSOR);
    ck_assert_int_eq(SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_ERASING, SPW_OP_RANDOM_ERASING);
    ck_assert_int_eq(SPILLWAY__V1__INTERPOLATION__INTERPOLATION_BICUBIC, SPW_INTERP_BICUBIC);
    ck_assert_int_eq(SPILLWAY__V1__DTYPE__DTYPE_INT64, SPW_DTYPE_I64);
    ck_assert_int_eq(SPILLWAY__V1__LAYOUT__LAYOUT_CHW, SPW_LAYOUT_CHW);
    ck_assert_int_eq(SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_TAR_SHARDS, SPW_SOURCE_TAR_SHARDS);
    ck_assert_int_eq(SPILLWAY__V1__ON_ERROR__ON_ERROR_FAIL, SPW_ON_ERROR_FAIL);
}
END_TEST

/* ---- hostile input -------------------------------------------------------------------------------- */

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Whatever comes back must be either a clean error with a message or a spec that round-trips. */
static void parse_any(const char *text)
{
    struct spw_pipeline_spec *s = NULL;
    char err[256] = "";
    int rc = spw_spec_parse_json(text, &s, err, sizeof(err));
    if (rc == 0) {
        char *j = spw_spec_to_json(s);
        ck_assert_ptr_nonnull(j);
        struct spw_pipeline_spec *t = parse_ok(j);
        assert_spec_equal(s, t);
        spw_spec_free(t);
        free(j);
        spw_spec_free(s);
    } else {
        ck_assert_int_eq(rc, SPW_ESPEC);
        ck_assert(err[0] != '\0');
        ck_assert_ptr_null(s);
    }
}

START_TEST(test_spec_truncated_and_mutated_inputs_never_crash)
{
    char *full = spec_text(ALL_OPS ", {\"op\": \"normalize\", \"mean\": [1, 2, 3], \"std\": [4, 5, 6]},"
                                   " {\"op\": \"random_erasing\", \"value\": \"random\"}");
    size_t n = strlen(full);
    char *buf = malloc(n + 1);
    ck_assert_ptr_nonnull(buf);
    for (size_t k = 0; k < n; k++) { /* every prefix */
        memcpy(buf, full, k);
        buf[k] = '\0';
        parse_any(buf);
    }
    static const char alphabet[] = "{}[],:\"0123456789.-eE+ truefalsnul\\xyz";
    static const char *const tokens[] = {"0", "-1", "1e308", "null", "[]", "{}", "\"\"", "\"random\"", "true",
                                         "[0, 0]", "9999999999", "0.5", "[1, 2, 3]", "\"x\""};
    uint64_t seed = 12345;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, full, n + 1);
        int edits = 1 + (int)(lcg(&seed) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = lcg(&seed) % n;
            switch (lcg(&seed) % 3) {
            case 0: buf[at] = alphabet[lcg(&seed) % (sizeof(alphabet) - 1)]; break;
            case 1: buf[at] = (char)(lcg(&seed) & 0xff ? lcg(&seed) & 0xff : 1); break;
            default: { /* replace the value after a ':' with a token, keeping the length sane */
                char *colon = strchr(buf + at, ':');
                if (!colon)
                    break;
                char *end = colon + 1;
                while (*end && *end != ',' && *end != '}')
                    end++;
                const char *tok = tokens[lcg(&seed) % (sizeof(tokens) / sizeof(tokens[0]))];
                size_t tl = strlen(tok), old = (size_t)(end - colon - 1);
                if (tl + 1 > old)
                    break;
                memcpy(colon + 1, tok, tl);
                memset(colon + 1 + tl, ' ', old - tl);
            }
            }
        }
        parse_any(buf);
    }
    free(buf);
    free(full);
}
END_TEST

/* Bytes after n ops of a spec with these ops, or -1 when the spec does not fix them. */
static int64_t fixed_bytes(const char *ops, int n_ops, int *op)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\"}, \"ops\": %s, "
             "\"batch\": {\"size\": 2}}", ops);
    struct spw_pipeline_spec *spec;
    char err[256];
    ck_assert_msg(spw_spec_parse_json(json, &spec, err, sizeof err) == 0, "%s", err);
    int64_t bytes = -1;
    if (!spw_element_fixed_bytes(spec, n_ops, &bytes, op))
        bytes = -1;
    spw_spec_free(spec);
    return bytes;
}

START_TEST(test_spec_fixed_element_bytes_follow_crops_resizes_and_dtypes)
{
    int op = -1;
    const char *train = "[{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": 224}, "
                        "{\"op\": \"rand_augment\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5], "
                        "\"std\": [0.5, 0.5, 0.5], \"dtype\": \"float16\"}]";
    ck_assert_int_eq(fixed_bytes(train, 0, &op), -1);
    ck_assert_int_eq(fixed_bytes(train, 1, &op), -1);              /* decoded: the file's size */
    ck_assert_int_eq(fixed_bytes(train, 2, &op), 224 * 224 * 3);
    ck_assert_int_eq(op, 1);
    ck_assert_int_eq(fixed_bytes(train, 3, &op), 224 * 224 * 3);   /* augmentations keep the size */
    ck_assert_int_eq(fixed_bytes(train, 4, &op), 224 * 224 * 3 * 2);
    ck_assert_int_eq(op, 3);
    ck_assert_int_eq(fixed_bytes("[{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 256}]", 2, &op), -1);
    ck_assert_int_eq(fixed_bytes("[{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": [30, 40]}, "
                                 "{\"op\": \"to_tensor\"}]", 3, &op), 30 * 40 * 3 * 4);
    ck_assert_int_eq(fixed_bytes("[{\"op\": \"decode_jpeg\"}, {\"op\": \"crop\", \"top\": 0, \"left\": 0, "
                                 "\"height\": 5, \"width\": 7}, {\"op\": \"rotate\", \"angle\": 30}]", 3, &op),
                     5 * 7 * 3);
    /* pad adds its sides to a known size; after an unknown one nothing is fixed */
    ck_assert_int_eq(fixed_bytes("[{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": [30, 40]}, "
                                 "{\"op\": \"pad\", \"padding\": [1, 2, 3, 4]}]", 3, &op), (30 + 6) * (40 + 4) * 3);
    ck_assert_int_eq(op, 2);
    ck_assert_int_eq(fixed_bytes("[{\"op\": \"decode_jpeg\"}, {\"op\": \"pad\", \"padding\": 4}]", 2, &op), -1);
    /* a python op fixes what it declares, shape and dtype both: an image again, or a tensor */
    const char *user = "[{\"op\": \"decode_jpeg\"}, {\"op\": \"python\", \"function\": \"m:f\", \"output_shape\": "
                       "[20, 30, 3], \"output_dtype\": \"uint8\"}, {\"op\": \"horizontal_flip\"}, "
                       "{\"op\": \"to_tensor\"}, "
                       "{\"op\": \"python\", \"function\": \"m:g\", \"output_shape\": [10, 7], \"output_dtype\": "
                       "\"float16\"}, {\"op\": \"python\", \"function\": \"m:h\", \"output_shape\": [4]}]";
    ck_assert_int_eq(fixed_bytes(user, 2, &op), 20 * 30 * 3);
    ck_assert_int_eq(op, 1);
    ck_assert_int_eq(fixed_bytes(user, 4, &op), 20 * 30 * 3 * 4);
    ck_assert_int_eq(fixed_bytes(user, 5, &op), 10 * 7 * 2);
    ck_assert_int_eq(op, 4);
    ck_assert_int_eq(fixed_bytes(user, 6, &op), -1);              /* a shape without a dtype fixes nothing */
}
END_TEST

START_TEST(test_spec_mutated_proto_never_crashes)
{
    char *t = spec_text(ALL_OPS ", {\"op\": \"normalize\", \"mean\": [1, 2, 3], \"std\": [4, 5, 6]},"
                                " {\"op\": \"random_erasing\", \"value\": [1, 2, 3]}");
    struct spw_pipeline_spec *a = parse_ok(t);
    Spillway__V1__Pipeline *msg = NULL;
    ck_assert_int_eq(spw_spec_to_proto(a, &msg), 0);
    size_t n = spillway__v1__pipeline__get_packed_size(msg);
    uint8_t *wire = malloc(n), *buf = malloc(n);
    ck_assert_ptr_nonnull(wire);
    ck_assert_ptr_nonnull(buf);
    spillway__v1__pipeline__pack(msg, wire);
    uint64_t seed = 99;
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, wire, n);
        size_t len = iter % 4 == 0 ? lcg(&seed) % n : n; /* truncated, or ... */
        for (int e = 0, edits = 1 + (int)(lcg(&seed) % 3); e < edits && iter % 4; e++)
            buf[lcg(&seed) % n] ^= (uint8_t)(1u << (lcg(&seed) % 8)); /* ... bit flips */
        Spillway__V1__Pipeline *m = spillway__v1__pipeline__unpack(NULL, len, buf);
        if (!m)
            continue;
        struct spw_pipeline_spec *s = NULL;
        char err[256] = "";
        int rc = spw_spec_from_proto(m, &s, err, sizeof(err));
        if (rc == 0) {
            accepted++;
            Spillway__V1__Pipeline *again = NULL;
            ck_assert_int_eq(spw_spec_to_proto(s, &again), 0);
            spw_spec_proto_free(again);
            spw_spec_free(s);
        } else {
            ck_assert_int_eq(rc, SPW_ESPEC);
            ck_assert(err[0] != '\0');
        }
        spillway__v1__pipeline__free_unpacked(m, NULL);
    }
    ck_assert_int_gt(accepted, 0); /* the loop did reach the validator's success path */
    free(wire);
    free(buf);
    spw_spec_proto_free(msg);
    spw_spec_free(a);
    free(t);
}
END_TEST


/* The proto's Op mirrors the op registry: OpKind value k is OP_KIND_<NAME of op k>, every field of every op
 * (but a combinator's `ops`, which follow it as Op.children) is a member of Op, and every member of Op
 * (besides `op`, the value_random form of `value`, a plugin op's `name` and `params`, `children`,
 * random_choice's `weights`, padding's sides, several min_size and elastic_transform's alpha pair) is some op's
 * field. A registry change the proto does not follow fails here. */
START_TEST(test_spec_proto_op_mirrors_registry)
{
    const ProtobufCMessageDescriptor *msg = &spillway__v1__op__descriptor;
    const ProtobufCEnumDescriptor *kinds = &spillway__v1__op_kind__descriptor;
    ck_assert_uint_eq(kinds->n_values, SPW_OP_COUNT);
    for (int k = 0; k < SPW_OP_COUNT; k++) {
        const struct spw_op_def *d = spw_op_def((enum spw_op_kind)k);
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(kinds, k);
        char want[64] = "OP_KIND_";
        for (size_t i = 0, o = 8; d->name[i] && o < 60; i++)     /* "<plugin>": OP_KIND_PLUGIN */
            if (d->name[i] != '<' && d->name[i] != '>')
                want[o++] = (char)(d->name[i] >= 'a' && d->name[i] <= 'z' ? d->name[i] - 32 : d->name[i]);
        ck_assert_msg(v && !strcmp(v->name, want), "OpKind %d is %s, the registry's op %s", k, v ? v->name : "none",
                      d->name);
        for (const struct spw_op_field *f = d->fields; f->name; f++)    /* a combinator's ops: Op.children */
            ck_assert_msg(f->kind == SPW_FK_OPS || protobuf_c_message_descriptor_get_field_by_name(msg, f->name),
                          "the proto's Op has no field %s (op %s)", f->name, d->name);
    }
    for (unsigned i = 0; i < msg->n_fields; i++) {
        const char *name = msg->fields[i].name;
        bool used = !strcmp(name, "op") || !strcmp(name, "value_random") || !strcmp(name, "name") ||
                    !strcmp(name, "params") ||      /* a plugin op's name and fields */
                    !strcmp(name, "children") || !strcmp(name, "weights") ||  /* a combinator's ops, choice's p */
                    !strcmp(name, "padding_sides") ||   /* padding whose sides differ */
                    !strcmp(name, "min_sizes") ||       /* random_shortest_size's several min_size */
                    !strcmp(name, "alpha_xy");          /* elastic_transform's alpha pair (aug_mix's: a number) */
        for (int k = 0; !used && k < SPW_OP_COUNT; k++)
            for (const struct spw_op_field *f = spw_op_def((enum spw_op_kind)k)->fields; !used && f->name; f++)
                used = !strcmp(f->name, name);
        ck_assert_msg(used, "the proto's Op has a field %s that no op of the registry has", name);
    }
}
END_TEST


/* from_proto on msg must fail with exactly this message. */
static void expect_proto_error(const Spillway__V1__Pipeline *msg, const char *want)
{
    struct spw_pipeline_spec *s = NULL;
    char err[256] = "";
    ck_assert_int_eq(spw_spec_from_proto(msg, &s, err, sizeof err), SPW_ESPEC);
    ck_assert_str_eq(err, want);
}

/* The combinators: what may be nested, how deep, how many, random_choice's weights; and on the wire, where a
 * combinator's ops follow it in the flat list (Op.children), a peer's counts that do not fit are refused
 * before anything is nested. */
START_TEST(test_spec_combinators)
{
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_apply\", \"ops\": [{\"op\": \"invert\"},"
                     " {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1]}]}",
                     "ops[1].ops[1]: \"normalize\" cannot be one of random_apply's ops: only image ops that keep the "
                     "image's size (colour ops, flips, warps, policies, combinators) can");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_order\", \"ops\": {\"op\": \"invert\"}}",
                     "ops[1].ops: expected an array of ops, got object");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_apply\"}", "ops[1].ops: required");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_choice\", \"ops\": [{\"op\": \"invert\"},"
                     " {\"op\": \"equalize\"}], \"p\": [1]}", "ops[1].p: 1 weights for 2 ops: one per op");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_choice\", \"ops\": [{\"op\": \"invert\"}],"
                     " \"p\": [-1]}", "ops[1].p[0]: -1 must be >= 0");
    expect_ops_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_apply\", \"ops\": [{\"op\": \"random_apply\","
                     " \"ops\": [{\"op\": \"random_apply\", \"ops\": [{\"op\": \"random_apply\", \"ops\":"
                     " [{\"op\": \"invert\"}]}]}]}]}",
                     "ops[1].ops[0].ops[0].ops[0].ops: combinators nested more than 4 deep");
    /* 17 ops in one combinator; 256 in all */
    char ops[8192] = "{\"op\": \"decode_jpeg\"}, {\"op\": \"random_order\", \"ops\": [{\"op\": \"invert\"}";
    for (int k = 1; k < 17; k++)
        strcat(ops, ", {\"op\": \"invert\"}");
    strcat(ops, "]}");
    expect_ops_error(ops, "ops[1].ops: 17 ops: give 1 to 16");
    char *many = calloc(1, 64 * 1024);
    ck_assert_ptr_nonnull(many);
    strcat(many, "{\"op\": \"decode_jpeg\"}");
    for (int c = 0; c < 16; c++) {      /* 1 + 16 x (1 + 15) = 257 */
        strcat(many, ", {\"op\": \"random_order\", \"ops\": [{\"op\": \"invert\"}");
        for (int k = 1; k < 15; k++)
            strcat(many, ", {\"op\": \"invert\"}");
        strcat(many, "]}");
    }
    expect_ops_error(many, "ops[16].ops: more than 256 ops in all, a combinator's counted too");
    free(many);

    /* On the wire: a valid nested spec flattens depth first, then hostile counts. */
    char *t = spec_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"random_apply\", \"ops\": [{\"op\": \"random_order\","
                        " \"ops\": [{\"op\": \"invert\"}, {\"op\": \"equalize\"}]}, {\"op\": \"autocontrast\"}]}");
    struct spw_pipeline_spec *a = parse_ok(t);
    Spillway__V1__Pipeline *msg = NULL;
    ck_assert_int_eq(spw_spec_to_proto(a, &msg), 0);
    ck_assert_uint_eq(msg->n_ops, 6);
    ck_assert_int_eq(msg->ops[1]->children, 2);
    ck_assert_int_eq(msg->ops[2]->op, SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_ORDER);
    ck_assert_int_eq(msg->ops[2]->children, 2);
    ck_assert_int_eq(msg->ops[5]->op, SPILLWAY__V1__OP_KIND__OP_KIND_AUTOCONTRAST);
    msg->ops[1]->children = 3;          /* its ops' own ops take what would be its third */
    expect_proto_error(msg, "ops[1].children: 3, but the list ends after 2 of them");
    msg->ops[1]->children = 0;
    expect_proto_error(msg, "ops[1].children: 0: a combinator has 1 to 16 ops, nested at most 4 deep, and they "
                            "must follow it (4 do)");
    msg->ops[1]->children = 2;
    msg->ops[2]->children = 9;
    expect_proto_error(msg, "ops[2].children: 9: a combinator has 1 to 16 ops, nested at most 4 deep, and they "
                            "must follow it (3 do)");
    msg->ops[2]->children = 2;
    for (int k = 1; k < 5; k++) {       /* a chain: each op the one child of the one before, 5 deep */
        msg->ops[k]->op = SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_APPLY;
        msg->ops[k]->opt_children_case = SPILLWAY__V1__OP__OPT_CHILDREN_CHILDREN;
        msg->ops[k]->children = 1;
    }
    msg->ops[5]->op = SPILLWAY__V1__OP_KIND__OP_KIND_INVERT;
    expect_proto_error(msg, "ops[4].children: 1: a combinator has 1 to 16 ops, nested at most 4 deep, and they "
                            "must follow it (1 do)");
    spw_spec_proto_free(msg);
    spw_spec_free(a);
    free(t);
}
END_TEST

/* batch.mix: its fields, defaults and errors; JSON and proto round trips; absent from specs without it. */
START_TEST(test_spec_batch_mix)
{
#define MIXSPEC(OPS, MIX)                                                                                  \
    "{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\"}, \"ops\": [{\"op\": \"decode_jpeg\"}" OPS "],"   \
    " \"batch\": {\"size\": 8, \"mix\": " MIX "}}"
#define NORM                                                                                               \
    ", {\"op\": \"center_crop\", \"size\": 8}, {\"op\": \"normalize\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1]}"
    const char *ok = MIXSPEC(NORM, "{\"num_classes\": 1000, \"mixup_alpha\": 0.2, \"cutmix_alpha\": 1}");
    struct spw_pipeline_spec *s = parse_ok(ok);
    ck_assert_int_eq(s->batch.mix.num_classes, 1000);
    ck_assert_double_eq(s->batch.mix.p, 1.0);
    ck_assert_double_eq(s->batch.mix.switch_prob, 0.5);
    spw_spec_free(s);
    check_json_round_trip(ok);
    check_proto_round_trip(ok);
    check_proto_round_trip(MIXSPEC(NORM, "{\"num_classes\": 3, \"cutmix_alpha\": 0.5, \"p\": 0.25,"
                                         " \"switch_prob\": 0}"));
    char *j = spw_spec_to_json(s = parse_ok(EXAMPLE));
    ck_assert_ptr_null(strstr(j, "\"mix\""));
    free(j);
    spw_spec_free(s);
    expect_error(MIXSPEC(NORM, "{\"mixup_alpha\": 1}"), "batch.mix.num_classes: required");
    expect_error(MIXSPEC(NORM, "{\"num_classes\": 10}"),
                 "batch.mix: mixup_alpha and cutmix_alpha are both 0: set one above 0 (or drop \"mix\")");
    expect_error(MIXSPEC(NORM, "{\"num_classes\": 10, \"mixup_alpha\": 1, \"cut\": 1}"),
                 "batch.mix: unknown key \"cut\"");
    expect_error(MIXSPEC(NORM, "{\"num_classes\": 10, \"mixup_alpha\": 1, \"p\": 2}"),
                 "batch.mix.p: 2 is outside [0, 1]");
    expect_error(MIXSPEC(", {\"op\": \"center_crop\", \"size\": 8}", "{\"num_classes\": 10, \"mixup_alpha\": 1}"),
                 "batch.mix: needs float32 image tensors: end an image pipeline with normalize or to_tensor "
                 "(dtype float32) and no python op after them, as RandomMixup and RandomCutmix do");
    expect_error(MIXSPEC(", {\"op\": \"to_tensor\", \"dtype\": \"float16\"}",
                         "{\"num_classes\": 10, \"mixup_alpha\": 1}"),
                 "batch.mix: needs float32 image tensors: end an image pipeline with normalize or to_tensor "
                 "(dtype float32) and no python op after them, as RandomMixup and RandomCutmix do");
#undef NORM
#undef MIXSPEC
}
END_TEST

/* The python op: its fields round-trip through JSON and the proto (kwargs as canonical JSON), and the names a
 * helper could not import, kwargs that are not an object and unknown plugin ops are refused by name. */
START_TEST(test_spec_python_op)
{
    char *t = spec_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"python\", \"function\": \"pkg.aug:Stamp.run\","
                        " \"kwargs\": {\"z\": [1, 2], \"a\": {\"b\": null}}, \"timeout_s\": 2.5,"
                        " \"output_shape\": [7], \"output_dtype\": \"int64\"},"
                        " {\"op\": \"python\", \"function\": \"m:f\", \"output_shape\": [2, 3, 4]},"
                        " {\"op\": \"to_tensor\"}");
    check_json_round_trip(t);
    check_proto_round_trip(t);
    struct spw_pipeline_spec *s = NULL;
    char err[256];
    ck_assert_int_eq(spw_spec_parse_json(t, &s, err, sizeof err), 0);
    ck_assert_str_eq(s->ops[1].function, "pkg.aug:Stamp.run");
    ck_assert_str_eq(s->ops[1].kwargs, "{\"a\":{\"b\":null},\"z\":[1,2]}");
    ck_assert(s->ops[1].timeout_s == 2.5 && s->ops[2].timeout_s == 60);
    ck_assert(s->ops[1].out_ndim == 1 && s->ops[1].out_shape[0] == 7 && s->ops[1].has_out_dtype &&
              s->ops[1].out_dtype == SPW_DTYPE_I64);
    ck_assert(s->ops[2].out_ndim == 3 && s->ops[2].out_shape[2] == 4 && !s->ops[2].has_out_dtype);
    spw_spec_free(s);
    free(t);
    static const char *const bad[][2] = {
        {"\"function\": \"mod:<lambda>\"",
         "ops[1].function: \"mod:<lambda>\" is a lambda or a nested function, which workers cannot import: define "
         "it at module level in a module on their Python path"},
        {"\"function\": \"__main__:f\"",
         "ops[1].function: \"__main__:f\" is defined in the script being run (__main__), which workers cannot "
         "import: move it into a module on their Python path"},
        {"\"function\": \"no_colon\"", "ops[1].function: \"no_colon\" is not \"package.module:function\""},
        {"\"function\": \"a..b:f\"", "ops[1].function: \"a..b:f\" is not \"package.module:function\""},
        {"\"function\": \"m:f\", \"kwargs\": [1]", "ops[1].kwargs: expected an object, got array"},
        {"\"function\": \"m:f\", \"timeout_s\": 0", "ops[1].timeout_s: 0 is outside (0, 86400]"},
        {"\"kwargs\": {}", "ops[1].function: required"},
        {"\"function\": \"m:f\", \"output_shape\": []", "ops[1].output_shape: must be null or a list of 1 to 5 "
         "dimensions"},
        {"\"function\": \"m:f\", \"output_shape\": [1, 2, 3, 4, 5, 6]", "ops[1].output_shape: must be null or a "
         "list of 1 to 5 dimensions"},
        {"\"function\": \"m:f\", \"output_shape\": [3, 0]", "ops[1].output_shape[1]: 0 is outside [1, 2147483647]"},
        {"\"function\": \"m:f\", \"output_shape\": [65536, 65536]", "ops[1].output_shape: more than 2^30 elements: "
         "no element may be that big"},
        {"\"function\": \"m:f\", \"output_dtype\": \"float64\"",
         "ops[1].output_dtype: \"float64\" is not one of uint8, float32, float16, int64"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char ops[256];
        snprintf(ops, sizeof ops, "{\"op\": \"decode_jpeg\"}, {\"op\": \"python\", %s}", bad[i][0]);
        t = spec_text(ops);
        expect_error(t, bad[i][1]);
        free(t);
    }
    t = spec_text("{\"op\": \"python\", \"function\": \"m:f\"}");
    expect_error(t, "ops[0]: \"python\" needs a decode op (decode_jpeg, decode_audio, ...) before it");
    free(t);
    t = spec_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"blur.box\"}");
    expect_error(t, "ops[1]: unknown op \"blur.box\": no loaded op plugin has it (SPILLWAY_OP_PLUGINS lists the "
                    "plugins this process loads; `spillctl ops` shows them)");
    free(t);
    t = spec_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"<plugin>\"}");
    expect_error(t, "ops[1]: unknown op \"<plugin>\"");
    free(t);
}
END_TEST

/* A spec with views: "ops" the prefix, then views[] (each its repeat and ops, nested as the spec's). */
static char *views_text(const char *ops, const char *views, const char *batch)
{
    char *t = malloc(16384);
    ck_assert_ptr_nonnull(t);
    snprintf(t, 16384, "{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\", \"seed\": 7}, \"ops\": [%s], "
             "\"views\": %s, \"batch\": {\"size\": 8%s}}", ops, views, batch ? batch : "");
    return t;
}

static void expect_views_error(const char *ops, const char *views, const char *msg)
{
    char *t = views_text(ops, views, NULL);
    expect_error(t, msg);
    free(t);
}

#define DINO_VIEWS                                                                                           \
    "[{\"repeat\": 2, \"ops\": [{\"op\": \"random_resized_crop\", \"size\": 224, \"scale\": [0.4, 1]},"       \
    " {\"op\": \"random_apply\", \"p\": 0.8, \"ops\": [{\"op\": \"color_jitter\", \"brightness\": 0.4}]},"     \
    " {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5], \"std\": [0.2, 0.2, 0.2]}]},"                       \
    " {\"repeat\": 6, \"ops\": [{\"op\": \"random_resized_crop\", \"size\": 96, \"scale\": [0.05, 0.4]},"     \
    " {\"op\": \"random_horizontal_flip\"}, {\"op\": \"to_tensor\"}]}]"

/* Views: what the parser keeps (the prefix's ops, then one views op; each view its own ops as a pipeline
 * with the spec's seed), the canonical JSON and the wire carry them as written, and every way to get them
 * wrong is named where it stands; the order rules run on from the prefix's state. */
START_TEST(test_spec_views)
{
    char *t = views_text("{\"op\": \"decode_jpeg\"}", DINO_VIEWS, NULL);
    struct spw_pipeline_spec *a = parse_ok(t);
    free(t);
    ck_assert_int_eq(a->n_ops, 2);
    ck_assert_int_eq(a->ops[1].kind, SPW_OP_VIEWS);
    ck_assert_int_eq(a->n_views, 2);
    ck_assert_int_eq(a->views[0].repeat, 2);
    ck_assert_int_eq(a->views[1].repeat, 6);
    ck_assert_int_eq(a->views[0].ops->n_ops, 3);
    ck_assert_int_eq(a->views[0].ops->ops[1].kind, SPW_OP_RANDOM_APPLY);
    ck_assert_int_eq(a->views[1].ops->ops[2].kind, SPW_OP_TO_TENSOR);
    ck_assert_uint_eq(a->views[1].ops->source.seed, 7);
    /* canonical JSON: "views" after "ops", which does not list the views op; it reads back the same */
    char *j = spw_spec_to_json(a);
    ck_assert_ptr_nonnull(strstr(j, "\"views\": ["));
    ck_assert_ptr_null(strstr(j, "\"op\": \"views\""));
    struct spw_pipeline_spec *b = parse_ok(j);
    char *j2 = spw_spec_to_json(b);
    ck_assert_str_eq(j, j2);
    /* the wire: Pipeline.views, each view's ops flat as the pipeline's */
    Spillway__V1__Pipeline *msg = NULL;
    ck_assert_int_eq(spw_spec_to_proto(a, &msg), 0);
    ck_assert_uint_eq(msg->n_ops, 1);
    ck_assert_uint_eq(msg->n_views, 2);
    ck_assert_int_eq(msg->views[0]->repeat, 2);
    ck_assert_uint_eq(msg->views[0]->n_ops, 4);         /* random_apply and its color_jitter */
    ck_assert_int_eq(msg->views[0]->ops[1]->children, 1);
    const size_t n = spillway__v1__pipeline__get_packed_size(msg);
    uint8_t *wire = malloc(n);
    ck_assert_ptr_nonnull(wire);
    spillway__v1__pipeline__pack(msg, wire);
    Spillway__V1__Pipeline *m = spillway__v1__pipeline__unpack(NULL, n, wire);
    ck_assert_ptr_nonnull(m);
    struct spw_pipeline_spec *c = NULL;
    char err[256] = "";
    ck_assert_msg(spw_spec_from_proto(m, &c, err, sizeof err) == 0, "%s", err);
    char *j3 = spw_spec_to_json(c);
    ck_assert_str_eq(j, j3);
    /* a peer's hostile counts: refused before anything is made */
    m->views[0]->ops[1]->children = 5;
    expect_proto_error(m, "views[0].ops[1].children: 5: a combinator has 1 to 16 ops, nested at most 4 deep, and they "
                          "must follow it (2 do)");
    m->views[0]->ops[1]->children = 1;
    m->views[1]->repeat = 31;
    expect_proto_error(m, "views: 33 view instances (repeats summed) or more: at most 32");
    const size_t had = m->n_views;
    m->n_views = 17;                    /* past the array: refused on the count alone, never read */
    expect_proto_error(m, "views: 17 views: give 1 to 16");
    m->n_views = had;
    spillway__v1__pipeline__free_unpacked(m, NULL);
    free(wire);
    spw_spec_proto_free(msg);
    free(j), free(j2), free(j3);
    spw_spec_free(a), spw_spec_free(b), spw_spec_free(c);

    const char *dec = "{\"op\": \"decode_jpeg\"}", *crop = "{\"op\": \"center_crop\", \"size\": 8}";
    char v[1024];
    expect_views_error(dec, "{}", "views: expected an array of views ({\"repeat\": 2, \"ops\": [...]}), got object");
    expect_views_error(dec, "[]", "views: 0 views: give 1 to 16");
    expect_views_error(dec, "[{\"repeat\": 2}]", "views[0].ops: required");
    expect_views_error(dec, "[{\"ops\": []}]", "views[0].ops: empty: give the view's ops");
    snprintf(v, sizeof v, "[{\"ops\": [%s], \"crops\": 2}]", crop);
    expect_views_error(dec, v, "views[0]: unknown key \"crops\"");
    snprintf(v, sizeof v, "[{\"repeat\": 0, \"ops\": [%s]}]", crop);
    expect_views_error(dec, v, "views[0].repeat: 0 is outside [1, 32]");
    snprintf(v, sizeof v, "[{\"repeat\": 20, \"ops\": [%s]}, {\"repeat\": 13, \"ops\": [%s]}]", crop, crop);
    expect_views_error(dec, v, "views: 33 view instances (repeats summed) or more: at most 32");
    snprintf(v, sizeof v, "[{\"ops\": [%s]}, {\"ops\": [%s, %s]}]", crop, crop, dec);
    expect_views_error(dec, v, "views[1].ops[1]: \"decode_jpeg\" must be the first op and appear once");
    snprintf(v, sizeof v, "[{\"ops\": [{\"op\": \"to_tensor\"}, %s]}]", crop);
    expect_views_error(dec, v, "views[0].ops[1]: image op \"center_crop\" must come before \"to_tensor\" "
                               "(views[0].ops[0])");
    snprintf(v, sizeof v, "[{\"ops\": [%s]}]", crop);   /* the rules run on from the prefix's state */
    expect_views_error("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"}", v,
                       "views[0].ops[0]: image op \"center_crop\" must come before \"to_tensor\" (ops[1])");
    expect_views_error(dec, "[{\"ops\": [{\"op\": \"python\", \"function\": \"m:f\"}]}]",
                       "views[0].ops[0]: user code (python and plugin ops) cannot be in a view yet: put it in "
                       "\"ops\" before the views");
    expect_views_error(dec, "[{\"ops\": [{\"op\": \"center_crop\", \"size\": 0}]}]",
                       "views[0].ops[0].size: 0 is outside [1, 65535]");
    t = views_text(dec, "[{\"ops\": [{\"op\": \"to_tensor\"}]}]",
                   ", \"mix\": {\"num_classes\": 10, \"mixup_alpha\": 0.2}");
    expect_error(t, "batch.mix: needs float32 image tensors: end an image pipeline with normalize or to_tensor "
                    "(dtype float32) and no python op after them, as RandomMixup and RandomCutmix do");
    free(t);
    t = views_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"}", "[{\"ops\": [{\"op\": \"random_erasing\"}]}]",
                   ", \"mix\": {\"num_classes\": 10, \"mixup_alpha\": 0.2}");
    expect_error(t, "views: views and batch.mix together: no recipe does both; drop one");
    free(t);
    t = views_text(dec, "[{\"ops\": [{\"op\": \"center_crop\", \"size\": 8}]}]", ", \"pad\": true");
    expect_error(t, "views: not with batch.pad (each view instance is its own part of one size: end each view with a "
                    "crop or a fixed-size resize)");
    free(t);
    t = strdup("{\"source\": {\"format\": \"image_folder\", \"path\": \"/d\"}, \"ops\": [{\"op\": \"decode_jpeg\"}],"
               " \"batch\": {\"size\": 8, \"pad\": true}}");
    check_json_round_trip(t);           /* images' pad: true survives the canonical form and the proto */
    check_proto_round_trip(t);
    free(t);
    t = views_text("{\"op\": \"decode_jpeg\"}, {\"op\": \"to_tensor\"}", "[]",
                   ", \"pad\": true, \"mix\": {\"num_classes\": 10, \"mixup_alpha\": 0.2}");
    expect_error(t, "batch.pad: true and batch.mix together: MixUp and CutMix need images of one size");
    free(t);
    t = calloc(1, 96 * 1024);           /* 1 + 16 views of 16 = 257 ops with the views op */
    ck_assert_ptr_nonnull(t);
    char *views = t + 64 * 1024;
    strcpy(views, "[");
    for (int k = 0; k < 16; k++) {
        strcat(views, k ? ", {\"ops\": [" : "{\"ops\": [");
        for (int i = 0; i < 16; i++)
            strcat(views, i ? ", {\"op\": \"invert\"}" : "{\"op\": \"invert\"}");
        strcat(views, "]}");
    }
    strcat(views, "]");
    expect_views_error(dec, views, "views[15].ops: more than 255 ops in all, the views' counted too");
    free(t);
}
END_TEST

static Suite *spec_suite(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_spec_defaults_filled);
    tcase_add_test(tc, test_spec_proto_op_mirrors_registry);
    tcase_add_test(tc, test_spec_python_op);
    tcase_add_test(tc, test_spec_combinators);
    tcase_add_test(tc, test_spec_batch_mix);
    tcase_add_test(tc, test_spec_example_parses);
    tcase_add_test(tc, test_spec_value_forms);
    tcase_add_test(tc, test_spec_color_jitter_matches_torchvision);
    tcase_add_test(tc, test_spec_error_messages_from_brief);
    tcase_add_test(tc, test_spec_rejects_what_kernels_lack);
    tcase_add_test(tc, test_spec_error_messages_structure);
    tcase_add_test(tc, test_spec_error_messages_fields);
    tcase_add_test(tc, test_spec_error_messages_top_level);
    tcase_add_test(tc, test_spec_syntax_errors_report_line_and_column);
    tcase_add_test(tc, test_spec_caps_on_text_and_ops);
    tcase_add_test(tc, test_spec_error_buffer_small_or_null);
    tcase_add_test(tc, test_spec_json_round_trip);
    tcase_add_test(tc, test_spec_audio_round_trips);
    tcase_add_test(tc, test_spec_audio_error_messages);
    tcase_add_test(tc, test_spec_to_json_is_canonical_text);
    tcase_add_test(tc, test_spec_proto_round_trip);
    tcase_add_test(tc, test_spec_label_key_round_trips_and_is_only_for_tar);
    tcase_add_test(tc, test_spec_labels_and_fields);
    tcase_add_test(tc, test_spec_fields_from_proto);
    tcase_add_test(tc, test_spec_from_proto_validates_like_json);
    tcase_add_test(tc, test_spec_load_file);
    tcase_add_test(tc, test_spec_names);
    tcase_add_test(tc, test_spec_truncated_and_mutated_inputs_never_crash);
    tcase_add_test(tc, test_spec_mutated_proto_never_crashes);
    tcase_add_test(tc, test_spec_views);
    tcase_add_test(tc, test_spec_fixed_element_bytes_follow_crops_resizes_and_dtypes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(spec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
