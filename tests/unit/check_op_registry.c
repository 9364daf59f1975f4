/* tests/unit/check_op_registry.c - pipeline/op_registry.c: every op has one complete row (a unique name, a
 * field list, a decode run for decode ops and a CPU run for the others, defaults that name no other kind),
 * classes say which ops are audio, and fusion groups follow the rows' roles. */
#include <check.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "pipeline/fusion.h"
#include "pipeline/op_registry.h"

START_TEST(test_registry_rows_complete_and_unique)
{
    for (int k = 0; k < SPW_OP_COUNT; k++) {
        const struct spw_op_def *d = spw_op_def((enum spw_op_kind)k);
        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_nonnull(d->name);
        ck_assert_ptr_nonnull(d->fields);
        ck_assert_int_eq(spw_op_find(d->name), d->generic ? -1 : k);     /* plugins' row: no name of its own */
        ck_assert_str_eq(spw_op_name((enum spw_op_kind)k), d->name);
        const bool decode = d->group == SPW_GROUP_DECODE;
        ck_assert_msg(decode == (d->decode != NULL) && decode == (d->cpu == NULL), "%s: runs", d->name);
        ck_assert_msg(decode == (d->cls == SPW_OPC_DECODE_IMAGE || d->cls == SPW_OPC_DECODE_AUDIO), "%s: class",
                      d->name);
        ck_assert_msg(d->defaults.kind == 0, "%s: defaults carry no kind", d->name);
        for (const struct spw_op_field *f = d->fields; f->name; f++)
            for (const struct spw_op_field *g = f + 1; g->name; g++)
                ck_assert_msg(strcmp(f->name, g->name) != 0, "%s: field %s twice", d->name, f->name);
        if (d->gated) {     /* a random_<op> row runs its op's row: a CPU run, a GPU run where it has one */
            const struct spw_op_def *g = spw_op_def(d->gated);
            ck_assert_msg(g->cpu && !g->gated && (!d->gpu || g->gpu), "%s: gated op %s", d->name, g->name);
            ck_assert_msg(!strncmp(d->name, "random_", 7), "%s: gated but not random_", d->name);
        }
    }
    ck_assert_ptr_null(spw_op_def(SPW_OP_COUNT));
    ck_assert_ptr_null(spw_op_name(SPW_OP_COUNT));
    ck_assert_int_eq(spw_op_find("no_such_op"), -1);
}
END_TEST

/* Audio is a class, not a position in the enum: the image ops are not audio whatever their number. */
START_TEST(test_registry_audio_by_class)
{
    ck_assert(spw_op_class_audio(spw_op_def(SPW_OP_DECODE_WAV)->cls));
    ck_assert(spw_op_class_audio(spw_op_def(SPW_OP_DECODE_AUDIO)->cls));
    ck_assert(spw_op_class_audio(spw_op_def(SPW_OP_SPEC_AUGMENT)->cls));
    ck_assert(spw_op_class_audio(spw_op_def(SPW_OP_FBANK)->cls));
    ck_assert(!spw_op_class_audio(spw_op_def(SPW_OP_DECODE_JPEG)->cls));
    ck_assert(!spw_op_class_audio(spw_op_def(SPW_OP_TO_TENSOR)->cls));
    int audio = 0;
    for (int k = 0; k < SPW_OP_COUNT; k++)
        audio += spw_op_class_audio(spw_op_def((enum spw_op_kind)k)->cls);
    ck_assert_int_eq(audio, 14);     /* decode_wav, decode_audio, 4 waveform ops, stft, fbank, 6 spectrogram ops */
}
END_TEST

static int groups_of(const enum spw_op_kind *kinds, int n, struct spw_group *g)
{
    struct spw_op_spec ops[16];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < n; i++)
        ops[i].kind = kinds[i];
    struct spw_pipeline_spec spec = {.n_ops = n, .ops = ops};
    return spw_fusion_groups(&spec, g);
}

START_TEST(test_registry_fusion_follows_roles)
{
    struct spw_group g[16];
    const enum spw_op_kind a[] = {SPW_OP_DECODE_JPEG, SPW_OP_RESIZE, SPW_OP_CENTER_CROP, SPW_OP_HORIZONTAL_FLIP,
                                  SPW_OP_RANDOM_VERTICAL_FLIP, SPW_OP_NORMALIZE, SPW_OP_RANDOM_ERASING};
    ck_assert_int_eq(groups_of(a, 7, g), 2);
    ck_assert(g[0].kind == SPW_GROUP_DECODE && g[0].first == 0 && g[0].count == 6);
    ck_assert(g[1].kind == SPW_GROUP_TENSOR && g[1].first == 6 && g[1].count == 1);
    /* a padding-capable random_crop does not fuse; two crops: only the first joins */
    const enum spw_op_kind b[] = {SPW_OP_DECODE_JPEG, SPW_OP_RANDOM_CROP, SPW_OP_RANDOM_HORIZONTAL_FLIP,
                                  SPW_OP_TO_TENSOR};
    ck_assert_int_eq(groups_of(b, 4, g), 3);
    ck_assert(g[0].count == 1 && g[1].kind == SPW_GROUP_AUGMENT && g[1].count == 2 && g[2].kind == SPW_GROUP_TENSOR);
    const enum spw_op_kind c[] = {SPW_OP_DECODE_JPEG, SPW_OP_CENTER_CROP, SPW_OP_CENTER_CROP, SPW_OP_TO_TENSOR};
    ck_assert_int_eq(groups_of(c, 4, g), 3);
    ck_assert(g[0].count == 2 && g[1].count == 1 && g[2].count == 1);
    const enum spw_op_kind d[] = {SPW_OP_DECODE_WAV, SPW_OP_RESAMPLE, SPW_OP_PAD_AUDIO, SPW_OP_STFT,
                                  SPW_OP_MEL, SPW_OP_LOG, SPW_OP_SPEC_AUGMENT};
    ck_assert_int_eq(groups_of(d, 7, g), 3);
    ck_assert(g[0].kind == SPW_GROUP_DECODE && g[0].count == 3);
    ck_assert(g[1].kind == SPW_GROUP_TENSOR && g[1].first == 3 && g[1].count == 3);
    ck_assert(g[2].kind == SPW_GROUP_AUGMENT && g[2].first == 6);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("op_registry");
    TCase *tc = tcase_create("op_registry");
    tcase_add_test(tc, test_registry_rows_complete_and_unique);
    tcase_add_test(tc, test_registry_audio_by_class);
    tcase_add_test(tc, test_registry_fusion_follows_roles);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
